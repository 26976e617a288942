"""Retention purges exactly what it should; the disk floor refuses intake cleanly."""

from __future__ import annotations

import io
import os
import time

import pytest
from fastapi.testclient import TestClient
from sqlmodel import select

from appliance.api import create_app
from appliance.daemon import Appliance
from appliance.errors import DiskFull, OriginalPurged
from appliance.export import render
from appliance.intake import Intake, SubmitOptions
from appliance.intake.spool import Spool
from appliance.retention import DAY_S, purge
from appliance.store import Database, contents, queries, transitions
from appliance.store.models import Document, Event, Outcome
from tests.conftest import make_settings
from tests.fixtures.documents import write_png
from tests.fixtures.results import page_done
from tests.fixtures.waiting import wait_for

RESULT = page_done("kept text", timings_ms={})


@pytest.fixture
def store(tmp_path):
    settings = make_settings(tmp_path, retention={"hot_days": 7})
    db = Database(settings.paths.data_dir / "appliance.db")
    spool = Spool(settings.paths.data_dir / "spool")
    return settings, db, spool, Intake(settings, db, spool)


def submitted(intake, db, spool, tmp_path, name, *, age_days=0.0, finish=True, content=None,
              exported=True):
    """A one-page PNG document, read to the end and exported (or still queued), made
    ``age_days`` old."""
    path = write_png(tmp_path / name, [content or name])
    with path.open("rb") as fh:
        doc = intake.submit(fh, name, SubmitOptions(source="api"))
    image = spool.page_image_path(doc.sha256, 0, 200)
    image.parent.mkdir(parents=True, exist_ok=True)
    image.write_bytes(b"page image")
    if finish:
        claim = transitions.claim_next_page(db, "w", lease_s=60)
        transitions.complete_page(db, claim, RESULT)
        if exported:
            transitions.mark_exported(db, doc.id, [])
    with db.write() as session:
        row = session.get(Document, doc.id)
        row.created_at -= age_days * DAY_S
        session.add(row)
    return doc, image


def test_purge_deletes_old_originals_and_page_images_and_keeps_results(store, tmp_path):
    settings, db, spool, intake = store
    old, old_image = submitted(intake, db, spool, tmp_path, "old.png", age_days=8)
    recent, recent_image = submitted(intake, db, spool, tmp_path, "recent.png", age_days=1)
    waiting, waiting_image = submitted(intake, db, spool, tmp_path, "waiting.png", age_days=30,
                                       finish=False)
    cache_entry = settings.paths.data_dir / "cache" / "ab" / "old.json"
    cache_entry.parent.mkdir(parents=True)
    cache_entry.write_text("{}")
    os.utime(cache_entry, (time.time() - 8 * DAY_S,) * 2)

    assert purge(settings, db, spool) == {"contents": 1, "files": 2, "cache_entries": 1,
                                          "idempotency_keys": 0}
    assert not spool.original_path(old.sha256).exists() and not old_image.exists()
    for doc, image in ((recent, recent_image), (waiting, waiting_image)):
        assert spool.original_path(doc.sha256).exists() and image.exists()
    # the results, the hash and the audit trail stay
    assert "kept text" in render(db, old.id)["md"]
    view = queries.get_document(db, old.id)
    assert view.doc.sha256 == old.sha256 and view.doc.purged_at is not None
    with db.read() as session:
        kinds = [e.kind for e in session.exec(select(Event).where(Event.document_id == old.id))]
    assert kinds[0] == "submitted" and kinds[-1] == "purged" and "completed" in kinds
    assert not cache_entry.exists()
    assert purge(settings, db, spool) == {"contents": 0, "files": 0, "cache_entries": 0,
                                          "idempotency_keys": 0}


def test_shared_content_waits_for_its_newest_document(store, tmp_path):
    settings, db, spool, intake = store
    old, _ = submitted(intake, db, spool, tmp_path, "a.png", age_days=9, content="same")
    again, _ = submitted(intake, db, spool, tmp_path, "b.png", age_days=1, content="same")
    assert old.sha256 == again.sha256
    assert purge(settings, db, spool)["contents"] == 0
    assert spool.original_path(old.sha256).exists()


def test_originals_stay_until_their_documents_are_finished_with_them(store, tmp_path):
    """Not exported yet, a page failed (a retry reads the original), or a watched file
    not yet disposed of: retention keeps the original however old the document is."""
    settings, db, spool, intake = store
    unexported, _ = submitted(intake, db, spool, tmp_path, "unexported.png", age_days=30,
                              exported=False)
    failed, _ = submitted(intake, db, spool, tmp_path, "failed.png", age_days=30, finish=False)
    claim = transitions.claim_next_page(db, "w", lease_s=60)
    transitions.fail_attempt(db, claim, Outcome.ERROR, "corrupt_file", "damaged",
                             retryable=False, max_attempts=3)
    transitions.mark_exported(db, failed.id, [])
    watched, _ = submitted(intake, db, spool, tmp_path, "watched.png", age_days=30)
    with db.write() as session:
        row = session.get(Document, watched.id)
        row.source_path, row.watch_folder = str(tmp_path / "inbox" / "watched.png"), "inbox"
        session.add(row)

    assert purge(settings, db, spool)["contents"] == 0
    for doc in (unexported, failed, watched):
        assert spool.original_path(doc.sha256).exists()
    assert transitions.retry_failed_pages(db, failed.id, "tester") == 1  # it can be read again


def test_a_retry_of_a_purged_document_says_retention_took_its_original(store, tmp_path):
    """A store from before originals were kept for failed pages: the remedy is to submit
    the file again, not that the file is damaged."""
    settings, db, spool, intake = store
    doc, _ = submitted(intake, db, spool, tmp_path, "gone.png", age_days=30, finish=False)
    claim = transitions.claim_next_page(db, "w", lease_s=60)
    transitions.fail_attempt(db, claim, Outcome.ERROR, "page_timeout", "too slow",
                             retryable=False, max_attempts=3)
    with db.write() as session:
        row = session.get(Document, doc.id)
        row.purged_at = time.time()
        session.add(row)
    with pytest.raises(OriginalPurged, match="deleted by retention.*submit the file again"):
        transitions.retry_failed_pages(db, doc.id, "tester")
    assert queries.get_document(db, doc.id).status == "failed"  # nothing changed


def test_a_purge_leaves_content_a_submission_is_storing(store, tmp_path):
    """The same bytes submitted again while retention runs: the submission's hold keeps
    the copy it is about to own (it could not be read, or exported, otherwise)."""
    settings, db, spool, intake = store
    old, _ = submitted(intake, db, spool, tmp_path, "same.png", age_days=30)
    hold = contents.hold_content(db, old.sha256)  # a submission between spool and row
    assert purge(settings, db, spool)["contents"] == 0
    assert spool.original_path(old.sha256).exists()
    contents.release_hold(db, hold)
    assert purge(settings, db, spool)["contents"] == 1


def test_the_disk_floor_refuses_intake_and_stores_nothing(tmp_path):
    settings = make_settings(tmp_path, retention={"min_free_disk_mb": 10**9})  # a petabyte
    appliance = Appliance(settings)
    try:
        with pytest.raises(DiskFull, match="disk is nearly full"):
            appliance.intake.submit(io.BytesIO(b"%PDF-1.4"), "a.pdf", SubmitOptions(source="api"))
        client = TestClient(create_app(appliance))
        page = write_png(tmp_path / "p.png", ["Disk floor"])
        with page.open("rb") as fh:
            response = client.post("/api/v1/documents", files={"file": ("p.png", fh)})
        assert response.status_code == 507
        assert response.json()["error"]["code"] == "disk_full"
        assert int(response.headers["Retry-After"]) > 0
        spool = settings.paths.data_dir / "spool"
        assert [p for p in spool.rglob("*") if p.is_file()] == []  # nothing half-written
        assert queries.list_documents(appliance.db) == []
    finally:
        appliance.db.close()


def test_a_rerun_of_a_page_whose_original_was_purged_is_refused_and_changes_nothing(tmp_path):
    """A done document, purged by retention, sent back to review: a reviewer's rerun would
    read nothing and replace the accepted reading with a failure. It is refused, with
    the reason, before anything changes."""
    settings = make_settings(tmp_path, retention={"hot_days": 0})
    appliance = Appliance(settings)
    appliance.start()
    try:
        path = write_png(tmp_path / "memo.png", ["Memo 42", "Kept text"])
        doc = appliance.submit_path(path, SubmitOptions(source="api"))
        wait_for(lambda: queries.get_document(appliance.db, doc.id).doc.exported_at,
                 what="the export")
        assert appliance.purge()["contents"] == 1
        exported = render(appliance.db, doc.id)["md"]
        assert transitions.send_to_review(appliance.db, doc.id, "web-ui") == 1
        page = appliance.review.next_page("anna").item
        with pytest.raises(OriginalPurged, match="page 1 cannot be read again; submit"):
            appliance.review.rerun("anna", page.page_id, higher_resolution=True)
        view = queries.get_document(appliance.db, doc.id)
        assert [p.status for p in view.pages] == ["review"]  # still the reviewer's to settle
        appliance.review.approve("anna", page.page_id)
        wait_for(lambda: queries.get_document(appliance.db, doc.id).doc.exported_at,
                 what="the export again")
        assert render(appliance.db, doc.id)["md"] == exported
    finally:
        appliance.stop()
