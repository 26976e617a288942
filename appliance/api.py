"""REST API (FastAPI): documents in, status and results out, health and readiness.

Access (API keys, allow-list, rate limits, CORS) is the ``AccessGuard`` middleware's
job (appliance/security.py): routes here never check it themselves.

Every error leaves as ``{"error": {"code": ..., "message": ...}}`` with the status
its class carries.
"""

from __future__ import annotations

from typing import Literal

from fastapi import FastAPI, File, Form, Header, Query, Request, UploadFile
from fastapi.middleware.cors import CORSMiddleware
from fastapi_offline import FastAPIOffline
from pydantic import AnyHttpUrl
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException as StarletteHTTPException

from appliance.daemon import Appliance
from appliance.config import DOC_TYPES
from appliance.errors import (
    ApplianceError, DuplicateDocument, HttpError, InvalidRequest, NotFound, QueueFull, TooLarge,
)
from appliance.export import document_json, render
from appliance.intake import SubmitOptions
from appliance.metrics import install_metrics
from appliance.security import AccessGuard
from appliance.store import queries
from appliance.store.models import Lane

DocType = Literal[DOC_TYPES]
UPLOAD_PATH = "/api/v1/documents"
# What a multipart upload carries besides the file: boundaries, headers and form fields.
FORM_ALLOWANCE_BYTES = 64 * 1024
MEDIA_TYPES = {"md": "text/markdown; charset=utf-8", "json": "application/json",
               "txt": "text/plain; charset=utf-8"}


class UploadBodyLimit:
    """ASGI middleware: an upload's body no larger than the file limit plus the form.

    Refused at once when Content-Length says it is too large, and a chunked body is
    read no further than the limit: a 60 MB upload against a 2 MB limit costs 2 MB at
    most. The 413 is raised from ``receive``, inside the route, so it is answered as
    every other error is (the ``HTTPException`` handler below).
    """

    def __init__(self, app, limit: int):
        self.app = app
        self.limit = limit

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["method"] != "POST" or scope["path"] != UPLOAD_PATH:
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


def _error(status: int, code: str, message: str) -> JSONResponse:
    return JSONResponse({"error": {"code": code, "message": message}}, status_code=status)


def create_app(appliance: Appliance) -> FastAPI:
    # the API docs' scripts and styles come from a package, not a CDN: no internet needed
    app = FastAPIOffline(title="OCR Appliance", version="1", docs_url="/docs",
                         redoc_url="/redoc", static_url="/docs/assets")
    db = appliance.db
    max_bytes = appliance.settings.limits.max_bytes
    auth = appliance.settings.auth
    if auth.cors_origins:  # off unless the operator names the origins
        app.add_middleware(CORSMiddleware, allow_origins=auth.cors_origins,
                           allow_methods=["GET", "POST"], allow_headers=["X-API-Key",
                                                                         "Authorization"])
    app.add_middleware(UploadBodyLimit, limit=max_bytes + FORM_ALLOWANCE_BYTES)
    # added last, so it runs first: nothing is answered to a request it refuses
    app.add_middleware(AccessGuard, settings=auth, keys=appliance.api_keys,
                       auth_on=appliance.auth_on)

    @app.exception_handler(ApplianceError)
    async def _appliance_error(_request: Request, exc: ApplianceError):
        response = _error(exc.http_status, exc.code, exc.message)
        if isinstance(exc, QueueFull):
            response.headers["Retry-After"] = str(exc.retry_after_s)
        return response

    @app.exception_handler(RequestValidationError)
    async def _validation_error(_request: Request, exc: RequestValidationError):
        detail = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        return _error(400, InvalidRequest.code, f"invalid request: {detail}")

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(_request: Request, exc: StarletteHTTPException):
        if exc.status_code == TooLarge.http_status:  # the upload route's body limit
            return _error(413, TooLarge.code, f"the upload is larger than the limit of "
                                              f"{max_bytes:,} bytes; nothing was stored. Split "
                                              f"the file, or raise limits.max_bytes")
        code = NotFound.code if exc.status_code == 404 else HttpError.code
        return _error(exc.status_code, code, str(exc.detail))

    @app.get("/healthz", tags=["health"])
    def healthz():
        return {"status": "ok"}

    @app.get("/readyz", tags=["health"])
    def readyz():
        status = appliance.status()
        return JSONResponse(status, status_code=200 if status["ready"] else 503)

    install_metrics(app, appliance)  # GET /metrics

    @app.post(UPLOAD_PATH, status_code=201, tags=["documents"])
    def submit_document(request: Request, file: UploadFile = File(...),
                        doc_type: DocType = Form("generic"),
                        lane: Lane = Form(Lane.INTERACTIVE),
                        engine: Literal["llama", "classic"] | None = Form(None),
                        tags: str = Form("", description="comma-separated"),
                        webhook_url: AnyHttpUrl | None = Form(None),
                        on_duplicate: Literal["process", "skip"] = Form(
                            "process", description="skip: content already read answers its "
                                                   "document (200) instead of a new one"),
                        idempotency_key: str | None = Header(
                            None, alias="Idempotency-Key", min_length=1, max_length=255,
                            pattern=r"^[\x21-\x7e]+$",
                            description="a retry with the same key answers the first "
                                        "request's document (200); other content: 409")):
        """Upload one document. A file that cannot be processed is still stored and
        answered with status `failed` and the reason in `error`. While the lane's queue
        is full the answer is 429 with Retry-After, and nothing is stored."""
        appliance.check_engine(engine)
        key = (getattr(request.state, "api_key", ""), idempotency_key) if idempotency_key \
            else None
        if key and (earlier := appliance.intake.replay(key, file.file)) is not None:
            return _existing(earlier.id, {"Idempotent-Replayed": "true"})
        options = SubmitOptions(source="api", lane=lane, doc_type=doc_type, engine=engine,
                                tags=[t.strip() for t in tags.split(",") if t.strip()],
                                webhook_url=str(webhook_url) if webhook_url else None,
                                skip_duplicates=on_duplicate == "skip", idempotency_key=key)
        try:
            doc = appliance.submit(file.file, file.filename, options)
        except DuplicateDocument as exc:
            return _existing(exc.existing_id, {"Duplicate-Of": exc.existing_id})
        if doc.error_code:
            appliance.finish(doc.id)
        return document_json(queries.get_document(db, doc.id))

    def _existing(document_id: str, headers: dict[str, str]) -> JSONResponse:
        """An earlier document answered instead of a new one: 200, not 201."""
        return JSONResponse(document_json(queries.get_document(db, document_id)),
                            headers=headers)

    @app.post("/api/v1/documents/{document_id}/cancel", tags=["documents"])
    def cancel_document(document_id: str):
        """Pages not yet started end `failed: cancelled`; pages being read finish."""
        return document_json(appliance.cancel(document_id))

    @app.get("/api/v1/documents", tags=["documents"])
    def list_documents(limit: int = Query(50, ge=1, le=500), offset: int = Query(0, ge=0)):
        return {"documents": [document_json(v) for v in queries.list_documents(db, limit, offset)]}

    @app.get("/api/v1/documents/{document_id}", tags=["documents"])
    def get_document(document_id: str):
        view = queries.get_document(db, document_id)
        if view is None:
            raise NotFound(f"no document with id {document_id}")
        return document_json(view)

    @app.get("/api/v1/documents/{document_id}/result", tags=["documents"])
    def get_result(document_id: str, format: Literal["md", "json", "txt"] = "md"):
        content = render(db, document_id)[format]
        return Response(content, media_type=MEDIA_TYPES[format])

    @app.api_route("/api/{rest:path}", methods=["GET", "POST", "PUT", "PATCH", "DELETE"],
                   include_in_schema=False)
    def unknown_api_route(rest: str):
        # The web UI is mounted at "/" and would answer unknown API paths otherwise.
        raise NotFound(f"no API route /api/{rest}; see /docs")

    return app
