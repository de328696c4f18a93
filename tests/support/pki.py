"""A throwaway PKI for TLS tests: a CA, a server certificate for 127.0.0.1/localhost and a client certificate."""

import datetime
import ipaddress
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


def _cert(name: str, key, issuer_name, issuer_key, ca: bool) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    builder = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
               .issuer_name(issuer_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(minutes=1)).not_valid_after(now + datetime.timedelta(days=1))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if not ca:
        builder = builder.add_extension(x509.SubjectAlternativeName(
            [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def _write(folder: Path, name: str, cert: x509.Certificate, key) -> tuple[Path, Path]:
    (folder / f"{name}.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (folder / f"{name}.key").write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                                           serialization.PrivateFormat.PKCS8,
                                                           serialization.NoEncryption()))
    return folder / f"{name}.pem", folder / f"{name}.key"


def write_pki(folder: Path) -> dict[str, Path]:
    """Write ca.pem, server.pem/.key and client.pem/.key into ``folder``; return their paths by name."""
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "mesh test CA")])
    out = {"ca": _write(folder, "ca", _cert("mesh test CA", ca_key, ca_name, ca_key, ca=True), ca_key)[0]}
    for name in ("server", "client"):
        key = ec.generate_private_key(ec.SECP256R1())
        out[name], out[f"{name}_key"] = _write(folder, name, _cert(name, key, ca_name, ca_key, ca=False), key)
    return out
