"""Read-only views of the store. A document's status is derived here from its pages."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from sqlalchemy import func
from sqlmodel import select

from appliance.store.db import Database
from appliance.store.models import (
    FINAL_PAGE_STATUSES, Document, DocStatus, Page, PageResult, PageStatus, WatchLedger,
)


def derive_status(doc: Document, page_counts: Counter) -> DocStatus:
    """The one rule for a document's status, from the count of its pages per status."""
    if doc.error_code:
        return DocStatus.FAILED
    total = sum(page_counts.values())
    final = sum(page_counts[s] for s in FINAL_PAGE_STATUSES)
    if total and final == total:
        if page_counts[PageStatus.FAILED] == total:
            return DocStatus.FAILED
        return DocStatus.PARTIAL if page_counts[PageStatus.FAILED] else DocStatus.DONE
    if page_counts[PageStatus.REVIEW] and not (page_counts[PageStatus.QUEUED]
                                               or page_counts[PageStatus.RUNNING]):
        return DocStatus.REVIEW
    if page_counts[PageStatus.QUEUED] == total:
        return DocStatus.QUEUED
    return DocStatus.PROCESSING


FINAL_DOC_STATUSES = (DocStatus.DONE, DocStatus.PARTIAL, DocStatus.FAILED)


@dataclass
class DocumentView:
    doc: Document
    status: DocStatus
    page_counts: Counter  # pages per PageStatus
    pages: list[Page] = field(default_factory=list)  # filled by get_document only

    @property
    def is_final(self) -> bool:
        return self.status in FINAL_DOC_STATUSES


def _page_counts(session, doc_ids: list[str]) -> dict[str, Counter]:
    counts: dict[str, Counter] = {d: Counter() for d in doc_ids}
    rows = session.exec(select(Page.document_id, Page.status, func.count())
                        .where(Page.document_id.in_(doc_ids))
                        .group_by(Page.document_id, Page.status)).all()
    for doc_id, status, n in rows:
        counts[doc_id][PageStatus(status)] = n
    return counts


def get_document(db: Database, document_id: str) -> DocumentView | None:
    with db.read() as session:
        doc = session.get(Document, document_id)
        if doc is None:
            return None
        pages = session.exec(select(Page).where(Page.document_id == document_id)
                             .order_by(Page.index)).all()
        counts = Counter(PageStatus(p.status) for p in pages)
        return DocumentView(doc, derive_status(doc, counts), counts, list(pages))


def list_documents(db: Database, limit: int = 100, offset: int = 0) -> list[DocumentView]:
    with db.read() as session:
        docs = session.exec(select(Document).order_by(Document.created_at.desc())
                            .limit(limit).offset(offset)).all()
        counts = _page_counts(session, [d.id for d in docs])
        return [DocumentView(d, derive_status(d, counts[d.id]), counts[d.id]) for d in docs]


def final_unexported_documents(db: Database) -> list[str]:
    """Processed documents whose pages are all final but whose export is not recorded.

    Documents rejected at intake have nothing to export.
    """
    with db.read() as session:
        docs = session.exec(select(Document).where(Document.exported_at.is_(None),
                                                   Document.error_code.is_(None))).all()
        counts = _page_counts(session, [d.id for d in docs])
        return [d.id for d in docs if derive_status(d, counts[d.id]) in FINAL_DOC_STATUSES]


def accepted_results(db: Database, document_id: str) -> list[tuple[Page, PageResult | None]]:
    """Each page of a document with its accepted result (None for failed pages)."""
    with db.read() as session:
        rows = session.exec(
            select(Page, PageResult).join(PageResult, Page.result_id == PageResult.id,
                                          isouter=True)
            .where(Page.document_id == document_id).order_by(Page.index)).all()
        return [(page, result) for page, result in rows]


def accepted_markdown(db: Database, document_id: str, index: int) -> str | None:
    """The accepted Markdown of one page of a document (None: not read, or failed)."""
    with db.read() as session:
        return session.exec(
            select(PageResult.markdown).join(Page, Page.result_id == PageResult.id)
            .where(Page.document_id == document_id, Page.index == index)).first()


def page_attempts(db: Database, page_id: int) -> list[PageResult]:
    with db.read() as session:
        return list(session.exec(select(PageResult).where(PageResult.page_id == page_id)
                                 .order_by(PageResult.attempt)).all())


def pending_pages(db: Database, lane: str) -> int:
    """Pages of a lane that are waiting or being read."""
    with db.read() as session:
        return session.exec(select(func.count()).select_from(Page)
                            .join(Document, Page.document_id == Document.id)
                            .where(Document.lane == lane,
                                   Page.status.in_((PageStatus.QUEUED, PageStatus.RUNNING)))
                            ).one()


def final_undisposed_documents(db: Database) -> list[Document]:
    """Final documents from watched folders whose original still awaits its disposition."""
    with db.read() as session:
        docs = session.exec(select(Document).where(Document.source_path.is_not(None),
                                                   Document.disposed_at.is_(None))).all()
        counts = _page_counts(session, [d.id for d in docs])
        return [d for d in docs if derive_status(d, counts[d.id]) in FINAL_DOC_STATUSES]


def final_unnotified_documents(db: Database) -> list[str]:
    """Final documents with a webhook that has not been delivered or given up on."""
    with db.read() as session:
        docs = session.exec(select(Document).where(Document.webhook_url.is_not(None),
                                                   Document.webhook_done_at.is_(None))).all()
        counts = _page_counts(session, [d.id for d in docs])
        return [d.id for d in docs if derive_status(d, counts[d.id]) in FINAL_DOC_STATUSES]


def watched_file_in_flight(db: Database, source_path: str) -> bool:
    """A document from this watched file exists and its original is not yet disposed of."""
    with db.read() as session:
        return session.exec(select(func.count()).select_from(Document).where(
            Document.source_path == source_path, Document.disposed_at.is_(None))).one() > 0


def same_content(db: Database, sha256: str) -> Document | None:
    """The newest document with this content that is read, or being read, successfully:
    what a new copy would duplicate. Failed ones do not count, so a retry gets through."""
    with db.read() as session:
        docs = session.exec(select(Document).where(Document.sha256 == sha256,
                                                   Document.error_code.is_(None))
                            .order_by(Document.created_at.desc())).all()
        counts = _page_counts(session, [d.id for d in docs])
        return next((d for d in docs if derive_status(d, counts[d.id])
                     not in (DocStatus.FAILED, DocStatus.PARTIAL)), None)


def kept_file_seen(db: Database, folder: str, path: str, size_bytes: int,
                   mtime_ns: int) -> bool:
    with db.read() as session:
        row = session.get(WatchLedger, (folder, path))
        return row is not None and (row.size_bytes, row.mtime_ns) == (size_bytes, mtime_ns)


def queue_depth(db: Database) -> int:
    with db.read() as session:
        return session.exec(select(func.count()).select_from(Page).where(
            Page.status == PageStatus.QUEUED)).one()
