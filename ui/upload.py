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
from ui.i18n import EN, label, plural, text, texts

log = logging.getLogger(__name__)

UPLOAD_HEADER_KEYS = ["upload_file", "upload_outcome", "upload_details"]
UPLOAD_HEADERS = texts(UPLOAD_HEADER_KEYS)
LANE_CHOICES = [(label("lane_interactive"), Lane.INTERACTIVE.value),
                (label("lane_batch"), Lane.BATCH.value)]
TEXT_LAYER_CHOICES = [(label("text_layer_default"), ""),
                      (label("text_layer_auto"), "auto"),
                      (label("text_layer_ignore"), "ignore"),
                      (label("text_layer_prefer"), "prefer")]
INTERNAL_ERROR_TEXT = text("upload_internal_error")


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


def handle_upload(appliance: Appliance, files, choices: UploadChoices = UploadChoices(),
                  lang: str = EN) -> list[Upload]:
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
            results.append(Upload(name, refusal=error_text(exc.code, exc.message, lang)))
            continue
        except Exception:
            log.exception("upload failed name=%r", name)
            results.append(Upload(name, refusal=text("upload_internal_error", lang)))
            continue
        results.append(Upload(name, doc.id))
    return results


def upload_row(upload: Upload, view: DocumentView | None, lang: str = EN) -> list[str]:
    """(file, outcome, details) of one file as it was submitted: accepted (the list
    follows it from there), failed at intake (stored, with the reason) or refused."""
    if upload.document_id is None:
        return [upload.name, text("upload_refused", lang), upload.refusal]
    if view is None:  # deleted at once by someone else
        return [upload.name, text("upload_accepted", lang), text("upload_gone", lang)]
    if view.doc.error_code:  # whole: the table wraps
        return [upload.name, text("upload_failed", lang), document_problem(view, lang)]
    return [upload.name, text("upload_accepted", lang),
            plural("upload_pages", view.doc.page_count, lang)]


def upload_rows(appliance: Appliance, uploads: list[Upload], lang: str = EN) -> list[list[str]]:
    return [upload_row(u, _stored(appliance, u.document_id), lang) for u in uploads]


def _stored(appliance: Appliance, document_id: str | None) -> DocumentView | None:
    if document_id is None:
        return None
    try:
        return appliance.library.document(document_id)
    except NotFound:
        return None
