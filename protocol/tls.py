"""TLS settings and SSL contexts, as upstream ``TlsSystemConfig`` / ``TlsHelper`` (4.9.7).

Contract:

* ``TlsConfig.from_properties(props)`` reads upstream's keys from the ``-D`` system
  properties, then lets ``tls.config.file`` (default ``/etc/rocketmq/tls.properties``)
  override them, key for key, as ``TlsHelper.extractTlsConfigFromFile`` does:
  ``tls.server.mode`` (``disabled`` / ``permissive`` / ``enforcing``, default permissive;
  not read from the file), ``tls.enable`` (client side; not read from the file),
  ``tls.test.mode.enable`` (default true), ``tls.server.need.client.auth`` (none / optional
  / require), ``tls.server.keyPath``, ``tls.server.keyPassword``, ``tls.server.certPath``,
  ``tls.server.authClient``, ``tls.server.trustCertPath``, and the ``tls.client.*``
  counterparts (``keyPath``, ``keyPassword``, ``certPath``, ``authServer``,
  ``trustCertPath``).
* ``server_context()`` is ``buildSslContext(false)``: in test mode a fresh self-signed
  certificate (needs the ``cryptography`` package), otherwise the configured certificate
  and key; with ``authClient`` client certificates are asked for per ``need.client.auth``
  and verified against ``trustCertPath``. Divergence: without ``authClient`` upstream asks
  for a client certificate and trusts any; Python's ``ssl`` cannot trust any, so it does
  not ask (clients connect the same way, their certificate is just not looked at).
* ``client_context(...)`` is ``buildSslContext(true)``: no verification of the server in
  test mode or without ``authServer`` (upstream's insecure trust manager), else verified
  against ``trustCertPath`` (or the system store); an optional client certificate. Host
  names are never checked: RocketMQ peers are addressed by IP, and upstream does not check
  them either.
* ``server_tls_active``: as a stock server, ours serves TLS unless ``tls.server.mode`` is
  ``disabled``: in its default configuration (permissive, test mode) it answers a TLS
  ClientHello with a self-signed certificate made at start, and plain connections as
  before, on the same port. Only when the ``cryptography`` package is missing and no mode
  was given does it fall back to plain only, with a warning (``maybe_server_context``);
  with ``tls.server.mode`` given it fails to start instead. In ``disabled`` mode a TLS
  ClientHello is not a frame, and the connection closes, as upstream's closes it.
"""

from __future__ import annotations

import dataclasses
import enum
import os
import ssl
import tempfile
from collections.abc import Mapping

from aiorocketmq.logs import get_logger
from aiorocketmq.protocol.bodies import string_to_properties
from aiorocketmq.protocol.errors import ProtocolError

__all__ = [
    "DEFAULT_TLS_CONFIG_FILE",
    "TLS_HANDSHAKE_BYTE",
    "TLS_SHUTDOWN_TIMEOUT",
    "TlsConfig",
    "TlsMode",
    "client_ssl_context",
]

log = get_logger("aiorocketmq.tls")

DEFAULT_TLS_CONFIG_FILE = "/etc/rocketmq/tls.properties"
TLS_HANDSHAKE_BYTE = 0x16  # NettyRemotingServer.HandshakeHandler.HANDSHAKE_MAGIC_CODE
# How long closing a TLS connection waits for the peer's close_notify before dropping the
# socket. Netty's SslHandler sends its own and does not wait for the peer's (its
# closeNotifyReadTimeout is 0), so a stock peer never answers ours: asyncio's default of
# 30 s made every close of a TLS connection to a stock server (a client's shutdown, a
# broker's) take 30 s.
TLS_SHUTDOWN_TIMEOUT = 1.0


class TlsMode(enum.Enum):
    """``TlsMode``: what a server does with TLS and plain connections."""

    DISABLED = "disabled"
    PERMISSIVE = "permissive"
    ENFORCING = "enforcing"

    @classmethod
    def parse(cls, text: str | None) -> TlsMode:
        """``TlsMode.parse``: an unknown name is PERMISSIVE."""
        for mode in cls:
            if text is not None and mode.value == text.strip().lower():
                return mode
        return cls.PERMISSIVE


def _flag(value: str | None, default: bool) -> bool:
    return default if value is None else value.strip().lower() == "true"


def _read_properties(path: str) -> dict[str, str]:
    """The ``tls.config.file`` as ``Properties.load`` reads it ({} when it cannot be read).

    Raises:
        ValueError: a malformed ``\\uXXXX`` escape in the file.
    """
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except OSError:
        return {}
    try:
        return string_to_properties(text)
    except ProtocolError as exc:
        raise ValueError(f"TLS configuration file {path}: {exc}") from exc


@dataclasses.dataclass(frozen=True, slots=True)
class TlsConfig:
    """The ``tls.*`` settings of one process (module docstring)."""

    mode: TlsMode = TlsMode.PERMISSIVE
    enable: bool = False
    config_file: str = DEFAULT_TLS_CONFIG_FILE
    test_mode: bool = True
    server_need_client_auth: str = "none"
    server_key_path: str | None = None
    server_key_password: str | None = dataclasses.field(default=None, repr=False)
    server_cert_path: str | None = None
    server_auth_client: bool = False
    server_trust_cert_path: str | None = None
    client_key_path: str | None = None
    client_key_password: str | None = dataclasses.field(default=None, repr=False)
    client_cert_path: str | None = None
    client_auth_server: bool = False
    client_trust_cert_path: str | None = None
    mode_given: bool = False

    @classmethod
    def from_properties(cls, props: Mapping[str, str] | None = None) -> TlsConfig:
        p = dict(props or {})
        config_file = p.get("tls.config.file", DEFAULT_TLS_CONFIG_FILE)
        merged = {**p, **_read_properties(config_file)}
        merged["tls.server.mode"] = p.get("tls.server.mode", "permissive")
        merged["tls.enable"] = p.get("tls.enable", "false")
        return cls(
            mode=TlsMode.parse(merged["tls.server.mode"]),
            enable=_flag(merged["tls.enable"], False),
            config_file=config_file,
            test_mode=_flag(merged.get("tls.test.mode.enable"), True),
            server_need_client_auth=merged.get("tls.server.need.client.auth", "none"),
            server_key_path=merged.get("tls.server.keyPath"),
            server_key_password=merged.get("tls.server.keyPassword"),
            server_cert_path=merged.get("tls.server.certPath"),
            server_auth_client=_flag(merged.get("tls.server.authClient"), False),
            server_trust_cert_path=merged.get("tls.server.trustCertPath"),
            client_key_path=merged.get("tls.client.keyPath"),
            client_key_password=merged.get("tls.client.keyPassword"),
            client_cert_path=merged.get("tls.client.certPath"),
            client_auth_server=_flag(merged.get("tls.client.authServer"), False),
            client_trust_cert_path=merged.get("tls.client.trustCertPath"),
            mode_given="tls.server.mode" in p,
        )

    @property
    def server_tls_active(self) -> bool:
        """Whether a server should detect and serve TLS: unless ``disabled``, as upstream."""
        return self.mode is not TlsMode.DISABLED

    def server_context(self) -> ssl.SSLContext:
        """``TlsHelper.buildSslContext(false)``. Raises ``ssl.SSLError`` / ``OSError`` /
        ``RuntimeError`` (test mode without the cryptography package)."""
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        if self.test_mode:
            cert, key = _self_signed_pem()
            _load_pem_chain(ctx, cert, key)
            return ctx
        if not self.server_cert_path or not self.server_key_path:
            raise ssl.SSLError("tls.server.certPath and tls.server.keyPath are required "
                               "when tls.test.mode.enable=false")
        ctx.load_cert_chain(self.server_cert_path, self.server_key_path,
                            self.server_key_password or None)
        auth = (self.server_need_client_auth or "none").strip().lower()
        if self.server_auth_client and auth in ("optional", "require"):
            ctx.verify_mode = ssl.CERT_REQUIRED if auth == "require" else ssl.CERT_OPTIONAL
            if self.server_trust_cert_path:
                ctx.load_verify_locations(self.server_trust_cert_path)
            else:
                ctx.load_default_certs(ssl.Purpose.CLIENT_AUTH)
        return ctx

    def maybe_server_context(self) -> ssl.SSLContext | None:
        """``server_context()`` when TLS is active (``server_tls_active``), else None; also
        None, with a warning, for the default test mode without the cryptography package."""
        if not self.server_tls_active:
            return None
        try:
            return self.server_context()
        except _NoSelfSignedCertificate as exc:
            if self.mode_given:
                raise
            log.warning("tls.plain_only", reason=str(exc))
            return None

    def client_context(self) -> ssl.SSLContext:
        """``TlsHelper.buildSslContext(true)`` (the broker's own client connections)."""
        verify = self.client_auth_server and not self.test_mode
        return client_ssl_context(
            verify=verify, ca_file=self.client_trust_cert_path if verify else None,
            cert_file=None if self.test_mode else self.client_cert_path,
            key_file=None if self.test_mode else self.client_key_path,
            key_password=None if self.test_mode else self.client_key_password)


def client_ssl_context(*, verify: bool = False, ca_file: str | None = None,
                       cert_file: str | None = None, key_file: str | None = None,
                       key_password: str | None = None) -> ssl.SSLContext:
    """A client context: verify the server against ``ca_file`` (or the system store) only
    when ``verify``; present ``cert_file`` / ``key_file`` when given; no host-name check."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    if verify:
        ctx.verify_mode = ssl.CERT_REQUIRED
        if ca_file:
            ctx.load_verify_locations(ca_file)
        else:
            ctx.load_default_certs(ssl.Purpose.SERVER_AUTH)
    else:
        ctx.verify_mode = ssl.CERT_NONE
    if cert_file:
        ctx.load_cert_chain(cert_file, key_file or None, key_password or None)
    return ctx


def _load_pem_chain(ctx: ssl.SSLContext, cert_pem: bytes, key_pem: bytes) -> None:
    # ssl loads certificates from files only; the temporary files live for this call.
    with tempfile.TemporaryDirectory(prefix="aiorocketmq-tls-") as tmp:
        cert_path, key_path = os.path.join(tmp, "cert.pem"), os.path.join(tmp, "key.pem")
        with open(cert_path, "wb") as fh:
            fh.write(cert_pem)
        with open(key_path, "wb") as fh:
            fh.write(key_pem)
        ctx.load_cert_chain(cert_path, key_path)


class _NoSelfSignedCertificate(RuntimeError):
    """Test mode without the cryptography package."""


def _self_signed_pem() -> tuple[bytes, bytes]:
    """Netty's ``SelfSignedCertificate`` (test mode): a throwaway certificate and key."""
    try:
        import datetime

        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID
    except ImportError as exc:
        raise _NoSelfSignedCertificate("tls.test.mode.enable=true needs a self-signed certificate: "
                           "install the cryptography package, or configure "
                           "tls.server.certPath / tls.server.keyPath with "
                           "tls.test.mode.enable=false") from exc
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=365))
            .sign(key, hashes.SHA256()))
    return (cert.public_bytes(serialization.Encoding.PEM),
            key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                              serialization.NoEncryption()))
