"""Uploads through the web UI: the files dropped on the page, submitted with the options
chosen beside them (document type, lane, tags, engine, a PDF's own text, an encrypted
PDF's password), and what became of each: a table of the files (``upload_html``) in the
upload panel, which folds after a drop so that the list below stays in view, and above
the list a line on the documents just dropped and on the queue (``drop_summary_html``),
whose "need review" leads to the review console.

Both are HTML made here: file names and reasons are untrusted and go through
``text_html``; names are kept whole on one line (the full name on hover), reasons wrap.

The password only travels in ``SubmitOptions.pdf_password`` to intake; it is never
logged, stored or shown again (the form's field is emptied after each upload).
"""

from __future__ import annotations

import logging
import os
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from appliance.daemon import Appliance
from appliance.errors import ApplianceError
from appliance.intake import SubmitOptions
from appliance.library import DocStatus, DocumentView, Lane, PageStatus
from ui.document_status import document_problem, error_text
from ui.i18n import EN, label, plural, text, texts
from ui.listing import text_html
from ui.review import MOUNT_PATH as REVIEW_PATH

log = logging.getLogger(__name__)

UPLOAD_HEADER_KEYS = ["upload_file", "upload_outcome", "upload_details"]
LANE_CHOICES = [(label("lane_interactive"), Lane.INTERACTIVE.value),
                (label("lane_batch"), Lane.BATCH.value)]
TEXT_LAYER_CHOICES = [(label("text_layer_default"), ""),
                      (label("text_layer_auto"), "auto"),
                      (label("text_layer_ignore"), "ignore"),
                      (label("text_layer_prefer"), "prefer")]
INTERNAL_ERROR_TEXT = text("upload_internal_error")
UPLOAD_CSS = (Path(__file__).parent / "upload.css").read_text()
# a dropped document's status as the summary counts it, in this order (partly failed
# is failed), and then the files refused
DROPPED = {DocStatus.QUEUED: "dropped_queued", DocStatus.PROCESSING: "dropped_reading",
           DocStatus.REVIEW: "dropped_review", DocStatus.DONE: "dropped_done",
           DocStatus.PARTIAL: "dropped_failed", DocStatus.FAILED: "dropped_failed"}
REFUSED = "dropped_refused"
# the pages of every document that wait, by status
QUEUE = {PageStatus.QUEUED: "queue_queued", PageStatus.RUNNING: "queue_reading",
         PageStatus.REVIEW: "queue_review"}


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
    views = appliance.library.documents([u.document_id for u in uploads if u.document_id])
    return [upload_row(u, views.get(u.document_id), lang) for u in uploads]


def upload_html(rows: list[list[str]], lang: str = EN) -> str:
    """``upload_rows`` as the upload panel's table: each name whole on one line (cut
    with an ellipsis where it is too long, all of it on hover), each reason wrapped in
    full."""
    if not rows:
        return ""
    heads = "".join(f"<th>{text_html(head)}</th>" for head in texts(UPLOAD_HEADER_KEYS, lang))
    body = "".join(
        f'<tr><td class="upload-name" title="{text_html(name)}">{text_html(name)}</td>'
        f"<td>{text_html(outcome)}</td><td>{text_html(details)}</td></tr>"
        for name, outcome, details in rows)
    return (f'<table class="upload-table" aria-label="{text_html(text("last_upload", lang))}">'
            f"<thead><tr>{heads}</tr></thead><tbody>{body}</tbody></table>")


def drop_summary_html(appliance: Appliance, uploads: list[Upload], lang: str = EN) -> str:
    """One line on what became of the documents just dropped ("1 queued · 1 reading · 1
    need review · 1 refused"), and one on the pages of every document waiting ("5
    queued · 1 reading · 2 need review"); each "need review" leads to the review
    console. Empty before any drop."""
    if not uploads:
        return ""
    views = appliance.library.documents([u.document_id for u in uploads if u.document_id])
    dropped = Counter(DROPPED[view.status] for view in views.values())
    dropped[REFUSED] = sum(1 for u in uploads if u.document_id is None)
    waiting = appliance.library.waiting_pages()
    documents = plural("documents", len(uploads), lang)
    return (_line(text("dropped_head", lang, documents=documents),
                  [_count(text(key, lang, n=dropped[key]), key == DROPPED[DocStatus.REVIEW])
                   + (" " + text_html(text("dropped_why", lang)) if key == REFUSED else "")
                   for key in (*dict.fromkeys(DROPPED.values()), REFUSED) if dropped[key]])
            + _line(text("queue_head", lang),
                    [_count(text(key, lang, n=waiting[status]), status == PageStatus.REVIEW)
                     for status, key in QUEUE.items() if waiting[status]]
                    or [text_html(text("queue_idle", lang))]))


def _line(head: str, counts: list[str]) -> str:
    return f'<p class="drop-summary"><strong>{text_html(head)}</strong> {" · ".join(counts)}</p>'


def _count(said: str, needs_review: bool = False) -> str:
    """A count as HTML; one of documents or pages that need review leads to the review
    console."""
    if needs_review:
        return f'<a href="{REVIEW_PATH}/" class="drop-review">{text_html(said)}</a>'
    return f"<span>{text_html(said)}</span>"
