"""TLS for the control channel: the driver's per-application certificate and the pinning.

The driver makes a fresh EC P-256 key pair and a self-signed certificate for every application
(``new_identity``). The private key never leaves the driver process: it is loaded into the
driver's ``ssl.SSLContext`` from an anonymous in-memory file (Linux ``memfd``) or, elsewhere,
from a 0600 temporary file that is deleted at once and holds the key only encrypted with a
random password kept in memory. Work units are given the certificate's SHA-256 fingerprint
with their payload and accept a server only if it presents exactly that certificate
(``client_context`` verifies nothing by itself: no CA, no host name; ``channel.connect``
compares the fingerprint before it sends a byte). Both ends speak TLS 1.3 only.
"""

from __future__ import annotations

import contextlib
import datetime
import hashlib
import os
import secrets
import ssl
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field


@dataclass(frozen=True)
class ServerIdentity:
    """The driver's TLS side of one application: the context holding its private key and
    the fingerprint (SHA-256 of the DER certificate, hex) that work units pin."""

    fingerprint: str
    context: ssl.SSLContext = field(repr=False)


def fingerprint(certificate_der: bytes) -> str:
    """The SHA-256 fingerprint (hex) of a DER-encoded certificate."""
    return hashlib.sha256(certificate_der).hexdigest()


def new_identity(common_name: str = "streamtide-control") -> ServerIdentity:
    """A fresh key pair and self-signed certificate, loaded into a TLS 1.3 server context."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    now = datetime.datetime.now(datetime.timezone.utc)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=3650))  # pinned: dates are not checked
        .sign(key, hashes.SHA256())
    )
    password = secrets.token_bytes(32)
    pem = certificate.public_bytes(serialization.Encoding.PEM) + key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(password),
    )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_3
    with _private_file(pem) as path:
        context.load_cert_chain(path, password=password)
    der = certificate.public_bytes(serialization.Encoding.DER)
    return ServerIdentity(fingerprint(der), context)


def client_context() -> ssl.SSLContext:
    """A work unit's TLS 1.3 context: it trusts no CA and checks no host name, because the
    caller pins the driver's certificate by fingerprint instead."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = ssl.TLSVersion.TLSv1_3
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


@contextlib.contextmanager
def _private_file(data: bytes) -> Iterator[str]:
    """A path that reads ``data`` and that no other user can read, gone on exit."""
    if hasattr(os, "memfd_create") and os.path.isdir("/proc/self/fd"):
        fd = os.memfd_create("streamtide-control-key", os.MFD_CLOEXEC)
        try:
            os.write(fd, data)
            yield f"/proc/self/fd/{fd}"
        finally:
            os.close(fd)
        return
    directory = tempfile.mkdtemp(prefix="streamtide-control-")  # 0700
    fd, path = tempfile.mkstemp(dir=directory)  # 0600
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(data)
        yield path
    finally:
        os.unlink(path)
        os.rmdir(directory)
