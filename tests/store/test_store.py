"""The page state machine on a real SQLite file."""

from __future__ import annotations

import threading
import time

import pytest
from sqlalchemy import text

from appliance.errors import CrashSuspect, SchemaMismatch
from appliance.store import Database, contents, queries, transitions
from appliance.store.models import (
    SCHEMA_VERSION, Document, DocStatus, Lane, Outcome, PageStatus, SchemaMeta,
)
from appliance.store.search import DocumentQuery, find_documents
from tests.fixtures.results import page_done

RESULT = page_done("hello")


def new_doc(db, pages=2, lane=Lane.INTERACTIVE, name="a.pdf", born_digital=()) -> Document:
    doc = Document(name=name, sha256="0" * 64, kind="pdf", size_bytes=10, source="api", lane=lane)
    return transitions.submit_document(db, doc, pages, born_digital=born_digital)


def status_of(db, doc_id):
    return queries.get_document(db, doc_id).status


def test_wal_mode_and_schema_version(db):
    with db.read() as session:
        mode = session.connection().exec_driver_sql("PRAGMA journal_mode").scalar()
    assert mode == "wal"
    assert db.schema_version() == SCHEMA_VERSION == 15


def test_a_version_1_database_is_migrated_in_place(tmp_path):
    old = Database(tmp_path / "v1.db")
    read = new_doc(old, pages=1, name="read.pdf")
    transitions.complete_page(old, transitions.claim_next_page(old, "w1", lease_s=60),
                              page_done("read before the upgrade 植株高度"))
    doc = new_doc(old, pages=1)
    with old.write() as session:  # take it back to version 1's tables
        for trigger in ("page_counted", "page_uncounted", "page_recounted"):
            session.exec(text(f"DROP TRIGGER {trigger}"))
        session.exec(text("DROP INDEX ix_page_review"))  # before its column
        for table, column in (("page", "review_since"), ("page", "review_owner"),
                              ("page", "review_lock_expires_at"), ("page", "options"),
                              ("pageresult", "confidence"), ("document", "purged_at"),
                              ("pageresult", "signals"), ("pageresult", "reasons"),
                              ("document", "source_mtime_ns"), ("page", "crash_suspect"),
                              ("pageresult", "field_answer"), ("document", "output_error"),
                              ("document", "text_layer"), ("pageresult", "barcodes"),
                              ("page", "born_digital"), ("pageresult", "selection_marks"),
                              *(("document", f"pages_{s}") for s in PageStatus)):
            session.exec(text(f"ALTER TABLE {table} DROP COLUMN {column}"))
        session.exec(text("DROP TABLE idempotencykey"))
        session.exec(text("DROP TABLE fieldset"))
        session.exec(text("DROP TABLE pagetext"))
        session.exec(text("DROP TABLE pagegrams"))
        session.exec(text("DROP TABLE contenthold"))
        session.exec(text("DROP TABLE analysis"))
        session.get(SchemaMeta, "schema_version").value = "1"
    old.close()
    migrated = Database(tmp_path / "v1.db")
    assert migrated.schema_version() == 15
    with migrated.read() as session:
        indexes = {row[1] for row in session.exec(text("PRAGMA index_list(page)"))}
    assert "ix_page_review" in indexes
    claim = transitions.claim_next_page(migrated, "w1", lease_s=60)
    transitions.complete_page(migrated, claim, page_done("x"))
    assert status_of(migrated, doc.id) == DocStatus.DONE
    # what was read before is found, and counted, as what is read after
    found = find_documents(migrated, DocumentQuery(q="upgrade", status=("done",)))
    assert [view.doc.id for view in found.documents] == [read.id]
    assert find_documents(migrated, DocumentQuery(status=("done",))).total == 2
    assert [view.doc.id for view in find_documents(migrated, DocumentQuery(q="株高")).documents
            ] == [read.id]


def test_a_version_9_store_finds_cjk_text_and_pages_waiting_for_review(tmp_path):
    old = Database(tmp_path / "v9.db")
    done = new_doc(old, pages=1, name="canna.pdf")
    transitions.complete_page(old, transitions.claim_next_page(old, "w1", lease_s=60),
                              page_done("美人蕉的植株高度"))
    waiting = new_doc(old, pages=1, name="doubtful.pdf")
    transitions.complete_page(old, transitions.claim_next_page(old, "w1", lease_s=60),
                              page_done("Totel 1O.00"), review=True)
    with old.write() as session:  # as version 9 indexed them: accepted text, no pairs
        session.exec(text("DELETE FROM pagegrams"))
        session.exec(text("DELETE FROM pagetext WHERE rowid IN (SELECT id FROM page "
                          "WHERE status = 'review')"))
        session.get(SchemaMeta, "schema_version").value = "9"
    old.close()
    migrated = Database(tmp_path / "v9.db")
    assert migrated.schema_version() == 15
    found = find_documents(migrated, DocumentQuery(q="植株高度"))
    assert [view.doc.id for view in found.documents] == [done.id]
    found = find_documents(migrated, DocumentQuery(q="Totel"))
    assert [view.doc.id for view in found.documents] == [waiting.id]
    assert not found.hits[waiting.id].reviewed


def test_a_version_14_store_finds_a_chinese_word_its_line_break_cut(tmp_path):
    old = Database(tmp_path / "v14.db")
    wrapped = new_doc(old, pages=1, name="diary.png")
    transitions.complete_page(old, transitions.claim_next_page(old, "w1", lease_s=60),
                              page_done("几周以来我第一次独\n处，又拾起了我真正的生活。"))
    with old.write() as session:  # as version 14 paired the lines: apart
        session.exec(text("UPDATE pagegrams SET grams = '几周 周以 以来 来我 我第 第一 一次 次独 "
                          "独 处'"))
        session.get(SchemaMeta, "schema_version").value = "14"
    old.close()
    assert Database(tmp_path / "v14.db").schema_version() == 15
    found = find_documents(Database(tmp_path / "v14.db"), DocumentQuery(q="第一次独处"))
    assert [view.doc.id for view in found.documents] == [wrapped.id]


def test_schema_version_mismatch_refuses_to_open(tmp_path):
    first = Database(tmp_path / "s.db")
    with first.write() as session:
        session.get(SchemaMeta, "schema_version").value = "999"
    first.close()
    with pytest.raises(SchemaMismatch, match="schema version 999"):
        Database(tmp_path / "s.db")


def test_submit_claim_complete_derives_document_status(db):
    doc = new_doc(db, pages=2)
    assert status_of(db, doc.id) == DocStatus.QUEUED
    first = transitions.claim_next_page(db, "w1", lease_s=60)
    assert (first.document_id, first.page_index, first.attempt) == (doc.id, 0, 1)
    assert status_of(db, doc.id) == DocStatus.PROCESSING
    assert transitions.complete_page(db, first, RESULT)
    second = transitions.claim_next_page(db, "w1", lease_s=60)
    assert second.page_index == 1
    assert transitions.claim_next_page(db, "w2", lease_s=60) is None
    assert transitions.complete_page(db, second, RESULT)
    assert status_of(db, doc.id) == DocStatus.DONE
    assert [r.text for _, r in queries.accepted_results(db, doc.id)] == ["hello", "hello"]


def test_retryable_failure_requeues_until_attempts_run_out(db):
    doc = new_doc(db, pages=1)
    for attempt in (1, 2):
        claim = transitions.claim_next_page(db, "w1", lease_s=60)
        assert claim.attempt == attempt
        status = transitions.fail_attempt(db, claim, Outcome.CRASHED, "worker_crashed", "died",
                                          retryable=True, max_attempts=3)
        assert status == PageStatus.QUEUED
    claim = transitions.claim_next_page(db, "w1", lease_s=60)
    status = transitions.fail_attempt(db, claim, Outcome.CRASHED, "worker_crashed", "died",
                                      retryable=True, max_attempts=3)
    assert status == PageStatus.FAILED
    view = queries.get_document(db, doc.id)
    assert view.status == DocStatus.FAILED
    assert view.pages[0].error_code == "worker_crashed"
    assert "after 3 attempts" in view.pages[0].error_message
    assert [r.outcome for r in queries.page_attempts(db, view.pages[0].id)] == ["crashed"] * 3


def test_bad_input_fails_at_once(db):
    doc = new_doc(db, pages=2)
    claim = transitions.claim_next_page(db, "w1", lease_s=60)
    transitions.fail_attempt(db, claim, Outcome.ERROR, "corrupt_file", "damaged",
                             retryable=False, max_attempts=3)
    claim = transitions.claim_next_page(db, "w1", lease_s=60)
    transitions.complete_page(db, claim, RESULT)
    assert status_of(db, doc.id) == DocStatus.PARTIAL


def test_backoff_delays_the_next_claim(db):
    new_doc(db, pages=1)
    claim = transitions.claim_next_page(db, "w1", lease_s=60)
    transitions.fail_attempt(db, claim, Outcome.ERROR, "engine_error", "x", retryable=True,
                             max_attempts=3, backoff_s=0.5)
    assert transitions.claim_next_page(db, "w1", lease_s=60) is None
    time.sleep(0.6)
    assert transitions.claim_next_page(db, "w1", lease_s=60).attempt == 2


def test_expired_lease_is_requeued_and_late_result_dropped(db):
    doc = new_doc(db, pages=1)
    stale = transitions.claim_next_page(db, "w1", lease_s=0.05)
    time.sleep(0.1)
    assert transitions.requeue_expired_leases(db, max_attempts=3) == 1
    fresh = transitions.claim_next_page(db, "w2", lease_s=60)
    assert fresh.attempt == 2
    assert not transitions.complete_page(db, stale, RESULT)  # the old holder lost its lease
    assert transitions.complete_page(db, fresh, RESULT)
    view = queries.get_document(db, doc.id)
    assert view.status == DocStatus.DONE
    assert len([r for r in queries.page_attempts(db, view.pages[0].id) if r.outcome == "ok"]) == 1


class WallClock:
    """``time.time`` (the hardware clock's stand-in) stepped by ``step``, as NTP or an
    operator setting the date steps it; ``time.monotonic`` runs on untouched."""

    def __init__(self, monkeypatch):
        self.offset = 0.0
        real = time.time
        monkeypatch.setattr(time, "time", lambda: real() + self.offset)

    def step(self, seconds: float) -> None:
        self.offset += seconds


def test_a_wall_clock_step_forward_expires_no_lease_and_releases_no_back_off(db, monkeypatch):
    wall = WallClock(monkeypatch)
    new_doc(db, pages=2)
    running = transitions.claim_next_page(db, "w1", lease_s=60)
    backed_off = transitions.claim_next_page(db, "w1", lease_s=60)
    transitions.fail_attempt(db, backed_off, Outcome.ERROR, "engine_error", "x", retryable=True,
                             max_attempts=3, backoff_s=30)
    wall.step(3600)
    assert transitions.requeue_expired_leases(db, max_attempts=3) == 0
    assert transitions.claim_next_page(db, "w2", lease_s=60) is None  # still backing off
    assert transitions.complete_page(db, running, RESULT)  # its lease held


def test_a_wall_clock_step_back_holds_no_back_off_or_dead_lease(db, monkeypatch):
    wall = WallClock(monkeypatch)
    new_doc(db, pages=2)
    vanished = transitions.claim_next_page(db, "w1", lease_s=0.2)  # its worker is gone
    backed_off = transitions.claim_next_page(db, "w1", lease_s=60)
    transitions.fail_attempt(db, backed_off, Outcome.ERROR, "engine_error", "x", retryable=True,
                             max_attempts=3, backoff_s=0.2)
    wall.step(-3600)
    time.sleep(0.3)
    assert transitions.requeue_expired_leases(db, max_attempts=3) == 1
    again = [transitions.claim_next_page(db, "w2", lease_s=60) for _ in range(2)]
    assert {claim.page_id for claim in again} == {vanished.page_id, backed_off.page_id}


def test_start_up_clears_the_back_off_of_the_last_run(db):
    docs = [new_doc(db, pages=1, name=f"{i}.pdf") for i in range(3)]
    for _ in docs:
        claim = transitions.claim_next_page(db, "w1", lease_s=60)
        transitions.fail_attempt(db, claim, Outcome.ERROR, "engine_error", "x", retryable=True,
                                 max_attempts=3, backoff_s=30)
    # the last run's back-offs: the first on this boot's clock, the others left by a boot
    # that had been up a day longer and by a build that used the wall clock
    with db.write() as session:
        for doc, not_before in zip(docs[1:], (time.monotonic() + 86400, time.time() + 30)):
            session.exec(text("UPDATE page SET not_before = :t WHERE document_id = :d"),
                         params={"t": not_before, "d": doc.id})
    transitions.requeue_after_restart(db)
    again = [transitions.claim_next_page(db, "w1", lease_s=60) for _ in docs]
    assert {claim.document_id for claim in again} == {doc.id for doc in docs}


def test_requeue_after_restart_does_not_charge_an_attempt(db):
    doc = new_doc(db, pages=1)
    transitions.claim_next_page(db, "w1", lease_s=600)
    assert transitions.requeue_after_restart(db) == 1
    assert status_of(db, doc.id) == DocStatus.QUEUED
    assert transitions.claim_next_page(db, "w1", lease_s=60).attempt == 1


def test_interactive_lane_is_claimed_before_older_batch(db):
    batch = new_doc(db, pages=3, lane=Lane.BATCH)
    interactive = new_doc(db, pages=1, lane=Lane.INTERACTIVE)
    assert transitions.claim_next_page(db, "w", 60).document_id == interactive.id
    assert transitions.claim_next_page(db, "w", 60).document_id == batch.id


def test_interactive_upload_overtakes_a_200_page_batch_backlog(db):
    backlog = new_doc(db, pages=200, lane=Lane.BATCH)
    for _ in range(3):
        transitions.claim_next_page(db, "w", 60)
    receipt = new_doc(db, pages=1, lane=Lane.INTERACTIVE, name="receipt.png")
    assert transitions.claim_next_page(db, "w", 60).document_id == receipt.id
    assert transitions.claim_next_page(db, "w", 60).document_id == backlog.id


def test_small_documents_go_first_within_a_lane_and_waiting_wins_in_the_end(db):
    big = new_doc(db, pages=300, lane=Lane.BATCH, name="big.pdf")
    small = new_doc(db, pages=1, lane=Lane.BATCH, name="small.pdf")
    assert transitions.claim_next_page(db, "w", 60).document_id == small.id
    # aging: with the delays bounded, a batch document that waited long enough
    # goes before a newer interactive one
    priority = transitions.Priority(batch_delay_s=600, per_page_delay_s=2, max_size_delay_s=1800)
    with db.write() as session:
        session.get(Document, big.id).created_at -= 3000
    newer = new_doc(db, pages=1, lane=Lane.INTERACTIVE, name="new.png")
    assert transitions.claim_next_page(db, "w", 60, priority).document_id == big.id
    with db.write() as session:
        session.get(Document, big.id).created_at += 3000
    assert transitions.claim_next_page(db, "w", 60, priority).document_id == newer.id


def test_born_digital_pages_go_ahead_of_scans_that_came_a_little_earlier(db):
    """A born-digital PDF's pages, read from their own text in a tenth of a second, do
    not wait behind a folder of scans that arrived before them; a scan page of the
    same PDF keeps its place; scans that waited past the advance go first again."""
    scans = [new_doc(db, pages=1, name=f"scan{i}.png") for i in range(3)]
    report = new_doc(db, pages=3, name="report.pdf", born_digital={0, 2})
    claimed = [transitions.claim_next_page(db, "w", 60) for _ in range(6)]
    assert [(c.document_id, c.page_index) for c in claimed] == [
        (report.id, 0), (report.id, 2), *((scan.id, 0) for scan in scans), (report.id, 1)]
    older = new_doc(db, pages=1, name="older.png")
    newer = new_doc(db, pages=1, name="newer.pdf", born_digital={0})
    with db.write() as session:  # the scan has waited longer than the advance
        session.get(Document, older.id).created_at -= 400
    assert transitions.claim_next_page(db, "w", 60).document_id == older.id
    assert transitions.claim_next_page(db, "w", 60).document_id == newer.id


def test_concurrent_claimers_never_share_a_page(tmp_path):
    path = tmp_path / "c.db"
    setup = Database(path)
    new_doc(setup, pages=60)
    claimed: list[int] = []
    lock = threading.Lock()

    def claimer(name):
        db = Database(path)  # its own engines, as another process would have
        while (claim := transitions.claim_next_page(db, name, 60)) is not None:
            with lock:
                claimed.append(claim.page_id)
        db.close()

    threads = [threading.Thread(target=claimer, args=(f"w{i}",)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(claimed) == 60 and len(set(claimed)) == 60


def test_rejected_document_is_failed_with_its_reason(db):
    doc = Document(name="x.pdf", sha256="1" * 64, size_bytes=0, source="api")
    transitions.record_rejected_document(db, doc, "empty_file", "the file is empty")
    view = queries.get_document(db, doc.id)
    assert view.status == DocStatus.FAILED and view.is_final
    assert queries.final_unexported_documents(db) == []


def test_output_stem_is_reserved_once(db):
    a, b = new_doc(db, name="scan.pdf"), new_doc(db, name="scan.pdf")
    assert transitions.reserve_output_stem(db, a.id, "scan", lambda s: False) == "scan"
    assert transitions.reserve_output_stem(db, a.id, "other", lambda s: True) == "scan"
    assert transitions.reserve_output_stem(db, b.id, "scan", lambda s: False) == f"scan-{b.id[:8]}"


def test_a_page_that_keeps_crashing_its_worker_is_set_aside(db):
    doc = new_doc(db, pages=2)
    for _ in range(2):
        claim = transitions.claim_next_page(db, "w1", lease_s=60)
        assert claim.page_index == 0
        status = transitions.fail_attempt(db, claim, Outcome.CRASHED, "worker_crashed", "died",
                                          retryable=True, max_attempts=5, poison_crashes=2)
    assert status == PageStatus.FAILED
    page = queries.get_document(db, doc.id).pages[0]
    assert page.error_code == "crashes_worker" and page.attempts == 2
    other = transitions.claim_next_page(db, "w1", lease_s=60)
    assert other.page_index == 1 and transitions.complete_page(db, other, RESULT)
    assert queries.get_document(db, doc.id).status == DocStatus.PARTIAL


def test_every_attempt_records_when_it_started_and_ended(db):
    doc = new_doc(db, pages=1)
    before = time.time()
    claim = transitions.claim_next_page(db, "w1", lease_s=60)
    transitions.fail_attempt(db, claim, Outcome.ERROR, "engine_error", "x", retryable=True,
                             max_attempts=3)
    claim = transitions.claim_next_page(db, "w1", lease_s=60)
    transitions.complete_page(db, claim, RESULT)
    attempts = queries.page_attempts(db, queries.get_document(db, doc.id).pages[0].id)
    assert [a.outcome for a in attempts] == ["error", "ok"]
    for attempt in attempts:
        assert before <= attempt.started_at <= attempt.finished_at <= time.time()


def test_crash_suspects_are_read_alone_and_first_and_cleared_once_read(db):
    older, newer = new_doc(db, pages=1), new_doc(db, pages=1)
    held = [transitions.claim_next_page(db, "w1", lease_s=60) for _ in range(2)]
    assert [c.document_id for c in held] == [older.id, newer.id]
    # the worker died with both in flight: neither is charged, both are suspects
    for claim in held:
        assert transitions.release_claim(db, claim, CrashSuspect("died"), suspect=True)
    pages = [queries.get_document(db, d.id).pages[0] for d in (older, newer)]
    assert [(p.status, p.attempts, p.crash_suspect) for p in pages] == [("queued", 0, True)] * 2
    third = new_doc(db, pages=1)  # plain work queued meanwhile
    # a worker with a page in flight gets nothing while a suspect waits ...
    assert transitions.claim_next_page(db, "w2", lease_s=60, alone=False) is None
    # ... one with nothing in flight gets the suspects first, flagged
    alone = transitions.claim_next_page(db, "w2", lease_s=60)
    assert (alone.document_id, alone.attempt, alone.suspect) == (older.id, 1, True)
    assert transitions.complete_page(db, alone, RESULT)
    assert not queries.get_document(db, older.id).pages[0].crash_suspect
    crashed = transitions.claim_next_page(db, "w2", lease_s=60)
    assert (crashed.document_id, crashed.suspect) == (newer.id, True)
    # a suspect that crashes alone is charged, and stays a suspect
    assert transitions.fail_attempt(db, crashed, Outcome.CRASHED, "worker_crashed", "died",
                                    retryable=True, max_attempts=3,
                                    poison_crashes=2) == PageStatus.QUEUED
    page = queries.get_document(db, newer.id).pages[0]
    assert (page.attempts, page.crash_suspect) == (1, True)
    again = transitions.claim_next_page(db, "w2", lease_s=60, alone=True)
    assert (again.document_id, again.attempt) == (newer.id, 2)
    # its second crash in a row sets it aside: the released attempt did not break the run
    assert transitions.fail_attempt(db, again, Outcome.CRASHED, "worker_crashed", "died",
                                    retryable=True, max_attempts=5,
                                    poison_crashes=2) == PageStatus.FAILED
    assert queries.get_document(db, newer.id).pages[0].error_code == "crashes_worker"
    # no suspect left: a worker with pages in flight is given plain work again
    plain = transitions.claim_next_page(db, "w2", lease_s=60, alone=False)
    assert (plain.document_id, plain.suspect) == (third.id, False)



def test_a_crash_suspect_stays_one_across_a_daemon_restart(db):
    doc = new_doc(db, pages=1)
    transitions.release_claim(db, transitions.claim_next_page(db, "w1", lease_s=60),
                              CrashSuspect("died"), suspect=True)
    assert transitions.claim_next_page(db, "w1", lease_s=60).suspect  # being read alone ...
    assert transitions.requeue_after_restart(db) == 1  # ... when the daemon died
    page = queries.get_document(db, doc.id).pages[0]
    assert (page.status, page.attempts, page.crash_suspect) == ("queued", 0, True)
    assert transitions.claim_next_page(db, "w1", lease_s=60, alone=False) is None


def test_an_analysis_of_a_document_deleted_since_its_submission_is_not_found(db):
    """A Document Intelligence analysis is recorded just after its submission; a delete
    in between leaves no document to record it for: NotFound (404), not a foreign-key
    error (500)."""
    from appliance.errors import NotFound

    doc = new_doc(db, pages=1)
    contents.delete_document(db, doc.id, "admin", lambda removed: None)
    with pytest.raises(NotFound, match="deleted before its analysis began"):
        transitions.record_analysis(db, doc.id, "prebuilt-read", {})
