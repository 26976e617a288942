"""Watched files on the paths nobody tried: a refused file is never deleted, a file
replaced after it was read keeps its reading, a deleted document's file is not read
again, and a document's finishing steps run once each, off the dispatcher's thread.

A real Appliance in this process (real watchdog observers, a real SQLite file, the
classic engine in its worker process), so that a reviewer's decision and a restart
can be made between two steps.
"""

from __future__ import annotations

import time
from contextlib import contextmanager

from sqlmodel import select

from appliance.daemon import Appliance
from appliance.store import queries
from appliance.store.models import Event
from tests.conftest import make_settings
from tests.fixtures.documents import write_png
from tests.fixtures.waiting import wait_for

FIRST = ["Packing list 77", "Two pallets of paper"]
SECOND = ["Delivery note 4410", "Nine boxes of toner"]



@contextmanager
def running(settings):
    appliance = Appliance(settings)
    appliance.start()
    try:
        yield appliance
    finally:
        appliance.stop()


def watched(tmp_path, **folder):
    inbox = tmp_path / "inbox"
    inbox.mkdir(exist_ok=True)
    return inbox, {"path": str(inbox), "mode": "events", "stability_s": 0.3,
                   "failed_hold_s": 1, **folder}


def events(appliance, kind: str, document_id: str | None = None) -> list[Event]:
    with appliance.db.read() as session:
        query = select(Event).where(Event.kind == kind)
        if document_id:
            query = query.where(Event.document_id == document_id)
        return session.exec(query).all()


def documents(appliance) -> list:
    return queries.list_documents(appliance.db)


def test_a_file_over_the_size_limit_is_never_deleted(tmp_path):
    """A `delete` folder deleted a refused file: the user's only copy, as nothing of it
    was stored. Now it stays where it is with its reason beside it, and is not offered
    again unless it changes, after a restart too; with a failed_dir it goes there."""
    inbox, folder = watched(tmp_path, disposition="delete")
    data = write_png(tmp_path / "big.png", FIRST * 8).read_bytes()
    assert len(data) > 2000
    settings = make_settings(tmp_path, limits={"max_bytes": 2000}, watch=[folder])
    with running(settings) as appliance:
        (inbox / "big.png").write_bytes(data)
        report = inbox / "big.png.error.txt"
        wait_for(report.exists, what="the refusal's report")
        assert report.read_text().startswith("too_large: ")
        time.sleep(1.5)  # a second offer would show now
        assert (inbox / "big.png").read_bytes() == data
        assert documents(appliance) == []
    report.unlink()
    with running(settings) as appliance:  # the start-up scan finds it: not again
        time.sleep(1.5)
        assert (inbox / "big.png").read_bytes() == data and not report.exists()
        assert documents(appliance) == []

    failed = tmp_path / "failed"
    settings = make_settings(tmp_path, limits={"max_bytes": 2000},
                             watch=[{**folder, "failed_dir": str(failed)}])
    with running(settings):
        (inbox / "other.png").write_bytes(data + b"\0")
        wait_for((failed / "other.png.error.txt").exists, what="the failed folder's report")
        assert (failed / "other.png").read_bytes() == data + b"\0"
        assert not (inbox / "other.png").exists()


def approve_next(appliance, reviewer: str = "rita") -> str:
    page = wait_for(lambda: appliance.review.next_page(reviewer), what="a page in review")
    appliance.review.approve(reviewer, page.item.page_id)
    return page.item.document_id


def test_a_file_replaced_after_it_was_read_keeps_its_reading(tmp_path):
    """The file is saved again under the same name while its first reading waits for a
    reviewer. The reviewed reading used to be forgotten; now it is kept and exported,
    the file left alone for it, and the new content read as a document of its own."""
    inbox, folder = watched(tmp_path, disposition="move", processed_dir=str(tmp_path / "done"),
                            failed_dir=str(tmp_path / "failed"))
    settings = make_settings(tmp_path, review={"enabled": True, "always_review": ["generic"]},
                             watch=[folder])
    with running(settings) as appliance:
        write_png(inbox / "scan.png", FIRST)
        first = wait_for(lambda: [d for d in documents(appliance) if d.status == "review"],
                         what="the first reading in review")[0].doc
        time.sleep(0.05)  # another mtime, whatever the file system's resolution
        new_content = write_png(inbox / "scan.png", SECOND).read_bytes()
        assert approve_next(appliance) == first.id
        second = wait_for(lambda: [d for d in documents(appliance) if d.doc.id != first.id],
                          what="the new content's document")[0].doc
        assert approve_next(appliance) == second.id
        wait_for((tmp_path / "done" / "scan.png").exists, what="the disposition")
        assert appliance.finisher.wait_idle(30)
        kept = queries.get_document(appliance.db, first.id)
        assert kept.status == "done" and kept.doc.exported_at is not None
        assert "Packing list" in (settings.paths.output_dir / "scan.md").read_text()
        assert [e.detail["disposition"] for e in events(appliance, "disposed", first.id)] \
            == ["replaced"]
        assert events(appliance, "forgotten") == []
        assert (tmp_path / "done" / "scan.png").read_bytes() == new_content


def test_a_deleted_documents_file_is_not_read_again(tmp_path):
    """A person deletes a watched document before its file was disposed of (here while
    it waits for review): its readings go, cached ones too, and the file left in the
    folder is not read again at the next start, unless it changes."""
    inbox, folder = watched(tmp_path, disposition="move", processed_dir=str(tmp_path / "done"),
                            failed_dir=str(tmp_path / "failed"))
    settings = make_settings(tmp_path, review={"enabled": True, "always_review": ["generic"]},
                             watch=[folder])
    cache = settings.paths.data_dir / "cache"
    with running(settings) as appliance:
        write_png(inbox / "scan.png", FIRST)
        [doc] = wait_for(lambda: [d for d in documents(appliance) if d.status == "review"],
                         what="the reading in review")
        assert list(cache.rglob("*.json"))  # the reading is cached
        appliance.delete(doc.doc.id, "rita")
        assert documents(appliance) == [] and not list(cache.rglob("*.json"))
    with running(settings) as appliance:
        time.sleep(1.5)  # the start-up scan has offered it
        assert documents(appliance) == [] and (inbox / "scan.png").exists()
        write_png(inbox / "scan.png", SECOND)  # a new file under the name: read
        wait_for(lambda: documents(appliance), what="the changed file's document")
