"""Logins for the mounted UIs: the web UI at "/" and the review console at "/review".

Both use Gradio's login page, checked against the users file (``appliance.users``).
Gradio calls the check with a name and a password only, and awaits it only when it
is declared ``async def`` (anything else it calls, and a coroutine object is truthy:
every password would pass). ``LoginGate`` wraps a mounted Gradio app so that:

- the check knows the caller's address, for the throttle and for the log (which
  names the address and the user, never the password);
- a mount whose login depends on configuration (the web UI: once an API key or an
  account exists) follows it on every request, so the first account or key added to
  a running daemon protects the UI at once.
"""

from __future__ import annotations

import logging
from contextvars import ContextVar
from typing import Callable

import anyio
import gradio as gr
from fastapi import FastAPI
from starlette.routing import Mount

from appliance.errors import ApplianceError
from appliance.users import Users

log = logging.getLogger(__name__)

# The address of the request being handled; Gradio's login route runs in its context.
_client_address: ContextVar[str] = ContextVar("login_client_address", default="-")


async def check_login(users: Users, name: str, password: str, where: str) -> bool:
    """Whether ``name``/``password`` is an account of ``users`` that may log in now.
    scrypt takes a while, so it runs off the event loop."""
    address = _client_address.get()

    def check() -> bool:
        try:
            return users.authenticate(name, password, address) is not None
        except ApplianceError as exc:  # e.g. a broken users file: nobody gets in, and why is logged
            log.error("login check failed: %s", exc.message)
            return False

    allowed = await anyio.to_thread.run_sync(check)
    if allowed:
        log.info("%s login user=%s address=%s", where, name, address)
    else:
        log.warning("%s login refused user=%r address=%s", where, name, address)
    return allowed


class LoginGate:
    """ASGI wrapper of one mounted Gradio app (see the module docstring)."""

    def __init__(self, ui_app, login, required: Callable[[], bool] | None = None):
        self.ui_app = ui_app
        self.login = login
        self.required = required  # None: the login is always required

    async def __call__(self, scope, receive, send):
        if scope["type"] not in ("http", "websocket"):
            return await self.ui_app(scope, receive, send)
        if self.required is not None:
            # Gradio reads its app's `auth` on every request: None lets everyone in
            self.ui_app.auth = self.login if self.required() else None
        token = _client_address.set((scope.get("client") or ("-", 0))[0])
        try:
            await self.ui_app(scope, receive, send)
        finally:
            _client_address.reset(token)


def mount_behind_login(app: FastAPI, blocks: gr.Blocks, path: str, users: Users, where: str,
                       required: Callable[[], bool] | None = None, **options) -> None:
    """Mount ``blocks`` at ``path`` of ``app`` behind a login checked against ``users``;
    with ``required``, only while it answers True. ``where`` names the UI in the log."""
    async def login(name: str, password: str) -> bool:  # async def: Gradio awaits it
        return await check_login(users, name, password, where)

    gr.mount_gradio_app(app, blocks, path=path, auth=login, **options)
    mount = next(route for route in reversed(app.router.routes)
                 if isinstance(route, Mount) and route.path == path.rstrip("/"))
    mount.app = LoginGate(mount.app, login, required)
