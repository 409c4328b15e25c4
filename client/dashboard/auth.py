"""Dashboard login: scrypt password hashes, a bounded session table, CSRF tokens. Pure.

* Passwords are stored as ``scrypt$N$r$p$<salt b64>$<hash b64>`` (``hashlib.scrypt``,
  N=2**14, r=8, p=1, 16-byte salt, 32-byte key: the parameters Python's docs and OWASP
  give for interactive logins). ``mqdashboard hash-password`` prints one for a config file.
* A session is a random id (the ``mqdashboard_session`` cookie: HttpOnly, SameSite=Strict)
  mapped to the user, their role and a CSRF token. The table is bounded
  (``max_sessions``, oldest dropped first) and every entry expires ``ttl_ms`` after its
  last use.
* CSRF: every state-changing request carries the session's token in ``X-CSRF-Token``
  (the page reads it from ``GET /api/session``); a cross-site form cannot know it, and the
  SameSite cookie is not sent cross-site at all. Tokens compare in constant time.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
import time
from collections import OrderedDict
from dataclasses import dataclass

__all__ = [
    "ROLE_ADMIN",
    "ROLE_VIEWER",
    "ROLES",
    "Session",
    "SessionStore",
    "hash_password",
    "verify_password",
    "is_password_hash",
]

ROLE_ADMIN = "admin"    # may change the cluster (create/delete topics, reset offsets, send)
ROLE_VIEWER = "viewer"  # reads only
ROLES = (ROLE_ADMIN, ROLE_VIEWER)

_SCHEME = "scrypt"
_N, _R, _P = 2**14, 8, 1
_KEY_LEN = 32
_MAX_N = 2**20  # refuse absurd cost parameters from a config file (memory = 128 * N * r)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def hash_password(password: str, *, salt: bytes | None = None) -> str:
    """The encoded scrypt hash of ``password`` with a fresh (or the given) salt."""
    salt = secrets.token_bytes(16) if salt is None else salt
    key = hashlib.scrypt(password.encode("utf-8"), salt=salt, n=_N, r=_R, p=_P, dklen=_KEY_LEN)
    return f"{_SCHEME}${_N}${_R}${_P}${_b64(salt)}${_b64(key)}"


def _parse(encoded: str) -> tuple[int, int, int, bytes, bytes] | None:
    parts = encoded.split("$")
    if len(parts) != 6 or parts[0] != _SCHEME:
        return None
    try:
        n, r, p = int(parts[1]), int(parts[2]), int(parts[3])
        salt = base64.b64decode(parts[4], validate=True)
        key = base64.b64decode(parts[5], validate=True)
    except (ValueError, binascii.Error):
        return None
    if not (1 < n <= _MAX_N and n & (n - 1) == 0 and 0 < r <= 32 and 0 < p <= 16 and salt
            and key):
        return None
    return n, r, p, salt, key


def is_password_hash(encoded: str) -> bool:
    """Whether ``encoded`` is a well-formed ``scrypt$...`` string."""
    return _parse(encoded) is not None


def verify_password(password: str, encoded: str) -> bool:
    """Whether ``password`` matches ``encoded``; a malformed hash matches nothing."""
    parsed = _parse(encoded)
    if parsed is None:
        return False
    n, r, p, salt, key = parsed
    got = hashlib.scrypt(password.encode("utf-8"), salt=salt, n=n, r=r, p=p, dklen=len(key),
                         maxmem=256 * n * r + 1024 * 1024)
    return hmac.compare_digest(got, key)


@dataclass(slots=True)
class Session:
    """One browser's login: who, with which role, and its CSRF token."""

    user: str
    role: str
    csrf_token: str
    expires_at: float  # time.monotonic() seconds

    @property
    def can_write(self) -> bool:
        return self.role == ROLE_ADMIN

    def csrf_ok(self, token: str | None) -> bool:
        """Constant-time check of a request's ``X-CSRF-Token``."""
        return bool(token) and hmac.compare_digest(self.csrf_token.encode(),
                                                   (token or "").encode())


class SessionStore:
    """Session id -> Session, bounded and expiring (see the module docstring)."""

    def __init__(self, *, ttl_ms: int = 8 * 3600 * 1000, max_sessions: int = 1000) -> None:
        if ttl_ms <= 0 or max_sessions <= 0:
            raise ValueError("SessionStore: ttl_ms and max_sessions must be positive")
        self.ttl = ttl_ms / 1000
        self.max_sessions = max_sessions
        self._sessions: OrderedDict[str, Session] = OrderedDict()

    def __len__(self) -> int:
        return len(self._sessions)

    def create(self, user: str, role: str) -> tuple[str, Session]:
        """A new session for ``user``; the oldest one goes when the table is full."""
        self._expire()
        while len(self._sessions) >= self.max_sessions:
            self._sessions.popitem(last=False)
        sid = secrets.token_urlsafe(32)
        session = Session(user, role, secrets.token_urlsafe(32), time.monotonic() + self.ttl)
        self._sessions[sid] = session
        return sid, session

    def get(self, sid: str | None) -> Session | None:
        """The live session of ``sid`` (its expiry pushed back), or None."""
        if not sid:
            return None
        session = self._sessions.get(sid)
        if session is None:
            return None
        now = time.monotonic()
        if session.expires_at <= now:
            del self._sessions[sid]
            return None
        session.expires_at = now + self.ttl
        self._sessions.move_to_end(sid)
        return session

    def drop(self, sid: str | None) -> None:
        if sid:
            self._sessions.pop(sid, None)

    def _expire(self) -> None:
        now = time.monotonic()
        while self._sessions:
            sid, oldest = next(iter(self._sessions.items()))
            if oldest.expires_at > now:
                break
            del self._sessions[sid]
