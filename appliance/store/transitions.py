"""The page state machine. Every function here is one write transaction.

    queued --claim (lease)--> running --complete--> done
       ^                         |
       +-- retryable failure, lease expiry, restart (attempts < max)
                                 +-- bad input, or attempts exhausted --> failed

A result is accepted only from the lease holder of the current attempt, so a page
that was requeued (timeout, crash) and finished twice still has one result.

A page whose worker died while it read other pages too is a *crash suspect*: it is
queued again uncharged (``release_claim``) and read alone until it answers.

Leases (``lease_expires_at``) and retry back-off (``not_before``) are instants of
``time.monotonic()``: a step of the wall clock (NTP, an operator setting the date)
neither expires every lease nor holds queued pages back. That clock starts again at a
reboot, so ``requeue_after_restart`` clears both at start-up. Times people are shown
(``updated_at``, attempts' start and end, events) stay wall-clock.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlalchemy import case, exists, func, or_, update
from sqlalchemy.orm import aliased
from sqlmodel import Session, select

from appliance.config import QueueSettings
from appliance.errors import (
    ApplianceError, Cancelled, CrashesWorker, LeaseExpired, NotFound, OriginalPurged,
)
from appliance.store.db import Database
from appliance.store.models import (
    Analysis, ContentHold, Document, Event, FieldSet, IdempotencyKey, Lane, Outcome, Page,
    PageResult, PageStatus, WatchLedger,
)
from appliance.store.search import index_page

if TYPE_CHECKING:
    from appliance.engines.messages import PageDone

log = logging.getLogger(__name__)

@dataclass(frozen=True)
class Claim:
    """A page handed to one worker for one attempt."""

    page_id: int
    document_id: str
    page_index: int
    attempt: int
    lease_owner: str
    sha256: str
    kind: str
    doc_type: str
    engine: str | None  # the engine the submitter asked for, if any
    watch_folder: str | None
    claimed_at: float  # the attempt's start: queue wait before it, service time after
    options: dict  # a reviewer's rerun options (engine, resolution_boost); {} otherwise
    suspect: bool = False  # a crash suspect: its worker reads nothing else meanwhile
    text_layer: str | None = None  # what the submitter asked of a PDF's own text, if anything


def _event(session: Session, kind: str, document_id: str | None = None,
           page_id: int | None = None, actor: str = "system", **detail) -> None:
    session.add(Event(kind=kind, document_id=document_id, page_id=page_id, actor=actor,
                      detail=detail or None))


IdempotencyKeyId = tuple[str, str]  # (owner: the API key's name or "", the client's key)


def _keyed_document(session: Session, key: IdempotencyKeyId | None) -> Document | None:
    """The document a client's idempotency key already names, if any."""
    row = session.get(IdempotencyKey, key) if key else None
    return session.get(Document, row.document_id) if row else None


def _release(session: Session, hold: int | None) -> None:
    if hold is not None and (row := session.get(ContentHold, hold)) is not None:
        session.delete(row)


def _store(session: Session, doc: Document, key: IdempotencyKeyId | None,
           sent: str | None, hold: int | None) -> None:
    _release(session, hold)  # the document's row holds the content from now on
    session.add(doc)
    session.flush()
    if key:  # in the document's own transaction: a retry finds one or the other, never half
        session.add(IdempotencyKey(owner=key[0], key=key[1], document_id=doc.id,
                                   sha256=sent or doc.sha256))


def submit_document(db: Database, doc: Document, page_count: int,
                    key: IdempotencyKeyId | None = None, sent: str | None = None,
                    hold: int | None = None, born_digital: Collection[int] = ()) -> Document:
    """Store a new document and queue its pages; ``sent`` is the sha256 of the content
    sent where it is not the document's own, ``hold`` the submission's hold on its
    content (``hold_content``), ``born_digital`` the indexes of the pages read from
    their own text. When ``key`` already names a document (a concurrent retry
    committed first), store nothing and answer that one."""
    doc.page_count = page_count
    with db.write() as session:
        if (earlier := _keyed_document(session, key)) is not None:
            _release(session, hold)
            return earlier
        _store(session, doc, key, sent, hold)
        session.add_all(Page(document_id=doc.id, index=i, born_digital=i in born_digital)
                        for i in range(page_count))
        _event(session, "submitted", doc.id, source=doc.source, pages=page_count)
    return doc


def record_rejected_document(db: Database, doc: Document, code: str, message: str,
                             key: IdempotencyKeyId | None = None, sent: str | None = None,
                             hold: int | None = None) -> Document:
    """A document whose intake failed: kept with its reason, no pages to process
    (``key``, ``sent``, ``hold``: as in ``submit_document``)."""
    doc.error_code, doc.error_message, doc.page_count = code, message, 0
    with db.write() as session:
        if (earlier := _keyed_document(session, key)) is not None:
            _release(session, hold)
            return earlier
        _store(session, doc, key, sent, hold)
        _event(session, "rejected", doc.id, code=code)
    return doc


def expire_idempotency_keys(db: Database, before: float) -> int:
    """Forget the idempotency keys recorded before ``before``; how many went."""
    with db.write() as session:
        rows = session.exec(select(IdempotencyKey).where(IdempotencyKey.created_at < before)).all()
        for row in rows:
            session.delete(row)
        return len(rows)


@dataclass(frozen=True)
class Priority:
    """Which page goes next: the lowest *virtual start time*.

    A document's virtual start is its arrival time plus a delay for its lane and for
    its size. Interactive work goes before batch work, a receipt before a 300-page
    PDF, and since the delays are bounded every page's turn comes: batch work ages
    past newer interactive work once it has waited longer than ``batch_delay_s``.
    A born-digital page (``Page.born_digital``), read in a fraction of a scanned one's
    time, has no size delay and starts ``born_digital_advance_s`` early.
    """

    # the configuration's defaults (``queue``), named there once
    batch_delay_s: float = QueueSettings.batch_delay_s
    per_page_delay_s: float = QueueSettings.per_page_delay_s
    max_size_delay_s: float = QueueSettings.max_size_delay_s
    born_digital_advance_s: float = QueueSettings.born_digital_advance_s

    def order(self):
        lane_delay = case((Document.lane == Lane.BATCH, self.batch_delay_s), else_=0.0)
        size_delay = case((Page.born_digital, -self.born_digital_advance_s),
                          else_=func.min(Document.page_count * self.per_page_delay_s,
                                         self.max_size_delay_s))
        return (Document.created_at + lane_delay + size_delay, Document.created_at, Page.index)


def claim_next_page(db: Database, owner: str, lease_s: float,
                    priority: Priority = Priority(), *, in_page_order: bool = False,
                    alone: bool = True, engines: tuple[str, ...] | None = None) -> Claim | None:
    """Lease the next claimable page, in ``priority`` order.

    ``in_page_order``: a page waits while the page before it is still queued or being
    read, so that its reader can be given the end of that page (multi-page context).
    Other documents' pages fill the wait.

    ``alone``: the claiming worker has nothing in flight. Only such a worker gets a
    crash suspect, and it gets one before anything else; a worker with pages in flight
    gets nothing while a suspect waits, so that some worker empties for it.

    ``engines``: the readings the claiming worker can give; a page that asks for
    another engine is left for a worker running it. None: any page.
    """
    now, clock = time.time(), time.monotonic()
    query = (select(Page, Document)
             .join(Document, Page.document_id == Document.id)
             .where(Page.status == PageStatus.QUEUED, Page.not_before <= clock))
    if in_page_order:
        previous = aliased(Page)
        query = query.where(~exists().where(
            previous.document_id == Page.document_id, previous.index == Page.index - 1,
            previous.status.in_((PageStatus.QUEUED, PageStatus.RUNNING))))
    if engines is not None:  # a reviewer's pick on the page, else the document's request
        asked = func.coalesce(func.json_extract(Page.options, "$.engine"), Document.engine)
        query = query.where(or_(asked.is_(None), asked.in_(engines)))
    with db.write() as session:
        if not alone and session.exec(query.where(Page.crash_suspect).limit(1)).first():
            return None
        order = (Page.crash_suspect.desc(), *priority.order()) if alone else priority.order()
        row = session.exec(query.order_by(*order).limit(1)).first()
        if row is None:
            return None
        page, doc = row
        page.status = PageStatus.RUNNING
        page.attempts += 1
        page.lease_owner = owner
        page.lease_expires_at = clock + lease_s
        page.updated_at = now
        session.add(page)
        _event(session, "claimed", doc.id, page.id, worker=owner, attempt=page.attempts)
        options = page.options or {}
        return Claim(page.id, doc.id, page.index, page.attempts, owner, doc.sha256, doc.kind,
                     doc.doc_type, options.get("engine", doc.engine), doc.watch_folder, now,
                     options, page.crash_suspect, doc.text_layer)


def _held_page(session: Session, claim: Claim) -> Page | None:
    page = session.get(Page, claim.page_id)
    if (page is None or page.status != PageStatus.RUNNING
            or page.lease_owner != claim.lease_owner or page.attempts != claim.attempt):
        return None
    return page


def complete_page(db: Database, claim: Claim, done: PageDone,
                  reasons: list[str] | None = None, review: bool = False,
                  fields: FieldSet | None = None) -> bool:
    """Accept a successful attempt: the page is done, or waits for ``review``; ``reasons``
    say why (routing's activation reasons); ``fields``, the document's fields read with
    its last page, are stored with it. False if the lease was lost (the result is
    dropped)."""
    now = time.time()
    with db.write() as session:
        page = _held_page(session, claim)
        if page is None:
            _event(session, "stale_result_dropped", claim.document_id, claim.page_id,
                   worker=claim.lease_owner, attempt=claim.attempt)
            return False
        reading = done.recognition
        row = PageResult(page_id=page.id, attempt=claim.attempt, outcome=Outcome.OK,
                         worker_id=claim.lease_owner, started_at=claim.claimed_at,
                         finished_at=now, reasons=reasons, engine=done.engine,
                         model_id=done.model_id, timings_ms=done.timings_ms,
                         confidence=done.confidence, signals=done.signals, text=reading.text,
                         markdown=reading.markdown,
                         lines=[line.to_dict() for line in reading.lines],
                         finish_reason=reading.finish_reason, tokens=reading.tokens,
                         flags=reading.flags, provenance=reading.provenance,
                         field_answer=reading.field_answer, barcodes=reading.barcodes,
                         selection_marks=reading.selection_marks)
        session.add(row)
        session.flush()
        page.crash_suspect = False  # it was read, and its worker lived
        page.status = PageStatus.REVIEW if review else PageStatus.DONE
        # searchable at once; a page waiting for review is found as not reviewed yet
        index_page(session, page, reading.text)
        page.review_since = now if review else None
        page.result_id = row.id
        page.lease_owner = page.lease_expires_at = None
        page.error_code = page.error_message = None
        page.updated_at = now
        session.add(page)
        if fields is not None:
            session.add(fields)
        _event(session, "routed_to_review" if review else "completed", claim.document_id,
               page.id, attempt=claim.attempt, **({"reasons": reasons} if review else {}))
        return True


def fail_attempt(db: Database, claim: Claim, outcome: Outcome, code: str, message: str, *,
                 retryable: bool, max_attempts: int, backoff_s: float = 0.0,
                 timings_ms: dict | None = None, poison_crashes: int = 0) -> str | None:
    """Record a failed attempt; requeue the page or fail it for good.

    A page whose last ``poison_crashes`` charged attempts all crashed their worker ends
    ``failed: crashes_worker`` at once, instead of crash-looping the worker. A crash
    suspect stays one until an attempt ends otherwise than in a crash.
    Returns the page's new status, or None if the lease was already lost.
    """
    now = time.time()
    with db.write() as session:
        page = _held_page(session, claim)
        if page is None:
            return None
        session.add(PageResult(page_id=page.id, attempt=claim.attempt, outcome=outcome,
                               worker_id=claim.lease_owner, error_code=code,
                               error_message=message, started_at=claim.claimed_at,
                               finished_at=now, timings_ms=timings_ms))
        page.crash_suspect = page.crash_suspect and outcome == Outcome.CRASHED
        if outcome == Outcome.CRASHED and poison_crashes:
            # newest first; a released attempt shares its number with the next one
            # and charged nothing, so it neither breaks nor extends the run
            recent = session.exec(select(PageResult.outcome)
                                  .where(PageResult.page_id == page.id,
                                         PageResult.outcome != Outcome.PREEMPTED)
                                  .order_by(PageResult.id.desc())
                                  .limit(poison_crashes)).all()
            if len(recent) == poison_crashes and all(o == Outcome.CRASHED for o in recent):
                poison = CrashesWorker(f"the page crashed the engine {poison_crashes} times "
                                       f"in a row")
                code, message, retryable = poison.code, poison.message, poison.retryable
        _settle_failed_attempt(session, page, code, message, retryable, max_attempts,
                               time.monotonic() + backoff_s)
        return page.status


def _settle_failed_attempt(session: Session, page: Page, code: str, message: str,
                           retryable: bool, max_attempts: int, not_before: float) -> None:
    page.lease_owner = page.lease_expires_at = None
    page.updated_at = time.time()
    if retryable and page.attempts < max_attempts:
        page.status = PageStatus.QUEUED
        page.not_before = not_before
        _event(session, "requeued", page.document_id, page.id, code=code, attempt=page.attempts)
    else:
        page.status = PageStatus.FAILED
        page.error_code = code
        page.error_message = (message if not retryable else
                              f"{message} (gave up after {page.attempts} attempts)")
        _event(session, "failed", page.document_id, page.id, code=code, attempt=page.attempts)
    session.add(page)


def release_claim(db: Database, claim: Claim, reason: ApplianceError, *,
                  suspect: bool = False) -> bool:
    """The appliance stopped this attempt itself (memory pressure, a shutdown), or
    cannot tell whether it crashed its worker (``suspect``: it was read with others;
    it is then read alone): the page goes back to the queue and the attempt is not
    charged to it. ``reason`` is recorded with the attempt."""
    with db.write() as session:
        page = _held_page(session, claim)
        if page is None:
            return False
        session.add(PageResult(page_id=page.id, attempt=claim.attempt,
                               outcome=Outcome.PREEMPTED, worker_id=claim.lease_owner,
                               started_at=claim.claimed_at,
                               error_code=reason.code, error_message=reason.message))
        page.status = PageStatus.QUEUED
        page.attempts -= 1
        page.crash_suspect = page.crash_suspect or suspect
        page.lease_owner = page.lease_expires_at = None
        page.updated_at = time.time()
        session.add(page)
        _event(session, "preempted", page.document_id, page.id, reason=reason.code)
        return True


def requeue_expired_leases(db: Database, max_attempts: int) -> int:
    """Running pages whose lease ran out (their worker vanished) go back to the queue."""
    now = time.monotonic()
    with db.write() as session:
        pages = session.exec(select(Page).where(
            Page.status == PageStatus.RUNNING, Page.lease_expires_at < now)).all()
        for page in pages:
            expired = LeaseExpired()
            _settle_failed_attempt(session, page, expired.code, expired.message,
                                   expired.retryable, max_attempts=max_attempts, not_before=now)
        return len(pages)


def requeue_after_restart(db: Database) -> int:
    """At start-up every running page belongs to a dead daemon: queue it again.

    The interrupted attempt is not counted against the page: the daemon died, not it.
    A queued page's back-off is cleared too: it is an instant of the last run's
    monotonic clock (or, from a build before that, of the wall clock), which this run's
    does not continue.
    """
    with db.write() as session:
        session.exec(update(Page).where(Page.status == PageStatus.QUEUED, Page.not_before != 0)
                     .values(not_before=0.0))
        pages = session.exec(select(Page).where(Page.status == PageStatus.RUNNING)).all()
        for page in pages:
            page.status = PageStatus.QUEUED
            page.attempts = max(0, page.attempts - 1)
            page.lease_owner = page.lease_expires_at = None
            page.not_before = 0.0
            session.add(page)
            _event(session, "requeued_after_restart", page.document_id, page.id)
        return len(pages)


def reserve_output_stem(db: Database, document_id: str, wanted: str, taken_on_disk) -> str:
    """Choose the document's export name once; later exports reuse it.

    ``taken_on_disk(stem)`` tells whether a file of another origin already uses it.
    """
    with db.write() as session:
        doc = session.get(Document, document_id)
        if doc.output_stem:
            return doc.output_stem
        stem = wanted
        used = session.exec(select(func.count()).select_from(Document).where(
            Document.output_stem == stem)).one()
        if used or taken_on_disk(stem):
            stem = f"{wanted}-{document_id[:8]}"
        doc.output_stem = stem
        session.add(doc)
        return stem


def mark_exported(db: Database, document_id: str, files: list[str],
                  timings_ms: dict[str, float] | None = None) -> None:
    """``timings_ms``: what making and writing the files took (``export.Exporter``)."""
    with db.write() as session:
        doc = session.get(Document, document_id)
        doc.exported_at = time.time()
        session.add(doc)
        _event(session, "exported", document_id, files=files,
               timings_ms=timings_ms and {stage: round(ms, 1) for stage, ms in timings_ms.items()})


def mark_output_failed(db: Database, document_id: str, message: str) -> None:
    """The document's results cannot be written (``OutputFailed``): not tried again until
    its pages are read again."""
    with db.write() as session:
        doc = session.get(Document, document_id)
        doc.output_error = message
        session.add(doc)
        _event(session, "output_failed", document_id, message=message)


def cancel_document(db: Database, document_id: str, actor: str = "api") -> int:
    """Fail the document's queued pages as cancelled; pages being read finish."""
    with db.write() as session:
        pages = session.exec(select(Page).where(Page.document_id == document_id,
                                                Page.status == PageStatus.QUEUED)).all()
        for page in pages:
            page.status = PageStatus.FAILED
            page.error_code, page.error_message = Cancelled.code, Cancelled().message
            page.updated_at = time.time()
            session.add(page)
        _event(session, "cancelled", document_id, actor=actor, pages=len(pages))
        return len(pages)


def require_original(doc: Document, what: str) -> None:
    """Refuse (OriginalPurged) to read ``what`` of ``doc`` again once retention deleted
    its original: nothing would be left to read, and the failure would replace what
    was read before."""
    if doc.purged_at is not None:
        raise OriginalPurged(f"the original of document {doc.id} was deleted by retention "
                             f"(retention.hot_days) after it was read, so {what} cannot be "
                             f"read again; submit the file again")


def retry_failed_pages(db: Database, document_id: str, actor: str) -> int:
    """Queue the document's failed pages again with a fresh count of attempts (cancelled
    ones too); its results are written again once they are read. Returns how many."""
    with db.write() as session:
        pages = session.exec(select(Page).where(Page.document_id == document_id,
                                                Page.status == PageStatus.FAILED)).all()
        doc = session.get(Document, document_id)
        if pages:
            require_original(doc, "its failed pages")
        for page in pages:
            page.status = PageStatus.QUEUED
            page.attempts = 0
            page.not_before = 0.0
            page.error_code = page.error_message = None
            page.updated_at = time.time()
            session.add(page)
        if pages:
            # final again: exported, notified
            doc.exported_at = doc.webhook_done_at = doc.output_error = None
            session.add(doc)
        _event(session, "retried", document_id, actor=actor, pages=len(pages))
        return len(pages)


def send_to_review(db: Database, document_id: str, actor: str) -> int:
    """A person sends the document's finished pages to the review queue (their text is
    no longer accepted until a reviewer settles them, and is found as not reviewed
    yet); its results are written again after. Returns how many pages went."""
    now = time.time()
    with db.write() as session:
        pages = session.exec(select(Page).where(Page.document_id == document_id,
                                                Page.status == PageStatus.DONE,
                                                Page.result_id.is_not(None))).all()
        for page in pages:
            result = session.get(PageResult, page.result_id)
            result.reasons = [*(result.reasons or []), f"sent_to_review: by {actor}"]
            session.add(result)
            page.status = PageStatus.REVIEW
            page.review_since = page.updated_at = now
            session.add(page)
        if pages:
            doc = session.get(Document, document_id)
            doc.exported_at = doc.output_error = None
            session.add(doc)
        _event(session, "sent_to_review", document_id, actor=actor, pages=len(pages))
        return len(pages)


def mark_disposed(db: Database, document_id: str, disposition: str, target: str | None) -> None:
    with db.write() as session:
        doc = session.get(Document, document_id)
        doc.disposed_at = time.time()
        session.add(doc)
        _event(session, "disposed", document_id, disposition=disposition, target=target)


def mark_webhook_done(db: Database, document_id: str, delivered: bool, detail: str) -> None:
    with db.write() as session:
        doc = session.get(Document, document_id)
        if doc is None:  # deleted while its webhook was on the way
            return
        doc.webhook_done_at = time.time()
        session.add(doc)
        _event(session, "webhook_delivered" if delivered else "webhook_failed", document_id,
               detail=detail)


def record_kept_file(db: Database, folder: str, path: str, size_bytes: int, mtime_ns: int,
                     sha256: str | None) -> None:
    with db.write() as session:
        session.merge(WatchLedger(folder=folder, path=path, size_bytes=size_bytes,
                                  mtime_ns=mtime_ns, sha256=sha256))


def record_fields(db: Database, fields: FieldSet, changes: dict | None = None) -> None:
    """Store a new reading of a document's fields (the newest is the document's); a
    person's correction is audited with its ``changes`` (name -> [before, after])."""
    with db.write() as session:
        session.add(fields)
        if fields.source == "corrected":
            _event(session, "fields_corrected", fields.document_id, actor=fields.actor,
                   changes=changes or {}, reasons=fields.reasons)
        else:
            _event(session, "fields_read", fields.document_id, reasons=fields.reasons)


def record_analysis(db: Database, document_id: str, model_id: str, options: dict) -> Analysis:
    """The Document Intelligence request a document was submitted with. NotFound when
    the document was deleted since it was submitted (a moment before)."""
    with db.write() as session:
        if session.get(Document, document_id) is None:
            raise NotFound(f"document {document_id} was deleted before its analysis began")
        analysis = Analysis(document_id=document_id, model_id=model_id, options=options)
        session.add(analysis)
        return analysis
