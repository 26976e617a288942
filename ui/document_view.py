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
from ui.document_status import error_text, page_progress, status_details
from ui.i18n import (EN, TEXTS, doc_type_text, history_kind_text, reason_text, source_text,
                     status_text, text, texts)
from ui.page_image import annotate_page
from ui.review import confidence_text, highlights_text

log = logging.getLogger(__name__)

HISTORY_HEADER_KEYS = ["history_when", "history_what", "history_who", "history_page",
                       "history_details"]
HISTORY_HEADERS = texts(HISTORY_HEADER_KEYS)
THUMBNAIL_PX = 200
NO_DOCUMENT_TEXT = text("no_document")
WAITING_TEXT = text("downloads_waiting")


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


def document_title(view: DocumentView, reviewers_exist: bool, lang: str = EN) -> str:
    doc = view.doc
    done, total = page_progress(view)
    title = (f"### {escape_markdown_text(doc.name)}\n\n"
             + text("document_title", lang, status=status_text(view.status, lang), done=done,
                    total=total))
    details = status_details(view, reviewers_exist, lang)
    if details:
        title += f" — {escape_markdown_text(details)}"
    english = lang == EN  # in English, the stored words (type, source, lane) as they are
    facts = [text("fact_type", lang, value=doc.doc_type if english else
                  doc_type_text(doc.doc_type, lang)),
             text("fact_source", lang, source=doc.source if english else
                  source_text(doc.source, lang), when=when_text(doc.created_at)),
             text("fact_lane", lang, value=doc.lane if english else
                  text(f"lane_name_{doc.lane}", lang)),
             text("fact_id", lang, value=doc.id)]
    if doc.watch_folder:
        facts.insert(2, text("fact_folder", lang, value=doc.watch_folder))
    if doc.tags:
        facts.insert(2, text("fact_tags", lang, value=", ".join(doc.tags)))
    return title + "\n\n" + " · ".join(escape_markdown_text(fact) for fact in facts)


def show_document(appliance: Appliance, document_id: str | None, lang: str = EN
                  ) -> DocumentPanel:
    """The document's heading, and whether its downloads can be prepared (they are
    made when asked: the searchable PDF takes seconds)."""
    if not document_id:
        return DocumentPanel(title=text("no_document", lang))
    try:
        view = appliance.library.document(document_id)
    except NotFound:
        return DocumentPanel(title=text("document_gone", lang))
    panel = DocumentPanel(title=document_title(view, not appliance.review_unstaffed(), lang),
                          key=view_key(view, appliance.library.fields(document_id)),
                          in_review=bool(view.page_counts[PageStatus.REVIEW]))
    if not view.is_final:
        panel.note = text("downloads_waiting", lang)
    elif view.doc.error_code:  # refused at intake: nothing was recognised
        panel.note = text("document_refused", lang)
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


def page_facts(page: PageView, count: int, lang: str = EN) -> str:
    """Page N of M, its status, confidence, engine, flags and why it was routed (the
    flags are codes, never translated; the routing reasons named in ``lang`` too)."""
    head = text("page_head", lang, n=page.number, count=count,
                status=status_text(page.page.status, lang))
    result = page.result
    if page.page.status == PageStatus.FAILED:
        return f"{head} · " + escape_markdown_text(error_text(
            page.page.error_code or "failed", page.page.error_message, lang))
    if result is None:
        return f"{head} · {text('page_not_read', lang)}"
    facts = [text("page_confidence", lang, value=confidence_text(result.confidence, lang)),
             text("page_read_by", lang, engine=escape_markdown_text(
                 result.engine or text("unknown", lang))),
             text("page_flags", lang, value=", ".join(
                 escape_markdown_text(f) for f in result.flags or []) or text("none", lang)),
             text("page_routing", lang, value=", ".join(
                 escape_markdown_text(reason_text(r, lang)) for r in result.reasons or [])
                 or text("none_recorded", lang))]
    facts += [text("page_codes", lang, value=", ".join(
        escape_markdown_text(f"{code['format']} {code['value']}")
        for code in result.barcodes))] if result.barcodes else []
    return f"{head} · " + " · ".join(facts)


def show_page(library: Library, document_id: str, index: int, lang: str = EN) -> PageShown:
    """The page at ``index`` (0-based) of the document; an empty view if it has none."""
    try:
        page = library.page(document_id, index)
        count = library.document(document_id).doc.page_count
    except NotFound:
        return PageShown(facts=text("page_missing", lang))
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
    return PageShown(image=image, facts=page_facts(page, count, lang),
                     doubts=highlights_text(doubtful, lang) if result else "",
                     markdown=markdown, text=(result.text or "") if markdown else "")


def thumbnails(library: Library, document_id: str, cache_dir: Path, lang: str = EN
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
        shown.append((small, text("thumbnail_caption", lang, n=index + 1)))
        indexes.append(index)
    return shown, indexes


def history_rows(entries: list[HistoryEntry], lang: str = EN) -> list[list[str]]:
    """The history as table rows (plain strings: the table shows them as text); the kinds
    and the details in ``lang`` (``history_detail``)."""
    return [[when_text(e.at), history_kind_text(e.kind, e.attempt, lang), e.actor,
             str(e.page) if e.page else "", history_detail(e, lang)] for e in entries]


def history_detail(entry: HistoryEntry, lang: str = EN) -> str:
    """An entry's details: in English as the library says them; in another language
    said again from their values (``HistoryEntry.values``), which stay as they are
    (names, engines, codes, numbers), a failure in its words (``error_text``)."""
    values = entry.values
    if lang == EN or not values:
        return entry.detail
    if entry.kind == "intake":
        return text("history_intake", lang, name=values["name"], n=values["pages"],
                    doc_type=doc_type_text(values["doc_type"], lang))
    if entry.attempt is not None:
        if "code" in values:
            return f"{values['engine']} {error_text(values['code'], values['message'], lang)}"
        if "confidence" in values:
            return text("history_confidence", lang, **values)
        return values["engine"]
    return "，".join(f"{text(f'detail_{name}', lang) if f'detail_{name}' in TEXTS else name} "
                    f"{_detail_value(name, value, lang)}" for name, value in values.items())


def _detail_value(name: str, value, lang: str) -> str:
    """An event's detail: a list's items one after the other, a page's routing reasons
    each named in ``lang`` (``reason_text``)."""
    if not isinstance(value, list):
        return value
    return ", ".join(reason_text(item, lang) if name == "reasons" else item for item in value)


def field_rows(found: FieldSet | None, lang: str = EN) -> list[list[str]] | None:
    """The key fields as table rows; None when the document has none."""
    return fields_form.field_rows(found.fields, lang) if found is not None else None
