"""Prometheus metrics at /metrics: on a real daemon, the counters and histograms agree
with what clients sent; in process, every family is checked against the store rows
it is derived from, and the exposition follows Prometheus' naming conventions."""

from __future__ import annotations

import re
import time
from collections import Counter
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from appliance.api import create_app
from appliance.daemon import Appliance
from appliance.engines.messages import PageDone
from appliance.errors import QueueFull
from tests.fixtures.gpu import FakeDevice
from appliance.intake import SubmitOptions
from appliance.metrics import (
    CONFIDENCE_BUCKETS, Buckets, PageTotals, metrics_for,
)
from appliance.store import queries, reviews, transitions
from appliance.store.models import Lane, Outcome
from tests.conftest import make_settings
from tests.daemon import Daemon
from tests.fixtures.documents import write_pdf, write_png
from tests.fixtures.results import page_done
from tests.openai_servers import ScriptedServer, endpoint

GIB = 2**30
LABEL_NAME = re.compile(r"^[a-z_][a-z0-9_]*$")
UNIT_SUFFIXES = ("_seconds", "_bytes")
OWN_PREFIXES = ("ocr_", "process_", "python_")


def families(text: str) -> dict:
    return {f.name: f for f in text_string_to_metric_families(text)}


def value(fams: dict, family: str, sample: str | None = None, **labels) -> float:
    """The value of the one sample of ``family`` named ``sample`` with these labels; 0
    when there is none (a counter not yet incremented has no sample)."""
    name = sample or family
    found = [s.value for s in fams[family].samples
             if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())]
    assert len(found) <= 1, (family, labels, found)
    return found[0] if found else 0.0


def histogram(fams: dict, family: str) -> tuple[list[tuple[float, float]], float, float]:
    """(cumulative buckets as (le, count), count, sum)."""
    samples = fams[family].samples
    buckets = [(float(s.labels["le"]), s.value) for s in samples if s.name == f"{family}_bucket"]
    count = next(s.value for s in samples if s.name == f"{family}_count")
    total = next(s.value for s in samples if s.name == f"{family}_sum")
    return buckets, count, total


def histogram_series(fam) -> dict:
    """A histogram family's series, each as a family of its own, by their labels."""
    series: dict = {}
    for s in fam.samples:
        key = tuple(sorted((k, v) for k, v in s.labels.items() if k != "le"))
        series.setdefault(key, type(fam)(fam.name, fam.documentation, fam.type))
        series[key].samples.append(s)
    return series


def assert_conventions(text: str) -> None:
    for fam in text_string_to_metric_families(text):
        assert fam.name.startswith(OWN_PREFIXES), fam.name
        assert fam.documentation, f"{fam.name} has no HELP"
        for s in fam.samples:
            assert all(LABEL_NAME.match(k) for k in s.labels), (s.name, s.labels)
            if fam.type == "counter":
                assert s.name.endswith(("_total", "_created")), s.name
        if fam.name.startswith("ocr_"):
            assert not fam.name.endswith("_total") or fam.type == "counter", fam.name
            assert not re.search(r"_(ms|milliseconds|mb|mib|gib|kb)(_|$)", fam.name), fam.name
            if fam.type == "histogram" and fam.name != "ocr_page_confidence":
                assert fam.name.endswith(UNIT_SUFFIXES), fam.name
            if fam.type == "histogram":
                for series in histogram_series(fam).values():
                    buckets, count, _ = histogram({fam.name: series}, fam.name)
                    assert [c for _, c in buckets] == sorted(c for _, c in buckets)
                    assert buckets[-1] == (float("inf"), count)


# --- a real daemon -----------------------------------------------------------------


@pytest.fixture
def daemon(tmp_path):
    # every page goes to review (confidence < 1.0); three pages fill the interactive lane
    d = Daemon(tmp_path, queue={"max_queued_pages_interactive": 3},
               review={"enabled": True, "review_below": 1.0, "accept_from": 1.0,
                       "second_opinion": False})
    d.start()
    yield d
    d.stop()


def wait_http(daemon: Daemon, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if daemon.client.get("/healthz").status_code == 200:
                return
        except Exception:
            pass
        assert daemon.process.poll() is None, daemon.log()
        time.sleep(0.2)
    raise AssertionError(f"no HTTP after {timeout_s} s:\n{daemon.log()}")


def test_metrics_agree_with_what_clients_sent(daemon, tmp_path):
    wait_http(daemon)
    three = write_pdf(tmp_path / "three.pdf", [["Page one of three"], ["Page two of three"],
                                               ["Page three of three"]])
    note = write_png(tmp_path / "note.png", ["Delivery note 12", "Three boxes of paper"])
    sent = [(three, "interactive")] + [(note, "interactive")] * 3 + [(note, "batch")]
    answers: Counter = Counter()  # (lane, status code)
    accepted: list[dict] = []
    for path, lane in sent:  # while the three pages wait, the interactive lane is full
        with path.open("rb") as fh:
            response = daemon.client.post("/api/v1/documents", data={"lane": lane},
                                          files={"file": (path.name, fh)})
        answers[(lane, response.status_code)] += 1
        if response.status_code == 201:
            accepted.append(response.json())
    assert set(answers) <= {("interactive", 201), ("interactive", 429), ("batch", 201)}
    assert answers[("interactive", 429)] >= 1, answers  # the point of the exercise

    ids = [d["id"] for d in accepted]
    deadline = time.monotonic() + 300
    while True:  # every page read: each document waits for review or is done
        docs = [daemon.document(i) for i in ids]
        if all(d["status"] in ("review", "done", "partial", "failed") for d in docs):
            break
        assert time.monotonic() < deadline, [d["status"] for d in docs]
        time.sleep(0.3)
    pages = sum(d["page_count"] for d in docs)
    in_review = sum(p["status"] == "review" for d in docs for p in d["pages"])
    assert pages == 3 + (len(accepted) - 1)

    response = daemon.client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    text = response.text
    openmetrics = daemon.client.get("/metrics", headers={
        "Accept": "application/openmetrics-text; version=1.0.0"})
    assert openmetrics.headers["content-type"].startswith("application/openmetrics-text")
    assert openmetrics.text.rstrip().endswith("# EOF")
    assert_conventions(text)
    fams = families(text)

    assert value(fams, "ocr_documents_accepted", "ocr_documents_accepted_total",
                 source="api") == len(accepted)
    for lane in ("interactive", "batch"):
        assert value(fams, "ocr_documents_refused", "ocr_documents_refused_total", source="api",
                     lane=lane, code="queue_full") == answers[(lane, 429)]
    assert value(fams, "ocr_pages", "ocr_pages_total", engine="classic", outcome="ok") == pages
    assert sum(s.value for s in fams["ocr_pages"].samples if s.name == "ocr_pages_total") == pages
    for family in ("ocr_page_queue_wait_seconds", "ocr_page_service_seconds",
                   "ocr_page_confidence"):
        _buckets, count, total = histogram(fams, family)
        assert count == pages, family
        assert total > 0, family
    for lane in ("interactive", "batch"):
        assert value(fams, "ocr_queue_depth", lane=lane) == 0
        assert value(fams, "ocr_pages_running", lane=lane) == 0
    assert in_review == pages  # thresholds of 1.0 send every page to review
    assert value(fams, "ocr_review_backlog_pages") == in_review
    assert value(fams, "ocr_review_backlog_reason_pages", reason="low_confidence") == in_review
    assert value(fams, "ocr_ready") == 1
    assert value(fams, "ocr_workers", state="idle") == 1
    assert value(fams, "ocr_worker_restarts", "ocr_worker_restarts_total", slot="0") == 0
    assert value(fams, "ocr_vram_total_bytes") > 0
    assert sum(value(fams, "ocr_vram_watermark_state", state=s)
               for s in ("ok", "paused", "critical")) == 1
    assert value(fams, "process_resident_memory_bytes") > 0

    # a second scrape counts nothing twice
    again = families(daemon.client.get("/metrics").text)
    assert value(again, "ocr_pages", "ocr_pages_total", engine="classic", outcome="ok") == pages
    assert histogram(again, "ocr_page_service_seconds")[1] == pages


def wait_metrics(daemon: Daemon, check, timeout_s: float = 60) -> dict:
    """The first scrape whose families pass ``check``."""
    deadline = time.monotonic() + timeout_s
    while True:
        fams = families(daemon.client.get("/metrics").text)
        if check(fams):
            return fams
        assert time.monotonic() < deadline, daemon.log()
        time.sleep(0.1)


def test_remote_endpoints_have_their_own_series(tmp_path):
    # "good" holds a page for a while and reads one at a time; "bad" warms up, then
    # fails every request: the page it is given comes back uncharged and it goes out
    with ScriptedServer("ok", delay_s=1.0) as good, ScriptedServer("ok") as bad:
        daemon = Daemon(tmp_path, engine={"name": "openai", "threads": 1, "remote": [
            endpoint(good.url, "scripted", "good", max_concurrency=1),
            endpoint(bad.url, "scripted", "bad", max_concurrency=1)]})
        with daemon.running():
            bad.mode = "error500"
            notes = [write_png(tmp_path / f"note{n}.png", [f"Delivery note {n}"])
                     for n in (1, 2)]  # two pages: the second is not in the result cache
            first = daemon.upload(notes[0])["id"]  # the first worker with a free slot: good
            fams = wait_metrics(daemon, lambda f: value(
                f, "ocr_endpoint_pages_in_flight", endpoint="good") == 1)
            assert value(fams, "ocr_endpoint_max_concurrency", endpoint="good",
                         model="scripted") == 1
            second = daemon.upload(notes[1])["id"]  # good is full: bad gets it, and fails it
            fams = wait_metrics(daemon, lambda f: value(f, "ocr_endpoint_out", endpoint="bad"))
            docs = daemon.wait_final([first, second], timeout_s=60)  # good reads both
            text = daemon.client.get("/metrics").text

    assert [d["status"] for d in docs] == ["done", "done"]
    assert_conventions(text)
    fams = families(text)
    for name in ("good", "bad"):
        assert value(fams, "ocr_endpoint_pages_in_flight", endpoint=name, model="scripted") == 0
    assert value(fams, "ocr_endpoint_out", endpoint="good", model="scripted") == 0
    assert value(fams, "ocr_endpoint_out", endpoint="bad", model="scripted") == 1
    assert value(fams, "ocr_workers", state="out") == 1
    errors = {(s.labels["endpoint"], s.labels["model"], s.labels["code"]): s.value
              for s in fams["ocr_endpoint_page_errors"].samples
              if s.name == "ocr_endpoint_page_errors_total"}
    assert errors == {("bad", "scripted", "endpoint_unavailable"): 1}
    latency = "ocr_endpoint_page_seconds"
    assert value(fams, latency, f"{latency}_count", endpoint="good") == 2
    assert value(fams, latency, f"{latency}_sum", endpoint="good") >= 2 * 1.0  # send to answer
    assert value(fams, latency, f"{latency}_count", endpoint="bad") == 0
    # the released attempt is not charged: the pages' own counts see two readings
    assert value(fams, "ocr_pages", "ocr_pages_total", engine="openai", outcome="ok") == 2


# --- in process, against the store --------------------------------------------------


def make_appliance(tmp: Path, device=None, **sections) -> Appliance:
    sections.setdefault("workers", {"count": 1})
    return Appliance(make_settings(tmp, **sections), device=device)


def ok_result(confidence: float, flags: list[str], level: int,
              engine: str = "classic") -> PageDone:
    return page_done("t", confidence=confidence, engine=engine, flags=flags,
                     provenance={"repair": {"level": level, "fixes": [], "problems": []}})


def scrape(appliance: Appliance) -> tuple[str, dict]:
    text = TestClient(create_app(appliance)).get("/metrics").text
    return text, families(text)


def test_each_family_matches_the_store(tmp_path):
    device = FakeDevice(total_bytes=16 * GIB)
    appliance = make_appliance(tmp_path, device=device,
                               queue={"max_queued_pages_interactive": 2})
    db = appliance.db
    pdf = write_pdf(tmp_path / "four.pdf", [["one"], ["two"], ["three"], ["four"]])
    png = write_png(tmp_path / "one.png", ["single page"])
    bad = tmp_path / "bad.png"
    bad.write_bytes(b"not an image at all")

    # sources and refusals: the batch lane holds the four pages, the interactive lane two
    appliance.submit_path(pdf, SubmitOptions(source="watch", lane=Lane.BATCH))
    appliance.submit_path(png, SubmitOptions(source="upload"))
    appliance.submit_path(png, SubmitOptions(source="api"))
    with pytest.raises(QueueFull):
        appliance.submit_path(png, SubmitOptions(source="api"))
    with pytest.raises(QueueFull):
        appliance.submit_path(png, SubmitOptions(source="upload"))
    rejected = appliance.submit_path(bad, SubmitOptions(source="cli", lane=Lane.BATCH))
    assert rejected.error_code

    text, fams = scrape(appliance)
    assert_conventions(text)
    accepted = {s.labels["source"]: s.value for s in fams["ocr_documents_accepted"].samples}
    assert accepted == {"watch": 1, "upload": 1, "api": 1, "cli": 1}
    refused = {(s.labels["source"], s.labels["lane"], s.labels["code"]): s.value
               for s in fams["ocr_documents_refused"].samples}
    assert refused == {("api", "interactive", "queue_full"): 1,
                       ("upload", "interactive", "queue_full"): 1}
    assert value(fams, "ocr_queue_depth", lane="batch") == 4
    assert value(fams, "ocr_queue_depth", lane="interactive") == 2
    assert value(fams, "ocr_pages", "ocr_pages_total") == 0  # nothing read yet

    # six pages read: a repaired one, a degraded one, a degenerate then ok, a timeout
    # that fails for good, a failure by reason code, and one still running
    outcomes = []
    for confidence, flags, level in ((0.95, ["repaired"], 1), (0.35, ["degraded"], 2),
                                     (0.8, [], 0)):
        claim = transitions.claim_next_page(db, "w0:1", 60)
        assert transitions.complete_page(db, claim, ok_result(confidence, flags, level))
        outcomes.append(confidence)
    claim = transitions.claim_next_page(db, "w0:1", 60)
    transitions.fail_attempt(db, claim, Outcome.DEGENERATE, "degenerate", "looped",
                             retryable=True, max_attempts=3)
    time.sleep(0.01)
    claim = transitions.claim_next_page(db, "w0:1", 60)
    transitions.fail_attempt(db, claim, Outcome.TIMEOUT, "page_timeout", "too slow",
                             retryable=False, max_attempts=1)
    running = transitions.claim_next_page(db, "w0:1", 60)
    assert running is not None

    _text, fams = scrape(appliance)
    assert value(fams, "ocr_pages", "ocr_pages_total", engine="classic", outcome="ok") == 3
    # a failed attempt names the engine it was sent to: the workers' (classic)
    assert value(fams, "ocr_pages", "ocr_pages_total", engine="classic",
                 outcome="degenerate") == 1
    assert value(fams, "ocr_pages", "ocr_pages_total", engine="classic", outcome="timeout") == 1
    assert value(fams, "ocr_pages_failed", "ocr_pages_failed_total", code="page_timeout") == 1
    assert value(fams, "ocr_pages_repaired", "ocr_pages_repaired_total") == 1
    assert value(fams, "ocr_pages_degraded", "ocr_pages_degraded_total") == 1
    buckets, count, total = histogram(fams, "ocr_page_confidence")
    assert count == 3 and total == pytest.approx(sum(outcomes))
    assert dict(buckets)[0.4] == 1 and dict(buckets)[0.8] == 2 and dict(buckets)[1.0] == 3
    assert histogram(fams, "ocr_page_service_seconds")[1] == 3
    assert sum(value(fams, "ocr_pages_running", lane=lane) for lane in ("batch",
                                                                          "interactive")) == 1

    # memory: the sampler's latest sample and its watermark state
    device.set_used(15 * GIB)  # above the high watermark: paused
    appliance.memory.sample_once()
    appliance.workers[0].restarts = 2
    _text, fams = scrape(appliance)
    assert value(fams, "ocr_vram_used_bytes", source="nvml") == 15 * GIB
    assert value(fams, "ocr_vram_total_bytes", source="nvml") == 16 * GIB
    assert value(fams, "ocr_vram_watermark_state", state="paused") == 1
    assert value(fams, "ocr_vram_watermark_state", state="ok") == 0
    assert value(fams, "ocr_vram_watermark_transitions", "ocr_vram_watermark_transitions_total",
                 kind="pause") == 1
    assert value(fams, "ocr_worker_restarts", "ocr_worker_restarts_total", slot="0") == 2

    # a restart (a new appliance on the same data) finds the same store-derived counts
    appliance.db.close()
    again = make_appliance(tmp_path, device=FakeDevice(total_bytes=16 * GIB))
    _text, fams = scrape(again)
    assert value(fams, "ocr_pages", "ocr_pages_total", engine="classic", outcome="ok") == 3
    assert value(fams, "ocr_pages_failed", "ocr_pages_failed_total", code="page_timeout") == 1
    assert sum(s.value for s in fams["ocr_documents_accepted"].samples) == 4
    again.db.close()


def test_review_backlog_and_actions(tmp_path):
    appliance = make_appliance(tmp_path, review={"enabled": True})
    db = appliance.db
    png = write_png(tmp_path / "one.png", ["single page"])
    for _ in range(2):
        appliance.submit_path(png, SubmitOptions(source="api"))
    for _ in range(2):
        claim = transitions.claim_next_page(db, "w0:1", 60)
        transitions.complete_page(db, claim, ok_result(0.3, [], 0),
                                  reasons=["low_confidence: 0.300 < 0.5"], review=True)
    page_id = reviews.claim_review(db, "clerk", lock_s=600)
    _text, fams = scrape(appliance)
    assert value(fams, "ocr_review_backlog_pages") == 2
    assert value(fams, "ocr_review_backlog_locked_pages") == 1
    assert value(fams, "ocr_review_backlog_reason_pages", reason="low_confidence") == 2
    assert queries.review_backlog(db)["waiting"] == reviews.review_counts(db)["waiting"] == 2

    reviews.approve(db, page_id, "clerk")
    _text, fams = scrape(appliance)
    assert value(fams, "ocr_review_backlog_pages") == 1
    assert value(fams, "ocr_review_backlog_locked_pages") == 0
    assert value(fams, "ocr_review_actions", "ocr_review_actions_total", action="approve") == 1
    db.close()


def test_every_app_has_its_own_registry(tmp_path):
    one = make_appliance(tmp_path / "one")
    two = make_appliance(tmp_path / "two")
    png = write_png(tmp_path / "one.png", ["single page"])
    one.submit_path(png, SubmitOptions(source="api"))
    assert metrics_for(one) is metrics_for(one)
    assert metrics_for(one).registry is not metrics_for(two).registry
    _t, fams_one = scrape(one)
    _t, fams_two = scrape(two)
    assert value(fams_one, "ocr_documents_accepted", "ocr_documents_accepted_total",
                 source="api") == 1
    assert value(fams_two, "ocr_documents_accepted", "ocr_documents_accepted_total",
                 source="api") == 0
    one.db.close()
    two.db.close()


def test_buckets_and_totals_are_exact():
    buckets = Buckets(CONFIDENCE_BUCKETS)
    for v in (0.1, 0.1000001, 0.5, 1.0, 1.5):
        buckets.observe(v)
    cumulative = dict(buckets.cumulative())
    assert cumulative["0.1"] == 1  # le: a value on a bound falls in that bucket
    assert cumulative["0.2"] == 2 and cumulative["0.5"] == 3 and cumulative["1.0"] == 4
    assert cumulative["+Inf"] == 5 and buckets.count == 5

    totals = PageTotals(keep_s=100)
    row = queries.AttemptRow(id=7, engine="llama", outcome="ok", flags=["degraded"],
                             repair_level=None, confidence=0.5, queued_at=1000.0,
                             started_at=1030.0, finished_at=1032.5)
    old = queries.AttemptRow(id=3, engine="llama", outcome="crashed", flags=[],
                             repair_level=None, confidence=None, queued_at=0.0,
                             started_at=1.0, finished_at=2.0)
    totals.add([old, row], now=1050.0)
    assert totals.last_id == 7
    assert totals.attempts == {("llama", "crashed"): 1, ("llama", "ok"): 1}
    assert totals.repair_levels == {2: 1}  # from the flag when provenance has no level
    assert totals.queue_wait.sum == 30.0 and totals.service.sum == 2.5
    assert [c.latency_s for c in totals.recent] == [32.5]
    totals.trim(now=1200.0)
    assert not totals.recent
