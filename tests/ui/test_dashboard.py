"""The Dashboard tab: its handlers against a real store (shapes, figures, escaping of
untrusted names and messages), the pure pieces behind its plots, and one look at it
in a real headless Chromium."""

from __future__ import annotations

import re
import sqlite3
import time
from html.parser import HTMLParser

import pandas as pd
import pytest

from appliance.daemon import Appliance
from appliance.engines.messages import PageDone, PageFailed, Ready
from appliance.intake import SubmitOptions
from appliance.metrics import (
    Completion, History, Snapshot, metrics_for, pages_per_bucket, percentile, rolling_latency,
)
from appliance.store import queries, transitions
from appliance.store.models import Outcome
from tests.conftest import make_settings
from tests.fixtures.documents import write_png
from tests.fixtures.results import page_done
from tests.openai_servers import endpoint
from ui.dashboard import dashboard_tab, dashboard_view, failures_markdown, latency_frame

HOSTILE_NAME = "<img src=x onerror=alert(1)>|<svg onload=window.__xss=1>.png"  # no "/"
HOSTILE_MESSAGE = "engine said <b onclick=alert(2)>[x](javascript:alert(3))</b> | and more"


class _Elements(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)

    def handle_data(self, data):
        self.text.append(data)


def rendered(markdown: str) -> _Elements:
    """The Markdown as the browser's renderer turns it into HTML (raw HTML allowed)."""
    markdown_it = pytest.importorskip("markdown_it")
    parser = _Elements()
    parser.feed(markdown_it.MarkdownIt("commonmark", {"html": True}).enable("table")
                .render(markdown))
    return parser


# --- pure pieces -------------------------------------------------------------------


def test_percentiles_throughput_and_rolling_latency():
    assert percentile([], 50) is None
    values = [float(v) for v in range(1, 101)]
    assert (percentile(values, 50), percentile(values, 95), percentile(values, 99)) == \
        (50.0, 95.0, 99.0)
    assert percentile([3.0], 99) == 3.0

    now = 10_000.0  # minute buckets [9960, 10020), [9900, 9960), ...
    done = [Completion(now - 5, queue_wait_s=1.0, service_s=v) for v in (1.0, 2.0, 3.0)]
    done += [Completion(now - 125, queue_wait_s=0.0, service_s=10.0)]
    done += [Completion(now - 7200, queue_wait_s=0.0, service_s=99.0)]  # outside the window
    buckets = pages_per_bucket(done, now, window_s=600, bucket_s=60)
    assert len(buckets) == 10 and all(at % 60 == 0 for at, _ in buckets)
    assert buckets[-1][0] <= now < buckets[-1][0] + 60
    assert [n for _, n in buckets] == [0] * 7 + [1, 0, 3]

    rolling = rolling_latency(done, [now - 200, now - 100, now], window_s=120)
    assert [(r.at, r.pages) for r in rolling] == [(now - 100, 1), (now, 3)]  # none at -200
    assert (rolling[1].p50_s, rolling[1].p95_s, rolling[1].p99_s) == (3.0, 4.0, 4.0)
    assert rolling[0].p50_s == 10.0


def test_latency_is_drawn_from_a_runs_first_page_with_gaps_between_runs():
    now = 100_000.0  # points every 15 s: neither run starts on one
    done = [Completion(now - 1793, queue_wait_s=0.0, service_s=2.0),
            Completion(now - 1783, queue_wait_s=0.0, service_s=4.0),
            Completion(now - 3, queue_wait_s=1.0, service_s=1.0)]
    frame = latency_frame(done, now)
    p50 = frame[frame["percentile"] == "p50"].set_index("time")["seconds"]
    assert p50.index.is_monotonic_increasing
    assert p50.index[-1] == pd.to_datetime(now, unit="s")
    at = lambda t: p50[pd.to_datetime(t, unit="s")]  # noqa: E731
    assert at(now - 1793) == 2.0  # from the first page read
    assert at(now - 3) == at(now) == 2.0  # a page read 3 s ago is a line already
    # idle time is a gap: two runs of values, none drawn across the 25 minutes between
    runs = (p50.notna() & ~p50.notna().shift(fill_value=False)).sum()
    assert runs == 2
    assert p50[pd.to_datetime(now - 1000, unit="s"):pd.to_datetime(now - 300, unit="s")
               ].isna().all()


def test_history_keeps_the_last_window():
    history = History(keep_s=60)
    for at in (0.0, 30.0, 61.0, 90.0):
        history.add(Snapshot(at, {"interactive": 1}, {}, None, None, None, 1, 2))
    assert [s.at for s in history.samples()] == [30.0, 61.0, 90.0]


def test_failures_are_escaped():
    rows = [queries.FailureRow(time.time(), "d" * 32, HOSTILE_NAME, 3, "page_timeout",
                               HOSTILE_MESSAGE),
            queries.FailureRow(time.time(), "e" * 32, "plain.pdf", None, "corrupt_file",
                               "the file\nis damaged")]
    markdown = failures_markdown(rows)
    html = rendered(markdown)
    assert not set(html.tags) & {"img", "script", "b", "a", "svg"}, html.tags
    shown = "".join(html.text)
    assert HOSTILE_NAME in shown  # every character shown literally, the pipe too
    assert HOSTILE_MESSAGE in shown
    assert "whole document" in shown and "the file is damaged" in shown
    assert html.tags.count("tr") == 3  # the header and one row per failure
    assert failures_markdown([]) == "No failures."


# --- handlers against a real store --------------------------------------------------


@pytest.fixture
def appliance(tmp_path):
    settings = make_settings(tmp_path, workers={"count": 1})
    appliance = Appliance(settings)
    yield appliance
    appliance.db.close()


def ok_result(confidence: float) -> PageDone:
    return page_done("t", confidence=confidence, provenance={"repair": {"level": 0}},
                     timings_ms={})


def test_dashboard_view_shapes_and_figures(appliance, tmp_path):
    db = appliance.db
    png = write_png(tmp_path / "note.png", ["Delivery note"])
    for _ in range(3):
        appliance.submit_path(png, SubmitOptions(source="api"))
    bad = tmp_path / "bad.png"
    bad.write_bytes(b"not an image")
    appliance.submit_path(bad, SubmitOptions(source="api"))
    hostile = appliance.submit_path(png, SubmitOptions(source="api"))
    with db.write() as session:  # a name the API keeps verbatim (see test_browser)
        doc = session.get(type(hostile), hostile.id)
        doc.name = HOSTILE_NAME
        session.add(doc)

    for _ in range(2):
        claim = transitions.claim_next_page(db, "w0:1", 60)
        transitions.complete_page(db, claim, ok_result(0.9))
    claim = transitions.claim_next_page(db, "w0:1", 60)
    while claim.document_id != hostile.id:  # fail the hostile document's page
        transitions.complete_page(db, claim, ok_result(0.9))
        claim = transitions.claim_next_page(db, "w0:1", 60)
    transitions.fail_attempt(db, claim, Outcome.ERROR, "engine_error", HOSTILE_MESSAGE,
                             retryable=False, max_attempts=3)

    appliance.memory.sample_once()  # the sampler's thread is not running here
    view = dashboard_view(appliance)

    assert list(view.queue.columns) == ["time", "lane", "pages"]
    assert pd.api.types.is_datetime64_any_dtype(view.queue["time"])
    assert set(view.queue["lane"]) == {"interactive", "batch"}
    assert view.queue["pages"].iloc[-2:].sum() == 0  # every page is read

    assert list(view.throughput.columns) == ["time", "pages"]
    assert len(view.throughput) == 60 and view.throughput["pages"].sum() == 3
    assert list(view.latency.columns) == ["time", "percentile", "seconds"]
    assert len(view.latency) % 3 == 0  # three percentiles per sample time, and now
    assert list(view.latency["percentile"].iloc[-3:]) == ["p50", "p95", "p99"]
    p50, p95, p99 = view.latency["seconds"].iloc[-3:]
    assert 0 <= p50 <= p95 <= p99 < 60

    for frame in (view.vram, view.ram):
        assert list(frame.columns) == ["time", "series", "GiB"]
        assert set(frame["series"]) == {"used", "total"}
    total = view.ram[view.ram["series"] == "total"]["GiB"].iloc[-1]
    used = view.ram[view.ram["series"] == "used"]["GiB"].iloc[-1]
    assert 0 < used <= total

    assert "3 pages in the last 15 min" in view.summary
    assert "0 pages waiting" in view.summary and "Review backlog:** 0" in view.summary
    memory_line = next(line for line in view.summary.splitlines() if "Memory:" in line)
    assert appliance.memory.status()["source"] == "host"  # no GPU here: the host is watched
    assert re.fullmatch(r"- \*\*Memory:\*\* ok: host memory \d+ % \([\d.]+ of [\d.]+ GiB\)",
                        memory_line), memory_line  # host memory named once, with its figures

    html = rendered(view.failures)
    shown = "".join(html.text)
    assert HOSTILE_NAME in shown and HOSTILE_MESSAGE in shown and "engine_error" in shown
    assert "unrecognized_file" in shown or "unsupported_type" in shown  # the refused file
    assert not set(html.tags) & {"img", "script", "b", "a"}, html.tags

    # plots take the frames as they are
    import gradio as gr

    plot = gr.LinePlot(x="time", y="seconds", color="percentile")
    data = plot.postprocess(view.latency)
    assert data.datatypes == {"time": "temporal", "percentile": "nominal",
                              "seconds": "quantitative"}


def test_an_empty_appliance_still_plots(appliance):
    import gradio as gr

    view = dashboard_view(appliance)
    assert view.failures == "No failures."
    assert view.latency["seconds"].isna().all()  # the hour, with no page in it
    for frame, y, color in ((view.latency, "seconds", "percentile"), (view.queue, "pages", "lane"),
                            (view.vram, "GiB", "series")):
        data = gr.LinePlot(x="time", y=y, color=color).postprocess(frame)
        assert data.datatypes["time"] == "temporal"
    assert metrics_for(appliance).history.samples()  # the view took a first sample
    assert view.endpoints is None  # no [[engine.remote]]: no table


def test_remote_endpoints_table(tmp_path):
    # two endpoints, their workers not started: one in service, one out for a reason
    # its server gave, which may hold markup
    appliance = Appliance(make_settings(tmp_path, engine={"name": "openai", "remote": [
        endpoint("http://gpu1:8080/v1", "gemma", "gpu1", max_concurrency=4),
        endpoint("http://gpu2:8080/v1", "qwen", "gpu2", max_concurrency=2)]}))
    try:
        gpu1, gpu2 = appliance.workers
        gpu1.on_ready(Ready("openai", "gemma@gpu1", 1, 0.0, 4))
        gpu2.out = HOSTILE_MESSAGE
        answers = appliance.dispatcher.endpoint_answers
        now = time.time()
        for seconds in (1.0, 2.0, 9.0):
            answers.record("gpu1", page_done(engine="openai"), seconds, now=now - 10)
        answers.record("gpu1", page_done(engine="openai", flags=["cached"]), 0.01, now=now)
        answers.record("gpu1", page_done(engine="openai"), 50.0, now=now - 3600)  # too old
        answers.record("gpu2", PageFailed(0, "endpoint_unavailable", "down", True, {}), 0.1)
        view = dashboard_view(appliance, now=now)
        import gradio as gr

        with gr.Blocks() as blocks:  # the tab shows the table: one output more
            dashboard_tab(appliance)
        for handler in blocks.fns.values():
            assert len(handler.fn()) == len(handler.outputs) == 8
    finally:
        appliance.db.close()

    html = rendered(view.endpoints)
    assert not set(html.tags) & {"img", "script", "b", "a", "svg"}, html.tags
    assert html.tags.count("tr") == 3  # the header and one row per endpoint
    cells = [text.strip() for text in html.text if text.strip()]
    assert cells[6:] == ["gpu1", "gemma", "0 / 4", "in service", "2.0 s", "none",  # p50, 15 min
                         "gpu2", "qwen", "0 / 2", f"out: {HOSTILE_MESSAGE}", "–",
                         "endpoint_unavailable 1"]


# --- in Chromium -----------------------------------------------------------------


def test_dashboard_in_the_browser(tmp_path):
    from playwright.sync_api import expect

    from tests.browser import UI_TIMEOUT_MS, launched_chromium, screenshot_on_failure
    from tests.daemon import Daemon

    with Daemon(tmp_path).running() as earlier:
        read = earlier.upload(write_png(tmp_path / "earlier.png", ["Delivery note 11"]))
        earlier.wait_final([read["id"]])
    # as if read 20 minutes ago: the latency plot has a run then, and idle time since
    with sqlite3.connect(earlier.data_dir / "appliance.db") as db:
        db.execute("UPDATE pageresult SET started_at = started_at - 1200, "
                   "finished_at = finished_at - 1200")
        db.execute("UPDATE document SET created_at = created_at - 1200")
    daemon = Daemon(tmp_path).start()
    try:
        daemon.wait_ready()
        png = write_png(tmp_path / "note.png", ["Delivery note 12"])
        doc = daemon.upload(png)
        with (tmp_path / "bad.png").open("wb") as fh:
            fh.write(b"not an image")
        with (tmp_path / "bad.png").open("rb") as fh:
            response = daemon.client.post("/api/v1/documents",
                                          files={"file": (HOSTILE_NAME, fh)})
        assert response.status_code == 201 and response.json()["status"] == "failed"
        daemon.wait_final([doc["id"]])

        with launched_chromium() as browser:
            page = browser.new_page(viewport={"width": 1280, "height": 1600})
            page.set_default_timeout(UI_TIMEOUT_MS)
            dialogs: list[str] = []
            page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
            with screenshot_on_failure(page, tmp_path, daemon):
                page.goto(f"http://127.0.0.1:{daemon.port}/",
                          wait_until="domcontentloaded")
                dashboard = page.get_by_role("tab", name="Dashboard")
                dashboard.click()
                # the first drawing: a line per percentile in two runs (20 minutes ago,
                # and from the page just read), a gap between them
                lines = page.locator("#dashboard-latency g.mark-line path")
                expect(lines).to_have_count(3)
                for line in lines.all():
                    runs = re.findall(r"M[^M]*", line.get_attribute("d"))
                    assert len(runs) == 2 and all("L" in run for run in runs), runs
                summary = page.locator("#dashboard-summary")
                expect(summary).to_contain_text("1 pages in the last 15 min")
                failures = page.locator("#dashboard-failures")
                expect(failures).to_contain_text(HOSTILE_NAME)  # as text
                assert page.locator("main img[src=x], main svg[onload]").count() == 0
                for plot in ("queue", "throughput", "latency", "vram", "ram"):
                    expect(page.locator(f"#dashboard-{plot} canvas, "
                                        f"#dashboard-{plot} svg").first).to_be_visible()
                # one Dashboard tab, after a visit and a visit again
                page.get_by_role("tab", name="Documents", exact=True).click()
                dashboard.first.click()
                expect(dashboard).to_have_count(1)
                assert page.get_by_role("tab").all_inner_texts() == [
                    "Documents", "Document", "Dashboard"]
                page.wait_for_timeout(1500)  # an onerror or a script would have fired
                assert dialogs == []
                assert page.evaluate("typeof window.__xss") == "undefined"
    finally:
        daemon.stop()
