"""The review queue in the store: locks on pages, and each reviewer action as one
transaction with its audit row (who, when, before and after).

A page in review is held by at most one reviewer at a time: ``claim_review`` takes the
oldest waiting page whose lock is free or expired and locks it for ``lock_s``. Every
action checks that the lock is still the reviewer's, so two reviewers never write the
same page, and a lock that ran out frees its page for the next claim.

The queue (its order, its filters, the next page to claim) is computed in SQL over the
page and document columns, and the reading's reasons where a filter names one: a claim
holds the write lock while it looks, and loading the readings (text, lines, tokens) of
thousands of waiting pages held it for seconds, past the dispatcher's busy timeout.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from sqlalchemy import and_, case, exists, func, or_, true
from sqlalchemy.orm import aliased
from sqlmodel import Session, select

from appliance.errors import LockLost, NotFound, PageBusy, RejectedUnreadable
from appliance.quality.routing import reason_code, review_reasons
from appliance.store.db import Database
from appliance.store.models import (
    FINAL_PAGE_STATUSES, Document, Lane, Outcome, Page, PageResult, PageStatus, ReviewAction,
)
from appliance.store.search import index_page
from appliance.store.transitions import _event, require_original

# the provenance entry of a reviewer's correction naming the machine reading it was made on
MACHINE_RESULT = "machine_result"


@dataclass
class ReviewFilter:
    doc_type: str | None = None
    folder: str | None = None  # a [[watch]] folder's name
    reason: str | None = None  # a routing reason's code, the part before its colon
    min_age_s: float | None = None  # waiting at least this long

    def clauses(self, now: float) -> list:
        """The filter as SQL conditions on a page in review and its document."""
        clauses = []
        if self.doc_type:
            clauses.append(Document.doc_type == self.doc_type)
        if self.folder:
            clauses.append(Document.watch_folder == self.folder)
        if self.reason:  # one of the accepted reading's reasons; only that column is read
            result = aliased(PageResult)
            reason = func.json_each(result.reasons).table_valued("value").alias("reason")
            # "low_confidence: 0.42 < 0.50" -> "low_confidence" (the whole of one without ":")
            code = func.substr(reason.c.value, 1,
                               func.instr(reason.c.value.op("||")(":"), ":") - 1)
            clauses.append(exists(select(1).select_from(result).join(reason, true()).where(
                result.id == Page.result_id, code == self.reason)))
        if self.min_age_s:  # a page with no review_since is as old as now
            clauses.append(now - func.coalesce(Page.review_since, now) >= self.min_age_s)
        return clauses


def _held_by(reviewer: str, now: float):
    """Locked by ``reviewer``, and not run out (ix_page_review finds these at once)."""
    return and_(Page.review_owner == reviewer,
                func.coalesce(Page.review_lock_expires_at, 0) > now)


def _free(now: float):
    """Locked by nobody, or by a lock that ran out."""
    return or_(Page.review_owner.is_(None), func.coalesce(Page.review_lock_expires_at, 0) <= now)


def _queue(query, where: ReviewFilter, now: float):
    """``query`` over the pages in review that match ``where``, in queue order: the
    interactive lane first, then the longest waiting."""
    return (query.join(Document, Page.document_id == Document.id)
            .where(Page.status == PageStatus.REVIEW, *where.clauses(now))
            .order_by(case((Document.lane == Lane.INTERACTIVE, 0), else_=1), Page.review_since,
                      Page.id))


def waiting_pages(db: Database, where: ReviewFilter = ReviewFilter(), limit: int | None = None
                  ) -> list[tuple[Page, Document, PageResult | None]]:
    """The first ``limit`` pages of the queue that match ``where`` (None: all), each with
    its document and accepted reading."""
    query = _queue(select(Page, Document, PageResult)
                   .join(PageResult, Page.result_id == PageResult.id, isouter=True),
                   where, time.time())
    with db.read() as session:
        return list(session.exec(query.limit(limit)).all())


def claim_review(db: Database, reviewer: str, lock_s: float,
                 where: ReviewFilter = ReviewFilter(), leaving: int | None = None) -> int | None:
    """Lock the next free page for ``reviewer``; its id, or None when none is free.
    A page the reviewer already holds comes back first (a reload loses nothing); the
    page they are ``leaving`` (open, and outside the filter changed since) is freed,
    unless it is the one that comes back."""
    now = time.time()
    queue = _queue(select(Page), where, now).limit(1)
    with db.write() as session:
        page = (session.exec(queue.where(_held_by(reviewer, now))).first()
                or session.exec(queue.where(_free(now))).first())
        if leaving is not None and (page is None or page.id != leaving):
            _release(session, leaving, reviewer)
        if page is None:
            return None
        page.review_owner = reviewer
        page.review_lock_expires_at = now + lock_s
        session.add(page)
        _event(session, "review_claimed", page.document_id, page.id, actor=reviewer)
        return page.id


def _locked_page(session: Session, page_id: int, reviewer: str) -> Page:
    page = session.get(Page, page_id)
    if page is None:
        raise NotFound(f"no page with id {page_id}")
    if page.status != PageStatus.REVIEW:
        raise LockLost(f"page {page.index + 1} is no longer waiting for review (it is "
                       f"{page.status}); open the next page")
    if page.review_owner != reviewer or (page.review_lock_expires_at or 0) <= time.time():
        raise LockLost("your lock on this page has expired or another reviewer holds it; "
                       "open the next page (your changes were not saved)")
    return page


def _settle(session: Session, page: Page, reviewer: str, action: str, status: str,
            before: str | None, after: str | None, note: str | None = None) -> None:
    result = session.get(PageResult, page.result_id) if page.result_id else None
    session.add(ReviewAction(page_id=page.id, document_id=page.document_id, reviewer=reviewer,
                             action=action, before_markdown=before, after_markdown=after,
                             reasons=result.reasons if result else None, note=note))
    page.status = status
    page.review_owner = page.review_lock_expires_at = None
    page.updated_at = time.time()
    session.add(page)
    # accepted, or still waiting (skipped): found by its text; else not at all
    index_page(session, page, result.text if result and status in (
        PageStatus.DONE, PageStatus.REVIEW) else None)
    _event(session, f"review_{action}", page.document_id, page.id, actor=reviewer)


def approve(db: Database, page_id: int, reviewer: str) -> str:
    """The machine's reading stands. Returns the page's document id."""
    with db.write() as session:
        page = _locked_page(session, page_id, reviewer)
        markdown = session.get(PageResult, page.result_id).markdown
        _settle(session, page, reviewer, "approve", PageStatus.DONE, markdown, markdown)
        return page.document_id


def correct(db: Database, page_id: int, reviewer: str, markdown: str, text: str) -> str:
    """The reviewer's text becomes the page's accepted result (the machine's stays on
    record as an earlier attempt)."""
    with db.write() as session:
        page = _locked_page(session, page_id, reviewer)
        machine = session.get(PageResult, page.result_id)
        now = time.time()
        row = PageResult(page_id=page.id, attempt=page.attempts, outcome=Outcome.CORRECTED,
                         worker_id=reviewer, engine="human", model_id=reviewer, text=text,
                         markdown=markdown, lines=machine.lines, flags=["corrected"],
                         provenance={"corrected_by": reviewer, MACHINE_RESULT: machine.id},
                         confidence=1.0, reasons=machine.reasons, started_at=now,
                         finished_at=now)
        session.add(row)
        session.flush()
        page.result_id = row.id
        _settle(session, page, reviewer, "correct", PageStatus.DONE, machine.markdown, markdown)
        doc = session.get(Document, page.document_id)
        doc.exported_at = None  # a document exported before is exported again
        session.add(doc)
        return page.document_id


def reject(db: Database, page_id: int, reviewer: str, note: str = "") -> str:
    """The page cannot be read: it fails with the reviewer's reason."""
    with db.write() as session:
        page = _locked_page(session, page_id, reviewer)
        markdown = session.get(PageResult, page.result_id).markdown
        page.error_code = RejectedUnreadable.code
        page.error_message = (RejectedUnreadable.said("rejected_note", reviewer=reviewer, note=note)
                              if note else RejectedUnreadable.said("rejected", reviewer=reviewer)
                              ).message
        _settle(session, page, reviewer, "reject", PageStatus.FAILED, markdown, None, note)
        return page.document_id


def rerun(db: Database, page_id: int, reviewer: str, options: dict, held: bool = True) -> str:
    """Read the page again with ``options`` (another engine, a higher resolution, a
    turn); the new reading is routed afresh. ``held``: the reviewer holds the page's
    lock (the review console); else (the document view, the REST API) any page read to
    an end will do, unless another reviewer holds it."""
    with db.write() as session:
        page = _locked_page(session, page_id, reviewer) if held else _read_page(
            session, page_id, reviewer)
        doc = session.get(Document, page.document_id)
        require_original(doc, f"page {page.index + 1}")
        markdown = session.get(PageResult, page.result_id).markdown if page.result_id else None
        if page.status in FINAL_PAGE_STATUSES:  # final again once read: exported, notified
            doc.exported_at = doc.webhook_done_at = doc.output_error = None
            session.add(doc)
        page.options = {**(page.options or {}), **options}
        page.attempts = 0  # a new reading, not a retry: the engine starts from its first rung
        page.not_before = 0.0
        page.review_since = None
        page.error_code = page.error_message = None
        _settle(session, page, reviewer, "rerun", PageStatus.QUEUED, markdown, None,
                note=", ".join(f"{k}={v}" for k, v in options.items()))
        return page.document_id


def _read_page(session: Session, page_id: int, person: str) -> Page:
    """The page, read to an end (done, failed, or waiting for review and not held by
    another reviewer), for ``person`` to have read again."""
    page = session.get(Page, page_id)
    if page is None:
        raise NotFound(f"no page with id {page_id}")
    if page.status in (PageStatus.QUEUED, PageStatus.RUNNING):
        raise PageBusy(f"page {page.index + 1} is {page.status}")
    holder = page.review_owner if (page.review_lock_expires_at or 0) > time.time() else None
    if page.status == PageStatus.REVIEW and holder not in (None, person):
        raise LockLost(f"reviewer {holder} has page {page.index + 1} open in the review "
                       f"console; ask again once they are done with it")
    return page


def skip(db: Database, page_id: int, reviewer: str) -> None:
    """Leave the page for someone else: it goes to the back of the queue."""
    with db.write() as session:
        page = _locked_page(session, page_id, reviewer)
        markdown = session.get(PageResult, page.result_id).markdown
        _settle(session, page, reviewer, "skip", PageStatus.REVIEW, markdown, markdown)
        page.review_since = time.time()
        session.add(page)


def _release(session: Session, page_id: int, reviewer: str) -> None:
    """The page free for the next claim, if ``reviewer`` still holds it."""
    page = session.get(Page, page_id)
    if page is not None and page.review_owner == reviewer:
        page.review_owner = page.review_lock_expires_at = None
        session.add(page)


def review_actions(db: Database, actions: tuple[str, ...] = ("approve", "correct")
                   ) -> list[tuple[ReviewAction, Page, Document, PageResult]]:
    """Reviewed pages with the machine's result they judged (for calibration and
    training data), oldest first."""
    with db.read() as session:
        rows = session.exec(
            select(ReviewAction, Page, Document)
            .join(Page, ReviewAction.page_id == Page.id)
            .join(Document, Page.document_id == Document.id)
            .where(ReviewAction.action.in_(actions))
            .order_by(ReviewAction.id)).all()
        out = []
        for action, page, doc in rows:
            machine = session.exec(
                select(PageResult).where(PageResult.page_id == page.id,
                                         PageResult.outcome == Outcome.OK,
                                         PageResult.finished_at <= action.at)
                .order_by(PageResult.id.desc())).first()
            if machine is not None:
                out.append((action, page, doc, machine))
        return out


def review_counts(db: Database) -> dict:
    """How many pages wait, in all and by reason code, document type and folder."""
    counts: dict = {"waiting": 0, "locked": 0, "by_reason": {}, "by_doc_type": {},
                    "by_folder": {}}
    now = time.time()
    for page, doc, result in waiting_pages(db):
        counts["waiting"] += 1
        counts["locked"] += bool(page.review_owner and (page.review_lock_expires_at or 0) > now)
        for bucket, key in (("by_doc_type", doc.doc_type), ("by_folder", doc.watch_folder)):
            if key:
                counts[bucket][key] = counts[bucket].get(key, 0) + 1
        for code in {reason_code(r) for r in review_reasons(result.reasons if result else [])}:
            counts["by_reason"][code] = counts["by_reason"].get(code, 0) + 1
    return counts
