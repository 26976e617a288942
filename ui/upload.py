"""Uploads through the web UI: the files dropped on the page, submitted with the options
chosen beside them (document type, lane, tags, engine, a PDF's own text, an encrypted
PDF's password),
and what became of each.

The password only travels in ``SubmitOptions.pdf_password`` to intake; it is never
logged, stored or shown again (the form's field is emptied after each upload).
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

from appliance.daemon import Appliance
from appliance.errors import ApplianceError, NotFound
from appliance.intake import SubmitOptions
from appliance.library import DocumentView, Lane
from ui.document_status import document_problem, error_text

log = logging.getLogger(__name__)

UPLOAD_HEADERS = ["File", "Outcome", "Details"]
LANE_CHOICES = [("interactive (read first)", Lane.INTERACTIVE.value),
                ("batch (read when the interactive queue is empty)", Lane.BATCH.value)]
TEXT_LAYER_CHOICES = [("as configured", ""),
                      ("read it where it can be trusted (auto)", "auto"),
                      ("always read by OCR (ignore)", "ignore"),
                      ("trust any text that maps to Unicode (prefer)", "prefer")]
INTERNAL_ERROR_TEXT = ("the file could not be accepted because of an internal error; "
                       "the server log has the details")


@dataclass(frozen=True)
class UploadChoices:
    """The options beside the drop zone."""

    doc_type: str = "generic"
    lane: str = Lane.INTERACTIVE.value
    tags: str = ""  # comma-separated
    engine: str = ""  # "": the configured one
    pdf_password: str = ""  # an encrypted PDF's: handed to intake, never kept or logged
    text_layer: str = ""  # a PDF's own text: auto, ignore or prefer; "": pdf.text_layer

    def submit_options(self) -> SubmitOptions:
        return SubmitOptions(source="upload", lane=Lane(self.lane or Lane.INTERACTIVE),
                             doc_type=self.doc_type or "generic", engine=self.engine or None,
                             tags=[t.strip() for t in self.tags.split(",") if t.strip()],
                             pdf_password=self.pdf_password or None,
                             text_layer=self.text_layer or None)


@dataclass(frozen=True)
class Upload:
    """One file of the last upload: the document it became, or why it was refused."""

    name: str
    document_id: str | None = None
    refusal: str = ""


def upload_name(item) -> str:
    """The original base name of an uploaded file.

    Gradio stores each upload as ``<cache>/<hash>/<original base name>`` (minus
    characters that are unsafe in file names) and hands the handler that server-side
    path; a client-side path never reaches us. Only the last component is used.
    """
    return Path(os.fspath(item)).name


def handle_upload(appliance: Appliance, files, choices: UploadChoices = UploadChoices()
                  ) -> list[Upload]:
    """Submit every uploaded file: the document each became, or why it was refused.

    A file that is refused (too large, unreadable, an engine that does not run here,
    ...) gets its reason in plain words and the others still go through.
    """
    results = []
    for item in files or []:
        path = Path(os.fspath(item))  # the copy in Gradio's upload cache, on this host
        name = upload_name(item)
        try:
            appliance.check_engine(choices.engine or None)
            doc = appliance.submit_path(path, choices.submit_options())
        except ApplianceError as exc:
            log.warning("upload refused name=%r code=%s", name, exc.code)
            results.append(Upload(name, refusal=error_text(exc.code, exc.message)))
            continue
        except Exception:
            log.exception("upload failed name=%r", name)
            results.append(Upload(name, refusal=INTERNAL_ERROR_TEXT))
            continue
        results.append(Upload(name, doc.id))
    return results


def upload_row(upload: Upload, view: DocumentView | None) -> list[str]:
    """(file, outcome, details) of one file as it was submitted: accepted (the list
    follows it from there), failed at intake (stored, with the reason) or refused."""
    if upload.document_id is None:
        return [upload.name, "refused", upload.refusal]
    if view is None:  # deleted at once by someone else
        return [upload.name, "accepted", "the document is no longer stored"]
    if view.doc.error_code:
        return [upload.name, "failed", document_problem(view)]  # whole: the table wraps
    pages = view.doc.page_count
    return [upload.name, "accepted",
            f"{pages} page{'s' if pages != 1 else ''} to read; the list shows how far it is"]


def upload_rows(appliance: Appliance, uploads: list[Upload]) -> list[list[str]]:
    return [upload_row(u, _stored(appliance, u.document_id)) for u in uploads]


def _stored(appliance: Appliance, document_id: str | None) -> DocumentView | None:
    if document_id is None:
        return None
    try:
        return appliance.library.document(document_id)
    except NotFound:
        return None
