"""Who holds a content, and how a document leaves the store.

The spool keeps one copy of each content (its sha256) for every document that holds
it. A copy may be deleted only when no document holds it and no submission storing
the same bytes at that moment does (a ``ContentHold``, taken before the copy takes its
place and released in the document's own transaction). The check and the deletion
run in one write transaction, so nothing can take hold between them: a person's
delete, a forgotten watched reading (``_remove_document``, the one routine that takes
a document out with everything that hangs on it) and retention's purge.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

from sqlmodel import Session, select

from appliance.engines.cache import CACHE_PROVENANCE
from appliance.errors import DocumentBusy, NotFound
from appliance.store import queries
from appliance.store.db import Database
from appliance.store.models import (
    Analysis, ContentHold, Document, FieldSet, IdempotencyKey, Page, PageResult, PageStatus,
    ReviewAction,
)
from appliance.store.search import unindex_pages
from appliance.store.transitions import _event, _release


def hold_content(db: Database, sha256: str) -> int:
    """Mark content as being stored by a submission that has no document row yet, so that
    a delete or purge of another document with the same bytes leaves its spool copy.
    Answers the hold's id; the document's own transaction releases it."""
    with db.write() as session:
        hold = ContentHold(sha256=sha256)
        session.add(hold)
        session.flush()
        return hold.id


def release_hold(db: Database, hold: int) -> None:
    """A submission that stored nothing after all (a refused duplicate) lets go."""
    with db.write() as session:
        _release(session, hold)


def clear_holds(db: Database) -> int:
    """At start-up every hold belongs to a submission of a dead process."""
    with db.write() as session:
        rows = session.exec(select(ContentHold)).all()
        for row in rows:
            session.delete(row)
        return len(rows)


def discard_unheld_content(db: Database, sha256: str, discard: Callable[[], object]) -> bool:
    """Run ``discard`` (delete the content's spool copy) unless a document or a
    submission in flight holds the content, in one write transaction; whether it ran."""
    with db.write() as session:
        if _content_held(session, sha256):
            return False
        discard()
        return True


@dataclass(frozen=True)
class Removed:
    """A document removed from the store: its row as it was, the result-cache entries
    its readings used, and whether its content is still held by another document or by
    a submission in flight (then its spool copy and those entries stay)."""

    doc: Document
    cache_keys: list[str]
    content_held: bool


def _remove_document(session: Session, doc: Document) -> Removed:
    """Delete a document and every row that hangs on it: pages, readings, review
    actions, fields, idempotency keys, its analysis and search entries. The one routine that takes a
    document out of the store (deleted by a person, or forgotten)."""
    pages = session.exec(select(Page).where(Page.document_id == doc.id)).all()
    page_ids = [page.id for page in pages]
    unindex_pages(session, page_ids)
    results = session.exec(select(PageResult).where(PageResult.page_id.in_(page_ids))).all()
    cache_keys = sorted({key for r in results if (key := (r.provenance or {}).get(CACHE_PROVENANCE))})
    for row in [*results, *session.exec(select(ReviewAction).where(
            ReviewAction.page_id.in_(page_ids))).all()]:
        session.delete(row)
    for model, column in ((FieldSet, FieldSet.document_id),
                          (IdempotencyKey, IdempotencyKey.document_id),
                          (Analysis, Analysis.document_id)):
        for row in session.exec(select(model).where(column == doc.id)).all():
            session.delete(row)
    session.flush()
    for page in pages:
        session.delete(page)
    session.flush()
    session.delete(doc)
    session.flush()
    return Removed(doc, cache_keys, _content_held(session, doc.sha256))


def _content_held(session: Session, sha256: str) -> bool:
    """A document, or a submission storing it now, holds this content."""
    return any(session.exec(select(model.sha256).where(model.sha256 == sha256).limit(1)).first()
               for model in (Document, ContentHold))


def delete_document(db: Database, document_id: str, actor: str,
                    discard: Callable[[Removed], None]) -> Removed:
    """Remove the document and what hangs on it, leaving an audit row; DocumentBusy while
    a page of it is being read. ``discard`` deletes its files (spool copy, cache
    entries) in the same write transaction, so that no submission of the same bytes
    can take hold of the content between the check and the deletion."""
    with db.write() as session:
        doc = session.get(Document, document_id)
        if doc is None:
            raise NotFound(f"no document with id {document_id}")
        if session.exec(select(Page.id).where(Page.document_id == document_id,
                                              Page.status == PageStatus.RUNNING)).first():
            raise DocumentBusy(f"a page of document {document_id} is being read; delete it "
                               f"once it is finished, or cancel it first")
        pages = doc.page_count
        removed = _remove_document(session, doc)
        _event(session, "deleted", document_id, actor=actor, name=doc.name, sha256=doc.sha256,
               pages=pages)
        discard(removed)
        return removed


def purge_content(db: Database, sha256: str, cutoff: float,
                  discard: Callable[[], int]) -> int | None:
    """Retention: run ``discard`` (delete the content's original and page images) and
    mark its documents purged, if the content is still ``purgeable`` now, inside the
    write transaction, so that no submission or retry of it can come in between.
    Answers the files deleted, None when it was not purged."""
    now = time.time()
    with db.write() as session:
        if not queries.purgeable(session, {sha256}, cutoff):
            return None
        files = discard()
        for doc in session.exec(select(Document).where(Document.sha256 == sha256,
                                                        Document.purged_at.is_(None))):
            doc.purged_at = now
            session.add(doc)
            _event(session, "purged", doc.id, files=files)
        return files


def forget_document(db: Database, document_id: str, reason: str,
                    discard: Callable[[Removed], None]) -> Removed | None:
    """Remove a document and everything read from it, as if it had never been submitted
    (a watched file whose read failed because its writer was still at work). The audit
    trail keeps an event; ``discard`` as in ``delete_document``."""
    with db.write() as session:
        doc = session.get(Document, document_id)
        if doc is None:
            return None
        removed = _remove_document(session, doc)
        _event(session, "forgotten", document_id, reason=reason, name=doc.name)
        discard(removed)
        return removed
