"""The document view: one document, opened from the list at the page a search found.

It shows the document's state and, once it is final, its downloads (every format, made
when asked: ``ui/downloads.py``), its pages as thumbnails, the selected page's image
(zoomable, every line outlined and the low-confidence ones numbered) beside its text
with the page's confidence, flags, engine and routing reasons, the key fields
(read-only: they are corrected in the review console or through the API) and the
document's history.

Everything comes from ``appliance.library`` and ``appliance.exporter``; names, text,
messages and field values are untrusted and are escaped, or shown as plain text by
components that do not render markup (a table's cells, a text box).
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from PIL import Image

from appliance.daemon import Appliance
from appliance.errors import NotFound
from appliance.library import DocumentView, FieldSet, HistoryEntry, Library, PageStatus, PageView
from ui import fields_form
from ui.components import escape_markdown_text
from ui.document_status import page_progress, status_details
from ui.page_image import annotate_page
from ui.review import confidence_text, highlights_text

log = logging.getLogger(__name__)

HISTORY_HEADERS = ["When", "What", "Who", "Page", "Details"]
THUMBNAIL_PX = 200
NO_DOCUMENT_TEXT = "Open a document from the list (click its name)."
WAITING_TEXT = "The downloads can be prepared once every page is finished."


def when_text(at: float | None) -> str:
    return datetime.fromtimestamp(at).strftime("%Y-%m-%d %H:%M:%S") if at else ""


@dataclass
class DocumentPanel:
    """The document's heading, and whether its downloads can be prepared."""

    title: str = NO_DOCUMENT_TEXT  # Markdown: our words, the document's facts escaped
    note: str = ""  # why there are no downloads (escaped)
    key: str = ""  # changes whenever what is shown would change
    in_review: bool = False  # a person has to check pages of it: show the way there
    downloadable: bool = False  # final, with results: its downloads can be prepared


def view_key(view: DocumentView | None, fields: FieldSet | None) -> str:
    """Changes with anything the view shows, the outputs included: each page's accepted
    reading (a correction, a rerun) and the newest key fields count even before the
    document is exported again, so the next refresh takes back downloads prepared
    before the change."""
    if view is None:
        return ""
    return (f"{view.doc.id}:{view.status}:{sorted(view.page_counts.items())}:"
            f"{view.doc.exported_at}:{[page.result_id for page in view.pages]}:"
            f"{fields.id if fields else None}")


def document_title(view: DocumentView, reviewers_exist: bool) -> str:
    doc = view.doc
    done, total = page_progress(view)
    title = (f"### {escape_markdown_text(doc.name)}\n\n**{view.status}**, {done}/{total} "
             f"pages done")
    details = status_details(view, reviewers_exist)
    if details:
        title += f" — {escape_markdown_text(details)}"
    facts = [f"type {doc.doc_type}", f"{doc.source} {when_text(doc.created_at)}",
             f"lane {doc.lane}", f"id {doc.id}"]
    if doc.watch_folder:
        facts.insert(2, f"folder {doc.watch_folder}")
    if doc.tags:
        facts.insert(2, "tags " + ", ".join(doc.tags))
    return title + "\n\n" + " · ".join(escape_markdown_text(fact) for fact in facts)


def show_document(appliance: Appliance, document_id: str | None) -> DocumentPanel:
    """The document's heading, and whether its downloads can be prepared (they are
    made when asked: the searchable PDF takes seconds)."""
    if not document_id:
        return DocumentPanel()
    try:
        view = appliance.library.document(document_id)
    except NotFound:
        return DocumentPanel(title="There is no document with this id (deleted?).")
    panel = DocumentPanel(title=document_title(view, not appliance.review_unstaffed()),
                          key=view_key(view, appliance.library.fields(document_id)),
                          in_review=bool(view.page_counts[PageStatus.REVIEW]))
    if not view.is_final:
        panel.note = WAITING_TEXT
    elif view.doc.error_code:  # refused at intake: nothing was recognised
        panel.note = "This document could not be processed; the reason is shown above."
    else:
        panel.downloadable = True
    return panel


@dataclass
class PageShown:
    """The selected page, as the view shows it."""

    image: Image.Image | Path | None = None
    facts: str = ""  # Markdown: our words, the page's facts escaped
    doubts: str = ""  # Markdown: the low-confidence lines, escaped
    markdown: str = ""  # the accepted Markdown: untrusted, for safe_markdown
    text: str = ""


def page_facts(page: PageView, count: int) -> str:
    """Page N of M, its status, confidence, engine, flags and why it was routed."""
    head = f"**Page {page.number} of {count}** · {page.page.status}"
    result = page.result
    if page.page.status == PageStatus.FAILED:
        return f"{head} · {escape_markdown_text(page.page.error_message or '')} " \
               f"\\[{escape_markdown_text(page.page.error_code or 'failed')}\\]"
    if result is None:
        return f"{head} · not read yet"
    facts = [f"confidence {confidence_text(result.confidence)}",
             f"read by {escape_markdown_text(result.engine or 'unknown')}",
             "flags: " + (", ".join(escape_markdown_text(f) for f in result.flags or []) or
                          "none"),
             "routing: " + (", ".join(escape_markdown_text(r) for r in result.reasons or [])
                            or "none recorded")]
    facts += ["codes: " + ", ".join(escape_markdown_text(f"{code['format']} {code['value']}")
                                    for code in result.barcodes)] if result.barcodes else []
    return f"{head} · " + " · ".join(facts)


def show_page(library: Library, document_id: str, index: int) -> PageShown:
    """The page at ``index`` (0-based) of the document; an empty view if it has none."""
    try:
        page = library.page(document_id, index)
        count = library.document(document_id).doc.page_count
    except NotFound:
        return PageShown(facts="This page is not there.")
    result = page.result
    doubtful = page.doubtful_lines()
    image = None
    if page.image_path is not None:
        lines = [line.get("box") for line in (result.lines or [])] if result else []
        try:
            image = annotate_page(page.image_path, doubtful, lines)
        except OSError:
            log.warning("page image unreadable doc=%s page=%d", document_id, page.number)
    markdown = (result.markdown or "") if result and page.page.status != PageStatus.FAILED \
        else ""
    return PageShown(image=image, facts=page_facts(page, count),
                     doubts=highlights_text(doubtful) if result else "",
                     markdown=markdown, text=(result.text or "") if markdown else "")


def thumbnails(library: Library, document_id: str, cache_dir: Path
               ) -> tuple[list[tuple[Path, str]], list[int]]:
    """(a small image and caption per page that has an image, the pages' indexes). Each
    is made once and kept in ``cache_dir``."""
    cache_dir.mkdir(parents=True, exist_ok=True)
    shown, indexes = [], []
    for index, path in enumerate(library.page_images(document_id)):
        if path is None:
            continue
        stat = path.stat()
        key = hashlib.sha256(f"{path}:{stat.st_mtime_ns}".encode()).hexdigest()[:32]
        small = cache_dir / f"{key}.png"
        if not small.exists():
            try:
                with Image.open(path) as image:
                    image.thumbnail((THUMBNAIL_PX, THUMBNAIL_PX))
                    image.convert("RGB").save(small)
            except OSError:
                log.warning("page image unreadable doc=%s page=%d", document_id, index + 1)
                continue
        shown.append((small, f"page {index + 1}"))
        indexes.append(index)
    return shown, indexes


def history_rows(entries: list[HistoryEntry]) -> list[list[str]]:
    """The history as table rows (plain strings: the table shows them as text)."""
    return [[when_text(e.at), e.kind, e.actor, str(e.page) if e.page else "", e.detail]
            for e in entries]


def field_rows(found: FieldSet | None) -> list[list[str]] | None:
    """The key fields as table rows; None when the document has none."""
    return fields_form.field_rows(found.fields) if found is not None else None
