"""Read-only views of the store. A document's status is derived here from its pages."""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field

from sqlalchemy import func
from sqlmodel import Session, select

from appliance.quality.routing import reason_code, review_reasons
from appliance.store.db import Database
from appliance.store.models import (
    FINAL_PAGE_STATUSES, Analysis, ContentHold, Document, DocStatus, Event, FieldSet, IdempotencyKey, Outcome, Page,
    PageResult, PageStatus, ReviewAction, WatchLedger,
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


def page_counts(session, doc_ids: list[str]) -> dict[str, Counter]:
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
        counts = page_counts(session, [d.id for d in docs])
        return [DocumentView(d, derive_status(d, counts[d.id]), counts[d.id]) for d in docs]


def documents_by_id(db: Database, ids: list[str]) -> dict[str, DocumentView]:
    """The documents of ``ids`` that still exist, each by its id (without its pages)."""
    with db.read() as session:
        docs = session.exec(select(Document).where(Document.id.in_(ids))).all()
        counts = page_counts(session, [d.id for d in docs])
        return {d.id: DocumentView(d, derive_status(d, counts[d.id]), counts[d.id]) for d in docs}


def final_unexported_documents(db: Database) -> list[str]:
    """Processed documents whose pages are all final but whose export is not recorded.

    Documents rejected at intake have nothing to export, and those whose results
    cannot be written (``output_error``) are not tried again.
    """
    with db.read() as session:
        docs = session.exec(select(Document).where(Document.exported_at.is_(None),
                                                   Document.error_code.is_(None),
                                                   Document.output_error.is_(None))).all()
        counts = page_counts(session, [d.id for d in docs])
        return [d.id for d in docs if derive_status(d, counts[d.id]) in FINAL_DOC_STATUSES]


def accepted_results(db: Database, document_id: str, indices: range | None = None
                     ) -> list[tuple[Page, PageResult | None]]:
    """Each page of a document (those of ``indices`` only, 0-based, where given) with its
    accepted result (None for failed pages)."""
    with db.read() as session:
        query = (select(Page, PageResult)
                 .join(PageResult, Page.result_id == PageResult.id, isouter=True)
                 .where(Page.document_id == document_id))
        if indices is not None:
            query = query.where(Page.index >= indices.start, Page.index < indices.stop)
        rows = session.exec(query.order_by(Page.index)).all()
        return [(page, result) for page, result in rows]


def page_id(db: Database, document_id: str, index: int) -> int | None:
    """The id of the document's page at ``index`` (0-based); None when there is none."""
    with db.read() as session:
        return session.exec(select(Page.id).where(Page.document_id == document_id,
                                                  Page.index == index)).first()


def analysis(db: Database, document_id: str) -> Analysis | None:
    """The Document Intelligence request of a document; None for one submitted otherwise."""
    with db.read() as session:
        return session.get(Analysis, document_id)


def page_result(db: Database, result_id: int) -> PageResult | None:
    with db.read() as session:
        return session.get(PageResult, result_id)


def accepted_texts(db: Database, document_id: str, exclude: int) -> list[str] | None:
    """The accepted texts of a document's pages other than ``exclude``, in page order;
    None while any of them is still waiting to be read."""
    with db.read() as session:
        rows = session.exec(
            select(Page.status, PageResult.text)
            .join(PageResult, Page.result_id == PageResult.id, isouter=True)
            .where(Page.document_id == document_id, Page.id != exclude)
            .order_by(Page.index)).all()
    if any(status in (PageStatus.QUEUED, PageStatus.RUNNING) for status, _ in rows):
        return None
    return [text or "" for _, text in rows]


def accepted_markdown(db: Database, document_id: str, index: int) -> str | None:
    """The accepted Markdown of one page of a document (None: not read, or failed)."""
    with db.read() as session:
        return session.exec(
            select(PageResult.markdown).join(Page, Page.result_id == PageResult.id)
            .where(Page.document_id == document_id, Page.index == index)).first()


def document_attempts(db: Database, document_id: str) -> list[PageResult]:
    """Every attempt at every page of the document, in the order they ended."""
    with db.read() as session:
        return list(session.exec(select(PageResult).join(Page, Page.id == PageResult.page_id)
                                 .where(Page.document_id == document_id)
                                 .order_by(PageResult.finished_at)).all())


def document_events(db: Database, document_id: str) -> list[Event]:
    """The document's audit trail, oldest first."""
    with db.read() as session:
        return list(session.exec(select(Event).where(Event.document_id == document_id)
                                 .order_by(Event.at, Event.id)).all())


def page_attempts(db: Database, page_id: int) -> list[PageResult]:
    with db.read() as session:
        return list(session.exec(select(PageResult).where(PageResult.page_id == page_id)
                                 .order_by(PageResult.attempt)).all())


def releases(db: Database, page_id: int, reason: str) -> int:
    """How often the page's reading was stopped uncharged for this reason code."""
    with db.read() as session:
        return session.exec(select(func.count()).select_from(PageResult).where(
            PageResult.page_id == page_id, PageResult.outcome == Outcome.PREEMPTED,
            PageResult.error_code == reason)).one()


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
        counts = page_counts(session, [d.id for d in docs])
        return [d for d in docs if derive_status(d, counts[d.id]) in FINAL_DOC_STATUSES]


def final_unnotified_documents(db: Database) -> list[str]:
    """Final documents with a webhook that has not been delivered or given up on."""
    with db.read() as session:
        docs = session.exec(select(Document).where(Document.webhook_url.is_not(None),
                                                   Document.webhook_done_at.is_(None))).all()
        counts = page_counts(session, [d.id for d in docs])
        return [d.id for d in docs if derive_status(d, counts[d.id]) in FINAL_DOC_STATUSES]


def watched_document(db: Database, source_path: str) -> DocumentView | None:
    """The document read from this watched file whose original is not yet disposed of."""
    with db.read() as session:
        doc_id = session.exec(select(Document.id).where(
            Document.source_path == source_path, Document.disposed_at.is_(None))
            .order_by(Document.created_at.desc())).first()
    return get_document(db, doc_id) if doc_id else None


def touched_by_a_person(db: Database, document_id: str) -> bool:
    """Whether a person acted on the document: a review action on one of its pages
    (approve, correct, reorder, reject, rerun) or a correction of its fields."""
    with db.read() as session:
        return (session.exec(select(ReviewAction.id).where(
                    ReviewAction.document_id == document_id)).first() is not None
                or session.exec(select(FieldSet.id).where(
                    FieldSet.document_id == document_id,
                    FieldSet.source == "corrected")).first() is not None)


def same_content(db: Database, sha256: str) -> Document | None:
    """The newest document with this content that is read, or being read, successfully:
    what a new copy would duplicate. Failed ones do not count, so a retry gets through."""
    with db.read() as session:
        docs = session.exec(select(Document).where(Document.sha256 == sha256,
                                                   Document.error_code.is_(None))
                            .order_by(Document.created_at.desc())).all()
        counts = page_counts(session, [d.id for d in docs])
        return next((d for d in docs if derive_status(d, counts[d.id])
                     not in (DocStatus.FAILED, DocStatus.PARTIAL)), None)


def content_in_use(db: Database, sha256: str) -> bool:
    """Some document holds this content (the spool keeps one copy for all of them)."""
    with db.read() as session:
        return session.exec(select(Document.id).where(Document.sha256 == sha256)).first() \
            is not None


def keyed_document(db: Database, key: tuple[str, str]) -> tuple[Document, str] | None:
    """The document a client's idempotency key (owner, key) names, and the sha256 of the
    content sent with the key (a PDF sent with its password: not the document's own)."""
    with db.read() as session:
        row = session.get(IdempotencyKey, key)
        if row is None:
            return None
        doc = session.get(Document, row.document_id)
        return doc, row.sha256 or doc.sha256


def kept_file_seen(db: Database, folder: str, path: str, size_bytes: int,
                   mtime_ns: int) -> bool:
    with db.read() as session:
        row = session.get(WatchLedger, (folder, path))
        return row is not None and (row.size_bytes, row.mtime_ns) == (size_bytes, mtime_ns)


def queue_depth(db: Database) -> int:
    with db.read() as session:
        return session.exec(select(func.count()).select_from(Page).where(
            Page.status == PageStatus.QUEUED)).one()


def purge_candidates(db: Database, cutoff: float) -> list[str]:
    """Content hashes whose originals retention may delete (``purgeable``)."""
    with db.read() as session:
        old = set(session.exec(select(Document.sha256).where(
            Document.created_at < cutoff, Document.purged_at.is_(None))).all())
        return sorted(purgeable(session, old, cutoff))


def purgeable(session: Session, hashes: set[str], cutoff: float) -> set[str]:
    """Those of ``hashes`` whose every document is older than ``cutoff`` and finished
    with them: final, exported, its watched original disposed of, and no page failed (a
    retry reads the original again). A document refused at intake is never finished
    with its content: the spool copy may be the only one left, and stays until someone
    deletes the document. No submission in flight may hold them either
    (``ContentHold``)."""
    if not hashes:
        return set()
    docs = session.exec(select(Document).where(Document.sha256.in_(hashes))).all()
    counts = page_counts(session, [d.id for d in docs])
    held = set(session.exec(select(ContentHold.sha256).where(
        ContentHold.sha256.in_(hashes))).all())
    blocked = {d.sha256 for d in docs if d.created_at >= cutoff or not _finished(d, counts[d.id])}
    return hashes - blocked - held


def _finished(doc: Document, counts: Counter) -> bool:
    if doc.error_code:  # refused at intake: kept until the document is deleted
        return False
    return (derive_status(doc, counts) == DocStatus.DONE and doc.exported_at is not None
            and (doc.source_path is None or doc.disposed_at is not None))


# --- figures for /metrics and the dashboard ---------------------------------------------
# Rows are never deleted (retention purges files, not rows), so counts of documents,
# attempts, final failures and review actions only grow: they are counters that
# survive a restart.


def documents_by_source(db: Database) -> dict[str, int]:
    """Documents stored per source (upload, api, watch, cli): every submission intake
    took, those refused for their content (stored ``failed`` with a reason) included."""
    with db.read() as session:
        return dict(session.exec(select(Document.source, func.count())
                                 .group_by(Document.source)).all())


def pages_in_flight(db: Database) -> dict[tuple[str, str], int]:
    """Pages waiting or being read, per (lane, status)."""
    with db.read() as session:
        rows = session.exec(select(Document.lane, Page.status, func.count())
                            .join(Document, Page.document_id == Document.id)
                            .where(Page.status.in_((PageStatus.QUEUED, PageStatus.RUNNING)))
                            .group_by(Document.lane, Page.status)).all()
    return {(lane, status): n for lane, status, n in rows}


def waiting_pages(db: Database) -> Counter:
    """Pages of every document queued, being read or waiting for review, by status."""
    with db.read() as session:
        rows = session.exec(select(Page.status, func.count()).where(Page.status.in_(
            (PageStatus.QUEUED, PageStatus.RUNNING, PageStatus.REVIEW)))
            .group_by(Page.status)).all()
    return Counter(dict(rows))


def failed_pages_by_code(db: Database) -> dict[str, int]:
    """Pages that ended ``failed``, per reason code."""
    with db.read() as session:
        rows = session.exec(select(Page.error_code, func.count())
                            .where(Page.status == PageStatus.FAILED)
                            .group_by(Page.error_code)).all()
    return {code or "unknown": n for code, n in rows}


def review_action_counts(db: Database) -> dict[str, int]:
    """Reviewer actions taken, per action (approve, correct, reject, rerun, skip)."""
    with db.read() as session:
        return dict(session.exec(select(ReviewAction.action, func.count())
                                 .group_by(ReviewAction.action)).all())


def review_backlog(db: Database) -> dict:
    """Pages waiting for review: how many, how many a reviewer holds, and per reason
    code (a page with two reasons counts under both). Reads only the columns it counts,
    unlike ``reviews.review_counts``, so a scrape never loads token arrays."""
    now = time.time()
    with db.read() as session:
        rows = session.exec(select(Page.review_owner, Page.review_lock_expires_at,
                                   PageResult.reasons)
                            .join(PageResult, Page.result_id == PageResult.id, isouter=True)
                            .where(Page.status == PageStatus.REVIEW)).all()
    by_reason: Counter = Counter()
    for _owner, _expires, reasons in rows:
        by_reason.update({reason_code(r) for r in review_reasons(reasons)})
    return {"waiting": len(rows),
            "locked": sum(1 for owner, expires, _ in rows if owner and (expires or 0) > now),
            "by_reason": dict(by_reason)}


@dataclass(frozen=True)
class AttemptRow:
    """One attempt at reading a page, as the metrics fold it in."""

    id: int
    engine: str  # the engine that answered; for a failed attempt, the one it was sent to
    outcome: str
    flags: list[str]
    repair_level: int | None  # provenance["repair"]["level"] of a successful reading
    confidence: float | None
    queued_at: float  # the document's arrival
    started_at: float | None
    finished_at: float


def attempts_after(db: Database, after_id: int, limit: int = 5000,
                   default_engine: str = "unknown") -> list[AttemptRow]:
    """Attempts recorded after ``after_id``, oldest first, at most ``limit``. Ids grow
    in commit order (one writer at a time), so reading on from the last id seen misses
    nothing. Reviewers' corrections are not attempts and are left out."""
    level = func.json_extract(PageResult.provenance, "$.repair.level")
    with db.read() as session:
        rows = session.exec(
            select(PageResult.id, PageResult.engine, Document.engine, PageResult.outcome,
                   PageResult.flags, level, PageResult.confidence, Document.created_at,
                   PageResult.started_at, PageResult.finished_at)
            .join(Page, PageResult.page_id == Page.id)
            .join(Document, Page.document_id == Document.id)
            .where(PageResult.id > after_id, PageResult.outcome != Outcome.CORRECTED)
            .order_by(PageResult.id).limit(limit)).all()
    return [AttemptRow(id=row_id, engine=engine or requested or default_engine,
                       outcome=outcome, flags=list(flags or []),
                       repair_level=int(lvl) if lvl is not None else None,
                       confidence=confidence, queued_at=created, started_at=started,
                       finished_at=finished)
            for (row_id, engine, requested, outcome, flags, lvl, confidence, created,
                 started, finished) in rows]


@dataclass(frozen=True)
class FailureRow:
    at: float
    document_id: str
    document: str  # the submitted name: untrusted, escape it to show it
    page: int | None  # 1-based; None when the document itself was refused
    code: str
    message: str  # may quote the file or the engine: untrusted too


def latest_failures(db: Database, limit: int = 20) -> list[FailureRow]:
    """The newest failures, newest first: pages that ended ``failed`` and documents
    refused at intake, each with its reason."""
    with db.read() as session:
        pages = session.exec(select(Page, Document.name)
                             .join(Document, Page.document_id == Document.id)
                             .where(Page.status == PageStatus.FAILED)
                             .order_by(Page.updated_at.desc()).limit(limit)).all()
        docs = session.exec(select(Document).where(Document.error_code.is_not(None))
                            .order_by(Document.created_at.desc()).limit(limit)).all()
    rows = [FailureRow(page.updated_at, page.document_id, name, page.index + 1,
                       page.error_code or "unknown", page.error_message or "")
            for page, name in pages]
    rows += [FailureRow(doc.created_at, doc.id, doc.name, None, doc.error_code,
                        doc.error_message or "") for doc in docs]
    return sorted(rows, key=lambda r: r.at, reverse=True)[:limit]


# --- key fields ----------------------------------------------------------------------


def latest_fields(db: Database, document_id: str) -> FieldSet | None:
    """The document's newest field reading, None when its type has no fields."""
    with db.read() as session:
        return session.exec(select(FieldSet).where(FieldSet.document_id == document_id)
                            .order_by(FieldSet.id.desc())).first()


def field_history(db: Database, doc_type: str, identity: str, exclude: str) -> list[FieldSet]:
    """Other documents' newest field readings with this identity (same seller and
    number, say), oldest first."""
    with db.read() as session:
        rows = session.exec(select(FieldSet).where(
            FieldSet.doc_type == doc_type, FieldSet.identity == identity,
            FieldSet.document_id != exclude).order_by(FieldSet.id)).all()
    newest = {row.document_id: row for row in rows}
    return list(newest.values())


def newest_correction_at(db: Database, document_id: str) -> float | None:
    """When a reviewer last corrected a page of the document (None: never)."""
    with db.read() as session:
        return session.exec(select(func.max(PageResult.finished_at))
                            .join(Page, PageResult.page_id == Page.id)
                            .where(Page.document_id == document_id,
                                   PageResult.outcome == Outcome.CORRECTED)).one()


def documents_with_fields(db: Database, doc_type: str, since: float = 0.0,
                          tag: str | None = None) -> list[tuple[Document, FieldSet]]:
    """Final documents of a type created since ``since`` (and tagged ``tag``), each with
    its newest field reading, oldest document first."""
    with db.read() as session:
        rows = session.exec(select(Document, FieldSet)
                            .join(FieldSet, FieldSet.document_id == Document.id)
                            .where(Document.doc_type == doc_type, Document.created_at >= since)
                            .order_by(Document.created_at, FieldSet.id)).all()
    newest = {doc.id: (doc, fields) for doc, fields in rows}
    return [(doc, fields) for doc, fields in newest.values()
            if tag is None or tag in (doc.tags or [])]
