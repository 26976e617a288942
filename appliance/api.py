"""REST API (FastAPI): documents in, status and results out, health and readiness.

Access (API keys, allow-list, rate limits, CORS) is the ``AccessGuard`` middleware's
job (appliance/api_guards.py): routes here never check it themselves.

Every error leaves as ``{"error": {"code": ..., "message": ...}}`` with the status
its class carries; under ``/documentintelligence`` (the Document Intelligence API,
``appliance.docintel``, mounted here) in that service's shape and status.
"""

from __future__ import annotations

import logging
import re
from typing import Literal

from fastapi import FastAPI, File, Form, Header, Path, Query, Request, UploadFile
from fastapi.exceptions import RequestValidationError
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import JSONResponse, Response
from fastapi_offline import FastAPIOffline
from prometheus_client.exposition import choose_encoder
from pydantic import BaseModel
from starlette.exceptions import HTTPException as StarletteHTTPException

from appliance import docintel
from appliance.api_guards import AccessGuard, RouteGuard, UploadBodyLimit, actor, error_response
from appliance.config import DOC_TYPES
from appliance.daemon import Appliance
from appliance.docintel.routes import install as install_docintel
from appliance.engines import pdf_text, registry
from appliance.errors import (
    ApplianceError, DuplicateDocument, HttpError, InvalidRequest, NotFound, QueueFull, TooLarge,
)
from appliance.export import FORMATS, SUFFIXES, document_json, safe_stem
from appliance.intake import SubmitOptions
from appliance.metrics import metrics_for
from appliance.review import TURNS
from appliance.store.models import DocStatus, Lane
from appliance.store.search import SORTS, DocumentQuery

log = logging.getLogger(__name__)

UPLOAD_PATH = "/api/v1/documents"
DOCS_PATH = "/docs"  # the web UI links it
# what the docs say first: a sign-in opens the docs but not the API, whose calls from a
# browser would otherwise be made by any page the person visits (a key is sent on purpose)
DOCS_DESCRIPTION = (
    "Every route but `/healthz` needs an API key once a key or an account exists: send it "
    "in the `X-API-Key` header (or as `Authorization: Bearer`). Signing in to the web UI "
    "opens these docs, not the API: to try a route here, press **Authorize** and give a "
    "key. An administrator makes one in the web UI (Documents tab, *API keys*) or with "
    "`appliance keys add NAME`; it is shown once.")
# What a multipart upload carries besides the file: boundaries, headers and form fields.
FORM_ALLOWANCE_BYTES = 64 * 1024
# A Document Intelligence analysis: the file as base64 (4 bytes for 3) in a small JSON
ANALYZE_PATH = re.compile(rf"^{docintel.PREFIX}/documentModels/[^/]+:analyze$")
MEDIA_TYPES = {"md": "text/markdown; charset=utf-8", "json": "application/json",
               "txt": "text/plain; charset=utf-8",
               "hocr": "application/xhtml+xml; charset=utf-8",
               "alto": "application/xml; charset=utf-8", "pdf": "application/pdf",
               "fields.json": "application/json"}
# the routes that take a document's id, by their operationId (OpenAPI links)
DOCUMENT_LINKS = {"GetDocument": "get_document", "GetResult": "get_result",
                  "CancelDocument": "cancel_document", "CorrectFields": "correct_fields",
                  "RetryDocument": "retry_document", "SendToReview": "send_to_review"}
# SQLite's integers end at 2**63 - 1; an offset past any real store is still just empty
# (and a page number past it, not found)
MAX_OFFSET = 2**62
MAX_TIME = 1e11  # UNIX seconds: past the year 5000


class FieldCorrections(BaseModel):
    fields: dict[str, str]  # field name -> value as it should read ("" removes it)


class PageTurn(BaseModel):
    degrees: Literal[TURNS]  # clockwise, from the page as it was last read


class ErrorDetail(BaseModel):
    code: str
    message: str


class ErrorBody(BaseModel):
    """Every error the API answers."""

    error: ErrorDetail


# What each error status means here, for the OpenAPI description of every route.
ERROR_STATUSES = {
    400: "a bad parameter, form field or header (invalid_request)",
    401: "no API key, or one that is not valid (unauthorized), once auth is on",
    403: "the caller's address is not in auth.allow_from (forbidden_address), or a "
         "webhook_url (a Document Intelligence urlSource) to a host not in "
         "webhooks.allow_hosts (webhook_not_allowed, source_not_allowed)",
    404: "no such document, or no such page of it (not_found)",
    405: "the route does not take this method (method_not_allowed)",
    409: "not final yet (not_ready), refused at intake so without a result (no_result), an "
         "Idempotency-Key sent with other content (idempotency_conflict), a page queued or "
         "being read (page_busy) or open in a reviewer's console (review_lock_lost), an engine "
         "this appliance does not run (engine_unavailable), or key fields set on a "
         "document whose type has none (no_fields) or not the ones named (unknown_field)",
    413: "the upload is over limits.max_bytes (too_large); nothing was stored",
    415: "a Document Intelligence analysis whose body is neither JSON nor a document "
         "(UnsupportedMediaType), or a file of a type the appliance does not read",
    429: "over the API key's rate limit (rate_limited) or the lane's queue is full "
         "(queue_full); see Retry-After",
    503: "shutting down (shutting_down), or not ready yet",
    507: "the data directory's disk is under its floor (disk_full); see Retry-After",
}
ACCESS_STATUSES = (401, 403, 405, 429)  # any route behind the AccessGuard may answer these


def errors(*statuses: int) -> dict:
    """The OpenAPI ``responses`` of a route that may answer ``statuses`` (and the access
    refusals every guarded route may answer)."""
    return {status: {"model": ErrorBody, "description": ERROR_STATUSES[status]}
            for status in sorted({*ACCESS_STATUSES, *statuses})}


def complete_openapi(app: FastAPI) -> None:
    """What FastAPI cannot infer goes into the OpenAPI schema: the AccessGuard's rules
    (an API key in X-API-Key or as a bearer token, on every route but /healthz, once a
    key or an account exists), invalid input as 400 (not FastAPI's 422), uploads as
    binary, and the links from a new document to the routes that take its id."""
    generate = app.openapi

    def openapi() -> dict:
        if app.openapi_schema is None:
            schema = generate()  # cached on the app: this runs once
            schema.setdefault("components", {})["securitySchemes"] = {
                "ApiKey": {"type": "apiKey", "in": "header", "name": "X-API-Key"},
                "Bearer": {"type": "http", "scheme": "bearer"}}
            schema["security"] = [{"ApiKey": []}, {"Bearer": []}]
            schema["paths"]["/healthz"]["get"]["security"] = []
            for operations in schema["paths"].values():  # invalid input is our 400, not 422
                for operation in operations.values():
                    operation["responses"].pop("422", None)
            for unused in ("HTTPValidationError", "ValidationError"):
                schema["components"].get("schemas", {}).pop(unused, None)
            for body in schema["components"].get("schemas", {}).values():
                for prop in body.get("properties", {}).values():
                    if prop.get("contentMediaType") == "application/octet-stream":
                        prop["format"] = "binary"  # any bytes: a file part has no JSON type
            links = {name: {"operationId": operation,
                            "parameters": {"document_id": "$response.body#/id"}}
                     for name, operation in DOCUMENT_LINKS.items()}
            for status in ("200", "201"):
                schema["paths"][UPLOAD_PATH]["post"]["responses"][status]["links"] = links
        return app.openapi_schema

    app.openapi = openapi


def create_app(appliance: Appliance) -> FastAPI:
    # the API docs' scripts and styles come from a package, not a CDN: no internet needed
    app = FastAPIOffline(title="OCR Appliance", version="1", description=DOCS_DESCRIPTION,
                         docs_url=DOCS_PATH,
                         redoc_url="/redoc", static_url=f"{DOCS_PATH}/assets")
    max_bytes = appliance.settings.limits.max_bytes
    auth = appliance.settings.auth
    app.add_middleware(RouteGuard, routes=app.router.routes)  # innermost: after CORS
    if auth.cors_origins:  # off unless the operator names the origins
        app.add_middleware(CORSMiddleware, allow_origins=auth.cors_origins,
                           allow_methods=["GET", "POST"], allow_headers=["X-API-Key",
                                                                         "Authorization"])
    app.add_middleware(UploadBodyLimit, matches=UPLOAD_PATH.__eq__,
                       limit=max_bytes + FORM_ALLOWANCE_BYTES)
    app.add_middleware(UploadBodyLimit, matches=ANALYZE_PATH.match,
                       limit=-(-max_bytes * 4 // 3) + FORM_ALLOWANCE_BYTES)
    # added last, so it runs first: nothing is answered to a request it refuses
    app.add_middleware(AccessGuard, settings=auth, keys=appliance.api_keys,
                       auth_on=appliance.auth_on)

    @app.exception_handler(ApplianceError)
    async def _appliance_error(request: Request, exc: ApplianceError):
        response = error_response(exc.http_status, exc.code, exc.message,
                                  path=request.url.path)
        if isinstance(exc, QueueFull):
            response.headers["Retry-After"] = str(exc.retry_after_s)
        return response

    @app.exception_handler(RequestValidationError)
    async def _validation_error(request: Request, exc: RequestValidationError):
        detail = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        return error_response(400, InvalidRequest.code, f"invalid request: {detail}",
                              path=request.url.path)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException):
        path = request.url.path
        if exc.status_code == TooLarge.http_status:  # the upload routes' body limit
            return error_response(413, TooLarge.code,
                                  f"the upload is larger than the limit of {max_bytes:,} "
                                  f"bytes; nothing was stored. Split the file, or raise "
                                  f"limits.max_bytes", path=path)
        code = NotFound.code if exc.status_code == 404 else HttpError.code
        return error_response(exc.status_code, code, str(exc.detail), path=path)

    @app.exception_handler(Exception)  # anything no route expected: never text/plain
    async def _unexpected_error(request: Request, exc: Exception):
        log.error("request failed method=%s path=%s", request.method, request.url.path,
                  exc_info=exc)
        # the details stay in the log: a traceback tells a caller what it should not know
        return error_response(ApplianceError.http_status, ApplianceError.code,
                              "the request failed unexpectedly; the appliance's log has the "
                              "details", path=request.url.path)

    @app.get("/healthz", tags=["health"], responses={405: errors()[405]})
    def healthz():
        """The process is up (always open, no key needed)."""
        return {"status": "ok"}

    @app.get("/readyz", tags=["health"], responses=errors(503))
    def readyz():
        """200 once the engine workers have warmed up, 503 before and while stopping."""
        status = appliance.status()
        return JSONResponse(status, status_code=200 if status["ready"] else 503)

    metrics = metrics_for(appliance)

    @app.get("/metrics", tags=["health"], responses={
        200: {"content": {"text/plain": {}, "application/openmetrics-text": {}},
              "description": "the metrics"}, **errors()})
    def prometheus_metrics(request: Request) -> Response:  # sync: read in the thread pool
        """Prometheus metrics: the text format, or OpenMetrics when the scraper asks."""
        encoder, content_type = choose_encoder(request.headers.get("accept", ""))
        return Response(encoder(metrics.registry), headers={"Content-Type": content_type})

    @app.post(UPLOAD_PATH, status_code=201, tags=["documents"],
              operation_id="submit_document", responses={
        200: {"description": "an earlier document instead of a new one: a retry with a known "
                             "Idempotency-Key, or on_duplicate=skip for content already read"},
        **errors(400, 409, 413, 503, 507)})
    # An empty form field means its default (FastAPI reads it so), hence "" in each choice.
    def submit_document(request: Request, file: UploadFile = File(...),
                        doc_type: Literal[("", *DOC_TYPES)] = Form(
                            "generic", description="empty: generic"),
                        lane: Literal["", "interactive", "batch"] = Form(
                            Lane.INTERACTIVE, description="empty: interactive"),
                        engine: Literal[("", *registry.names())] = Form(
                            "", description="empty: the engine the appliance runs"),
                        tags: str = Form("", description="comma-separated"),
                        text_layer: Literal["", *pdf_text.MODES] = Form(
                            "", description="a PDF page's own text: auto (read it where "
                                            "its checks trust it), ignore (OCR every "
                                            "page), prefer (trust any text that maps to "
                                            "Unicode); empty: pdf.text_layer"),
                        webhook_url: str = Form(
                            "", max_length=2083,
                            description="an http(s) URL, POSTed to once the document is "
                                        "final; only hosts in webhooks.allow_hosts (anything "
                                        "else: 403 webhook_not_allowed)"),
                        password: str = Form(
                            "", max_length=1024,
                            description="an encrypted PDF's password: used once, to keep "
                                        "the PDF decrypted; never stored or logged"),
                        on_duplicate: Literal["", "process", "skip"] = Form(
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
        engine = engine or None
        appliance.check_engine(engine)
        if webhook_url:
            appliance.webhooks.policy.check(webhook_url)
        key = (getattr(request.state, "api_key", ""), idempotency_key) if idempotency_key \
            else None
        if key and (earlier := appliance.intake.replay(key, file.file)) is not None:
            return _existing(earlier.id, {"Idempotent-Replayed": "true"})
        options = SubmitOptions(source="api", lane=Lane(lane), doc_type=doc_type, engine=engine,
                                text_layer=text_layer or None,
                                tags=[t.strip() for t in tags.split(",") if t.strip()],
                                webhook_url=webhook_url or None, pdf_password=password or None,
                                skip_duplicates=on_duplicate == "skip", idempotency_key=key)
        try:
            doc = appliance.submit(file.file, file.filename, options)
        except DuplicateDocument as exc:
            return _existing(exc.existing_id, {"Duplicate-Of": exc.existing_id})
        return document_json(appliance.library.document(doc.id))

    def _existing(document_id: str, headers: dict[str, str]) -> JSONResponse:
        """An earlier document answered instead of a new one: 200, not 201."""
        return JSONResponse(document_json(appliance.library.document(document_id)),
                            headers=headers)

    @app.post("/api/v1/documents/{document_id}/cancel", tags=["documents"],
              operation_id="cancel_document", responses=errors(404))
    def cancel_document(document_id: str, request: Request):
        """Pages not yet started end `failed: cancelled`; pages being read finish."""
        return document_json(appliance.cancel(document_id, actor(request)))

    @app.post("/api/v1/documents/{document_id}/retry", tags=["documents"],
              operation_id="retry_document", responses=errors(404))
    def retry_document(document_id: str, request: Request):
        """The document's failed pages are read again (cancelled ones too), with a fresh
        count of attempts; its results are written again once they are read."""
        retried = appliance.retry(document_id, actor(request))
        return {"retried": retried, **document_json(appliance.library.document(document_id))}

    @app.post("/api/v1/documents/{document_id}/review", tags=["documents"],
              operation_id="send_to_review", responses=errors(404))
    def send_document_to_review(document_id: str, request: Request):
        """The document's finished pages wait for a reviewer (reason `sent_to_review`);
        its results are written again once they are settled."""
        sent = appliance.send_to_review(document_id, actor(request))
        return {"sent": sent, **document_json(appliance.library.document(document_id))}

    @app.post("/api/v1/documents/{document_id}/pages/{number}/turn", tags=["documents"],
              operation_id="turn_page", responses=errors(400, 404, 409))
    def turn_page(document_id: str, body: PageTurn, request: Request,
                  number: int = Path(ge=1, le=MAX_OFFSET, description="1 for the first page")):
        """The page turned `degrees` clockwise from how it was last read, and read again
        in place of the orientation the machine chose, as the review console's Turn
        does: a page done, failed or waiting for review (409 page_busy while it is
        queued or being read, review_lock_lost while a reviewer has it open). Audited
        under the API key's name; the document's results are written again once the
        page is read."""
        appliance.review.turn(actor(request), document_id, number, body.degrees)
        return document_json(appliance.library.document(document_id))

    @app.delete("/api/v1/documents/{document_id}", tags=["documents"], status_code=204,
                operation_id="delete_document", responses=errors(404, 409))
    def delete_document(document_id: str, request: Request):
        """The document, its results (the exported files too), and its original and page
        images unless another document holds the same content; an audit row records who
        deleted what. 409 document_busy while a page of it is being read."""
        appliance.delete(document_id, actor(request))
        return Response(status_code=204)

    @app.put("/api/v1/documents/{document_id}/fields", tags=["documents"],
             operation_id="correct_fields", responses=errors(400, 404, 409))
    def correct_fields(document_id: str, body: FieldCorrections, request: Request):
        """Set key fields by hand (an empty value removes one): they are checked again,
        the change is audited under the API key's name, and an exported document is
        exported again."""
        fields = appliance.correct_fields(document_id, body.fields, actor(request))
        return {"document_id": document_id, "fields": fields.fields, "reasons": fields.reasons}

    @app.get("/api/v1/documents", tags=["documents"], operation_id="list_documents",
             responses=errors(400))
    def list_documents(
            q: str = Query("", max_length=500,
                           description="words of the accepted text, or of the name"),
            status: list[Literal[tuple(DocStatus)]] = Query([]),
            # the text filters: "" is none (an optional string, not string-or-null: a
            # query string has no null)
            doc_type: Literal[("", *DOC_TYPES)] = "",
            tag: str = Query("", max_length=200),
            source: Literal["", "upload", "api", "watch", "cli"] = "",
            folder: str = Query("", max_length=200, description="a watched folder"),
            since: float | None = Query(None, ge=0, le=MAX_TIME, description="UNIX seconds"),
            until: float | None = Query(None, ge=0, le=MAX_TIME),
            engine: Literal[("", *registry.readers())] = Query(
                "", description="some page was read by it (pdf-text: from the PDF's own text)"),
            fields_invalid: bool | None = None,
            sort: Literal[SORTS] = Query("date", description="relevance needs q"),
            order: Literal["asc", "desc"] = "desc",
            limit: int = Query(50, ge=1, le=500),
            offset: int = Query(0, ge=0, le=MAX_OFFSET)):
        """Documents that match, newest first unless sorted otherwise, with the total
        over all pages of results. With `q`, each document's `hit` is its best page and
        a snippet of it: plain text, the matched words at `spans` (character offsets);
        `reviewed` is false where that is the machine's text of a page waiting for
        review. Words in Chinese, Japanese or Korean match as any run of two characters
        or more of the page."""
        found = appliance.library.find(DocumentQuery(
            q=q, status=tuple(status), doc_type=doc_type or None, tag=tag or None,
            source=source or None, folder=folder or None, since=since, until=until,
            engine=engine or None,
            fields_invalid=fields_invalid, sort=sort, descending=order == "desc", limit=limit,
            offset=offset))
        documents = []
        for view in found.documents:
            body = document_json(view)
            if (hit := found.hits.get(view.doc.id)) is not None:
                snippet, spans = hit.marked()
                body["hit"] = {"page": hit.page_index + 1, "snippet": snippet, "spans": spans,
                               "reviewed": hit.reviewed}
            documents.append(body)
        return {"total": found.total, "limit": limit, "offset": offset, "documents": documents}

    @app.get("/api/v1/documents/{document_id}", tags=["documents"],
             operation_id="get_document", responses=errors(404))
    def get_document(document_id: str):
        return document_json(appliance.library.document(document_id))

    @app.get("/api/v1/documents/{document_id}/result", tags=["documents"],
             operation_id="get_result", responses={
        200: {"content": {media: {} for media in MEDIA_TYPES.values()},
              "description": "the result in the format asked for"},
        **errors(400, 404, 409)})
    def get_result(document_id: str, format: Literal[FORMATS] = "md"):
        """The document's result once it is final (409 not_ready before; 409 no_result for
        a document refused at intake)."""
        content = appliance.exporter.rendered(document_id, [format])[format]
        # the PDF, and hOCR (XHTML), are files to keep, not pages for the browser to
        # open; named after the document, as the web UI's downloads are
        stem = safe_stem(appliance.library.document(document_id).doc.name)
        disposition = ({"Content-Disposition": f'attachment; filename="'
                                              f'{stem}{SUFFIXES[format]}"'}
                       if format in ("pdf", "hocr") else {})
        return Response(content, media_type=MEDIA_TYPES[format], headers=disposition)

    install_docintel(app, appliance, responses=errors(400, 403, 404, 409, 415, 503))
    complete_openapi(app)
    return app
