"""ASGI middleware in front of the REST API's routes: what is refused before a route runs.

- ``AccessGuard``: the allow-list, API keys and rate limits of ``appliance.security``,
  on every route but ``/healthz``, the mounted UI's included.
- ``UploadBodyLimit``: an upload's body no larger than the file limit plus the form.
- ``RouteGuard``: a known route asked with a method it does not take answers 405, and
  an unknown ``/api/`` path 404, in the API's JSON; otherwise the web UI mounted at "/"
  would answer both as a page of its own.

Every refusal is the API's error body, ``{"error": {"code", "message"}}``, or under
``/documentintelligence`` the Document Intelligence service's (``error_response``).
"""

from __future__ import annotations

import ipaddress
import math
from collections.abc import Callable

from fastapi.responses import JSONResponse
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import HTTPConnection
from starlette.routing import Match, Mount

from appliance import docintel
from appliance.config import AuthSettings
from appliance.docintel.errors import error_body
from appliance.errors import (
    ForbiddenAddress, MethodNotAllowed, NotFound, RateLimited, TooLarge, Unauthorized,
)
from appliance.security import ApiKeys, RateLimiter

OPEN_PATHS = ("/healthz",)
# Routes that answer machines: they need an API key. Everything else is the web UI.
KEY_PATHS = ("/api/", "/readyz", "/metrics", "/docs", "/redoc", "/openapi.json",
             "/documentintelligence")
# the headers a key may come in, besides Authorization: Bearer
KEY_HEADERS = (b"x-api-key", b"ocp-apim-subscription-key")
# ... of which these are for people too: a signed-in user of the web UI reads them
# without a key (the UI's mount sets ``app.state.signed_in``, its session check; the
# library never imports its UI)
DOCS_PATHS = ("/docs", "/redoc", "/openapi.json")


def error_response(status: int, code: str, message: str,
                   headers: dict[str, str] | None = None, path: str = "") -> JSONResponse:
    """An error as the route at ``path`` answers it: the Document Intelligence API's in
    that service's shape and status, the rest in the native API's."""
    if path.startswith(docintel.PREFIX):
        status, body = error_body(code, message)
    else:
        body = {"error": {"code": code, "message": message}}
    return JSONResponse(body, status_code=status, headers=headers)


def actor(request) -> str:
    """Whom the audit trail names for a request: its API key's name."""
    return getattr(request.state, "api_key", "") or "api"


class UploadBodyLimit:
    """Refused at once when Content-Length says the body is too large, and a chunked
    body is read no further than the limit: a 60 MB upload against a 2 MB limit costs
    2 MB at most. The 413 is raised from ``receive``, inside the route, so it is
    answered as every other HTTP error is (the API's ``HTTPException`` handler)."""

    def __init__(self, app, matches: Callable[[str], bool], limit: int):
        self.app = app
        self.matches = matches  # the upload path(s) it guards
        self.limit = limit

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["method"] != "POST" or not self.matches(scope["path"]):
            return await self.app(scope, receive, send)
        declared = Headers(scope=scope).get("content-length")
        too_large = declared is not None and declared.isdigit() and int(declared) > self.limit
        received = 0

        async def limited_receive():
            nonlocal received
            if too_large:
                raise StarletteHTTPException(TooLarge.http_status)
            message = await receive()
            received += len(message.get("body", b""))
            if received > self.limit:
                raise StarletteHTTPException(TooLarge.http_status)
            return message

        await self.app(scope, limited_receive, send)


class RouteGuard:
    """405 and 404 for the API's own paths (see the module docstring). ``routes`` is
    the app's live route list: routes added after the middleware count too."""

    def __init__(self, app, routes: list):
        self.app = app
        self.routes = routes

    async def __call__(self, scope, receive, send):
        refusal = self._refusal(scope) if scope["type"] == "http" else None
        if refusal is None:
            return await self.app(scope, receive, send)
        await refusal(scope, receive, send)

    def _refusal(self, scope) -> JSONResponse | None:
        allowed: set[str] = set()
        for route in self.routes:
            if isinstance(route, Mount):  # the UI's catch-all and static assets
                continue
            match, _ = route.matches(scope)
            if match is Match.FULL:
                return None
            if match is Match.PARTIAL:
                allowed |= set(route.methods or ())
        if allowed:
            return error_response(MethodNotAllowed.http_status, MethodNotAllowed.code,
                                  f"{scope['method']} is not allowed here; use "
                                  f"{', '.join(sorted(allowed))}",
                                  {"Allow": ", ".join(sorted(allowed))}, scope["path"])
        if scope["path"].startswith(("/api/", docintel.PREFIX + "/")):
            return error_response(NotFound.http_status, NotFound.code,
                                  f"no API route {scope['path']}; see /docs", path=scope["path"])
        return None


class AccessGuard:
    """ASGI middleware: the allow-list, API keys and rate limits (``appliance.security``'s
    module docstring has the rules). Its refusals are written as the route would write
    them (``error_response``): the Document Intelligence API's in that service's shape."""

    def __init__(self, app, settings: AuthSettings, keys: ApiKeys, auth_on):
        self.app = app
        self.settings = settings
        self.keys = keys
        self.auth_on = auth_on  # callable: is auth configured right now
        self.networks = [ipaddress.ip_network(n, strict=False) for n in settings.allow_from]
        self.limiter = RateLimiter()

    async def __call__(self, scope, receive, send):
        if scope["type"] not in ("http", "websocket") or scope["path"] in OPEN_PATHS:
            return await self.app(scope, receive, send)
        refusal = self._refusal(scope)
        if refusal is None:
            return await self.app(scope, receive, send)
        if scope["type"] == "websocket":
            return await send({"type": "websocket.close", "code": 1008})
        await refusal(scope, receive, send)

    def _refusal(self, scope):
        client = (scope.get("client") or ("", 0))[0]
        path = scope["path"]

        def _error(status: int, code: str, message: str, headers: dict | None = None):
            return error_response(status, code, message, headers, path)

        if self.networks and not self._allowed(client):
            return _error(ForbiddenAddress.http_status, ForbiddenAddress.code,
                          f"requests from {client} are not allowed; add the address to "
                          f"auth.allow_from")
        if not path.startswith(KEY_PATHS) or not self.auth_on():
            return None  # the web UI: Gradio's login guards it
        if scope.get("method") == "OPTIONS":
            return None  # a CORS preflight carries no key and changes nothing
        headers = dict(scope.get("headers") or [])
        # header bytes are Latin-1 by HTTP's rules: any bytes decode (and a key with odd
        # ones simply matches none)
        presented = next((value for name in KEY_HEADERS if (value := headers.get(name, b""))),
                         b"").decode("latin-1")
        bearer = headers.get(b"authorization", b"").decode("latin-1")
        if not presented and bearer.lower().startswith("bearer "):
            presented = bearer[7:].strip()
        if not presented and self._signed_in(scope):
            if path.startswith(DOCS_PATHS):
                return None
            return _error(Unauthorized.http_status, Unauthorized.code,
                          "a sign-in opens the web UI and the API's docs, not the API: this "
                          "route needs an API key; on /docs press Authorize and give one (an "
                          "administrator makes keys in the web UI, Documents tab, API keys)",
                          {"www-authenticate": "Bearer"})
        if not presented:
            return _error(Unauthorized.http_status, Unauthorized.code,
                          "this route needs an API key: send it in the X-API-Key (or "
                          "Ocp-Apim-Subscription-Key) header (`appliance keys add NAME`)",
                          {"www-authenticate": "Bearer"})
        key = self.keys.find(presented)
        if key is None:
            return _error(Unauthorized.http_status, Unauthorized.code, "the API key is not valid",
                          {"www-authenticate": "Bearer"})
        rate = key.rate_per_minute or self.settings.rate_per_minute
        wait_s = self.limiter.take(key.name, rate)
        if wait_s:
            return _error(RateLimited.http_status, RateLimited.code,
                          f"key '{key.name}' is over its limit of {rate} requests a minute; "
                          f"retry later",
                          {"retry-after": str(math.ceil(wait_s))})
        scope.setdefault("state", {})["api_key"] = key.name
        return None

    @staticmethod
    def _signed_in(scope) -> bool:
        """Whether the request carries a web UI session (its cookie)."""
        signed_in = getattr(getattr(scope.get("app"), "state", None), "signed_in", None)
        return signed_in is not None and signed_in(HTTPConnection(scope)) is not None

    def _allowed(self, client: str) -> bool:
        try:
            address = ipaddress.ip_address(client)
        except ValueError:
            return False
        return any(address in network for network in self.networks)
