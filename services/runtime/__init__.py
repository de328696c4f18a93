"""The process runtime every process uses: settings, logs, tracing, limits, processes, jobs.

Settings and CLI, logs, tracing set-up, process limits, process control and supervision, and the
job store. It imports no service, no gateway and no client; the gRPC-server bootstrap
(``services.bootstrap``) builds on it, and so do the gateway, ``infra/`` launchers and ``scripts/``.
"""
