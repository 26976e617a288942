"""A final document's remaining steps (export, disposition, webhook): each once per
final state however many callers ask, off the dispatcher's thread, and a webhook
thread that lives through any one delivery's error.

A real Appliance in this process (a real SQLite file, the classic engine in its
worker process) and a real webhook receiver on loopback.
"""

from __future__ import annotations

import io
import logging
import threading
import time

import pytest
from sqlmodel import select

from appliance.daemon import Appliance
from appliance.intake import SubmitOptions
from appliance.store import queries
from appliance.store.models import Event
from tests.conftest import make_settings
from tests.fixtures.documents import write_png
from tests.fixtures.waiting import wait_for
from tests.fixtures.webhooks import Receiver



@pytest.fixture
def receiver():
    receiver = Receiver()
    yield receiver
    receiver.gate.set()
    receiver.close()


@pytest.fixture
def appliance(tmp_path):
    appliance = Appliance(make_settings(tmp_path, webhooks={"allow_hosts": ["127.0.0.1"]}))
    appliance.start()
    yield appliance
    appliance.stop()


def submit(appliance, tmp_path, name: str, url: str):
    page = write_png(tmp_path / name, [f"Delivery note {name}", "Three boxes of paper"])
    return appliance.submit(io.BytesIO(page.read_bytes()), name,
                            SubmitOptions(source="api", webhook_url=url))


def exports(appliance, document_id: str) -> int:
    with appliance.db.read() as session:
        return len(session.exec(select(Event).where(Event.kind == "exported",
                                                    Event.document_id == document_id)).all())


def test_each_step_runs_once_however_many_callers_ask(appliance, receiver, tmp_path, caplog):
    """The dispatcher, a reviewer, the watcher and the 30 s sweep all ask for a final
    document's steps; eight threads asking all the time stand in for them. Before, two
    callers could export it twice and POST its webhook twice."""
    doc = submit(appliance, tmp_path, "a.png", receiver.url)
    stop = threading.Event()

    def ask():
        while not stop.is_set():
            appliance.finish(doc.id)
            appliance.finish_pending()
            time.sleep(0.001)

    callers = [threading.Thread(target=ask) for _ in range(8)]
    with caplog.at_level(logging.INFO, logger="appliance.export"):
        for caller in callers:
            caller.start()
        try:
            wait_for(lambda: receiver.calls, what="the webhook")
            time.sleep(1.0)  # a second export or POST would come now
        finally:
            stop.set()
            for caller in callers:
                caller.join()
    assert appliance.finisher.wait_idle(30)
    assert exports(appliance, doc.id) == 1
    assert [call["document"]["id"] for call in receiver.calls] == [doc.id]
    # the steps ran on the finisher's thread, not the dispatcher's (which feeds systemd's
    # watchdog and must never wait for a PDF/A export or a slow network share)
    [exported] = [r for r in caplog.records if r.getMessage().startswith("exported doc=")]
    assert exported.threadName == "finisher"


def test_a_webhook_error_does_not_stop_the_others(appliance, receiver, tmp_path):
    """A document deleted while its webhook waited behind a slow receiver used to kill
    the webhook thread: no webhook went out after it until a restart."""
    receiver.gate.clear()  # the first delivery hangs; the next ones queue behind it
    first = submit(appliance, tmp_path, "first.png", receiver.url)
    wait_for(lambda: receiver.calls, what="the first delivery")
    deleted = submit(appliance, tmp_path, "deleted.png", receiver.url)
    last = submit(appliance, tmp_path, "last.png", receiver.url)
    for doc in (deleted, last):
        wait_for(lambda: (v := queries.get_document(appliance.db, doc.id)) and v.is_final
                 and v.doc.exported_at, what="both exported")
    appliance.delete(deleted.id, "tester")
    receiver.gate.set()
    wait_for(lambda: len(receiver.calls) == 2, timeout_s=30, what="the last document's webhook")
    assert [c["document"]["id"] for c in receiver.calls] == [first.id, last.id]
