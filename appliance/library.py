"""The documents as the UI, the API and the CLI read them: one read facade over the
store, so that none of them reaches into its modules.

``Library.find`` is the documents browser's and ``GET /api/v1/documents``'s search
(``store.search``); ``document``, ``page``, ``page_images`` and ``history``
are the document view's. The store's types its readers meet are named here too
(``__all__``), so that no reader imports the store.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from appliance.config import Settings
from appliance.errors import NotFound
from appliance.intake.spool import Spool
from appliance.pipeline.document import document_page
from appliance.review import highlights, page_image
from appliance.store import Database, queries
from appliance.store.models import DocStatus, FieldSet, Lane, Page, PageResult, PageStatus
from appliance.store.queries import DocumentView, FailureRow
from appliance.store.search import DocumentPage, DocumentQuery, Hit, find_documents

__all__ = ["Library", "PageView", "HistoryEntry", "DocumentQuery", "DocumentPage", "Hit",
           "DocumentView", "DocStatus", "PageStatus", "Lane", "FailureRow", "FieldSet"]


@dataclass
class PageView:
    """One page of a document as the document view shows it."""

    page: Page
    result: PageResult | None  # the accepted reading (or the one waiting for review)
    image_path: Path | None  # the page as the engine read it, while the spool keeps it

    @property
    def number(self) -> int:
        return self.page.index + 1

    def doubtful_lines(self) -> list[dict]:
        """The lines (or token runs) a reviewer would look at first."""
        return highlights(self.result) if self.result is not None else []


@dataclass
class HistoryEntry:
    at: float
    kind: str  # intake, an attempt's outcome, review_*, exported, webhook, cancelled, ...
    actor: str
    page: int | None  # 1-based, where it concerns one page
    detail: str
    attempt: int | None = None  # an attempt's number (its kind is its outcome)
    # what ``detail`` says, by name, to be said in other words: an intake's name, pages
    # and doc_type; an attempt's engine and its code and message, or its confidence;
    # an event's details, a list's items one by one (a page's routing reasons), others
    # as a person reads them (``_said``), the empty ones left out
    values: dict = field(default_factory=dict)


class Library:
    def __init__(self, settings: Settings, db: Database, spool: Spool):
        self.settings = settings
        self.db = db
        self.spool = spool

    def find(self, query: DocumentQuery = DocumentQuery()) -> DocumentPage:
        return find_documents(self.db, query)

    def document(self, document_id: str) -> DocumentView:
        """The document with its pages; NotFound when there is none."""
        view = queries.get_document(self.db, document_id)
        if view is None:
            raise NotFound(f"no document with id {document_id}")
        return view

    def documents(self, ids: list[str]) -> dict[str, DocumentView]:
        """Those of ``ids`` that still exist, by id: a list's rows read again."""
        return queries.documents_by_id(self.db, ids)

    def page(self, document_id: str, index: int) -> PageView:
        """One page (0-based ``index``) of the document as its results render it, read
        with its neighbours alone (``pipeline.document.document_page``): a long
        document's other pages are not read to show one of them."""
        view = self.document(document_id)
        found = document_page(self.db, document_id, index, self.settings.output.page_furniture)
        if found is None:
            raise NotFound(f"document {document_id} has no page {index + 1}")
        page, result = found
        return PageView(page, result, self._image(view, page, result))

    def page_images(self, document_id: str) -> list[Path | None]:
        """Each page's image as the engine read it (None where there is none), by index."""
        view = self.document(document_id)
        return [self._image(view, page, self._result(page)) for page in view.pages]

    def _result(self, page: Page) -> PageResult | None:
        return queries.page_result(self.db, page.result_id) if page.result_id else None

    def _image(self, view: DocumentView, page: Page, result: PageResult | None) -> Path | None:
        image = page_image(self.spool, self.settings, view.doc, page, result)
        return image if image.exists() else None

    def fields(self, document_id: str) -> FieldSet | None:
        return queries.latest_fields(self.db, document_id)

    def history(self, document_id: str) -> list[HistoryEntry]:
        """Intake, every attempt, review actions, exports, webhook deliveries and other
        audited actions, oldest first."""
        view = self.document(document_id)
        numbers = {page.id: page.index + 1 for page in view.pages}
        entries = [HistoryEntry(view.doc.created_at, "intake", view.doc.source, None,
                                f"{view.doc.name} ({view.doc.page_count} pages, "
                                f"{view.doc.doc_type})",
                                values={"name": view.doc.name, "pages": view.doc.page_count,
                                        "doc_type": view.doc.doc_type})]
        for result in queries.document_attempts(self.db, document_id):
            detail, values = result.engine or "", {"engine": result.engine or ""}
            if result.error_code:
                detail += f" {result.error_code}: {result.error_message}"
                values.update(code=result.error_code, message=result.error_message)
            elif result.confidence is not None:
                detail += f" confidence {result.confidence:.2f}"
                values.update(confidence=f"{result.confidence:.2f}")
            entries.append(HistoryEntry(result.finished_at, result.outcome,
                                        result.worker_id or "system",
                                        numbers.get(result.page_id), detail.strip(),
                                        attempt=result.attempt, values=values))
        for event in queries.document_events(self.db, document_id):
            values = {key: list(map(str, value)) if isinstance(value, list) else _said(value)
                      for key, value in (event.detail or {}).items()
                      if value not in (None, "", [], {})}  # an export of no files: none
            entries.append(HistoryEntry(event.at, event.kind, event.actor,
                                        numbers.get(event.page_id),
                                        ", ".join(f"{key} {_said(said)}"
                                                  for key, said in values.items()),
                                        values=values))
        return sorted(entries, key=lambda entry: entry.at)

    def latest_failures(self, limit: int) -> list[FailureRow]:
        return queries.latest_failures(self.db, limit)

    def waiting_pages(self) -> Counter:
        """Pages queued, being read and waiting for review, by status."""
        return queries.waiting_pages(self.db)

    def review_backlog(self) -> dict:
        return queries.review_backlog(self.db)

def _said(value) -> str:
    """An event's detail as a person reads it: a list's items and a mapping's entries one
    after the other ("a.md, a.txt"; "md 1.2, pdf 350.0"), not as Python writes them."""
    if isinstance(value, dict):
        return ", ".join(f"{key} {item}" for key, item in value.items())
    if isinstance(value, list):
        return ", ".join(map(str, value))
    return str(value)
