"""The documents browser's list: what it asks the library for (``browse_query``), where
its pager goes (``pager_offset``), and the page of results it shows (``results_html``).

The rows are fixed when a query runs (``Listed``): the timer and the actions read those
documents again and redraw them where they were, and a deleted one stays as a row that
says so. Were the list re-queried under the pointer, a document that leaves the filter
(after a retry, say) would move the rows up, and the next click would tick the document
that moved there. Each row keeps one height for the same reason: a name over its facts,
each on one line and whole (cut with an ellipsis where too long, all of it on hover),
beside a status over at most two lines of its details (all of them on hover).
Whether the query now finds other rows is only said (``pager_text``); "Refresh list" shows
them.

The list is HTML made here. Names, tags, folders, messages and snippets are untrusted
(file names and OCR text), so each goes through ``text_html``; only our own markup
reaches the page: the table, each document's open button and checkbox, a progress bar,
and ``<mark>`` around the spans a search matched (``Hit.marked``). ``listing.js`` turns a
click on a name into an "open" event (the document, and the page the search found) and
the checkboxes into a "pick" event with the chosen documents; the table names its query
(``data-query``), so that a new one (a search, a filter, the pager) starts a new choice.
"""

from __future__ import annotations

import dataclasses
import hashlib
import html
from datetime import datetime
from pathlib import Path
from typing import Callable

from appliance.library import DocumentPage, DocumentQuery, DocumentView, Hit, PageStatus
from ui.document_status import duration_text, error_text, page_progress, pages_read, review_text
from ui.i18n import EN, doc_type_text, label, plural, source_text, status_text, text

PAGE_SIZE = 50
ANY = ""  # the "no filter" value of every filter
DAY_S = 86400.0
NEWEST, BEST_MATCH = "date:desc", "relevance:desc"
SORT_CHOICES = [(label("sort_newest"), NEWEST), (label("sort_oldest"), "date:asc"),
                (label("sort_name_asc"), "name:asc"), (label("sort_name_desc"), "name:desc"),
                (label("sort_status"), "status:asc"), (label("sort_best"), BEST_MATCH)]
SOURCE_CHOICES = [(label("any_source"), ANY), (label("source_upload"), "upload"),
                  (label("source_api"), "api"), (label("source_watch"), "watch"),
                  (label("source_cli"), "cli")]
FIELDS_CHOICES = [(label("fields_any"), ANY), (label("fields_invalid"), "invalid"),
                  (label("fields_valid"), "valid")]
PAGER_MOVES = ("first", "previous", "next", "last")
HERE = Path(__file__).parent
LIST_JS = (HERE / "listing.js").read_text()
LIST_CSS = (HERE / "listing.css").read_text()


def browse_query(q: str | None, statuses: list[str] | None, doc_type: str | None,
                 tag: str | None, source: str | None, folder: str | None,
                 since: float | None, until: float | None, engine: str | None,
                 fields: str | None, sort: str | None, offset: int = 0) -> DocumentQuery:
    """The browser's controls as a query ("" or None is no filter). ``since`` and
    ``until`` are days (their first second): the range holds both whole days."""
    order, _, direction = (sort or "date:desc").partition(":")
    return DocumentQuery(
        q=(q or "").strip(), status=tuple(statuses or ()), doc_type=doc_type or None,
        tag=(tag or "").strip() or None, source=source or None, folder=folder or None,
        since=since, until=until + DAY_S if until is not None else None,
        engine=engine or None,
        fields_invalid={"invalid": True, "valid": False}.get(fields or ANY),
        sort=order, descending=direction != "asc", limit=PAGE_SIZE, offset=max(0, offset))


def search_sort(q: str | None, sort: str | None) -> str | None:
    """The order a search asks for: words searched are listed best match first, and an
    emptied search box goes back to the newest; any other order chosen stays."""
    if (q or "").strip():
        return BEST_MATCH if sort == NEWEST else sort
    return NEWEST if sort == BEST_MATCH else sort


def pager_offset(move: str, offset: int, total: int, size: int = PAGE_SIZE) -> int:
    """Where the pager's ``move`` (one of PAGER_MOVES) goes from ``offset``."""
    last = max(0, (total - 1) // size * size)
    return {"first": 0, "previous": max(0, offset - size),
            "next": min(offset + size, last), "last": last}[move]


@dataclasses.dataclass(frozen=True)
class Listed:
    """The rows a list shows, in order, as ``query`` found them (None: no query yet)."""
    query: DocumentQuery | None = None
    ids: tuple[str, ...] = ()
    names: dict[str, str] = dataclasses.field(default_factory=dict)  # a row deleted since keeps its name
    hits: dict[str, Hit] = dataclasses.field(default_factory=dict)  # by id, when searching
    total: int = 0  # documents that matched, over all pages of results

    @classmethod
    def of(cls, query: DocumentQuery, found: DocumentPage) -> Listed:
        return cls(query, tuple(view.doc.id for view in found.documents),
                   {view.doc.id: view.doc.name for view in found.documents}, dict(found.hits),
                   found.total)

    @property
    def searching(self) -> bool:
        return bool(self.query and self.query.q)

    def differs(self, found: DocumentPage) -> bool:
        """Whether the query now finds other rows than these."""
        return (found.total != self.total
                or tuple(view.doc.id for view in found.documents) != self.ids)


CHANGED_TEXT = text("pager_changed")


def pager_text(offset: int, shown: int, total: int, changed: bool = False,
               lang: str = EN) -> str:
    """e.g. "51–100 of 1,003 documents", and whether the query now finds others."""
    changed_text = text("pager_changed", lang) if changed else ""
    if not total:
        return text("pager_none", lang) + changed_text
    return plural("pager_range", total, lang, first=f"{offset + 1:,}",
                  last=f"{offset + shown:,}", total=f"{total:,}") + changed_text


def text_html(text: object) -> str:
    """Untrusted text as HTML text: escaped, and with no "{", "}" or "$" left for the
    component's template engine to read."""
    return (html.escape(str(text), quote=True).replace("{", "&#123;").replace("}", "&#125;")
            .replace("$", "&#36;"))


def snippet_html(hit: Hit) -> str:
    """The hit's snippet, escaped, with only the matched spans in <mark>."""
    plain, spans = hit.marked()
    parts, at = [], 0
    for start, end in spans:
        parts += [text_html(plain[at:start]), f"<mark>{text_html(plain[start:end])}</mark>"]
        at = end
    parts.append(text_html(plain[at:]))
    return "".join(parts)


def list_details(view: DocumentView, reviewers_exist: bool, lang: str = EN) -> str:
    """What the list says beside a status: why it failed at intake, what it waits for,
    or how many pages failed (the document view gives their reasons)."""
    if view.page_counts[PageStatus.REVIEW]:
        return review_text(view, reviewers_exist, lang)
    if view.doc.error_code:
        return error_text(view.doc.error_code, view.doc.error_message, lang)
    failed = view.page_counts[PageStatus.FAILED]
    if failed:
        return plural("list_failed", failed, lang)
    return ""


def _when(at: float) -> str:
    return datetime.fromtimestamp(at).strftime("%Y-%m-%d %H:%M")


def _row(view: DocumentView, hit: Hit | None, searching: bool, reviewers_exist: bool,
         remaining: Callable[[DocumentView], float | None], lang: str = EN) -> str:
    doc = view.doc
    name, doc_id = text_html(doc.name), text_html(doc.id)
    # in English the source's word as stored (upload, api, watch, cli)
    source = doc.source if lang == EN else source_text(doc.source, lang)
    where = source + (f": {doc.watch_folder}" if doc.watch_folder else "")
    meta = " · ".join(text_html(part) for part in (
        _when(doc.created_at), doc_type_text(doc.doc_type, lang), where,
        ", ".join(doc.tags or [])) if part)
    done, total = page_progress(view)
    read, waiting = pages_read(view)
    left = remaining(view)
    # whole: two lines show (the remedy ends a message), and all of it on hover
    details = text_html(list_details(view, reviewers_exist, lang))
    # our words are escaped as well: a translation holds no markup
    said = {key: text_html(text(key, lang, name=doc.name)) for key in ("list_select",
                                                                       "list_progress")}
    pages = text_html(text("list_pages_done", lang, done=done, total=total)
                      + (plural("list_waiting", waiting, lang) if waiting else "")
                      + (text("list_left", lang, duration=duration_text(left, lang))
                         if left is not None else ""))
    cells = [
        f'<td><input type="checkbox" data-pick="{doc_id}" aria-label="{said["list_select"]}"></td>',
        # the name whole on one line, cut with an ellipsis: all of it on hover
        f'<td><button type="button" class="doc-open" data-open="{doc_id}" '
        f'data-page="{hit.page_index if hit else 0}" title="{name}">{name}</button>'
        f'<div class="doc-meta">{meta}</div></td>',
        # the status's word translated; its value (data-status) as the library has it
        f'<td><span class="doc-status" data-status="{text_html(view.status)}">'
        f'{text_html(status_text(view.status, lang))}</span>'
        f'<div class="doc-details" title="{details}">{details}</div></td>',
        # pages read and waiting for a person fill the bar in another colour than pages
        # done: a document read to the end and waiting for review is not one still queued
        f'<td><progress value="{read}" max="{max(total, 1)}"'
        + (' class="doc-waiting"' if waiting else "") + f' aria-label="'
        f'{said["list_progress"]}"></progress> <span class="doc-pages">{pages}</span></td>',
    ]
    if searching:
        cells.append(_hit_cell(hit, lang))
    return f'<tr data-document="{doc_id}">{"".join(cells)}</tr>'


NOT_REVIEWED_TEXT = text("list_not_reviewed")


def _hit_cell(hit: Hit | None, lang: str = EN) -> str:
    if not hit:
        return f'<td class="doc-hit">{text_html(text("list_name_matches", lang))}</td>'
    unreviewed = ("" if hit.reviewed else
                  f' <span class="doc-unreviewed">'
                  f'({text_html(text("list_not_reviewed", lang))})</span>')
    where = text_html(text("list_hit_page", lang, n=hit.page_index + 1))
    return f'<td class="doc-hit">{where}{unreviewed}: {snippet_html(hit)}</td>'


def _deleted_row(doc_id: str, name: str, hit: Hit | None, searching: bool,
                 lang: str = EN) -> str:
    """A row deleted since the list was made: it stays, so the rows below do not move."""
    deleted = text_html(text("list_deleted", lang))
    cells = ['<td></td>', f'<td><span class="doc-gone" title="{text_html(name)}">'
             f'{text_html(name)}</span>'
             f'<div class="doc-meta">{deleted}</div></td>',
             f'<td><span class="doc-status" data-status="deleted">{deleted}</span>'
             '<div class="doc-details"></div></td>',
             "<td></td>"]
    if searching:
        cells.append(_hit_cell(hit, lang))
    return f'<tr data-document="{text_html(doc_id)}" class="doc-deleted">{"".join(cells)}</tr>'


def results_html(listed: Listed, views: dict[str, DocumentView], reviewers_exist: bool = True,
                 remaining: Callable[[DocumentView], float | None] = lambda view: None,
                 lang: str = EN) -> str:
    """The listed rows as a table in ``lang``, each as ``views`` has it now (a row
    missing there was deleted); ``remaining`` estimates a document's time left."""
    if not listed.ids:
        return f'<p class="doc-none">{text_html(text("pager_none", lang))}</p>'
    heads = [f'<th><input type="checkbox" data-pick-all aria-label="'
             f'{text_html(text("list_select_all", lang))}"></th>',
             *(f"<th>{text_html(text(key, lang))}</th>"
               for key in ("list_document", "list_status", "list_pages"))]
    query = hashlib.sha256(repr(listed.query).encode()).hexdigest()[:16]
    if listed.searching:
        heads.append(f"<th>{text_html(text('list_where', lang))}</th>")
    rows = "".join(
        _row(views[doc_id], listed.hits.get(doc_id), listed.searching, reviewers_exist,
             remaining, lang) if doc_id in views else
        _deleted_row(doc_id, listed.names.get(doc_id, doc_id), listed.hits.get(doc_id),
                     listed.searching, lang)
        for doc_id in listed.ids)
    return (f'<table class="doc-list" aria-label="{text_html(text("list_label", lang))}" '
            f'data-query="{query}"><thead><tr>'
            f'{"".join(heads)}</tr></thead><tbody>{rows}</tbody></table>')
