"""The dashboard's aiohttp application: middlewares, login, static pages, lifecycle.

Why aiohttp (and not Starlette on uvicorn): one well-kept library that is both the HTTP
server and its test client, built on asyncio only, with an ``AppRunner`` we start and stop
ourselves. That lets ``mqdashboard`` bind port 0 and print the bound address like our
servers do, share one event loop (uvloop when present) with the admin client, and order
its shutdown (sampler, then admin client, then sockets) without handing the process over
to an ASGI server that owns signals and the loop. Starlette would add uvicorn, an ASGI
layer and two lifecycles for no feature we need.

Middlewares, outermost first:

* ``_access_log``: one ``dashboard.request`` event per API call (INFO for changes, DEBUG
  for reads, which the pages poll).
* ``_errors``: errors of ``service`` / ``protocol.errors`` -> JSON with the status of
  ``routes.error_status``; an unexpected exception -> 500, logged with its traceback.
* ``_guard``: the session cookie, the login requirement, and for every state-changing
  method (POST, PUT, PATCH, DELETE) a matching ``X-CSRF-Token``, a same-origin ``Origin``
  when the browser sends one, and the admin role. Without ``[users]`` in the config there is
  no login: ``GET /api/session`` opens an ``anonymous`` admin session (still CSRF-checked).

Static assets (``static/``: ``index.html``, ``app.js``, ``app.css``, ``favicon.svg``, no CDN)
are package data.
Responses carry a strict Content-Security-Policy (``default-src 'self'``).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from aiohttp import web

from aiorocketmq.client.admin.api import MQAdmin
from aiorocketmq.logs import get_logger
from aiorocketmq.protocol.errors import RocketMQError

from .auth import ROLE_ADMIN, Session, SessionStore, verify_password
from .config import DashboardConfig
from .routes import SAMPLER, SERVICE, SESSION, error_body, error_status, routes
from .sampler import LiveSampler
from .service import DashboardService, InputError

__all__ = ["build_app", "open_admin", "STATIC_DIR", "SESSION_COOKIE", "CSRF_HEADER"]

log = get_logger("aiorocketmq.dashboard")

STATIC_DIR = Path(__file__).resolve().parent / "static"
SESSION_COOKIE = "mqdashboard_session"
CSRF_HEADER = "X-CSRF-Token"
MAX_REQUEST_BYTES = 256 * 1024  # a test message body is at most 64 KiB
_UNSAFE = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_OPEN_PATHS = frozenset({"/api/session", "/api/login"})

CONFIG = web.AppKey("config", DashboardConfig)
SESSIONS = web.AppKey("sessions", SessionStore)
ADMIN = web.AppKey("admin", MQAdmin)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

_SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; "
                               "frame-ancestors 'none'; form-action 'self'",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}


def open_admin(config: DashboardConfig) -> MQAdmin:
    """The admin client of the dashboard; with ACL credentials every request is signed
    (``ClientConfig.access_key``/``secret_key``: upstream's ``AclClientRPCHook``), the
    producer of a test message included."""
    options = ({"access_key": config.access_key, "secret_key": config.secret_key}
               if config.access_key else {})
    return MQAdmin(config.namesrv_addr, timeout=config.admin_timeout_ms / 1000,
                   client_options=options)


def _json_error(status: int, message: str) -> web.Response:
    return web.json_response({"error": message}, status=status)


@web.middleware
async def _access_log(request: web.Request, handler: Handler) -> web.StreamResponse:
    started = time.perf_counter()
    response = await handler(request)
    if request.path.startswith("/api/"):
        session: Session | None = request.get(SESSION)
        fields = {"method": request.method, "path": request.path, "status": response.status,
                  "user": session.user if session else None, "peer": request.remote,
                  "ms": round((time.perf_counter() - started) * 1000, 1)}
        if request.method in _UNSAFE or response.status >= 400:
            log.info("dashboard.request", **fields)
        else:
            log.debug("dashboard.request", **fields)
    for key, value in _SECURITY_HEADERS.items():
        response.headers.setdefault(key, value)
    return response


@web.middleware
async def _errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except web.HTTPException as exc:
        if not request.path.startswith("/api/") or exc.status < 400:
            raise
        return _json_error(exc.status, exc.reason)
    except RocketMQError as exc:
        status = error_status(exc)
        if status >= 500:
            log.warning("dashboard.cluster_error", path=request.path,
                        error=f"{type(exc).__name__}: {exc}")
        return web.json_response(error_body(exc), status=status)
    except Exception:
        log.exception("dashboard.internal_error", path=request.path)
        return _json_error(500, "internal error (see the dashboard's log)")


@web.middleware
async def _guard(request: web.Request, handler: Handler) -> web.StreamResponse:
    if not request.path.startswith("/api/"):
        return await handler(request)
    config = request.app[CONFIG]
    session = request.app[SESSIONS].get(request.cookies.get(SESSION_COOKIE))
    request[SESSION] = session
    if request.path in _OPEN_PATHS:
        return await handler(request)
    if session is None and (config.login_required or request.method in _UNSAFE):
        return _json_error(401, "login required" if config.login_required
                           else "no session: load the dashboard page first")
    if request.method in _UNSAFE:
        assert session is not None
        origin = request.headers.get("Origin")
        if origin is not None and origin != f"{request.scheme}://{request.host}":
            return _json_error(403, f"cross-origin request from {origin} refused")
        if not session.csrf_ok(request.headers.get(CSRF_HEADER)):
            return _json_error(403, f"missing or wrong {CSRF_HEADER} header")
        if not session.can_write and request.path != "/api/logout":
            return _json_error(403, f"user '{session.user}' may only read")
    return await handler(request)


def _set_cookie(response: web.StreamResponse, sid: str, config: DashboardConfig) -> None:
    response.set_cookie(SESSION_COOKIE, sid, httponly=True, samesite="Strict", path="/",
                        max_age=config.session_ttl_ms // 1000)


def _session_body(session: Session | None, config: DashboardConfig) -> dict[str, object]:
    return {"login_required": config.login_required,
            "authenticated": session is not None,
            "user": session.user if session else None,
            "role": session.role if session else None,
            "csrf_token": session.csrf_token if session else None,
            "namesrv_addr": config.namesrv_addr}


async def _get_session(request: web.Request) -> web.Response:
    config = request.app[CONFIG]
    session: Session | None = request[SESSION]
    if session is None and not config.login_required:
        sid, session = request.app[SESSIONS].create("anonymous", ROLE_ADMIN)
        response = web.json_response(_session_body(session, config))
        _set_cookie(response, sid, config)
        return response
    return web.json_response(_session_body(session, config))


async def _login(request: web.Request) -> web.Response:
    config = request.app[CONFIG]
    try:
        data = await request.json()
    except ValueError:
        raise InputError("request body is not valid JSON") from None
    if not isinstance(data, dict) or not isinstance(data.get("username"), str) or \
            not isinstance(data.get("password"), str):
        raise InputError("give 'username' and 'password'")
    user = config.users.get(data["username"])
    if user is None or not verify_password(data["password"], user.password_hash):
        log.warning("dashboard.login_failed", user=data["username"][:64], peer=request.remote)
        return _json_error(401, "wrong username or password")
    store = request.app[SESSIONS]
    store.drop(request.cookies.get(SESSION_COOKIE))  # a fresh id at login: no fixation
    sid, session = store.create(user.name, user.role)
    log.info("dashboard.login", user=user.name, role=user.role, peer=request.remote)
    response = web.json_response(_session_body(session, config))
    _set_cookie(response, sid, config)
    return response


async def _logout(request: web.Request) -> web.Response:
    session: Session | None = request[SESSION]
    request.app[SESSIONS].drop(request.cookies.get(SESSION_COOKIE))
    if session is not None:
        log.info("dashboard.logout", user=session.user, peer=request.remote)
    response = web.json_response({"authenticated": False})
    response.del_cookie(SESSION_COOKIE, path="/")
    return response


async def _index(request: web.Request) -> web.FileResponse:
    return web.FileResponse(STATIC_DIR / "index.html")


async def _favicon(request: web.Request) -> web.FileResponse:
    """``/favicon.ico``, which browsers ask for on their own: the SVG icon."""
    return web.FileResponse(STATIC_DIR / "favicon.svg",
                            headers={"Content-Type": "image/svg+xml"})


async def _unknown_api(request: web.Request) -> web.Response:
    return _json_error(404, f"no API endpoint {request.method} {request.path}")


def build_app(config: DashboardConfig, *, admin: MQAdmin | None = None) -> web.Application:
    """The dashboard application; ``admin`` (else one from ``open_admin``) is closed at cleanup.

    The sampler starts with the application and stops before the admin client closes.
    """
    app = web.Application(middlewares=[_access_log, _errors, _guard],
                          client_max_size=MAX_REQUEST_BYTES)
    app[CONFIG] = config
    app[SESSIONS] = SessionStore(ttl_ms=config.session_ttl_ms)
    app[ADMIN] = admin if admin is not None else open_admin(config)
    app[SERVICE] = DashboardService(app[ADMIN], max_scan_messages=config.max_scan_messages,
                                    cache_ttl=config.cache_ttl_ms / 1000)
    app[SAMPLER] = LiveSampler(app[SERVICE], interval=config.sample_interval_ms / 1000)
    app.router.add_get("/api/session", _get_session)
    app.router.add_post("/api/login", _login)
    app.router.add_post("/api/logout", _logout)
    app.add_routes(routes)
    app.router.add_route("*", "/api/{tail:.*}", _unknown_api)
    app.router.add_get("/", _index)
    app.router.add_get("/favicon.ico", _favicon)
    app.router.add_static("/static/", STATIC_DIR, follow_symlinks=False)

    async def start(app: web.Application) -> None:
        app[SAMPLER].start()
        log.info("dashboard.started", namesrv_addr=config.namesrv_addr,
                 login_required=config.login_required, acl=bool(config.access_key))

    async def stop(app: web.Application) -> None:
        await app[SAMPLER].stop()
        await app[ADMIN].close()

    app.on_startup.append(start)
    app.on_cleanup.append(stop)
    return app
