"""The Document Intelligence API's routes, as the SDK 1.0.2 calls them.

Access (keys, allow-list, rate limits) is the AccessGuard's, as for the native API;
errors are rendered in the service's shape by the app's handlers
(``api_guards.error_response``). An analysis is submitted through the same
``Appliance.submit`` as any upload: a file that intake refuses is a failed document
in the workspace, and the request is answered at once with the reason in the
service's terms (400 InvalidContent), as the service answers a file it cannot read;
what only reading can find (a page that fails) fails the analysis later.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import mmap
import os
import re
import shutil
import tempfile
import uuid
from typing import BinaryIO, Literal
from urllib.parse import urlsplit

import httpx
from fastapi import Depends, FastAPI, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import Response
from starlette.convertors import StringConvertor, register_url_convertor

from appliance.daemon import Appliance
from appliance.docintel import API_VERSION, PREFIX, catalogue, offsets
from appliance.docintel.languages import LANGUAGES
from appliance.docintel.result import BARCODES, PAGES_PATTERN, operation, status
from appliance.errors import (
    InvalidRequest, NotFound, NotReady, SourceNotAllowed, SourceUnreachable, TooLarge,
    UnsupportedMediaType, WebhookNotAllowed, error_class_for,
)
from appliance.intake import SubmitOptions
from appliance.store import queries, transitions
from appliance.store.models import Lane

log = logging.getLogger(__name__)

TAG = "docintel"  # every analysis's document carries it: the workspace finds them by it
FEATURES = ("ocrHighResolution", LANGUAGES, BARCODES, "formulas", "keyValuePairs",
            "styleFont", "queryFields")
# the add-on features the appliance gives; the others are warned about
OFFERED = (BARCODES, LANGUAGES)
OUTPUTS = ("pdf", "figures")
# a raw body: a document as its bytes; application/json: the AnalyzeDocumentRequest
RAW_TYPES = re.compile(r"^(application/(octet-stream|pdf)|image/[\w.+-]+)$")
FETCH_TIMEOUT_S = 30.0
COPY_CHUNK = 1 << 20


class ModelIdConvertor(StringConvertor):
    """A model id in a path: no ``:`` (the service's ids never hold one), so that
    ``{model_id}:analyze`` is not also a model named "x:analyze" that GET answers, and
    a method ``:analyze`` does not take is refused with ``Allow: POST`` alone."""

    regex = "[^/:]+"


register_url_convertor("model_id", ModelIdConvertor())


def _version(_api_version: Literal[API_VERSION] = Query(alias="api-version")) -> None:
    """Every route takes the one api-version it speaks (others: 400 InvalidRequest)."""


def list_pattern(known: tuple[str, ...]) -> str:
    """A comma-separated list of ``known`` names, as the schema declares it."""
    names = "|".join(known)
    return rf"^({names})(,({names}))*$"


def _listed(value: str | None) -> list[str]:
    return value.split(",") if value else []


# what an analyze request's body may be, for the OpenAPI schema (FastAPI cannot infer it
# from a body the route streams): an AnalyzeDocumentRequest, or the document's bytes
ANALYZE_BODY = {"requestBody": {"required": True, "content": {
    "application/json": {"schema": {
        "type": "object", "title": "AnalyzeDocumentRequest",
        "properties": {"base64Source": {"type": "string", "format": "byte"},
                       "urlSource": {"type": "string", "format": "uri", "maxLength": 2083}},
        "oneOf": [{"required": ["base64Source"]}, {"required": ["urlSource"]}]}},
    **{media: {"schema": {"type": "string", "format": "binary"}}
       for media in ("application/octet-stream", "application/pdf", "image/png",
                     "image/jpeg", "image/tiff")}}}}


def analyze_request(body: BinaryIO, into: BinaryIO) -> str | None:
    """Read the AnalyzeDocumentRequest in the file ``body``: a base64Source is decoded
    into ``into`` and None answered; a urlSource is answered, to be fetched. InvalidRequest
    for anything else.

    The body lies in a file; a base64Source is decoded from it as it lies (mapped, a
    chunk at a time), once the request around it parsed as JSON with the source left
    out: a 53 MB body was once held whole three times over (its text, the string, the
    bytes). A source the quick look cannot take out (an escaped character in it, a
    decoy of the same name) is read by parsing the whole body."""
    size = os.fstat(body.fileno()).st_size
    if not size:
        raise InvalidRequest(_NOT_JSON)
    with mmap.mmap(body.fileno(), 0, access=mmap.ACCESS_READ) as data:
        request, (start, end) = _request(data)
        if not isinstance(request, dict) or ("base64Source" in request) == ("urlSource" in request):
            raise InvalidRequest("the request must have one of base64Source and urlSource")
        source = request.get("base64Source", request.get("urlSource"))
        if not isinstance(source, str):
            raise InvalidRequest("base64Source and urlSource are strings")
        if "urlSource" in request:
            return source
        try:
            if start == end:  # parsed whole
                into.write(base64.b64decode(source, validate=True))
            for at in range(start, end, _BASE64_CHUNK):
                into.write(base64.b64decode(data[at:min(at + _BASE64_CHUNK, end)], validate=True))
        except binascii.Error:
            raise InvalidRequest("base64Source is not base64") from None
    return None


_NOT_JSON = ("the body is not JSON; send an AnalyzeDocumentRequest (base64Source or "
             "urlSource) or the document's bytes")
_BASE64_MEMBER = re.compile(rb'"base64Source"\s*:\s*"')
_BASE64_CHUNK = 4 << 20  # a multiple of 4: base64 decodes chunk by chunk


def _request(data) -> tuple[object, tuple[int, int]]:
    """The request parsed, and where its base64Source's text lies in ``data`` (an empty
    span where the source is in the parsed request itself)."""
    if (match := _BASE64_MEMBER.search(data)) is not None:
        start = match.end()
        end = data.find(b'"', start)
        if end != -1 and data.find(b"\\", start, end) == -1:
            try:
                request = json.loads(data[:start] + data[end:])
            except (ValueError, UnicodeDecodeError):
                request = None
            if isinstance(request, dict) and request.get("base64Source") == "":
                return request, (start, end)
    try:
        return json.loads(data[:]), (0, 0)
    except (ValueError, UnicodeDecodeError):
        raise InvalidRequest(_NOT_JSON) from None


def install(app: FastAPI, appliance: Appliance, responses: dict) -> None:
    """Add the routes to ``app`` (its own routes, so that the RouteGuard and the
    OpenAPI schema see each of them)."""
    route = {"tags": ["document intelligence"], "dependencies": [Depends(_version)],
             "responses": responses}
    max_bytes = appliance.settings.limits.max_bytes

    def _fetch(url: str, into: BinaryIO) -> str:
        """Download ``urlSource`` into ``into``, from a host webhooks may go to only;
        answers the file's name. The URL may carry a token: only its host is logged."""
        try:
            appliance.webhooks.policy.check(url)
        except WebhookNotAllowed as exc:
            raise SourceNotAllowed(f"urlSource is fetched only from the hosts webhooks may "
                                   f"go to: {exc.message}") from None
        host = urlsplit(url).hostname
        received = 0
        try:
            with httpx.stream("GET", url, timeout=FETCH_TIMEOUT_S,
                              follow_redirects=False) as response:
                if response.status_code != 200:
                    raise SourceUnreachable(f"urlSource answered HTTP {response.status_code} "
                                            f"(redirects are not followed)")
                for chunk in response.iter_bytes(COPY_CHUNK):
                    received += len(chunk)
                    if received > max_bytes:
                        raise TooLarge(f"the file at urlSource is larger than the limit of "
                                       f"{max_bytes:,} bytes")
                    into.write(chunk)
        except httpx.HTTPError as exc:
            raise SourceUnreachable(f"urlSource could not be fetched from {host}: "
                                    f"{type(exc).__name__}") from None
        log.info("docintel fetched urlSource host=%s bytes=%d", host, received)
        return urlsplit(url).path.rsplit("/", 1)[-1]

    def _from_json(body: BinaryIO, into: BinaryIO) -> str | None:
        """The AnalyzeDocumentRequest's document into ``into``; its name if it has one."""
        url = analyze_request(body, into)
        return _fetch(url, into) if url is not None else None

    def _submit(model: catalogue.Model, body: BinaryIO, media: str, owner: str,
                options: dict) -> str:
        with tempfile.TemporaryFile() as document:  # under data_dir/tmp, as every upload
            if media == "application/json":
                name = _from_json(body, document)
            else:
                shutil.copyfileobj(body, document, COPY_CHUNK)
                name = None
            document.seek(0)
            doc = appliance.submit(document, name or f"{TAG}-{model.model_id}", SubmitOptions(
                source="api", lane=Lane.INTERACTIVE, doc_type=model.doc_type, tags=[TAG]))
        if doc.error_code:
            # a file intake refused (not a document, corrupt, encrypted, too many pages or
            # pixels): the service answers it at the door, 400 InvalidContent; the failed
            # document stays in the workspace with its reason, for the operator
            raise error_class_for(doc.error_code)(doc.error_message or "")
        transitions.record_analysis(appliance.db, doc.id, model.model_id, options)
        log.info("docintel analysis doc=%s model=%s key=%s", doc.id, model.model_id,
                 owner or "-")
        return doc.id

    @app.post(PREFIX + "/documentModels/{model_id}:analyze", **route, status_code=202,
              openapi_extra=ANALYZE_BODY)
    async def analyze_document(
            model_id: str, request: Request,
            pages: str | None = Query(None, max_length=200, pattern=PAGES_PATTERN),
            locale: str | None = Query(None, max_length=40),
            string_index_type: Literal[offsets.STRING_INDEX_TYPES] = Query(
                offsets.DEFAULT, alias="stringIndexType"),
            features: str | None = Query(None, max_length=400, pattern=list_pattern(FEATURES)),
            query_fields: str | None = Query(None, alias="queryFields", max_length=2000),
            output_content_format: Literal["text", "markdown"] = Query(
                "text", alias="outputContentFormat"),
            output: str | None = Query(None, max_length=100, pattern=list_pattern(OUTPUTS))):
        """Analyze a document: an AnalyzeDocumentRequest (JSON with base64Source or
        urlSource) or the document's bytes as the body. 202 with Operation-Location; a
        file the appliance cannot read fails its analysis with the reason."""
        model = catalogue.model(model_id)
        outputs = _listed(output)
        asked = _listed(features)
        ignored = [feature for feature in asked if feature not in OFFERED]
        ignored += ["queryFields"] * bool(query_fields) + ["figures"] * ("figures" in outputs)
        media = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if media != "application/json" and not RAW_TYPES.match(media):
            raise UnsupportedMediaType(f"Content-Type {media[:100]!r} is not supported; send "
                                       f"application/json, application/pdf, image/* or "
                                       f"application/octet-stream")
        options = {"outputContentFormat": output_content_format, "pages": pages,
                   "locale": locale, "output": outputs, "ignored": ignored,
                   "features": [feature for feature in asked if feature in OFFERED],
                   "stringIndexType": string_index_type}
        with tempfile.TemporaryFile() as body:  # the body as it arrives, never in memory
            async for chunk in request.stream():
                body.write(chunk)
            body.seek(0)
            document_id = await run_in_threadpool(
                _submit, model, body, media, getattr(request.state, "api_key", ""), options)
        location = (f"{str(request.base_url).rstrip('/')}{PREFIX}/documentModels/"
                    f"{model.model_id}/analyzeResults/{uuid.UUID(document_id)}"
                    f"?api-version={API_VERSION}")
        return Response(status_code=202, headers={"Operation-Location": location})

    def _analysis(model_id: str, result_id: str):
        """The document and analysis of ``result_id``: a GUID, as the service writes a
        result id (its document's id with dashes), or the document's id as it is."""
        try:
            document_id = uuid.UUID(result_id).hex
        except ValueError:
            document_id = None
        analysis = document_id and queries.analysis(appliance.db, document_id)
        view = queries.get_document(appliance.db, document_id) if analysis else None
        if view is None or analysis.model_id != model_id:
            raise NotFound(f"there is no analysis {result_id[:64]!r} of model {model_id[:100]!r}")
        return view, analysis

    @app.get(PREFIX + "/documentModels/{model_id}/analyzeResults/{result_id}", **route)
    def get_analyze_result(model_id: str, result_id: str):
        """The analysis's status, and its AnalyzeResult once it has succeeded."""
        view, analysis = _analysis(model_id, result_id)
        body = operation(appliance.db, view, analysis, appliance.settings)
        retry = appliance.settings.di.retry_after_s
        headers = ({"Retry-After": str(retry)}
                   if retry and body["status"] in ("notStarted", "running") else {})
        return Response(json.dumps(body, ensure_ascii=False), media_type="application/json",
                        headers=headers)

    @app.get(PREFIX + "/documentModels/{model_id}/analyzeResults/{result_id}/pdf", **route,
             response_class=Response)
    def get_analyze_result_pdf(model_id: str, result_id: str):
        """The appliance's searchable PDF of the document: its original with the
        accepted words as an invisible text layer (README, "Where results land")."""
        view, analysis = _analysis(model_id, result_id)
        if "pdf" not in analysis.options.get("output", []):
            raise NotFound(f"analysis {result_id} was not asked for output=pdf")
        if status(view, appliance.settings.di.review) != "succeeded":
            raise NotReady(f"analysis {result_id} has not succeeded; its PDF is made once it has")
        return Response(appliance.exporter.pdf(view.doc.id), media_type="application/pdf")

    @app.delete(PREFIX + "/documentModels/{model_id}/analyzeResults/{result_id}", **route,
                status_code=204)
    def delete_analyze_result(model_id: str, result_id: str, request: Request):
        """The analysis and its document, as DELETE /api/v1/documents/{id} deletes one."""
        view = _analysis(model_id, result_id)[0]
        appliance.delete(view.doc.id, getattr(request.state, "api_key", "") or "api")
        return Response(status_code=204)

    @app.get(PREFIX + "/documentModels", **route)
    def list_models():
        return {"value": [model.details() for model in catalogue.MODELS.values()]}

    @app.get(PREFIX + "/documentModels/{model_id:model_id}", **route)
    def get_model(model_id: str):
        return catalogue.model(model_id).details()

    @app.get(PREFIX + "/info", **route)
    def get_resource_details():
        """No custom models: the appliance offers its prebuilt ones only."""
        return {"customDocumentModels": {"count": 0, "limit": 0}}

