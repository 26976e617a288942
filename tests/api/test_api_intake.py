"""API intake options over real HTTP: per-request options, backpressure (429),
cancel, and the completion webhook with retries."""

from __future__ import annotations

import time

import pytest

from tests.daemon import Daemon
from tests.fixtures.documents import write_pdf, write_png, write_report_pdf
from tests.fixtures.webhooks import Receiver

LINES = ["Delivery note 12", "Three boxes of paper"]


@pytest.fixture
def daemon(tmp_path):
    d = Daemon(tmp_path, queue={"max_queued_pages_interactive": 3, "retry_after_s": 7},
               webhooks={"allow_hosts": ["127.0.0.1"]})
    d.start()
    yield d
    d.stop()


def test_per_request_options_and_webhook_with_a_retry(daemon, tmp_path):
    receiver = Receiver(fail_first=1)
    try:
        daemon.wait_ready()
        png = write_png(tmp_path / "note.png", LINES)
        with png.open("rb") as fh:
            response = daemon.client.post("/api/v1/documents", files={"file": ("note.png", fh)},
                                          data={"doc_type": "receipt", "lane": "batch",
                                                "tags": "north, urgent",
                                                "webhook_url": receiver.url})
        doc = response.json()
        assert response.status_code == 201
        assert (doc["doc_type"], doc["lane"], doc["tags"]) == ("receipt", "batch",
                                                                ["north", "urgent"])
        daemon.wait_final([doc["id"]])
        deadline = time.monotonic() + 30
        while len(receiver.calls) < 2:
            assert time.monotonic() < deadline, receiver.calls
            time.sleep(0.1)
        assert receiver.calls[0] == receiver.calls[1]  # the retry sends the same body
        body = receiver.calls[1]
        assert body["event"] == "document.finished"
        assert body["document"]["id"] == doc["id"] and body["document"]["status"] == "done"
    finally:
        receiver.close()


def test_a_webhook_url_is_logged_by_its_host_only(daemon, tmp_path):
    """A webhook URL with a user, a password and a token: the daemon's log (httpx logs
    every request's URL at INFO) names the host, never the rest."""
    receiver = Receiver()
    try:
        daemon.wait_ready()
        secret_url = receiver.url.replace("http://", "http://clerk:hunter2@") + \
            "?token=s3cr3t-t0ken"
        with write_png(tmp_path / "note.png", LINES).open("rb") as fh:
            response = daemon.client.post("/api/v1/documents", files={"file": ("note.png", fh)},
                                          data={"webhook_url": secret_url})
        assert response.status_code == 201
        deadline = time.monotonic() + 60
        while not receiver.calls:
            assert time.monotonic() < deadline, "no webhook"
            time.sleep(0.1)
        time.sleep(0.5)  # the request's log line follows its answer
        log = daemon.log_path.read_text()
        assert "HTTP Request: POST http://127.0.0.1:" in log  # the request is logged...
        for secret in ("clerk", "hunter2", "s3cr3t-t0ken", "/hook"):
            assert secret not in log  # ...by its host only
    finally:
        receiver.close()


def test_a_file_refused_at_intake_is_final_at_once_and_its_webhook_called(daemon, tmp_path):
    """The shared submit() finishes a refused document itself: no caller has to."""
    receiver = Receiver()
    try:
        daemon.wait_ready()
        empty = tmp_path / "empty.pdf"
        empty.write_bytes(b"")
        with empty.open("rb") as fh:
            response = daemon.client.post("/api/v1/documents", files={"file": ("empty.pdf", fh)},
                                          data={"webhook_url": receiver.url})
        doc = response.json()
        assert response.status_code == 201 and doc["status"] == "failed"
        assert doc["error"]["code"] == "empty_file"
        deadline = time.monotonic() + 30
        while not receiver.calls:
            assert time.monotonic() < deadline, "no webhook for a refused document"
            time.sleep(0.1)
        body = receiver.calls[0]
        assert body["document"]["id"] == doc["id"] and body["document"]["status"] == "failed"
    finally:
        receiver.close()


def test_bad_options_are_refused_clearly(daemon, tmp_path):
    daemon.wait_ready()
    png = write_png(tmp_path / "x.png", LINES)
    for form, code in (({"doc_type": "poem"}, "invalid_request"),
                       ({"engine": "llama"}, "engine_unavailable"),
                       ({"webhook_url": "file:///etc/passwd"}, "webhook_not_allowed"),
                       ({"webhook_url": "https://[::1/x"}, "webhook_not_allowed"),
                       # only the hosts in webhooks.allow_hosts (here 127.0.0.1)
                       ({"webhook_url": "http://169.254.169.254/latest/meta-data"},
                        "webhook_not_allowed"),
                       ({"webhook_url": "http://localhost:8480/api/v1/documents"},
                        "webhook_not_allowed"),
                       ({"webhook_url": "http://127.0.0.2/hook"}, "webhook_not_allowed")):
        with png.open("rb") as fh:
            response = daemon.client.post("/api/v1/documents", files={"file": ("x.png", fh)},
                                          data=form)
        assert response.json()["error"]["code"] == code, (form, response.text)
        assert response.status_code == {"engine_unavailable": 409,
                                        "webhook_not_allowed": 403}.get(code, 400)
    assert daemon.client.get("/api/v1/documents").json()["documents"] == []  # none stored


def test_full_queue_answers_429_and_stores_nothing_then_cancel(daemon, tmp_path):
    daemon.wait_ready()
    pages = [LINES * 20] * 4  # dense pages: the queue stays full while we probe it
    first = daemon.upload(write_pdf(tmp_path / "big.pdf", pages))
    spool = daemon.data_dir / "spool" / "originals"
    stored = sorted(p.name for p in spool.rglob("*") if p.is_file())
    with write_png(tmp_path / "late.png", LINES).open("rb") as fh:
        busy = daemon.client.post("/api/v1/documents", files={"file": ("late.png", fh)})
    assert busy.status_code == 429 and busy.headers["Retry-After"] == "7"
    assert busy.json()["error"]["code"] == "queue_full"
    assert sorted(p.name for p in spool.rglob("*") if p.is_file()) == stored

    cancelled = daemon.client.post(f"/api/v1/documents/{first['id']}/cancel").json()
    final = daemon.wait_final([first["id"]])[0]
    codes = [p["error"]["code"] if p["error"] else None for p in final["pages"]]
    assert "cancelled" in codes and final["status"] in ("partial", "failed")
    assert cancelled["id"] == first["id"]
    missing = daemon.client.post("/api/v1/documents/nope/cancel")
    assert missing.status_code == 404


def test_the_engine_filter_finds_pages_read_from_the_pdfs_own_text(daemon, tmp_path):
    """A born-digital page records the PDF text reader as its engine; the list filters
    by it as by any engine (its name was refused as no engine: 400)."""
    daemon.wait_ready()
    report = daemon.upload(write_report_pdf(tmp_path / "report.pdf", pages=1))
    scan = daemon.upload(write_png(tmp_path / "scan.png", LINES))
    daemon.wait_final([report["id"], scan["id"]])
    for engine, expected in (("pdf-text", report), ("classic", scan)):
        response = daemon.client.get("/api/v1/documents", params={"engine": engine})
        assert response.status_code == 200, response.text
        assert [d["id"] for d in response.json()["documents"]] == [expected["id"]], engine
