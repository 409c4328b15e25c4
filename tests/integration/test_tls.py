"""TLS on our servers (tls.server.mode, upstream's -D properties; protocol/tls.py,
protocol/tls_acceptor.py): enforcing refuses plain clients and serves TLS ones, permissive
serves both on one port, our client verifies the server against a CA when asked. The
certificates are made here (a CA and a server certificate signed by it)."""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from aiorocketmq.client import ClientConfig, Message, Producer, SendStatus
from aiorocketmq.protocol.codes import RequestCode, ResponseCode
from aiorocketmq.protocol.command import RemotingCommand
from aiorocketmq.protocol.errors import RemotingError
from aiorocketmq.protocol.remoting_client import RemotingClient
from aiorocketmq.protocol.tls import client_ssl_context
from tests.procs import ServerProcess, broker_process, namesrv_process

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def make_certs(directory: Path) -> dict[str, Path]:
    """A CA, and a server certificate for 127.0.0.1 / localhost signed by it (PEM files)."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "aiorocketmq test CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(now - datetime.timedelta(days=1))
          .not_valid_after(now + datetime.timedelta(days=30))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    import ipaddress

    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")]))
            .issuer_name(ca_name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=30))
            .add_extension(x509.SubjectAlternativeName([
                x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                critical=False)
            .sign(ca_key, hashes.SHA256()))
    paths = {"ca": directory / "ca.pem", "cert": directory / "server.pem",
             "key": directory / "server.key"}
    paths["ca"].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths["cert"].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    # PKCS#8, unencrypted: what Netty's SslContextBuilder (the stock servers) reads
    paths["key"].write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                               serialization.PrivateFormat.PKCS8,
                                               serialization.NoEncryption()))
    return paths


def tls_props(certs: dict[str, Path], mode: str) -> tuple[str, ...]:
    return (f"-Dtls.server.mode={mode}", "-Dtls.test.mode.enable=false",
            f"-Dtls.server.certPath={certs['cert']}", f"-Dtls.server.keyPath={certs['key']}")


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return make_certs(tmp_path_factory.mktemp("certs"))


def _cluster(tmp: Path, certs: dict[str, Path], mode: str) -> Iterator[tuple[ServerProcess, ServerProcess]]:
    ns = namesrv_process(tmp, *tls_props(certs, "permissive")).start()
    br = broker_process(tmp, ns.address, extra=tls_props(certs, mode))
    try:
        br.start()
        yield ns, br
    finally:
        br.stop()
        ns.stop()
        print(f"---- broker ----\n{br.log_tail(40)}")


@pytest.fixture(scope="module")
def enforcing(tmp_path_factory: pytest.TempPathFactory,
              certs: dict[str, Path]) -> Iterator[tuple[ServerProcess, ServerProcess]]:
    yield from _cluster(tmp_path_factory.mktemp("enforcing"), certs, "enforcing")


async def _route(addr: str, ssl: bool, code: int = RequestCode.GET_BROKER_CLUSTER_INFO) -> RemotingCommand:
    request = RemotingCommand.create_request(code)
    async with RemotingClient(ssl=client_ssl_context() if ssl else None) as client:
        return await client.invoke(addr, request, 5.0)


async def test_enforcing_serves_tls_and_refuses_plain(
        enforcing: tuple[ServerProcess, ServerProcess], certs: dict[str, Path]) -> None:
    ns, br = enforcing
    with pytest.raises(RemotingError):
        await _route(br.address, ssl=False)
    answer = await _route(br.address, ssl=True)
    assert answer.code in (ResponseCode.SUCCESS, ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                           ResponseCode.SYSTEM_ERROR)
    config = ClientConfig(use_tls=True, tls_verify=True, tls_ca_file=str(certs["ca"]))
    async with Producer("TlsPG", ns.address, config=config) as producer:
        result = await producer.send(Message("TlsTopic", b"over tls"))
        assert result.status == SendStatus.SEND_OK


async def test_verification_fails_against_another_ca(
        enforcing: tuple[ServerProcess, ServerProcess], tmp_path: Path) -> None:
    ns, br = enforcing
    other = make_certs(tmp_path)
    request = RemotingCommand.create_request(RequestCode.GET_BROKER_CLUSTER_INFO)
    ctx = client_ssl_context(verify=True, ca_file=str(other["ca"]))
    async with RemotingClient(ssl=ctx) as client:
        with pytest.raises(RemotingError):
            await client.invoke(br.address, request, 5.0)


async def test_permissive_serves_both_on_one_port(
        tmp_path: Path, certs: dict[str, Path]) -> None:
    for ns, br in _cluster(tmp_path, certs, "permissive"):
        for ssl in (False, True):
            assert (await _route(br.address, ssl=ssl)).code is not None
            assert (await _route(ns.address, ssl=ssl)).code == ResponseCode.SUCCESS
        for use_tls in (False, True):
            async with Producer("TlsPG", ns.address,
                                config=ClientConfig(use_tls=use_tls)) as producer:
                result = await producer.send(Message("TlsTopic", b"either way"))
                assert result.status == SendStatus.SEND_OK


async def test_defaults_serve_tls_and_plain_on_both_broker_ports(tmp_path: Path) -> None:
    """Started without any tls.* setting, as a stock nameserver and broker: TLS with a
    self-signed certificate and plain on the listen port and on the VIP port (listenPort - 2);
    ``-Dtls.server.mode=disabled`` leaves plain only."""
    from tests.interop.stock import free_port

    port = free_port(offsets=(-2, 0, 1))
    ns = namesrv_process(tmp_path).start()
    br = broker_process(tmp_path, ns.address, conf={"listenPort": str(port)})
    off = broker_process(tmp_path, ns.address, name="broker-off", extra=("-Dtls.server.mode=disabled",))
    try:
        br.start()
        off.start()
        info = RequestCode.GET_BROKER_RUNTIME_INFO
        for ssl in (False, True):
            assert (await _route(ns.address, ssl=ssl)).code == ResponseCode.SUCCESS, ssl
            for addr in (br.address, f"127.0.0.1:{port - 2}"):
                assert (await _route(addr, ssl=ssl, code=info)).code == ResponseCode.SUCCESS, (addr, ssl)
        assert br.log_tail(200).count("remoting.tls_accepted") >= 2
        assert (await _route(off.address, ssl=False, code=info)).code == ResponseCode.SUCCESS
        with pytest.raises(RemotingError):
            await _route(off.address, ssl=True, code=info)
    finally:
        off.stop()
        br.stop()
        ns.stop()
        print(f"---- broker ----\n{br.log_tail(40)}")
