"""kill -9 of the daemon while pages are being read, twice, while clients upload and
retry with an Idempotency-Key, as a client that lost its answer should. Afterwards
every document is there exactly once, read to the end, and exported exactly once.

The figures (documents lost, doubled, exported twice; how many retries the daemon
answered as replays) are printed and written to $APPLIANCE_CRASH_REPORT when set.
"""

from __future__ import annotations

import io
import json
import os
import threading
import time
from collections import Counter

import httpx
import psutil
from sqlmodel import select

from appliance.raster.synthetic import render_text_page
from appliance.store import Database
from appliance.store.models import Document, Event
from tests.daemon import Daemon

CLIENTS = 3
DOCUMENTS_PER_CLIENT = 6
KILLS = 2
RETRY_PAUSE_S = 0.3
LOST_ANSWER_S = 0.005


def note_number(key: str) -> int:
    """The delivery note's number a client's key stands for (``c1-d4``: 104)."""
    client, document = key.removeprefix("c").split("-d")
    return int(client) * 100 + int(document)


def page(number: int) -> bytes:
    buffer = io.BytesIO()
    render_text_page([f"Delivery note {number:04d}", "Three boxes of paper",
                      f"Customer {number * 37 % 1000:03d}"] * 4,
                     width=1240, height=1754, font_size=36).save(buffer, format="PNG")
    return buffer.getvalue()


class RetryingClient(threading.Thread):
    """Uploads its documents one by one; any failure to get an answer (connection
    refused or cut, a 5xx, a timeout) is retried with the same key until the daemon
    answers. Every other document's first try gives up after LOST_ANSWER_S, before the
    daemon can have answered: an answer lost after the daemon committed."""

    def __init__(self, daemon: Daemon, number: int, stop: threading.Event):
        super().__init__(name=f"client-{number}", daemon=True)
        self.daemon_url = str(daemon.client.base_url)
        self.uploads = {key: page(note_number(key))
                        for key in (f"c{number}-d{i}" for i in range(DOCUMENTS_PER_CLIENT))}
        self.answers: dict[str, str] = {}  # key -> the document id the daemon answered
        self.replays = 0
        self.retries = 0
        self.stop_event = stop

    def run(self) -> None:
        with httpx.Client(base_url=self.daemon_url, timeout=20) as http:
            for number, (key, body) in enumerate(self.uploads.items()):
                impatient = number % 2 == 0
                while not self.stop_event.is_set():
                    timeout = httpx.Timeout(20, read=LOST_ANSWER_S) if impatient else 20
                    impatient = False
                    try:
                        response = http.post("/api/v1/documents",
                                             files={"file": (f"{key}.png", body)},
                                             headers={"Idempotency-Key": key}, timeout=timeout)
                    except httpx.TransportError:  # refused, cut, or timed out
                        response = None
                    if response is not None and response.status_code in (200, 201):
                        self.answers[key] = response.json()["id"]
                        self.replays += response.headers.get("Idempotent-Replayed") == "true"
                        break
                    self.retries += 1
                    time.sleep(RETRY_PAUSE_S)


def wait_for_a_page_being_read(daemon: Daemon, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            docs = daemon.client.get("/api/v1/documents", params={"limit": 500}).json()
            running = [d["id"] for d in docs["documents"] if d["status"] == "processing"]
            if running:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.05)
    raise AssertionError(f"no page was being read within {timeout_s} s:\n{daemon.log()}")


def test_kill_9_while_reading_loses_doubles_and_re_exports_nothing(tmp_path):
    stop = threading.Event()
    daemon = Daemon(tmp_path, output={"upload_formats": ["md"]}).start()  # a file per document
    clients = [RetryingClient(daemon, n, stop) for n in range(CLIENTS)]
    try:
        daemon.wait_ready()
        for client in clients:
            client.start()
        for _ in range(KILLS):
            wait_for_a_page_being_read(daemon)
            workers = psutil.Process(daemon.process.pid).children()
            daemon.kill9()
            psutil.wait_procs(workers, timeout=10)
            time.sleep(1)  # the clients meet a dead port and keep retrying
            daemon.start()
            daemon.wait_ready()
        for client in clients:
            client.join(timeout=300)
            assert not client.is_alive(), "a client never got its answer"
        keys = {key: doc for client in clients for key, doc in client.answers.items()}
        final = daemon.wait_final(sorted(set(keys.values())), timeout_s=600)
    finally:
        stop.set()
        daemon.stop()

    db = Database(daemon.data_dir / "appliance.db")
    with db.read() as session:
        documents = session.exec(select(Document)).all()
        exports = Counter(session.exec(select(Event.document_id)
                                       .where(Event.kind == "exported")).all())
    db.close()
    submitted = CLIENTS * DOCUMENTS_PER_CLIENT
    per_name = Counter(d.name for d in documents)
    exported_files = sorted(p.name for p in daemon.output_dir.glob("*.md"))
    # a file holds its own document's text: its delivery note's number (c<client>-d<i>)
    misfiled = [name for name in exported_files
                if f"{note_number(name.removesuffix('.md')):04d}"
                not in (daemon.output_dir / name).read_text()]
    report = {
        "documents_submitted": submitted,
        "kills": KILLS,
        "client_retries": sum(c.retries for c in clients),
        "answered_as_replay": sum(c.replays for c in clients),
        "lost": submitted - len(keys),
        "doubled": sum(n - 1 for n in per_name.values()),
        "exported_twice": sum(n - 1 for n in exports.values() if n > 1),
        "never_exported": sum(1 for d in documents if exports[d.id] == 0),
        "misfiled": len(misfiled),
        "export_files": len(exported_files),
        "statuses": dict(Counter(d["status"] for d in final)),
    }
    print(json.dumps(report, indent=2))
    if os.environ.get("APPLIANCE_CRASH_REPORT"):
        with open(os.environ["APPLIANCE_CRASH_REPORT"], "w") as out:
            json.dump(report, out, indent=2)
    assert report["client_retries"] >= CLIENTS * DOCUMENTS_PER_CLIENT // 2  # answers were lost
    assert report["lost"] == 0 and report["doubled"] == 0 and report["exported_twice"] == 0
    assert report["never_exported"] == 0 and misfiled == []
    assert len(documents) == submitted and report["statuses"] == {"done": submitted}
    assert exported_files == sorted(f"{key}.md" for key in keys)  # no "-<id8>" copies
