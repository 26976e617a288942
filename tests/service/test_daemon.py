"""The daemon end to end over real HTTP on loopback, with a real RapidOCR worker,
and its crash safety: kill -9 of a worker mid-page and of the daemon mid-batch."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pikepdf
import psutil
import pypdfium2 as pdfium
import pytest

from appliance.config import OUTPUT_FORMATS
from appliance.measure.bench import IDLE_SETTLE_S
from appliance.measure.driver import idle_core_share
from appliance.oneshot import Interrupted, _interruptible
from appliance.store import Database
from appliance.store.models import Event
from sqlmodel import select
from tests.daemon import Daemon
from tests.engines.test_classic_engine import abstract_over_columns
from tests.fixtures.documents import text_similarity, write_pdf, write_png

PAGE_A = ["Invoice number 4711", "Delivery of office chairs", "Total amount 118.50 EUR"]
PAGE_B = ["Quarterly report", "Revenue grew by twelve percent", "Signed by the board"]
PAGE_C = ["Receipt from the bakery", "Two loaves of bread", "Paid in cash"]
IDLE_MEASURED_S = 10
IDLE_CORE_SHARE = 0.03  # measured 0.011 (daemon and worker together)


@pytest.fixture
def daemon(tmp_path):
    d = Daemon(tmp_path)
    d.start()
    yield d
    d.stop()


def test_api_roundtrip_pdf_and_png(tmp_path):
    """Sent over the API and asked for in every format on disk too: the files written
    are what the API serves."""
    with Daemon(tmp_path, output={"upload_formats": list(OUTPUT_FORMATS)}).running() as daemon:
        pdf = write_pdf(tmp_path / "report.pdf", [PAGE_A, PAGE_B])
        png = write_png(tmp_path / "receipt.png", PAGE_C)
        assert daemon.client.get("/healthz").json() == {"status": "ok"}
        docs = [daemon.upload(pdf), daemon.upload(png)]
        assert [d["page_count"] for d in docs] == [2, 1]
        final = daemon.wait_final([d["id"] for d in docs])
        assert [d["status"] for d in final] == ["done", "done"]

        md = daemon.client.get(f"/api/v1/documents/{docs[0]['id']}/result", params={"format": "md"})
        assert md.status_code == 200 and md.headers["content-type"].startswith("text/markdown")
        assert text_similarity(md.text, " ".join(PAGE_A + PAGE_B)) > 0.7
        txt = daemon.client.get(f"/api/v1/documents/{docs[1]['id']}/result?format=txt").text
        assert text_similarity(txt, " ".join(PAGE_C)) > 0.7
        body = daemon.client.get(f"/api/v1/documents/{docs[0]['id']}/result?format=json").json()
        assert [p["number"] for p in body["pages"]] == [1, 2]
        assert body["pages"][0]["lines"][0]["box"]
        assert body["pages"][0]["provenance"]["engine"] == "classic"

        daemon.wait_exported([d["id"] for d in docs])
        exported = sorted(p.name for p in daemon.output_dir.iterdir())
        assert exported == sorted(f"{stem}{suffix}" for stem in ("receipt", "report")
                                  for suffix in (".md", ".json", ".txt", ".hocr", ".alto.xml",
                                                 ".pdf"))
        assert (daemon.output_dir / "report.md").read_text() == md.text
        # the words with their positions, for archives and other OCR tools
        hocr = daemon.client.get(f"/api/v1/documents/{docs[0]['id']}/result?format=hocr")
        assert hocr.headers["content-type"].startswith("application/xhtml+xml")
        assert hocr.text.count('class="ocr_page"') == 2 and ">4711</span>" in hocr.text
        alto = daemon.client.get(f"/api/v1/documents/{docs[0]['id']}/result?format=alto")
        assert alto.headers["content-type"].startswith("application/xml")
        assert 'CONTENT="4711"' in alto.text
        assert alto.text == (daemon.output_dir / "report.alto.xml").read_text()
        # the original pages with the accepted words as an invisible text layer, PDF/A-2b
        pdf = daemon.client.get(f"/api/v1/documents/{docs[0]['id']}/result?format=pdf")
        assert pdf.headers["content-type"] == "application/pdf"
        assert pdf.headers["content-disposition"].startswith("attachment")
        searchable = pdfium.PdfDocument(pdf.content)
        try:
            assert len(searchable) == 2
            assert "4711" in searchable[0].get_textpage().get_text_range()
        finally:
            searchable.close()
        with pikepdf.open(io.BytesIO(pdf.content)) as archived:
            assert archived.open_metadata().pdfa_status == "2B"
        with pikepdf.open(daemon.output_dir / "report.pdf") as exported_pdf:
            assert len(exported_pdf.pages) == 2


def test_a_document_sent_over_the_api_is_written_to_disk_only_when_asked(daemon, tmp_path):
    """By default its sender fetches what it wants: nothing is made for output_dir, and
    every format, the searchable PDF included, is made when asked for."""
    daemon.wait_ready()
    doc = daemon.upload(write_png(tmp_path / "receipt.png", PAGE_C))
    daemon.wait_exported([doc["id"]])
    assert list(daemon.output_dir.iterdir()) == []
    pdf = daemon.client.get(f"/api/v1/documents/{doc['id']}/result?format=pdf")
    assert pdf.status_code == 200 and pdf.content.startswith(b"%PDF")
    txt = daemon.client.get(f"/api/v1/documents/{doc['id']}/result?format=txt").text
    assert text_similarity(txt, " ".join(PAGE_C)) > 0.7


def test_an_idle_daemon_leaves_the_cores_to_others(daemon):
    """Nothing to read, no one connected: the daemon and its workers wait without
    polling (Gradio's queue looked for work every millisecond: 7 % of a core). As
    `appliance bench` measures it."""
    daemon.wait_ready()
    time.sleep(IDLE_SETTLE_S)
    assert idle_core_share(daemon.process.pid, IDLE_MEASURED_S) < IDLE_CORE_SHARE


def test_api_errors_are_json(daemon, tmp_path):
    daemon.wait_ready()
    missing = daemon.client.get("/api/v1/documents/nope")
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "not_found"
    bad = daemon.client.get("/api/v1/documents/nope/result?format=docx")
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_request"
    (tmp_path / "notes.pdf").write_bytes(b"hello, I am not a PDF")
    doc = daemon.upload(tmp_path / "notes.pdf")
    assert doc["status"] == "failed" and doc["error"]["code"] == "unsupported_type"
    result = daemon.client.get(f"/api/v1/documents/{doc['id']}/result")
    assert result.status_code == 409 and result.json()["error"]["code"] == "no_result"
    assert "(unsupported_type)" in result.json()["error"]["message"]


def test_worker_killed_mid_page_is_restarted_and_the_page_retried(daemon, tmp_path):
    pdf = write_pdf(tmp_path / "long.pdf", [PAGE_A * 12, PAGE_B * 12, PAGE_C * 12], dpi=200)
    worker_pid = daemon.wait_ready()["workers"][0]["pid"]
    doc = daemon.upload(pdf)
    deadline = time.monotonic() + 60
    while not any(p["status"] == "running" for p in daemon.document(doc["id"])["pages"]):
        assert time.monotonic() < deadline, "no page started"
        time.sleep(0.05)
    os.kill(worker_pid, signal.SIGKILL)

    final = daemon.wait_final([doc["id"]])[0]
    assert final["status"] == "done"
    assert max(p["attempts"] for p in final["pages"]) == 2
    status = daemon.client.get("/readyz").json()
    assert status["workers"][0]["restarts"] == 1
    assert status["workers"][0]["pid"] != worker_pid


def test_daemon_killed_mid_batch_completes_every_document_once(tmp_path):
    paths = [write_pdf(tmp_path / f"batch-{i}.pdf", [PAGE_A, PAGE_B, PAGE_C]) for i in range(4)]
    first = Daemon(tmp_path, output={"upload_formats": ["md"]}).start()
    try:
        first.wait_ready()
        ids = [first.upload(p)["id"] for p in paths]
        deadline = time.monotonic() + 120
        while sum(p["status"] == "done" for i in ids for p in first.document(i)["pages"]) < 2:
            assert time.monotonic() < deadline, first.log()
            time.sleep(0.1)
        workers = psutil.Process(first.process.pid).children()
        first.kill9()
        psutil.wait_procs(workers, timeout=10)  # orphaned workers exit on their own
        assert not any(w.is_running() and w.status() != psutil.STATUS_ZOMBIE for w in workers)
    finally:
        first.stop()

    second = Daemon(tmp_path, output={"upload_formats": ["md"]}).start()
    try:
        second.wait_ready()
        final = second.wait_final(ids)
        assert [d["status"] for d in final] == ["done"] * 4
    finally:
        second.stop()
    assert sorted(p.name for p in second.output_dir.glob("*.md")) == \
        [f"batch-{i}.md" for i in range(4)]
    db = Database(second.data_dir / "appliance.db")
    with db.read() as session:
        exports = session.exec(select(Event.document_id).where(Event.kind == "exported")).all()
    db.close()
    assert sorted(exports) == sorted(ids)


def run_ocr(tmp_path: Path, *files: Path, fmt: str = "json", output: Path | None = None,
            **sections) -> subprocess.Popen:
    """`appliance ocr` with its temporary directories under tmp_path/tmp."""
    (tmp_path / "tmp").mkdir(exist_ok=True)
    config = Daemon(tmp_path, **sections).config_path
    to_file = ["-o", str(output)] if output else []
    return subprocess.Popen([sys.executable, "-m", "appliance.cli", "ocr", *map(str, files),
                             "--format", fmt, *to_file, "--config", str(config)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "TMPDIR": str(tmp_path / "tmp")})


def test_cli_ocr_one_shot(tmp_path):
    png = write_png(tmp_path / "memo.png", PAGE_B)
    run = run_ocr(tmp_path, png)
    stdout, stderr = run.communicate(timeout=300)
    assert run.returncode == 0, stderr
    assert "1/1 pages" in stderr
    body = json.loads(stdout)
    assert text_similarity(body["pages"][0]["text"], " ".join(PAGE_B)) > 0.7
    assert not list((tmp_path / "tmp").glob("appliance-*"))  # one-shot: nothing left behind


def test_cli_ocr_ends_with_the_reason_when_its_engine_cannot_start(tmp_path, aborting_model,
                                                                   monkeypatch):
    """A model that kills its worker at the warm-up: the daemon would start it again and
    again; a one-shot run ends at once, saying how, and leaves nothing behind."""
    # ggml prints a crash's backtrace through gdb where gdb is installed; a gdb left
    # attaching to the dead worker would hold the output pipes open
    monkeypatch.setenv("GGML_NO_BACKTRACE", "1")
    png = write_png(tmp_path / "memo.png", PAGE_B)
    model, mmproj = aborting_model
    run = run_ocr(tmp_path, png, engine={"name": "llama", "model": str(model),
                                         "mmproj": str(mmproj), "threads": 1})
    _out, stderr = run.communicate(timeout=120)
    assert run.returncode == 2, stderr
    assert ("error (engine_unavailable): the engine could not start (engine_unavailable): "
            "the engine process died while starting (killed by SIGABRT)") in stderr
    assert not list((tmp_path / "tmp").glob("appliance-*"))


def test_cli_ocr_writes_the_searchable_pdf_to_a_file_never_to_the_terminal(tmp_path):
    png = write_png(tmp_path / "memo.png", PAGE_B)
    refused = run_ocr(tmp_path, png, fmt="pdf")
    _out, stderr = refused.communicate(timeout=120)
    assert refused.returncode != 0 and "-o OUT.pdf" in stderr
    run = run_ocr(tmp_path, png, fmt="pdf", output=tmp_path / "memo.pdf")
    stdout, stderr = run.communicate(timeout=300)
    assert run.returncode == 0 and stdout == "", stderr
    pdf = pdfium.PdfDocument(tmp_path / "memo.pdf")
    try:
        text = pdf[0].get_textpage().get_text_range()
    finally:
        pdf.close()
    assert text_similarity(text, " ".join(PAGE_B)) > 0.7


def test_cli_ocr_never_waits_for_a_reviewer(tmp_path):
    """Every page would go to review here; nobody is there, so the result is printed and
    the pages that would have waited are named, with a code of their own."""
    png = write_png(tmp_path / "receipt.png", PAGE_B)
    run = run_ocr(tmp_path, png, fmt="txt",
                  review={"enabled": True, "review_below": 1.0, "accept_from": 1.0})
    stdout, stderr = run.communicate(timeout=300)
    assert run.returncode == 3, stderr
    assert text_similarity(stdout, " ".join(PAGE_B)) > 0.7
    assert "receipt.png: page 1 would go to review: low_confidence:" in stderr
    assert not list((tmp_path / "tmp").glob("appliance-*"))


def test_cli_ocr_names_a_page_whose_columns_are_read_across_for_review(tmp_path):
    """A page whose order is in doubt goes to review, however sure its characters are."""
    png = tmp_path / "paper.png"
    abstract_over_columns().save(png)
    run = run_ocr(tmp_path, png, fmt="txt")
    _stdout, stderr = run.communicate(timeout=300)
    assert run.returncode == 3, stderr
    assert "paper.png: page 1 would go to review:" in stderr and "layout_doubt: block 1" in stderr


def test_a_page_whose_columns_are_read_across_waits_for_a_person_whatever_its_band(tmp_path):
    """Doubt is a route, not a discount (issue 50): with bands that accept every page
    and sample none, a page whose order is in doubt still waits in review."""
    from appliance.daemon import Appliance
    from appliance.intake import SubmitOptions
    from appliance.store import queries
    from tests.conftest import make_settings
    from tests.fixtures.waiting import wait_for

    png = tmp_path / "paper.png"
    abstract_over_columns().save(png)
    appliance = Appliance(make_settings(tmp_path, review={
        "enabled": True, "review_below": 0.0, "accept_from": 0.0, "sample_rate": 0.0}))
    appliance.start()
    try:
        doc = appliance.submit_path(png, SubmitOptions(source="api"))
        view = wait_for(lambda: (v := queries.get_document(appliance.db, doc.id)).status
                        in ("review", "done") and v, what="the page read")
        assert view.status == "review"
        [(_page, result)] = queries.accepted_results(appliance.db, doc.id)
        assert [r.split(":")[0] for r in result.reasons] == ["confident", "layout_doubt"]
    finally:
        appliance.stop()


def test_a_signal_is_acted_on_between_steps_not_inside_them():
    # Raised inside the handler, the interruption surfaced in whatever library call was
    # running; SQLAlchemy wrapped it in its own error and `appliance ocr` exited 1 with
    # a traceback (seen once in three runs of the test below).
    with _interruptible() as stop:
        signal.raise_signal(signal.SIGTERM)  # must not raise here
        signal.raise_signal(signal.SIGINT)  # ignored: the clean-up is not cut short
        with pytest.raises(Interrupted) as caught:
            stop.check()
    assert caught.value.signum == signal.SIGTERM


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_cli_ocr_cleans_up_when_interrupted(tmp_path, sig):
    pdf = write_pdf(tmp_path / "long.pdf", [PAGE_A * 8] * 6, dpi=200)
    run = run_ocr(tmp_path, pdf)
    deadline = time.monotonic() + 120
    while not list((tmp_path / "tmp").glob("appliance-ocr-*/data/spool/originals/*/*")):
        assert time.monotonic() < deadline and run.poll() is None, run.stderr.read()
        time.sleep(0.1)
    run.send_signal(sig)
    _stdout, stderr = run.communicate(timeout=60)
    assert run.returncode == 128 + sig, stderr
    assert "interrupted" in stderr
    assert not list((tmp_path / "tmp").glob("appliance-*"))


def test_page_over_deadline_kills_the_worker_and_fails_after_max_attempts(tmp_path):
    dense = [" ".join(PAGE_A + PAGE_B)] * 40  # about 2-4 s of OCR on one thread
    pdf = write_pdf(tmp_path / "dense.pdf", [dense], dpi=150)
    daemon = Daemon(tmp_path, workers={"page_timeout_s": 1, "max_attempts": 2}).start()
    try:
        daemon.wait_ready()
        doc = daemon.upload(pdf)
        final = daemon.wait_final([doc["id"]])[0]
        page = final["pages"][0]
        assert final["status"] == "failed"
        assert (page["attempts"], page["error"]["code"]) == (2, "page_timeout")
        assert "workers.page_timeout_s" in page["error"]["message"]
        deadline = time.monotonic() + 30  # the second restart follows the page's failure
        while daemon.client.get("/readyz").json()["workers"][0]["restarts"] < 2:
            assert time.monotonic() < deadline
            time.sleep(0.1)
    finally:
        daemon.stop()


def test_poison_page_is_set_aside_while_the_other_pages_complete(tmp_path):
    """A page that kills its worker every time (here: killed by us while it runs)."""
    pdf = write_pdf(tmp_path / "mixed.pdf", [PAGE_A, PAGE_B * 14, PAGE_C], dpi=200)
    daemon = Daemon(tmp_path, workers={"poison_crashes": 2, "max_attempts": 5}).start()
    try:
        daemon.wait_ready()
        doc = daemon.upload(pdf)
        killed: set[int] = set()
        deadline = time.monotonic() + 180
        while len(killed) < 2:
            assert time.monotonic() < deadline, daemon.log()
            page = daemon.document(doc["id"])["pages"][1]
            pid = daemon.client.get("/readyz").json()["workers"][0]["pid"]
            if page["status"] == "running" and pid not in killed:
                os.kill(pid, signal.SIGKILL)
                killed.add(pid)
            time.sleep(0.05)
        final = daemon.wait_final([doc["id"]])[0]
        assert [p["status"] for p in final["pages"]] == ["done", "failed", "done"]
        assert final["pages"][1]["error"]["code"] == "crashes_worker"
        assert final["pages"][1]["attempts"] == 2
    finally:
        daemon.stop()


def test_leak_guard_recycles_a_worker_whose_memory_grew(tmp_path):
    """The default guard is on (max_worker_growth_mb); here its limit is tiny, so a
    page that grows the worker by a few MiB is enough."""
    pdf = write_pdf(tmp_path / "dense.pdf", [PAGE_A * 10, PAGE_B * 10], dpi=200)
    daemon = Daemon(tmp_path, workers={"max_worker_growth_mb": 1}).start()
    try:
        daemon.wait_ready()
        doc = daemon.upload(pdf)
        final = daemon.wait_final([doc["id"]])[0]
        assert final["status"] == "done" and all(p["attempts"] == 1 for p in final["pages"])
        worker = daemon.client.get("/readyz").json()["workers"][0]
        assert worker["recycled"] >= 1 and worker["restarts"] == 0
        assert "recycling worker slot=0 private_mb=" in daemon.log_path.read_text()
    finally:
        daemon.stop()


def test_leak_guard_recycles_a_worker_between_pages_without_losing_one(tmp_path):
    pdf = write_pdf(tmp_path / "four.pdf", [PAGE_A, PAGE_B, PAGE_C, PAGE_A])
    daemon = Daemon(tmp_path, workers={"recycle_after_pages": 2}).start()
    try:
        daemon.wait_ready()
        doc = daemon.upload(pdf)
        final = daemon.wait_final([doc["id"]])[0]
        assert final["status"] == "done" and all(p["attempts"] == 1 for p in final["pages"])
        worker = daemon.client.get("/readyz").json()["workers"][0]
        assert worker["recycled"] == 2 and worker["restarts"] == 0
    finally:
        daemon.stop()
