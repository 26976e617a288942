"""The appliance's refusals in the Document Intelligence service's terms.

The service answers ``{"error": {"code", "message", "innererror": {"code", "message"}}}``
with a top-level code of its own (InvalidRequest, UnsupportedMediaType, NotFound, ...)
and, where it has one, a finer inner code (InvalidContent, InvalidContentLength, ...).
The appliance's own reason code stays in the inner message, in brackets, so nothing
the native API would say is lost.
"""

from __future__ import annotations

from appliance import errors

# the appliance's reason code -> (HTTP status, the service's code, its inner code)
BAD_CONTENT = (400, "InvalidRequest", "InvalidContent")
MAPPING: dict[str, tuple[int, str, str | None]] = {
    # the AccessGuard's refusals (appliance.security)
    "unauthorized": (401, "Unauthorized", None),
    "forbidden_address": (403, "Forbidden", None),
    "rate_limited": (429, "TooManyRequests", None),
    errors.QueueFull.code: (429, "TooManyRequests", None),
    errors.DiskFull.code: (503, "ServiceUnavailable", None),
    errors.ShuttingDown.code: (503, "ServiceUnavailable", None),
    errors.NotFound.code: (404, "NotFound", None),
    errors.UnknownModel.code: (404, "NotFound", "ModelNotFound"),
    errors.MethodNotAllowed.code: (405, "MethodNotAllowed", None),
    errors.NotReady.code: (409, "Conflict", None),
    errors.OutputFailed.code: (409, "Conflict", None),
    errors.DocumentBusy.code: (409, "Conflict", None),
    errors.InvalidRequest.code: (400, "InvalidRequest", "InvalidParameter"),
    errors.UnsupportedMediaType.code: (415, "UnsupportedMediaType", None),
    errors.TooLarge.code: (400, "InvalidRequest", "InvalidContentLength"),
    errors.TooManyPixels.code: (400, "InvalidRequest", "InvalidContentDimensions"),
    errors.SourceNotAllowed.code: (403, "Forbidden", None),
    errors.SourceUnreachable.code: (400, "InvalidRequest", "ContentSourceNotAccessible"),
    **{cls.code: BAD_CONTENT for cls in (
        errors.BadInput, errors.EmptyFile, errors.CorruptFile, errors.TruncatedFile,
        errors.UnrecognizedFile, errors.UnsupportedType, errors.EncryptedPdf,
        errors.TooManyPages)},
}
INTERNAL = (500, "InternalServerError", None)


def error_body(code: str, message: str) -> tuple[int, dict]:
    """The HTTP status and the service's error body for the appliance's reason ``code``."""
    return MAPPING.get(code, INTERNAL)[0], {"error": service_error(code, message)}


def service_error(code: str, message: str) -> dict:
    """The service's error object (the body's ``error``; a failed analysis's ``error``)."""
    _status, service_code, inner = MAPPING.get(code, INTERNAL)
    return {"code": service_code, "message": message,
            "innererror": {"code": inner or service_code, "message": f"{message} [{code}]"}}
