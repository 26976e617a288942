"""ASGI middleware in front of the REST API's routes: what is refused before a route runs.

- ``UploadBodyLimit``: an upload's body no larger than the file limit plus the form.
- ``RouteGuard``: a known route asked with a method it does not take answers 405, and
  an unknown ``/api/`` path 404, in the API's JSON; otherwise the web UI mounted at "/"
  would answer both as a page of its own.

Every refusal is the API's error body, ``{"error": {"code", "message"}}``, or under
``/documentintelligence`` the Document Intelligence service's (``error_response``).
"""

from __future__ import annotations

from collections.abc import Callable

from fastapi.responses import JSONResponse
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match, Mount

from appliance import docintel
from appliance.docintel.errors import error_body
from appliance.errors import MethodNotAllowed, NotFound, TooLarge


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
