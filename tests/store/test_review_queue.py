"""The review queue computed in SQL, on a real SQLite file with thousands of pages
waiting: the same pages in the same order as the rule says, and a claim that reads no
reading's text while it holds the write lock."""

from __future__ import annotations

import random
import re
import time
import uuid

from sqlalchemy import event, insert, select
from sqlalchemy.engine import Engine

from appliance.store import reviews
from appliance.store.models import Document, Lane, Page, PageResult, PageStatus
from appliance.store.reviews import ReviewFilter

REASONS = ("low_confidence: 0.42 < 0.50", "sampled: 0.61 in [0.50, 0.75) at 10 %",
           "missing_field: total", "always_review", "sent_to_review: by api")


def fill(db, pages: int, seed: int = 1) -> float:
    """``pages`` pages in review (and some done and queued ones) over documents of both
    lanes, several types and folders, with reasons, ties in waiting time, and locks:
    other reviewers', expired ones, anna's. Rows go in directly; returns their "now"."""
    rng = random.Random(seed)
    now = time.time()
    docs, rows, results = [], [], []
    while len(rows) < pages:
        doc_id = uuid.uuid4().hex
        docs.append({"id": doc_id, "name": f"{doc_id[:6]}.pdf", "sha256": "0" * 64,
                     "size_bytes": 1, "page_count": 5, "source": "api", "tags": [],
                     "lane": rng.choice((Lane.INTERACTIVE, Lane.BATCH, Lane.BATCH)),
                     "doc_type": rng.choice(("invoice", "receipt", "generic")),
                     "watch_folder": rng.choice((None, "scans", "mail")), "created_at": now})
        for index in range(5):
            page_id = len(rows) + 1
            owner, expires = rng.choice((
                (None, None), (None, None), (None, None), (None, None), (None, None),
                ("ben", now + 600), ("ben", now - 600), ("carl", now + 600),
                ("anna", now + 600), ("anna", now - 600), ("carl", None)))
            status = PageStatus.REVIEW if rng.random() < 0.9 else rng.choice(
                (PageStatus.DONE, PageStatus.QUEUED))
            rows.append({"id": page_id, "document_id": doc_id, "index": index, "status": status,
                         "attempts": 1, "not_before": 0.0, "result_id": page_id,
                         "updated_at": now, "crash_suspect": False, "review_owner": owner,
                         "review_lock_expires_at": expires,
                         # whole minutes: ties, broken by the page id
                         "review_since": (None if rng.random() < 0.01
                                          else now - 60 * rng.randrange(0, 240))})
            results.append({"id": page_id, "page_id": page_id, "attempt": 1, "outcome": "ok",
                            "text": "Total 1l8.50", "lines": [], "finished_at": now,
                            "reasons": rng.choice((None, [], *([r] for r in REASONS),
                                                   list(rng.sample(REASONS, 2))))})
    with db.write() as session:
        session.execute(insert(Document), docs)
        session.execute(insert(Page), rows)
        session.execute(insert(PageResult), results)
    return now


def by_the_rule(db, where: ReviewFilter, now: float) -> list[tuple[int, str | None, float | None]]:
    """The queue as the rule states it, in Python over every row: the pages in review
    that match ``where``, interactive lane first, then by review_since (none first, as
    SQLite sorts NULL), then by id; each as (id, lock owner, lock expiry)."""
    with db.read() as session:
        rows = session.exec(select(Page.id, Page.review_since, Page.review_owner,
                                   Page.review_lock_expires_at, Document.lane,
                                   Document.doc_type, Document.watch_folder, PageResult.reasons)
                            .join(Document, Page.document_id == Document.id)
                            .join(PageResult, Page.result_id == PageResult.id)
                            .where(Page.status == PageStatus.REVIEW)).all()
    queue = []
    for page_id, since, owner, expires, lane, doc_type, folder, reasons in rows:
        if ((where.doc_type and doc_type != where.doc_type)
                or (where.folder and folder != where.folder)
                or (where.reason and not any(r.split(":", 1)[0] == where.reason
                                             for r in reasons or []))
                or (where.min_age_s and now - (since or now) < where.min_age_s)):
            continue
        queue.append(((lane != Lane.INTERACTIVE, since is not None, since or 0.0, page_id),
                      owner, expires))
    return [(key[-1], owner, expires) for key, owner, expires in sorted(queue)]


def next_by_the_rule(queue, reviewer: str, now: float) -> int | None:
    """A page the reviewer holds, else the first whose lock is free or ran out."""
    held = [page for page, owner, expires in queue if owner == reviewer and (expires or 0) > now]
    free = [page for page, owner, expires in queue if owner is None or (expires or 0) <= now]
    return (held or free or [None])[0]


# whole minutes of waiting and locks 10 minutes off: the seconds the test takes to run
# after ``fill``'s "now" move no page across a filter's age or a lock's end
FILTERS = [ReviewFilter(), ReviewFilter(doc_type="receipt"), ReviewFilter(folder="scans"),
           ReviewFilter(reason="low_confidence"), ReviewFilter(reason="always_review"),
           ReviewFilter(min_age_s=3 * 3600 + 30),
           ReviewFilter(doc_type="invoice", folder="mail", reason="sampled", min_age_s=1830)]


def test_thousands_of_waiting_pages_are_claimed_in_the_order_of_the_rule(db):
    now = fill(db, 3000)
    assert len(by_the_rule(db, ReviewFilter(), now)) > 2500
    for where in FILTERS:  # the listing: held or not, in order
        listed = [page.id for page, _doc, _result in reviews.waiting_pages(db, where, limit=50)]
        assert listed == [page for page, _, _ in by_the_rule(db, where, now)][:50], where
    # claims: anna gets the pages she holds first, others the next free one; each claim
    # changes the locks the next one sees
    for turn in range(40):
        reviewer = "anna" if turn % 4 == 0 else f"r{turn}"
        where = FILTERS[turn % len(FILTERS)]
        expected = next_by_the_rule(by_the_rule(db, where, now), reviewer, now)
        assert reviews.claim_review(db, reviewer, 600, where) == expected, (turn, where)


# a column of a reading besides its reasons: what a claim must not read
READING = re.compile(r"\bpageresult(_\d+)?\.(text|markdown|lines|tokens|signals|provenance)\b")


def test_a_claim_reads_no_reading_while_it_holds_the_write_lock(db):
    fill(db, 500)
    statements: list[str] = []

    def record(_conn, _cursor, statement, *_args) -> None:
        statements.append(statement)

    event.listen(Engine, "before_cursor_execute", record)
    try:
        for reviewer, where in (("ben", ReviewFilter()), ("dora", ReviewFilter(
                reason="low_confidence", doc_type="invoice", min_age_s=60))):
            statements.clear()
            assert reviews.claim_review(db, reviewer, 600, where) is not None
            # everything it ran, from the BEGIN IMMEDIATE that took the write lock
            assert statements[0] == "BEGIN IMMEDIATE", statements
            assert any(s.startswith("UPDATE page SET") for s in statements)  # the lock
            read = [s for s in statements if READING.search(s)]
            assert read == [], read
    finally:
        event.remove(Engine, "before_cursor_execute", record)
