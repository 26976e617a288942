"""ASGI middleware in front of the REST API's routes: what is refused before a route runs.

- ``UploadBodyLimit``: an upload's body no larger than the file limit plus the form.
- ``RouteGuard``: a known route asked with a method it does not take answers 405, and
  an unknown ``/api/`` path 404, in the API's JSON; otherwise the web UI mounted at "/"
  would answer both as a page of its own.

Every refusal is the API's error body, ``{"error": {"code", "message"}}``.
"""

from __future__ import annotations

from fastapi.responses import JSONResponse
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match, Mount

from appliance.errors import MethodNotAllowed, NotFound, TooLarge


def error_response(status: int, code: str, message: str,
                   headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": {"code": code, "message": message}}, status_code=status,
                        headers=headers)


class UploadBodyLimit:
    """Refused at once when Content-Length says the body is too large, and a chunked
    body is read no further than the limit: a 60 MB upload against a 2 MB limit costs
    2 MB at most. The 413 is raised from ``receive``, inside the route, so it is
    answered as every other HTTP error is (the API's ``HTTPException`` handler)."""

    def __init__(self, app, path: str, limit: int):
        self.app = app
        self.path = path
        self.limit = limit

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["method"] != "POST" or scope["path"] != self.path:
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
                                  {"Allow": ", ".join(sorted(allowed))})
        if scope["path"].startswith("/api/"):
            return error_response(NotFound.http_status, NotFound.code,
                                  f"no API route {scope['path']}; see /docs")
        return None
