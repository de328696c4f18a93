"""gRPC hops over TLS and mutual TLS: a real server with certificates, clients configured from the environment."""

import pytest
from prometheus_client import CollectorRegistry

from clients.channels import aio_channel
from clients.health import check_health
from services.bootstrap.server import create_server
from services.runtime.errors import StartupError
from services.runtime.settings import ServiceSettings
from support.pki import write_pki
from support.servers import running_server

pytestmark = pytest.mark.asyncio(loop_scope="session")


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return write_pki(tmp_path_factory.mktemp("pki"))


async def _bare(settings: ServiceSettings):
    """A created server with no service behind it."""
    return await create_server(settings, [], registry=CollectorRegistry())


async def _health(port: int) -> str:
    async with aio_channel(f"127.0.0.1:{port}") as channel:
        return await check_health(channel, "", timeout_s=2.0)


async def test_mutual_tls_admits_only_clients_with_a_certificate_from_the_ca(pki, monkeypatch):
    settings = ServiceSettings(port=0, tls_cert_file=pki["server"], tls_key_file=pki["server_key"],
                               tls_client_ca_file=pki["ca"], reflection=False)
    async with running_server(await _bare(settings)) as mesh:
        monkeypatch.delenv("MESH_GRPC_TLS_CA_FILE", raising=False)
        assert await _health(mesh.port) == "UNREACHABLE"  # plaintext cannot talk to a TLS port
        monkeypatch.setenv("MESH_GRPC_TLS_CA_FILE", str(pki["ca"]))
        assert await _health(mesh.port) == "UNREACHABLE"  # TLS without a client certificate is refused
        monkeypatch.setenv("MESH_GRPC_TLS_CERT_FILE", str(pki["client"]))
        monkeypatch.setenv("MESH_GRPC_TLS_KEY_FILE", str(pki["client_key"]))
        assert await _health(mesh.port) == "SERVING"


async def test_tls_without_client_certificates_and_plaintext_by_default(pki, monkeypatch):
    tls_settings = ServiceSettings(port=0, tls_cert_file=pki["server"], tls_key_file=pki["server_key"])
    async with running_server(await _bare(tls_settings)) as tls, \
            running_server(await _bare(ServiceSettings(port=0))) as plain:
        monkeypatch.setenv("MESH_GRPC_TLS_CA_FILE", str(pki["ca"]))
        assert await _health(tls.port) == "SERVING"
        monkeypatch.delenv("MESH_GRPC_TLS_CA_FILE")
        assert await _health(plain.port) == "SERVING"
        assert await _health(tls.port) == "UNREACHABLE"


async def test_half_a_tls_configuration_is_a_startup_error(pki):
    with pytest.raises(StartupError, match="both --tls-cert-file and --tls-key-file"):
        await create_server(ServiceSettings(port=0, tls_cert_file=pki["server"]), [], registry=CollectorRegistry())
    with pytest.raises(StartupError, match="needs --tls-cert-file"):
        await create_server(ServiceSettings(port=0, tls_client_ca_file=pki["ca"]), [], registry=CollectorRegistry())
