"""One sign-in for the mounted UIs: the web UI at "/" and the review console at "/review".

A person signs in once, on the appliance's own page at ``/login``, against the users
file (``appliance.users``: scrypt passwords, the throttle against guessing), and is
signed in to both; ``/logout`` signs out of both. The session is a random token in an
HttpOnly cookie, held in this process's memory (a restart signs everyone out) for a
working day; each request looks the account up again, so a removed account's session
ends at once and a changed role counts at once.

``SignInGate`` wraps each mounted Gradio app and refuses by default: while sign-in is
required, a request without a session reaches none of Gradio's routes (many of them,
the heartbeat's event stream, cancel, reset, the theme, check no login at all). A page
asked for is sent to ``/login`` (and back after), anything else answers 401. Gradio's
``auth_dependency`` is set too, to name the user in ``gr.Request``.
The web UI's sign-in follows configuration on every request: it is required once an
API key or an account exists, so the first one added to a running daemon protects
the UI at once, and always on an address other hosts can reach unless ``auth.open``
(``Appliance.auth_on``). The review console always requires it.

The log names the address and the user of every sign-in, never a password.
"""

from __future__ import annotations

import html
import logging
import secrets
import threading
import time
from dataclasses import dataclass
from typing import Callable
from urllib.parse import quote

import anyio
import gradio as gr
from fastapi import FastAPI, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse
from starlette.requests import HTTPConnection
from starlette.routing import Mount

from appliance.api_guards import error_response
from appliance.errors import ApplianceError, Unauthorized
from appliance.users import User, Users
from ui.i18n import (EN, I18N, LANGUAGE_COOKIE, LANGUAGE_COOKIE_AGE_S, LANGUAGE_PATH, ZH,
                     chosen_language, language_of, language_script, text)

log = logging.getLogger(__name__)

SESSION_COOKIE = "appliance-session"
SESSION_TTL_S = 10 * 3600.0  # a working day
# how often Gradio's queue looks for a UI event and for progress to send, when it has none
QUEUE_POLL_S = 0.05
PROGRESS_POLL_S = 0.1
LOGIN_PATH, LOGOUT_PATH = "/login", "/logout"
# In every page of a mounted UI: a call of the UI's own that answers 401 (signed out in
# another tab, the session ran out, the daemon restarted) brings the sign-in page, and
# back here after; otherwise each action would only say "Error".
SIGNED_OUT_HEAD = f"""<script>(() => {{
  const fetched = window.fetch.bind(window);
  window.fetch = async (...args) => {{
    const response = await fetched(...args);
    if (response.status === 401) {{
      window.location.assign("{LOGIN_PATH}?next=" + encodeURIComponent(window.location.pathname));
    }}
    return response;
  }};
}})();</script>"""
_PAGE_HEADERS = {"Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; "
                                            "form-action 'self'; frame-ancestors 'none'",
                 "Cache-Control": "no-store"}


@dataclass
class _Session:
    name: str
    expires: float


class Sessions:
    """Who is signed in, by session token (see the module docstring)."""

    def __init__(self, users: Users, ttl_s: float = SESSION_TTL_S):
        self.users = users
        self.ttl_s = ttl_s
        self._open: dict[str, _Session] = {}
        self._lock = threading.Lock()

    def open(self, name: str) -> str:
        token = secrets.token_urlsafe(32)
        with self._lock:
            now = time.monotonic()
            self._open = {t: s for t, s in self._open.items() if s.expires > now}
            self._open[token] = _Session(name, now + self.ttl_s)
        return token

    def user(self, token: str | None) -> User | None:
        """The account signed in with ``token``, while its session lasts and it exists."""
        with self._lock:
            session = self._open.get(token or "")
        if session is None or session.expires <= time.monotonic():
            return None
        try:
            return self.users.get(session.name)
        except ApplianceError as exc:  # a broken users file: nobody is in, and why is logged
            log.error("session check failed: %s", exc.message)
            return None

    def close(self, token: str | None) -> str | None:
        """End the session; the name it was for."""
        with self._lock:
            session = self._open.pop(token or "", None)
        return session.name if session else None

    def user_of(self, request: HTTPConnection) -> str | None:
        """Gradio's ``auth_dependency``: the signed-in user's name."""
        user = self.user(request.cookies.get(SESSION_COOKIE))
        return user.name if user else None


async def check_login(users: Users, name: str, password: str, address: str) -> bool:
    """Whether ``name``/``password`` is an account that may sign in now from ``address``.
    scrypt takes a while, so it runs off the event loop."""
    def check() -> bool:
        try:
            return users.authenticate(name, password, address) is not None
        except ApplianceError as exc:  # e.g. a broken users file: nobody gets in, and why is logged
            log.error("login check failed: %s", exc.message)
            return False

    allowed = await anyio.to_thread.run_sync(check)
    if allowed:
        log.info("ui login user=%s address=%s", name, address)
    else:
        log.warning("ui login refused user=%r address=%s", name, address)
    return allowed


def _back_to(target: str) -> str:
    """Where to go after signing in: a path of this server only (no open redirect)."""
    if not target.startswith("/") or target.startswith("//") or "\\" in target:
        return "/"
    return target


LANGUAGE_NAMES = {EN: "English", ZH: "简体中文"}  # each in its own language


def language_link(lang: str, target: str) -> str:
    """Where the language link goes: it sets ``lang`` and comes back to ``target``."""
    return f"{LANGUAGE_PATH}?set={quote(lang)}&next={quote(_back_to(target))}"


def login_page(target: str, message: str = "", username: str = "", lang: str = EN) -> str:
    """The sign-in page in ``lang``; ``message`` is ours (already in ``lang``)."""
    error = f'<p class="error" role="alert">{html.escape(message)}</p>' if message else ""
    # after a wrong password the name stays, and the password is typed again
    focus_name, focus_password = ("", " autofocus") if username else (" autofocus", "")
    back = _back_to(target)
    here = f"{LOGIN_PATH}?next={quote(back)}"
    languages = " · ".join(
        f'<a href="{html.escape(language_link(code, here))}" lang="{code}"'
        + (' aria-current="true"' if code == lang else "") + f">{name}</a>"
        for code, name in LANGUAGE_NAMES.items())
    # our own words: the intro holds markup of ours, nothing else is markup
    return f"""<!doctype html>
<html lang="{lang}"><head><meta charset="utf-8"><title>{html.escape(text("sign_in_title", lang))}</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>body{{font-family:sans-serif;max-width:22rem;margin:4rem auto;padding:0 1rem}}
label,input,button{{display:block;width:100%;box-sizing:border-box;margin:.3rem 0}}
input{{padding:.5rem}}button{{padding:.6rem;margin-top:1rem}}.error{{color:#b00020}}
.languages{{font-size:.9rem}}</style>
</head><body><p class="languages" id="languages">{html.escape(text("sign_in_language", lang))} {languages}</p>
<h1>{html.escape(text("app_title", lang))}</h1><p>{text("sign_in_intro", lang)}</p>{error}
<form method="post" action="{LOGIN_PATH}">
<input type="hidden" name="next" value="{html.escape(back)}">
<label for="username">{html.escape(text("sign_in_username", lang))}</label>
<input id="username" name="username" autocomplete="username" required{focus_name}
 value="{html.escape(username)}">
<label for="password">{html.escape(text("sign_in_password", lang))}</label>
<input id="password" name="password" type="password" autocomplete="current-password"{focus_password}>
<button type="submit">{html.escape(text("sign_in_button", lang))}</button></form></body></html>"""


def mount_sign_in(app: FastAPI, sessions: Sessions) -> None:
    """The sign-in and sign-out routes; add them before the UIs' mounts."""

    @app.get(LOGIN_PATH, include_in_schema=False)
    def sign_in_page(request: Request, next: str = "/") -> HTMLResponse:
        return HTMLResponse(login_page(next, lang=language_of(request)), headers=_PAGE_HEADERS)

    @app.get(LANGUAGE_PATH, include_in_schema=False)
    def set_language(request: Request, set: str = "", next: str = "/") -> RedirectResponse:
        """The language link: ``set`` (en, zh-CN), or without it the other one than now;
        kept in this browser's cookie, and back to ``next``."""
        lang = chosen_language(set) or (EN if language_of(request) == ZH else ZH)
        response = RedirectResponse(_back_to(next), status_code=303)
        response.set_cookie(LANGUAGE_COOKIE, lang, max_age=LANGUAGE_COOKIE_AGE_S, httponly=True,
                            samesite="lax", secure=request.url.scheme == "https", path="/")
        return response

    @app.post(LOGIN_PATH, include_in_schema=False)
    async def sign_in(request: Request, username: str = Form(""), password: str = Form(""),
                      next: str = Form("/")):
        address = request.client.host if request.client else "-"
        if not await check_login(sessions.users, username.strip(), password, address):
            lang = language_of(request)
            return HTMLResponse(login_page(next, text("sign_in_failed", lang), username, lang),
                                status_code=401, headers=_PAGE_HEADERS)
        response = RedirectResponse(_back_to(next), status_code=303)
        response.set_cookie(SESSION_COOKIE, sessions.open(username.strip()),
                            max_age=int(sessions.ttl_s), httponly=True, samesite="lax",
                            secure=request.url.scheme == "https", path="/")
        return response

    @app.get(LOGOUT_PATH, include_in_schema=False)
    def sign_out(request: Request) -> RedirectResponse:
        if name := sessions.close(request.cookies.get(SESSION_COOKIE)):
            log.info("ui logout user=%s", name)
        response = RedirectResponse(LOGIN_PATH, status_code=303)
        response.delete_cookie(SESSION_COOKIE, path="/")
        return response


class SignInGate:
    """ASGI wrapper of one mounted Gradio app (see the module docstring)."""

    def __init__(self, ui_app, sessions: Sessions, required: Callable[[], bool] | None,
                 title_key: str = "app_title"):
        self.ui_app = ui_app
        self.sessions = sessions
        self.required = required  # None: always required
        self.title_key = title_key  # the page's title, in the ui.i18n catalogue

    async def __call__(self, scope, receive, send):
        if scope["type"] in ("http", "websocket"):
            required = self.required is None or self.required()
            # Gradio reads its app's auth_dependency on every request: None lets all in
            self.ui_app.auth_dependency = self.sessions.user_of if required else None
            connection = HTTPConnection(scope)
            if required and self.sessions.user_of(connection) is None:
                return await self._refuse(connection, receive, send)
            if scope["type"] == "http" and scope["method"] == "GET":
                send = _with_language(send, language_script(language_of(connection),
                                                            self.title_key))
        await self.ui_app(scope, receive, send)

    @staticmethod
    async def _refuse(connection: HTTPConnection, receive, send) -> None:
        scope = connection.scope
        if scope["type"] == "websocket":
            return await send({"type": "websocket.close", "code": 1008})
        if scope["method"] == "GET" and "text/html" in connection.headers.get("accept", ""):
            response = RedirectResponse(f"{LOGIN_PATH}?next={quote(scope['path'])}",
                                        status_code=303)  # a browser asking for a page
        else:
            response = error_response(Unauthorized.http_status, Unauthorized.code,
                                      f"sign in first, at {LOGIN_PATH}")
        await response(scope, receive, send)


def _with_language(send, script: str):
    """``send`` of a response that gets ``script`` first in its <head> when it is a page
    (HTML): the page's language (``ui.i18n.language_script``), before Gradio starts."""
    start: dict | None = None
    chunks: list[bytes] = []

    async def sending(message) -> None:
        nonlocal start
        if message["type"] == "http.response.start":
            headers = dict(message.get("headers") or [])
            if not headers.get(b"content-type", b"").startswith(b"text/html"):
                return await send(message)
            start = message
            return None
        if start is None or message["type"] != "http.response.body":
            return await send(message)
        chunks.append(message.get("body", b""))
        if message.get("more_body"):
            return None
        body = b"".join(chunks).replace(b"<head>", b"<head>" + script.encode(), 1)
        headers = [(k, v) for k, v in start.get("headers") or [] if k != b"content-length"]
        headers.append((b"content-length", str(len(body)).encode()))
        await send({**start, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    return sending


def mount_signed_in(app: FastAPI, blocks: gr.Blocks, path: str, sessions: Sessions,
                    required: Callable[[], bool] | None = None, title_key: str = "app_title",
                    **options) -> None:
    """Mount ``blocks`` at ``path`` of ``app`` for signed-in users only; with
    ``required``, only while it answers True. Its pages are in the person's language
    (``ui.i18n``; Gradio's translations are ``I18N``), titled ``title_key``."""
    gr.mount_gradio_app(app, blocks, path=path, auth_dependency=sessions.user_of,
                        head=SIGNED_OUT_HEAD, i18n=I18N, **options)
    # Gradio's queue looks for work every millisecond (its progress every 10 ms) off
    # Windows: two mounted UIs kept an idle daemon at 7 % of a core, taken from the
    # engine's pages too. Gradio's Windows pace answers a click 50 ms later at most.
    blocks._queue.sleep_when_free = QUEUE_POLL_S
    blocks._queue.progress_update_sleep_when_free = PROGRESS_POLL_S
    app.state.signed_in = sessions.user_of  # the API docs open to the signed-in (AccessGuard)
    mount = next(route for route in reversed(app.router.routes)
                 if isinstance(route, Mount) and route.path == path.rstrip("/"))
    mount.app = SignInGate(mount.app, sessions, required, title_key)
