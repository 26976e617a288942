"""Every failure a user can see, one class each.

Each class carries a stable reason ``code`` (stored with the page or document,
returned by the API, shown in the UI), the HTTP status the API answers with, and a
message that tells the person what to do. ``retryable`` says whether trying the
same page again can help: bad input never gets better by retrying.

A class whose remedy is always the same says it once, in ``advice``: a raise site
then gives only the specifics (``CrashesWorker("it crashed the engine 3 times in a
row")``), and the message is the two joined. Classes whose remedy depends on the
case (a config key, a limit) leave ``advice`` empty and their raise sites say it.
"""

from __future__ import annotations

import re
from string import Formatter


class ApplianceError(Exception):
    code = "internal_error"
    http_status = 500
    retryable = False
    # a file still being written fails like this: a watched file is given time to
    # change before it counts (``[[watch]] failed_hold_s``)
    may_be_partial = False
    advice = ""  # what to do, where it is the same for every case

    def __init__(self, message: str = ""):
        message = "; ".join(part for part in (message, self.advice) if part) or self.code
        super().__init__(message)
        self.message = message

    def to_dict(self) -> dict:
        return {"code": self.code, "message": self.message}

    @classmethod
    def said(cls, key: str, **values: object) -> ApplianceError:
        """The error whose message says its case in the words of ``SAID[key]``, so that
        a UI can say it again in other words (``said_as``)."""
        return cls(SAID[key].format(**{name: str(value) for name, value in values.items()}))


class ConfigError(ApplianceError):
    code = "config_error"


class SchemaMismatch(ApplianceError):
    code = "schema_mismatch"


# --- bad input: the document ends `failed`, the original stays in the spool ---


class BadInput(ApplianceError):
    """A file that cannot be read. Intake stores it and records a failed document with
    this code (the API answers 201 with status "failed", and its result NoResult);
    only TooLarge is refused before storing."""

    code = "bad_input"
    http_status = 422


class EmptyFile(BadInput):
    code = "empty_file"
    may_be_partial = True


class UnsupportedType(BadInput):
    code = "unsupported_type"


class CorruptFile(BadInput):
    code = "corrupt_file"
    may_be_partial = True


class EncryptedPdf(BadInput):
    code = "encrypted_pdf"


class TooLarge(BadInput):
    """Over limits.max_bytes: refused before anything is stored, so no document exists
    (API 413, at once when Content-Length says so)."""

    code = "too_large"
    http_status = 413


class TooManyPages(BadInput):
    code = "too_many_pages"


class TooManyPixels(BadInput):
    code = "too_many_pixels"


class TruncatedFile(CorruptFile):
    """The file ends early: an interrupted copy, upload or scan. A CorruptFile too."""

    code = "truncated_file"


class UnrecognizedFile(BadInput):
    """No known file signature at the start: damaged, or not a document at all."""

    code = "unrecognized_file"
    may_be_partial = True  # space a writer reserved but has not filled yet
    http_status = 415


# --- processing ---


class EngineError(ApplianceError):
    code = "engine_error"
    retryable = True


class EngineUnavailable(ApplianceError):
    """The engine asked for is not one this appliance runs (or it could not start). To
    a request that names it: 409, since asking again will not help; ask for another."""

    code = "engine_unavailable"
    http_status = 409


class WarmupTimeout(EngineUnavailable):
    """A worker's engine did not load and read its warm-up page within
    ``workers.warmup_timeout_s``: the worker is killed and started again later."""

    code = "warmup_timeout"


class DegenerateOutput(ApplianceError):
    code = "degenerate"
    retryable = True  # the next rung of the retry ladder decodes differently


class PageTimeout(ApplianceError):
    code = "page_timeout"
    retryable = True


class PagePreempted(ApplianceError):
    """The page was taken back from the engine (device memory critical, or its worker
    was stopped for another page's timeout): it is queued again without charging an
    attempt."""

    code = "preempted"
    retryable = True


class EndpointUnavailable(ApplianceError):
    """A remote engine's server did not answer this page: connection refused or reset,
    a 5xx, a refused key, or silence past the endpoint's ``timeout_s``. The page goes
    back to the queue without charging an attempt (another endpoint or the local engine
    may read it), and the endpoint is taken out until a probe gets an answer."""

    code = "endpoint_unavailable"
    retryable = True


class WorkerCrashed(ApplianceError):
    code = "worker_crashed"
    retryable = True


class CrashesWorker(ApplianceError):
    """A page that crashed its engine several times in a row, read alone each time: it
    is set aside rather than crash the worker again."""

    code = "crashes_worker"
    advice = "it was set aside; check the file, or try the other engine"


class LeaseExpired(ApplianceError):
    code = "lease_expired"
    retryable = True
    advice = "the worker holding this page stopped answering"


# --- an attempt the appliance stopped itself: the page is queued again, uncharged ---


class MemoryCritical(ApplianceError):
    """Device memory passed its critical watermark and the newest page was taken back."""

    code = "memory_critical"
    retryable = True
    advice = "stopped to free memory; it is read again when memory allows"


class StoppedAtShutdown(ApplianceError):
    """The daemon stopped while the page was being read, after its drain timeout."""

    code = "shutdown"
    retryable = True
    advice = "stopped by a shutdown; read again after the restart"


class CrashSuspect(ApplianceError):
    """The engine process died while it read this page with others: which one killed it
    is unknown, so none is charged. Each is queued again, uncharged, and read alone
    next; one that then crashes alone is charged (WorkerCrashed)."""

    code = "crash_suspect"
    retryable = True


class OutputFailed(ApplianceError):
    """A finished document's result could not be made in one format (the searchable
    PDF of an original its libraries cannot handle). The other formats are written;
    to a request for this one: 409, since asking again will not help."""

    code = "output_failed"
    http_status = 409


# --- API-level ---


class NotFound(ApplianceError):
    code = "not_found"
    http_status = 404


class UnknownModel(NotFound):
    """A Document Intelligence model id the appliance does not offer."""

    code = "unknown_model"
    advice = "GET /documentintelligence/documentModels lists the models"


class HttpError(ApplianceError):
    """An HTTP-level refusal with no reason of the appliance's own."""

    code = "http_error"


class MethodNotAllowed(ApplianceError):
    """A known route asked with a method it does not take; its Allow header lists them."""

    code = "method_not_allowed"
    http_status = 405


class NoResult(ApplianceError):
    """A document refused at intake (unreadable, not a scan, ...) has no result; its
    own reason says why."""

    code = "no_result"
    http_status = 409


class NotReady(ApplianceError):
    code = "not_ready"
    http_status = 409


class NoFields(ApplianceError):
    """The document's type has no key fields, so there are none to set."""

    code = "no_fields"
    http_status = 409


class UnknownField(ApplianceError):
    """A key field the document's type does not have."""

    code = "unknown_field"
    http_status = 409


class ShuttingDown(ApplianceError):
    """The daemon is draining before it stops: new work is refused, nothing is lost."""

    code = "shutting_down"
    http_status = 503
    retryable = True


class LockLost(ApplianceError):
    """A reviewer acted on a page whose review lock is no longer theirs."""

    code = "review_lock_lost"
    http_status = 409


class PageBusy(ApplianceError):
    """A page asked to be read again while it is queued or being read."""

    code = "page_busy"
    http_status = 409
    advice = "ask again once it is read"


class QueueFull(ApplianceError):
    """Backpressure: the lane's queue is over its cap. Nothing was stored; try later."""

    code = "queue_full"
    http_status = 429
    retryable = True

    def __init__(self, message: str, retry_after_s: int):
        super().__init__(message)
        self.retry_after_s = retry_after_s


class DiskFull(QueueFull):
    """Intake's disk floor: nothing is stored while free space is under it; the
    watcher leaves files in place and the API answers 507 with Retry-After."""

    code = "disk_full"
    http_status = 507


class DuplicateDocument(ApplianceError):
    """The same content was already read, or is being read (on_duplicate = "skip")."""

    code = "duplicate"
    http_status = 409

    def __init__(self, message: str, existing_id: str):
        super().__init__(message)
        self.existing_id = existing_id


class IdempotencyConflict(ApplianceError):
    """An Idempotency-Key sent again with other content than its first request's."""

    code = "idempotency_conflict"
    http_status = 409


class DocumentBusy(ApplianceError):
    """A page of the document is being read: it cannot be deleted now."""

    code = "document_busy"
    http_status = 409


class OriginalPurged(ApplianceError):
    """Retention deleted the document's original after it was read: nothing is left
    to read its pages again from."""

    code = "original_purged"
    http_status = 409


class Cancelled(ApplianceError):
    """A page still queued when its document was cancelled."""

    code = "cancelled"
    advice = "cancelled before it was read; retry the document to read it"


class RejectedUnreadable(ApplianceError):
    """A reviewer judged the page unreadable: it carries no text in any output."""

    code = "rejected_unreadable"
    advice = "rescan it and submit the document again"


class PagesFailed(ApplianceError):
    """The document-level summary of a document some of whose pages failed."""

    code = "pages_failed"


class InvalidRequest(ApplianceError):
    code = "invalid_request"
    http_status = 400


# --- access (``appliance.security``, ``ui.auth``): refused before any route runs ---


class Unauthorized(ApplianceError):
    """No API key, or one that is not valid; for the web UIs, no session."""

    code = "unauthorized"
    http_status = 401


class ForbiddenAddress(ApplianceError):
    """The caller's address is not in auth.allow_from."""

    code = "forbidden_address"
    http_status = 403


class RateLimited(ApplianceError):
    """The API key is over its requests a minute; see Retry-After."""

    code = "rate_limited"
    http_status = 429
    retryable = True


class DatasetError(ApplianceError):
    """A dataset ``appliance eval`` or ``bench`` was given cannot be read whole: a
    label without its image, malformed JSON or CSV. Nothing is scored."""

    code = "dataset_error"


class WebhookNotAllowed(ApplianceError):
    """A webhook_url whose host is not in webhooks.allow_hosts: a well-formed request
    that policy refuses."""

    code = "webhook_not_allowed"
    http_status = 403


class UnsupportedMediaType(ApplianceError):
    """A Document Intelligence request whose Content-Type is neither JSON nor a document
    (a PDF, an image, or application/octet-stream)."""

    code = "unsupported_media_type"
    http_status = 415


class SourceNotAllowed(ApplianceError):
    """A Document Intelligence urlSource whose host is not in webhooks.allow_hosts: the
    appliance fetches only from the hosts it may call (the webhook rule, no SSRF)."""

    code = "source_not_allowed"
    http_status = 403


class SourceUnreachable(ApplianceError):
    """A Document Intelligence urlSource that could not be fetched: nothing was stored."""

    code = "source_unreachable"
    http_status = 400


class AlreadyRunning(ApplianceError):
    code = "already_running"


# --- model files (checked before llama.cpp loads them) and their download ---


class ModelError(ApplianceError):
    """A configured model file cannot be used; also a download that fails its checksum."""

    code = "model_error"
    http_status = 503


class ModelNotGguf(ModelError):
    code = "model_not_gguf"  # missing, not a GGUF, damaged header, or truncated


class ModelNoMmproj(ModelError):
    code = "model_no_mmproj"  # text model without its vision projector, or the two swapped


class ModelMmprojMismatch(ModelError):
    code = "model_mmproj_mismatch"  # the projector belongs to another model size or family


class ModelUnsupportedArch(ModelError):
    code = "model_unsupported_arch"


class ModelDoesNotFit(ApplianceError):
    """Not even one worker's model, KV cache and buffers fit in free GPU (or host) memory.

    The message states what one worker needs, what is free, and the knobs that shrink
    it: a smaller quant, engine.n_gpu_layers, engine.n_ctx, workers.count.
    """

    code = "model_does_not_fit"
    http_status = 503


class NetworkUnavailable(ApplianceError):
    code = "network_unavailable"
    http_status = 503
    retryable = True


def error_class_for(code: str) -> type[ApplianceError]:
    """The class that owns a reason code (used to rebuild errors sent by workers)."""
    stack = [ApplianceError]
    while stack:
        cls = stack.pop()
        if cls.code == code:
            return cls
        stack.extend(cls.__subclasses__())
    return ApplianceError


def specifics(code: str, message: str | None) -> str:
    """What a failure's message says of its own case (a file name, a page, a number):
    the message less its class's ``advice``, empty where it holds nothing else. A UI
    that says the code's remedy in its own words shows these beside them."""
    said = message or ""
    advice = error_class_for(code).advice
    if advice:
        said = said.removesuffix(advice).removesuffix("; ")
    return "" if said == code else said


_DAMAGED = "The file is damaged or incomplete; rescan or re-export it and submit it again."
_CUT = ("The file ends early, probably an interrupted copy, upload or scan. Copy it again from "
        "its source (or rescan or re-export it) and submit it again.")
_PASSWORD = (" Upload it again with its password (the web UI's password field, the API's "
             "`password` form field), drop it into a watched folder configured with its "
             "password, or remove the password (for example with `qpdf --decrypt "
             "--password=PASSWORD in.pdf out.pdf`).")
_LOWER_RESOLUTION = "Scan or export it at a lower resolution and submit it again."
_SUPPORTED = "PDF, PNG, JPEG, TIFF, BMP, WebP and GIF"
# What a failure's message says of its case, by key, where its raise site says it so
# (``ApplianceError.said``): the English words, with the case's values (a size, a limit,
# a name, a decoder's own words) in braces. The UI says each in its language again
# from the stored message (``said_as``; ui.i18n's said_<key>).
SAID: dict[str, str] = {
    # intake: what the file is (``intake.sniff``)
    "empty": "The file is empty (0 bytes). Check the scanner or upload and send it again.",
    "signature_cut": ("The file is only {size} bytes long and ends inside its own file "
                      "signature: it ends early, probably an interrupted copy, upload or scan. "
                      "Copy it again from its source (or rescan it) and submit it again."),
    "other_format": ("This file is {what}, which the appliance does not read: it reads scanned "
                     f"documents and images ({_SUPPORTED}). Convert the file to PDF first (for "
                     "example with Print to PDF or Export as PDF) and submit it again."),
    "misnamed": ("The file is named as {named} but is not one: its content starts with no "
                      "signature of {named}, nor of any other file type the appliance knows. "
                      "Check where the file came from, open it on your computer, and submit "
                      f"the document itself ({_SUPPORTED})."),
    "no_signature": ("The file's content starts with no known file signature: it is damaged "
                     "(for example cut short or overwritten) or it is not a document. "
                     f"Supported types: {_SUPPORTED}. Check that the file opens on your "
                     "computer, export it again as PDF or PNG, and submit it again."),
    # intake: the limits (``intake``)
    "over_bytes": "the file is larger than the limit of {limit} bytes; split it, or raise "
                  "limits.max_bytes",
    "over_pages": "the document has {pages} pages, over the limit of {limit}; split it, or "
                  "raise limits.max_pages",
    "over_pixels": ("The image is {width}x{height} pixels, more than the limit of {limit} "
                    f"pixels. {_LOWER_RESOLUTION}"),
    "bomb": f"The image is too large to process safely ({{detail}}). {_LOWER_RESOLUTION}",
    "frame_bomb": "The image is too large to process safely ({detail}).",
    # a PDF or an image that cannot be opened or decoded (``raster``)
    "pdf_password": "The PDF is protected by a password." + _PASSWORD,
    "pdf_wrong_password": "The password given does not open this PDF." + _PASSWORD,
    "pdf_watch_password": ("The PDF's password does not open it; check the watched folder's "
                           "password." + _PASSWORD),
    "pdf_unopened": f"The PDF cannot be opened ({{detail}}). {_DAMAGED}",
    "pdf_cut": f"The PDF cannot be opened ({{detail}}) and has no end-of-file marker. {_CUT}",
    "pdf_page_unrendered": f"Page {{page}} of the PDF cannot be rendered ({{detail}}). {_DAMAGED}",
    "image_unread": f"The {{kind}} image cannot be read ({{detail}}). {_DAMAGED}",
    "image_unread_cut": f"The {{kind}} image cannot be read ({{detail}}). {_CUT}",
    "image_undecoded": f"The {{kind}} image cannot be decoded ({{detail}}). {_DAMAGED}",
    "image_undecoded_cut": f"The {{kind}} image cannot be decoded ({{detail}}). {_CUT}",
    "frame_undecoded": f"Page {{page}} of the {{kind}} image cannot be decoded ({{detail}}). "
                       f"{_DAMAGED}",
    "frame_undecoded_cut": f"Page {{page}} of the {{kind}} image cannot be decoded ({{detail}}). "
                           f"{_CUT}",
    # review
    "rejected": "reviewer {reviewer} marked this page unreadable",
    "rejected_note": "reviewer {reviewer} marked this page unreadable: {note}",
}


def _pattern(template: str) -> re.Pattern:
    """``template``'s words, each of its fields a value of any text (the same value
    where a field comes again)."""
    pattern, seen = "", set()
    for literal, field, _spec, _conversion in Formatter().parse(template):
        pattern += re.escape(literal)
        if field:
            pattern += f"(?P={field})" if field in seen else f"(?P<{field}>.+?)"
            seen.add(field)
    return re.compile(pattern, re.DOTALL)


_PATTERNS = {key: _pattern(template) for key, template in SAID.items()}


def said_as(code: str, message: str | None) -> tuple[str, dict[str, str]] | None:
    """The ``SAID`` key and values a failure's message (its ``specifics``) was said
    with, or None where its raise site said it otherwise."""
    said = specifics(code, message)
    for key, pattern in _PATTERNS.items():
        if found := pattern.fullmatch(said):
            return key, found.groupdict()
    return None
