"""What tests share: free ports, a real Redis, service processes, in-process servers (servers.py) and the
gateway app (apps.py), waiting without sleeps, stand-ins, test settings, catalogs and a throwaway PKI.

Importable from every test layer as ``support`` (pytest puts ``tests/``, the folder of the root
conftest, on ``sys.path``) and never collected (tests/conftest.py ignores the folder; no ``test_*`` here).
"""

from support.offloop import off_loop
from support.ports import free_port
from support.processes import ServiceProcess, module_process, start_module
from support.redis_server import RedisServer
from support.waiting import eventually, eventually_async, job_finished

__all__ = ["RedisServer", "ServiceProcess", "eventually", "eventually_async", "free_port", "job_finished",
           "module_process", "off_loop", "start_module"]
