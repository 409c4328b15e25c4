"""ClientConfig: the settings every producer and consumer shares, validated once.

Upstream ``org.apache.rocketmq.client.ClientConfig`` and ``NamespaceUtil`` (docs/PROTOCOL.md
4.6, 6.9). ``ClientConfig`` is an immutable record: build it with keyword arguments,
it checks them once, and the hot paths read plain attributes. ``build_client_id()`` is
``buildMQClientId``: ``ip@instance[@unit]``; an instance name of ``DEFAULT`` becomes
``pid#nanoTime`` (``changeInstanceNameToPID``) when a producer or consumer starts, so
each such object gets its own id and ``MQClientInstance``; objects given the same explicit
instance name share one instance, as upstream.

Language: ``HEART_BEAT`` carries ``language`` (the only request where upstream uses the
configured value; every other request says ``JAVA``). We default to ``PYTHON`` so that
``consumerConnection`` and friends show what the peer really is; no 4.9.x broker changes
behaviour by language (checked: nothing in broker/ or tools/ branches on it). Pass
``language=LanguageCode.JAVA`` to look exactly like the Java client.

Serialize type: ``serialize_type`` is Java's ``rocketmq.serialize.type`` (environment
``ROCKETMQ_SERIALIZE_TYPE``, ``RemotingCommand.serializeTypeConfigInThisServer``): ``JSON``
(default) or ``ROCKETMQ`` (binary headers, docs/PROTOCOL.md 1). Every request the client sends
is written in it; answers to the servers' own requests mirror the request's type, and a
ROCKETMQ client still reads the JSON frames a broker starts itself (NOTIFY_CONSUMER_IDS_CHANGED).
"""

from __future__ import annotations

import dataclasses
import os
import re
import socket
import ssl
import time

from aiorocketmq.protocol.acl import AclClientRPCHook, RPCHook, SessionCredentials
from aiorocketmq.protocol.codes import LanguageCode, MixAll, SerializeType, SystemTopic
from aiorocketmq.protocol.errors import MQClientError
from aiorocketmq.protocol.tls import client_ssl_context

__all__ = [
    "ClientConfig",
    "DEFAULT_INSTANCE_NAME",
    "local_ip",
    "wrap_namespace",
    "without_namespace",
]

DEFAULT_INSTANCE_NAME = "DEFAULT"
NAMESPACE_SEPARATOR = "%"
_RETRY = MixAll.RETRY_GROUP_TOPIC_PREFIX
_DLQ = MixAll.DLQ_GROUP_TOPIC_PREFIX
_ADDR = re.compile(r"^[^\s:;]+:\d{1,5}$")


def local_ip() -> str:
    """``RemotingUtil.getLocalAddress`` without touching the network.

    Prefers a non-loopback IPv4 address of this host's name, else ``127.0.0.1``. (Upstream
    walks the interfaces; resolving our own host name gives the same answer on ordinary
    hosts and sends no packet anywhere.)
    """
    try:
        infos = socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET)
    except OSError:
        return "127.0.0.1"
    for info in infos:
        ip = str(info[4][0])
        if not ip.startswith("127."):
            return ip
    return "127.0.0.1"


def _is_system_resource(resource: str) -> bool:
    return (
        resource in SystemTopic.SYSTEM_TOPICS
        or resource.startswith(SystemTopic.SYSTEM_TOPIC_PREFIX)
        or MixAll.is_sys_consumer_group(resource)
    )


def _strip_retry_dlq(resource: str) -> tuple[str, str]:
    if resource.startswith(_RETRY):
        return _RETRY, resource[len(_RETRY):]
    if resource.startswith(_DLQ):
        return _DLQ, resource[len(_DLQ):]
    return "", resource


def wrap_namespace(namespace: str | None, resource: str) -> str:
    """``NamespaceUtil.wrapNamespace``: ``[%RETRY%|%DLQ%]<ns>%<resource>``."""
    if not namespace or not resource or _is_system_resource(resource):
        return resource
    prefix, bare = _strip_retry_dlq(resource)
    if bare.startswith(namespace + NAMESPACE_SEPARATOR):
        return resource
    return f"{prefix}{namespace}{NAMESPACE_SEPARATOR}{bare}"


def without_namespace(namespace: str | None, resource: str) -> str:
    """``NamespaceUtil.withoutNamespace(resource, namespace)``."""
    if not namespace or not resource or _is_system_resource(resource):
        return resource
    prefix, bare = _strip_retry_dlq(resource)
    if not bare.startswith(namespace + NAMESPACE_SEPARATOR):
        return resource
    return prefix + bare[len(namespace) + 1:]


def _serialize_type(value: object) -> SerializeType:
    """``SerializeType.valueOf`` of ``rocketmq.serialize.type`` (a name, or the enum)."""
    if isinstance(value, SerializeType):
        return value
    member = SerializeType.__members__.get(str(value).strip().upper())
    if member is None:
        raise MQClientError(f"ClientConfig.serialize_type: {value!r} is not JSON or ROCKETMQ")
    return member


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ClientConfig:
    """Settings shared by producers and consumers (upstream ``ClientConfig``).

    Args:
        namesrv_addr: ``"host:port;host:port"`` (upstream separator ``;``); by default the
            ``NAMESRV_ADDR`` environment variable, as upstream
            (``NameServerAddressUtils.getNameServerAddresses``; there the Java system
            property ``rocketmq.namesrv.addr`` wins over it), else none.
        client_ip: our address as the broker should know it (default: ``local_ip()``).
        instance_name: ``DEFAULT`` is replaced by ``pid#nanoTime`` at start.
        unit_name: appended to the client id when set.
        namespace: prefixes topics and groups (``ns%topic``), as upstream.
        poll_name_server_interval_ms: route refresh period (30 s).
        heartbeat_broker_interval_ms: HEART_BEAT period (30 s).
        persist_consumer_offset_interval_ms: UPDATE_CONSUMER_OFFSET period (5 s).
        pull_time_delay_ms_when_exception: re-pull delay after a failed pull (1 s).
        mq_client_api_timeout_ms: default budget of one API call (3 s).
        language: sent on HEART_BEAT (module docstring).
        unit_mode: upstream unit mode flag (sent in headers, normally False).
        serialize_type: header encoding of every request, ``"JSON"`` or ``"ROCKETMQ"`` (or a
            ``SerializeType``); stored as ``SerializeType`` (module docstring).
        access_key / secret_key / security_token: ACL credentials; with them every request
            is signed as by Java's ``AclClientRPCHook`` (protocol/acl.py). Never printed.
        rpc_hook: an object with ``do_before_request(addr, request)`` and
            ``do_after_response(addr, request, response)`` (Java ``RPCHook``) for custom
            signing; it wins over the credentials.
        use_tls: connect with TLS (Java ``useTLS`` / ``-Dtls.enable=true``).
        tls_verify: verify the server's certificate (Java ``tls.client.authServer``; off by
            default, as the Java client, which trusts any certificate); against
            ``tls_ca_file`` (``tls.client.trustCertPath``) or the system store.
        tls_cert_file / tls_key_file / tls_key_password: a client certificate
            (``tls.client.certPath`` / ``keyPath`` / ``keyPassword``).

    Raises:
        MQClientError: an option out of range or a malformed address list.
    """

    namesrv_addr: str = dataclasses.field(
        default_factory=lambda: os.environ.get(MixAll.NAMESRV_ADDR_ENV, "").strip())
    client_ip: str = dataclasses.field(default_factory=local_ip)
    instance_name: str = dataclasses.field(
        default_factory=lambda: os.environ.get("ROCKETMQ_CLIENT_NAME", DEFAULT_INSTANCE_NAME))
    unit_name: str | None = None
    namespace: str | None = None
    poll_name_server_interval_ms: int = 30_000
    heartbeat_broker_interval_ms: int = 30_000
    persist_consumer_offset_interval_ms: int = 5_000
    pull_time_delay_ms_when_exception: int = 1_000
    mq_client_api_timeout_ms: int = 3_000
    language: LanguageCode = LanguageCode.PYTHON
    unit_mode: bool = False
    serialize_type: SerializeType = dataclasses.field(
        default_factory=lambda: _serialize_type(os.environ.get("ROCKETMQ_SERIALIZE_TYPE", "JSON")))
    access_key: str | None = None
    secret_key: str | None = dataclasses.field(default=None, repr=False)
    security_token: str | None = dataclasses.field(default=None, repr=False)
    rpc_hook: RPCHook | None = dataclasses.field(default=None, repr=False, compare=False)
    use_tls: bool = False
    tls_verify: bool = False
    tls_ca_file: str | None = None
    tls_cert_file: str | None = None
    tls_key_file: str | None = None
    tls_key_password: str | None = dataclasses.field(default=None, repr=False)

    def __post_init__(self) -> None:
        for name in ("poll_name_server_interval_ms", "heartbeat_broker_interval_ms",
                     "persist_consumer_offset_interval_ms", "mq_client_api_timeout_ms"):
            value = getattr(self, name)
            if not isinstance(value, int) or value <= 0:
                raise MQClientError(f"ClientConfig.{name} must be a positive int (ms), got {value!r}")
        if self.pull_time_delay_ms_when_exception < 0:
            raise MQClientError("ClientConfig.pull_time_delay_ms_when_exception must be >= 0")
        for addr in self.namesrv_addresses:
            if not _ADDR.match(addr):
                raise MQClientError(
                    f"ClientConfig.namesrv_addr: {addr!r} is not host:port "
                    f"(list separator is ';'), in {self.namesrv_addr!r}")
        if not self.client_ip:
            raise MQClientError("ClientConfig.client_ip must not be empty")
        if not self.instance_name:
            raise MQClientError("ClientConfig.instance_name must not be empty")
        try:
            object.__setattr__(self, "language", LanguageCode(self.language))
        except ValueError as exc:
            raise MQClientError(f"ClientConfig.language: unknown {self.language!r}") from exc
        object.__setattr__(self, "serialize_type", _serialize_type(self.serialize_type))
        if bool(self.access_key) != bool(self.secret_key):
            raise MQClientError("ClientConfig: access_key and secret_key go together "
                                "(one of them is missing)")

    def build_rpc_hook(self) -> RPCHook | None:
        """``rpc_hook``, else an ``AclClientRPCHook`` for the credentials, else None."""
        if self.rpc_hook is not None:
            return self.rpc_hook
        if self.access_key and self.secret_key:
            return AclClientRPCHook(SessionCredentials(
                self.access_key, self.secret_key, self.security_token))
        return None

    def build_ssl_context(self) -> ssl.SSLContext | None:
        """The client TLS context when ``use_tls`` (protocol/tls.py), else None."""
        if not self.use_tls:
            return None
        return client_ssl_context(verify=self.tls_verify, ca_file=self.tls_ca_file,
                                  cert_file=self.tls_cert_file, key_file=self.tls_key_file,
                                  key_password=self.tls_key_password)

    @property
    def namesrv_addresses(self) -> list[str]:
        """The nameserver list (upstream splits on ``;``)."""
        return [a.strip() for a in self.namesrv_addr.split(";") if a.strip()]

    def with_pid_instance_name(self) -> ClientConfig:
        """``changeInstanceNameToPID``: ``DEFAULT`` -> ``pid#nanoTime``, else unchanged."""
        if self.instance_name != DEFAULT_INSTANCE_NAME:
            return self
        return dataclasses.replace(
            self, instance_name=f"{os.getpid()}#{time.monotonic_ns()}")

    def replace(self, **changes: object) -> ClientConfig:
        """A copy with ``changes`` applied (validated again)."""
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]

    def with_options(self, **options: object) -> ClientConfig:
        """This config with the ``options`` that are not None applied: how a producer's or
        consumer's own keyword arguments (``namesrv_addr``, ``namespace``, ...) win over the
        ``config`` it was given. Returns ``self`` when every option is None."""
        changes = {k: v for k, v in options.items() if v is not None}
        return self.replace(**changes) if changes else self

    def build_client_id(self) -> str:
        """``buildMQClientId``: ``clientIP@instanceName[@unitName]``."""
        cid = f"{self.client_ip}@{self.instance_name}"
        if self.unit_name and self.unit_name.strip():
            cid += f"@{self.unit_name}"
        return cid

    @property
    def api_timeout(self) -> float:
        """``mq_client_api_timeout_ms`` in seconds (what asyncio takes)."""
        return self.mq_client_api_timeout_ms / 1000

    def with_namespace(self, resource: str) -> str:
        return wrap_namespace(self.namespace, resource)

    def without_namespace(self, resource: str) -> str:
        return without_namespace(self.namespace, resource)
