"""The Dashboard tab: queue, throughput, latency, memory, review backlog, the remote
endpoints (when [[engine.remote]] has any) and the latest failures, refreshed on a
timer.

``dashboard_view`` is a plain function of the ``Appliance`` that returns everything
the tab shows (pandas DataFrames for the plots, Markdown for the rest); the data comes
from ``appliance.metrics`` (the same running totals /metrics serves, plus a short
in-memory history of queue and memory samples) and ``appliance.library``.
``dashboard_tab`` only wires it to components.

Document names, failure messages and why an endpoint is out are untrusted (a file
name, an engine's message or a remote server's error can hold markup): every such
cell is escaped, then the table goes through ``safe_markdown`` into a sanitising
Markdown view.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

import gradio as gr
import pandas as pd

from appliance.metrics import (
    HISTORY_S, SAMPLE_S, EndpointStatus, metrics_for, pages_per_bucket, percentile,
    rolling_latency,
)
from appliance.library import FailureRow, Lane
from ui.components import escape_markdown_text, safe_markdown, safe_markdown_view
from ui.document_status import error_words
from ui.i18n import EN, label, language_of, memory_text, text, texts

if TYPE_CHECKING:
    from appliance.daemon import Appliance

REFRESH_S = 5.0
FAILURE_LIMIT = 20
MESSAGE_CHARS = 240
SUMMARY_WINDOW_S = 900.0  # the summary's throughput and latency: the last 15 minutes
LATENCY_WINDOW_S = 300.0  # each point of the latency plot: the 5 minutes before it
LATENCY_STEP_S = 15.0  # a point every 15 s of the hour
BUCKET_S = 60.0
GIB = 2**30
FAILURE_HEADER_KEYS = ["failure_when", "failure_document", "failure_page", "failure_code",
                       "failure_message"]
FAILURE_HEADERS = texts(FAILURE_HEADER_KEYS)
ENDPOINT_HEADER_KEYS = ["endpoint_name", "endpoint_model", "endpoint_in_flight",
                        "endpoint_state", "endpoint_latency", "endpoint_errors"]
ENDPOINT_HEADERS = texts(ENDPOINT_HEADER_KEYS)
PERCENTILES = (("p50", 50), ("p95", 95), ("p99", 99))
CLOCK = {"x_title": "time", "x_axis_format": "%H:%M:%S"}  # the history's time axis


@dataclass
class DashboardView:
    summary: str  # Markdown, our own words and numbers only
    queue: pd.DataFrame  # time, lane, pages (waiting)
    throughput: pd.DataFrame  # time, pages (read successfully per minute)
    latency: pd.DataFrame  # time, percentile (p50/p95/p99), seconds (arrival to result,
    #                        over the LATENCY_WINDOW_S before each time; NaN: no page)
    vram: pd.DataFrame  # time, series (used/total), GiB
    ram: pd.DataFrame  # time, series (used/total), GiB
    failures: str  # Markdown, already made safe
    endpoints: str | None = None  # Markdown, already made safe; None: no remote endpoint


def _times(seconds: list[float]) -> pd.Series:
    return pd.to_datetime(pd.Series(seconds, dtype="float64"), unit="s")


def _frame(times: list[float], **columns) -> pd.DataFrame:
    """A plot's data with typed columns, so an empty frame still plots."""
    data = {"time": _times(times)}
    for name, (values, dtype) in columns.items():
        data[name] = pd.Series(values, dtype=dtype)
    return pd.DataFrame(data)


def queue_frame(samples) -> pd.DataFrame:
    times, lanes, pages = [], [], []
    for s in samples:
        for lane in Lane:
            times.append(s.at)
            lanes.append(lane.value)
            pages.append(s.queued.get(lane.value, 0))
    return _frame(times, lane=(lanes, "string"), pages=(pages, "int64"))


def memory_frames(samples) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(VRAM, RAM): used and total in GiB over time."""
    frames = []
    for used, total in (("vram_used_bytes", "vram_total_bytes"),
                        ("ram_used_bytes", "ram_total_bytes")):
        times, series, gib = [], [], []
        for s in samples:
            for name, attr in (("used", used), ("total", total)):
                value = getattr(s, attr)
                if value is not None:
                    times.append(s.at)
                    series.append(name)
                    gib.append(value / GIB)
        frames.append(_frame(times, series=(series, "string"), GiB=(gib, "float64")))
    return frames[0], frames[1]


def throughput_frame(completions, now: float) -> pd.DataFrame:
    """Pages read successfully per minute over the last hour."""
    buckets = pages_per_bucket(completions, now, HISTORY_S, BUCKET_S)
    return _frame([at for at, _ in buckets], pages=([n for _, n in buckets], "int64"))


def latency_times(completions, now: float) -> list[float]:
    """When the latency plot has a point: every LATENCY_STEP_S of the last hour, now,
    and the moment each run of pages began (a page read with none in the window before
    it), so that a run shows from its first page, not from the next step."""
    finished = sorted(c.finished_at for c in completions)
    times = {now, *(at for before, at in zip([float("-inf"), *finished], finished)
                    if at - before >= LATENCY_WINDOW_S)}
    step = now // LATENCY_STEP_S * LATENCY_STEP_S
    times.update(step - i * LATENCY_STEP_S for i in range(int(HISTORY_S // LATENCY_STEP_S)))
    return sorted(at for at in times if at > now - HISTORY_S)


def latency_frame(completions, now: float) -> pd.DataFrame:
    """Page latency percentiles over the LATENCY_WINDOW_S before each of
    ``latency_times``; no value (a gap in the lines, not one across it) where the window
    holds no page."""
    at_times = latency_times(completions, now)
    rows = {row.at: row for row in rolling_latency(completions, at_times, LATENCY_WINDOW_S)}
    times, names, seconds = [], [], []
    for at in at_times:
        for name, _q in PERCENTILES:
            times.append(at)
            names.append(name)
            seconds.append(getattr(rows[at], f"{name}_s") if at in rows else None)
    return _frame(times, percentile=(names, "string"), seconds=(seconds, "float64"))


def _cell(text: str, limit: int = MESSAGE_CHARS) -> str:
    text = " ".join(str(text).split())
    if len(text) > limit:
        text = text[:limit - 1] + "…"
    return escape_markdown_text(text)


def failures_markdown(rows: list[FailureRow], lang: str = EN) -> str:
    """The latest failures as a table; names, codes and messages escaped (the codes as
    they are, the messages in ``lang``: ``document_status.error_words``)."""
    if not rows:
        return text("no_failures", lang)
    lines = ["| " + " | ".join(texts(FAILURE_HEADER_KEYS, lang)) + " |",
             "|" + "---|" * len(FAILURE_HEADERS)]
    for row in rows:
        when = datetime.fromtimestamp(row.at).strftime("%Y-%m-%d %H:%M:%S")
        page = str(row.page) if row.page is not None else text("failure_whole", lang)
        lines.append(f"| {when} | {_cell(row.document, 120)} | {page} | {_cell(row.code, 60)} "
                     f"| {_cell(error_words(row.code, row.message, lang))} |")
    return safe_markdown("\n".join(lines))


def endpoint_state(endpoint: EndpointStatus, lang: str = EN) -> str:
    if endpoint.out is not None:
        return text("endpoint_out", lang, why=endpoint.out)
    if endpoint.state in ("idle", "busy"):
        return text("endpoint_in_service", lang)
    return endpoint.state  # starting, or dead until its worker is restarted


def endpoints_markdown(endpoints: list[EndpointStatus], now: float, lang: str = EN) -> str:
    """The remote endpoints as a table; every cell escaped (why an endpoint is out
    quotes its server)."""
    lines = ["| " + " | ".join(texts(ENDPOINT_HEADER_KEYS, lang)) + " |",
             "|" + "---|" * len(ENDPOINT_HEADERS)]
    for endpoint in endpoints:
        recent = sorted(seconds for at, seconds in endpoint.answered.recent
                        if at >= now - SUMMARY_WINDOW_S)
        errors = ", ".join(f"{code} {n}" for code, n in endpoint.answered.errors.items())
        cells = [endpoint.name, endpoint.model,
                 f"{endpoint.in_flight} / {endpoint.max_concurrency}",
                 endpoint_state(endpoint, lang), _seconds(percentile(recent, 50)),
                 errors or text("none", lang)]
        lines.append("| " + " | ".join(_cell(cell) for cell in cells) + " |")
    return safe_markdown("\n".join(lines))


def _seconds(value: float | None) -> str:
    return "–" if value is None else f"{value:.1f} s"


def summary_markdown(appliance: Appliance, snapshot, completions, now: float,
                     lang: str = EN) -> str:
    recent = sorted(c.latency_s for c in completions
                    if c.finished_at >= now - SUMMARY_WINDOW_S)
    minutes = SUMMARY_WINDOW_S / 60
    waiting = sum(snapshot.queued.values())
    running = sum(snapshot.running.values())
    lanes = ", ".join(f"{lane if lang == EN else text(f'lane_name_{lane}', lang)} {n}"
                      for lane, n in snapshot.queued.items())
    backlog = appliance.library.review_backlog()
    memory = appliance.memory.status()
    workers = appliance.worker_status()
    restarts = sum(w["restarts"] for w in workers)
    busy = sum(w["state"] == "busy" for w in workers)
    ram = text("summary_ram", lang, used=f"{snapshot.ram_used_bytes / GIB:.1f}",
               total=f"{snapshot.ram_total_bytes / GIB:.1f}")
    latency = ", ".join(f"{name} {_seconds(percentile(recent, q))}" for name, q in PERCENTILES)
    return "\n".join([
        text("summary_queue", lang, waiting=waiting, lanes=lanes, running=running),
        text("summary_throughput", lang, pages=len(recent), minutes=f"{minutes:.0f}",
             rate=f"{len(recent) / minutes:.1f}"),
        text("summary_latency", lang, minutes=f"{minutes:.0f}", latency=latency),
        text("summary_backlog", lang, waiting=backlog["waiting"], locked=backlog["locked"]),
        text("summary_memory_host" if memory.get("source") == "host" else "summary_memory",
             lang, memory=memory_text(memory, lang), ram=ram),
        text("summary_workers", lang, workers=len(workers), busy=busy, restarts=restarts),
    ])  # our own words and numbers: nothing from a document (the memory's line is the
    # library's, in English)


def dashboard_view(appliance: Appliance, now: float | None = None,
                   lang: str = EN) -> DashboardView:
    """Everything the Dashboard tab shows, read now."""
    metrics = metrics_for(appliance)
    samples = metrics.history.samples()
    if not samples or time.time() - samples[-1].at > 2 * SAMPLE_S:
        metrics.sample()  # the scheduler is not sampling (not started, or just started)
        samples = metrics.history.samples()
    now = time.time() if now is None else now
    metrics.catch_up(now)
    completions = metrics.recent_completions()
    vram, ram = memory_frames(samples)
    endpoints = metrics.endpoints(now)
    return DashboardView(
        summary=summary_markdown(appliance, samples[-1], completions, now, lang),
        queue=queue_frame(samples), throughput=throughput_frame(completions, now),
        latency=latency_frame(completions, now), vram=vram, ram=ram,
        failures=failures_markdown(appliance.library.latest_failures(FAILURE_LIMIT), lang),
        endpoints=endpoints_markdown(endpoints, now, lang) if endpoints else None)


# --- Gradio wiring ---------------------------------------------------------------


def dashboard_tab(appliance: Appliance) -> None:
    summary = gr.Markdown(elem_id="dashboard-summary")
    endpoints = None
    if appliance.remote_specs:  # [[engine.remote]]: fixed until a restart
        gr.Markdown(label("remote_endpoints"))
        endpoints = safe_markdown_view(value="", elem_id="dashboard-endpoints")
    with gr.Row():
        queue = gr.LinePlot(x="time", y="pages", color="lane", label=label("plot_queue"),
                            y_title="pages waiting", elem_id="dashboard-queue", **CLOCK,
                            y_lim=[0, None], y_axis_format="d")
        throughput = gr.BarPlot(x="time", y="pages", label=label("plot_throughput"),
                                y_title="pages", elem_id="dashboard-throughput",
                                x_title="time", x_axis_format="%H:%M", y_axis_format="d")
    with gr.Row():
        latency = gr.LinePlot(x="time", y="seconds", color="percentile",
                              label=label("plot_latency"),
                              y_title="seconds", elem_id="dashboard-latency", **CLOCK,
                              y_lim=[0, None])
    memory_label = label("plot_vram" if appliance.memory.device.name != "host" else
                         "plot_watched")
    with gr.Row():
        vram = gr.LinePlot(x="time", y="GiB", color="series", label=memory_label,
                           y_title="GiB", elem_id="dashboard-vram", **CLOCK, y_lim=[0, None])
        ram = gr.LinePlot(x="time", y="GiB", color="series", label=label("plot_ram"),
                          y_title="GiB", elem_id="dashboard-ram", **CLOCK, y_lim=[0, None])
    gr.Markdown(label("latest_failures"))
    failures = safe_markdown_view(value=label("no_failures"), elem_id="dashboard-failures")
    outputs = [summary, queue, throughput, latency, vram, ram, failures]
    if endpoints is not None:
        outputs.append(endpoints)

    def refresh(request: gr.Request = None):
        lang = language_of(request)
        view = dashboard_view(appliance, lang=lang)
        # the plots' words in the person's language: axes, legends and the legends' entries
        # (the lanes, used and total; percentiles are p50, p95, p99 in both)
        when = text("plot_time", lang)
        named = {value: text(key, lang) for value, key in (
            ("interactive", "lane_name_interactive"), ("batch", "lane_name_batch"),
            ("used", "series_used"), ("total", "series_total"))}

        def words(frame: pd.DataFrame, column: str) -> pd.DataFrame:
            frame = frame.copy()
            frame[column] = frame[column].map(lambda v: named.get(v, v)).astype("string")
            return frame

        values = [view.summary,
                  gr.LinePlot(value=words(view.queue, "lane"), x_title=when,
                              y_title=text("plot_pages_waiting", lang),
                              color_title=text("plot_lane", lang)),
                  gr.BarPlot(value=view.throughput, x_title=when,
                             y_title=text("plot_pages", lang)),
                  gr.LinePlot(value=view.latency, x_title=when,
                              y_title=text("plot_seconds", lang),
                              color_title=text("plot_percentile", lang)),
                  gr.LinePlot(value=words(view.vram, "series"), x_title=when,
                              color_title=text("plot_series", lang)),
                  gr.LinePlot(value=words(view.ram, "series"), x_title=when,
                              color_title=text("plot_series", lang)), view.failures]
        return values + [view.endpoints] if endpoints is not None else values

    # on page load, then every REFRESH_S
    gr.on(triggers=None, fn=refresh, inputs=None, outputs=outputs, show_progress="hidden",
          api_visibility="private")
    gr.Timer(REFRESH_S).tick(refresh, outputs=outputs, show_progress="hidden",
                             trigger_mode="once", concurrency_limit=4,
                             concurrency_id="dashboard-refresh", api_visibility="private")
