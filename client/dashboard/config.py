"""``DashboardConfig``: what ``mqdashboard`` serves and how (a TOML file plus flags).

The file (``mqdashboard -c dashboard.toml``; every key optional)::

    namesrv_addr = "127.0.0.1:9876"        # or -n, or NAMESRV_ADDR
    host = "127.0.0.1"                     # beyond loopback only with [users] (below)
    port = 8080
    allow_anonymous_remote = false         # or --allow-anonymous-remote (see below)
    sample_interval_ms = 5000              # live charts: one sample per interval
    admin_timeout_ms = 5000                # budget of one admin call
    cache_ttl_ms = 5000                    # topic / group lists are reused this long

    [acl]                                  # when the cluster has aclEnable=true
    access_key = "RocketMQ"
    secret_key = "12345678"

    [users.admin]                          # no [users]: no login, everyone is admin
    password_hash = "scrypt$16384$8$1$..."  # mqdashboard hash-password
    role = "admin"                         # or "viewer" (read only)

Command-line flags win over the file. Checked once, here; the rest of the dashboard reads an
immutable record.

Without ``[users]`` every visitor acts as an anonymous admin, so a ``host`` other than a
loopback address (``127.0.0.1``, ``::1``, ``localhost``) is refused unless
``allow_anonymous_remote`` (``--allow-anonymous-remote``) says the operator means it; the
dashboard then logs ``dashboard.anonymous_remote_admin`` as a warning when it starts.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from aiorocketmq.protocol.codes import MixAll
from aiorocketmq.protocol.errors import MQClientError
from aiorocketmq.protocol.remoting_client import parse_namesrv_addr

from .auth import ROLE_ADMIN, ROLES, is_password_hash

__all__ = ["DashboardConfig", "DashboardConfigError", "User", "is_loopback", "load_config_file"]


def is_loopback(host: str) -> bool:
    """Whether listening on ``host`` serves this machine only (127.0.0.0/8, ::1, localhost)."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name (or "" = every interface): reachable from elsewhere


class DashboardConfigError(MQClientError):
    """A bad dashboard setting (file or flag); the message names it."""


@dataclasses.dataclass(frozen=True, slots=True)
class User:
    """One login of the dashboard."""

    name: str
    password_hash: str = dataclasses.field(repr=False)
    role: str = ROLE_ADMIN


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class DashboardConfig:
    """Validated settings of one dashboard process.

    Args:
        namesrv_addr: ``host:port;host:port``; empty: ``NAMESRV_ADDR`` from the environment.
        host / port: where the HTTP server listens (port 0: any free port, printed).
        access_key / secret_key: ACL credentials the admin client signs requests with
            (``ClientConfig.access_key``); never logged.
        users: name -> User; empty means no login (every visitor acts as ``anonymous``).
        allow_anonymous_remote: without users, listen on a ``host`` beyond loopback anyway.
        session_ttl_ms: idle time after which a login expires.
        sample_interval_ms: period of the live TPS / lag samples.
        admin_timeout_ms: budget of one admin call.
        max_scan_messages: cap of a message search by time range (upstream's 2000).
        cache_ttl_ms: how long topic / group lists and group rows are reused (0: never);
            the dashboard's own changes drop the cache at once.
    """

    namesrv_addr: str = ""
    host: str = "127.0.0.1"
    port: int = 8080
    access_key: str | None = None
    secret_key: str | None = dataclasses.field(default=None, repr=False)
    users: Mapping[str, User] = dataclasses.field(default_factory=dict)
    allow_anonymous_remote: bool = False
    session_ttl_ms: int = 8 * 3600 * 1000
    sample_interval_ms: int = 5000
    admin_timeout_ms: int = 5000
    max_scan_messages: int = 2000
    cache_ttl_ms: int = 5000

    def __post_init__(self) -> None:
        addr = self.namesrv_addr or os.environ.get(MixAll.NAMESRV_ADDR_ENV, "").strip()
        if not parse_namesrv_addr(addr):
            raise DashboardConfigError(
                f"no name server address: give -n host:port, namesrv_addr in the config file, "
                f"or set {MixAll.NAMESRV_ADDR_ENV}")
        object.__setattr__(self, "namesrv_addr", addr)
        if not 0 <= self.port <= 65535:
            raise DashboardConfigError(f"port {self.port} is not in 0..65535")
        if not self.users and not self.allow_anonymous_remote and not is_loopback(self.host):
            raise DashboardConfigError(
                f"refusing to serve {self.host or 'every interface'} without [users]: every "
                "visitor would be an anonymous admin; add [users] to the config file (-c, "
                "mqdashboard hash-password), listen on 127.0.0.1, or pass "
                "--allow-anonymous-remote")
        if bool(self.access_key) != bool(self.secret_key):
            raise DashboardConfigError("acl: access_key and secret_key go together")
        for name, positive in (("session_ttl_ms", self.session_ttl_ms),
                               ("sample_interval_ms", self.sample_interval_ms),
                               ("admin_timeout_ms", self.admin_timeout_ms),
                               ("max_scan_messages", self.max_scan_messages)):
            if positive <= 0:
                raise DashboardConfigError(f"{name} must be positive, got {positive}")
        if self.cache_ttl_ms < 0:
            raise DashboardConfigError(f"cache_ttl_ms must be 0 (no cache) or more, got "
                                       f"{self.cache_ttl_ms}")
        for user in self.users.values():
            if not is_password_hash(user.password_hash):
                raise DashboardConfigError(
                    f"users.{user.name}.password_hash is not a scrypt$... hash "
                    "(make one with: mqdashboard hash-password)")
            if user.role not in ROLES:
                raise DashboardConfigError(
                    f"users.{user.name}.role must be one of {', '.join(ROLES)}, got {user.role!r}")

    @property
    def login_required(self) -> bool:
        return bool(self.users)

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any]) -> DashboardConfig:
        """Build from a flat mapping (the file's keys, flags merged in); unknown keys refused."""
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(settings) - names)
        if unknown:
            raise DashboardConfigError(f"unknown setting(s): {', '.join(unknown)}")
        for f in dataclasses.fields(cls):
            if f.name in settings and f.type == "int" and not (
                    isinstance(settings[f.name], int) and not isinstance(settings[f.name], bool)):
                raise DashboardConfigError(
                    f"{f.name} must be an integer, got {settings[f.name]!r}")
            if f.name in settings and f.type == "bool" and not isinstance(settings[f.name], bool):
                raise DashboardConfigError(
                    f"{f.name} must be true or false, got {settings[f.name]!r}")
        return cls(**settings)


def load_config_file(path: str | Path) -> dict[str, Any]:
    """The settings of a TOML file as a flat mapping for ``DashboardConfig.from_settings``."""
    try:
        with open(path, "rb") as f:
            doc = tomllib.load(f)
    except OSError as exc:
        raise DashboardConfigError(f"cannot read config file {path}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise DashboardConfigError(f"config file {path} is not valid TOML: {exc}") from None
    settings = {k: v for k, v in doc.items() if k not in ("acl", "users")}
    acl = doc.get("acl", {})
    if not isinstance(acl, dict) or set(acl) - {"access_key", "secret_key"}:
        raise DashboardConfigError(f"{path}: [acl] takes access_key and secret_key only")
    settings.update(acl)
    users_doc = doc.get("users", {})
    if not isinstance(users_doc, dict):
        raise DashboardConfigError(f"{path}: [users] must be a table of [users.<name>] tables")
    users: dict[str, User] = {}
    for name, entry in users_doc.items():
        if not isinstance(entry, dict) or not isinstance(entry.get("password_hash"), str):
            raise DashboardConfigError(f"{path}: users.{name} needs password_hash = \"scrypt$...\"")
        extra = set(entry) - {"password_hash", "role"}
        if extra:
            raise DashboardConfigError(f"{path}: users.{name}: unknown key(s) {sorted(extra)}")
        users[name] = User(name, entry["password_hash"], str(entry.get("role", ROLE_ADMIN)))
    settings["users"] = users
    return settings
