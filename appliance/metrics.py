"""Prometheus metrics (``appliance.api`` serves them at ``/metrics``), and the figures the
dashboard plots.

Most figures are read from the store when they are asked for, so they survive a
restart and cannot disagree with it: documents per source, pages in flight per
lane, final failures per code, the review backlog and reviewer actions. The few that
only exist in this process come from the objects that own them: the memory sampler
(VRAM, watermark state), the worker handles (restarts) and intake (refused
submissions, which leave nothing in the store).

Page attempts, their timings, repairs and confidences are folded into running totals
by ``PageTotals``, which reads the append-only attempt table on from the last row it
saw: each scrape costs only the rows written since the one before, and the first
scrape after a start reads the history once. Histograms are therefore computed from
the store with fixed buckets rather than observed in the dispatcher: no hook in the
page path, nothing lost by a restart, and exactly one observation per stored attempt.

Remote endpoints ([[engine.remote]]) are the exception: a failed or released attempt
is stored under its worker's id only (``w<slot>:<pid>``), which names an endpoint in
this run alone, so the store cannot say which endpoint failed a page. What each
endpoint answered is therefore counted where the answers arrive (``EndpointAnswers``,
fed by the dispatcher), beside what the supervisor knows of it now (its pages in
flight, whether its circuit breaker has it out); those counts start again at a
restart, as a Prometheus counter may.

Every app gets its own ``CollectorRegistry`` (``metrics_for``), never the global
one: tests run several appliances in one process.
"""

from __future__ import annotations

import threading
import time
import weakref
from bisect import bisect_left, bisect_right
from collections import Counter, deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import psutil
from prometheus_client import (
    CollectorRegistry, PlatformCollector, ProcessCollector, generate_latest,
)
from prometheus_client.core import (
    CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric,
)
from prometheus_client.utils import floatToGoString

from appliance.engines.messages import PageDone, PageFailed
from appliance.store import queries
from appliance.store.models import Lane, Outcome

if TYPE_CHECKING:
    from appliance.daemon import Appliance

# Queue wait reaches the batch lane's delays (600 s + up to 1800 s by size); service
# time is a classic page's second or a vision page's minute; confidence is 0-1.
QUEUE_WAIT_BUCKETS_S = (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1200, 1800,
                        3600, 7200)
SERVICE_BUCKETS_S = (0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600)
CONFIDENCE_BUCKETS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 1.0)
WATERMARK_STATES = ("ok", "paused", "critical")
WORKER_STATES = ("starting", "idle", "busy", "out", "dead")

HISTORY_S = 3600.0  # what the dashboard plots
SAMPLE_S = 5.0  # one queue and memory sample this often
READ_BATCH = 5000  # attempt rows per read while catching up


class Buckets:
    """A histogram's running state: a count per bucket (``le`` bounds) and the sum."""

    def __init__(self, bounds: Iterable[float]):
        self.bounds = tuple(sorted(bounds))
        self.counts = [0] * (len(self.bounds) + 1)  # the last one is +Inf
        self.sum = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self.bounds, value)] += 1  # the first bound >= value
        self.sum += value

    @property
    def count(self) -> int:
        return sum(self.counts)

    def cumulative(self) -> list[tuple[str, int]]:
        out, running = [], 0
        for bound, n in zip((*self.bounds, float("inf")), self.counts):
            running += n
            out.append((floatToGoString(bound), running))
        return out


@dataclass(frozen=True)
class EndpointAnswered:
    """What one endpoint answered since the start (``EndpointAnswers.snapshot``)."""

    latency: list[tuple[str, int]]  # cumulative histogram buckets (le, count)
    latency_sum_s: float
    recent: list[tuple[float, float]]  # (answered at, seconds) of the last keep_s, oldest first
    errors: dict[str, int]  # pages answered failed, by code


class EndpointAnswers:
    """The answers of each remote endpoint's worker since the start, by endpoint name,
    as the dispatcher receives them: the seconds from sending a page to its answer for
    the pages read (a histogram, and those of the last ``keep_s`` for the dashboard;
    a page found in the result cache never reached the endpoint and is left out), and
    the pages answered failed, by code (``endpoint_unavailable``: the endpoint failed
    the request and the page went back uncharged)."""

    def __init__(self, keep_s: float = HISTORY_S):
        self.keep_s = keep_s
        self._latency: dict[str, Buckets] = {}
        self._recent: dict[str, deque] = {}
        self._errors: Counter = Counter()  # (endpoint, code) -> n
        self._lock = threading.Lock()

    def record(self, endpoint: str, answer: PageDone | PageFailed, seconds: float,
               now: float | None = None) -> None:
        """The endpoint's worker answered a page ``seconds`` after it was sent."""
        now = time.time() if now is None else now
        with self._lock:
            if isinstance(answer, PageFailed):
                self._errors[(endpoint, answer.code)] += 1
                return
            if "cached" in answer.recognition.flags:
                return
            self._latency.setdefault(endpoint, Buckets(SERVICE_BUCKETS_S)).observe(seconds)
            recent = self._recent.setdefault(endpoint, deque())
            recent.append((now, seconds))
            self._trim(recent, now)

    def snapshot(self, endpoint: str, now: float | None = None) -> EndpointAnswered:
        now = time.time() if now is None else now
        with self._lock:
            latency = self._latency.get(endpoint) or Buckets(SERVICE_BUCKETS_S)
            recent = self._recent.get(endpoint, deque())
            self._trim(recent, now)
            return EndpointAnswered(latency.cumulative(), latency.sum, list(recent),
                                    {code: n for (name, code), n in sorted(self._errors.items())
                                     if name == endpoint})

    def _trim(self, recent: deque, now: float) -> None:
        while recent and recent[0][0] < now - self.keep_s:
            recent.popleft()


@dataclass(frozen=True)
class EndpointStatus:
    """One remote endpoint now: from its worker, and what it answered."""

    name: str
    model: str
    max_concurrency: int
    in_flight: int  # pages sent to it and not answered yet
    state: str  # its worker's state: starting, idle, busy, out or dead
    out: str | None  # why its breaker has it out; the server's words: untrusted
    answered: EndpointAnswered


@dataclass(frozen=True)
class Completion:
    """One page read successfully, for the dashboard's latency and throughput plots."""

    finished_at: float
    queue_wait_s: float
    service_s: float

    @property
    def latency_s(self) -> float:
        return self.queue_wait_s + self.service_s


@dataclass
class PageTotals:
    """Running totals over page attempts, fed the store's attempt rows in id order.

    Successful attempts (outcome ``ok``) give the queue wait (``started_at`` minus the
    document's arrival: retries and review reruns wait longer), the service time
    (``finished_at - started_at``), the confidence and the repair level.
    """

    last_id: int = 0
    attempts: Counter = field(default_factory=Counter)  # (engine, outcome) -> n
    repair_levels: Counter = field(default_factory=Counter)  # 1 repaired, 2 degraded
    queue_wait: Buckets = field(default_factory=lambda: Buckets(QUEUE_WAIT_BUCKETS_S))
    service: Buckets = field(default_factory=lambda: Buckets(SERVICE_BUCKETS_S))
    confidence: Buckets = field(default_factory=lambda: Buckets(CONFIDENCE_BUCKETS))
    recent: deque = field(default_factory=deque)  # Completions of the last HISTORY_S
    keep_s: float = HISTORY_S

    def add(self, rows: Iterable[queries.AttemptRow], now: float) -> None:
        for row in rows:
            self.last_id = max(self.last_id, row.id)
            self.attempts[(row.engine, row.outcome)] += 1
            if row.outcome != Outcome.OK:
                continue
            level = row.repair_level
            if level is None:  # a reading stored before provenance carried the level
                level = 2 if "degraded" in row.flags else 1 if "repaired" in row.flags else 0
            if level:
                self.repair_levels[level] += 1
            if row.confidence is not None:
                self.confidence.observe(row.confidence)
            if row.started_at is None:
                continue
            wait = max(0.0, row.started_at - row.queued_at)
            service = max(0.0, row.finished_at - row.started_at)
            self.queue_wait.observe(wait)
            self.service.observe(service)
            if row.finished_at >= now - self.keep_s:
                self.recent.append(Completion(row.finished_at, wait, service))
        self.trim(now)

    def trim(self, now: float) -> None:
        while self.recent and self.recent[0].finished_at < now - self.keep_s:
            self.recent.popleft()


@dataclass(frozen=True)
class Snapshot:
    """One sample of what the store and the process cannot tell afterwards."""

    at: float
    queued: dict[str, int]  # per lane
    running: dict[str, int]
    vram_used_bytes: int | None
    vram_total_bytes: int | None
    vram_source: str | None  # nvml, host or fake
    ram_used_bytes: int
    ram_total_bytes: int


class History:
    """The last ``keep_s`` seconds of snapshots; the caller supplies the time."""

    def __init__(self, keep_s: float = HISTORY_S):
        self.keep_s = keep_s
        self._samples: deque[Snapshot] = deque()
        self._lock = threading.Lock()

    def add(self, snapshot: Snapshot) -> None:
        with self._lock:
            self._samples.append(snapshot)
            while self._samples and self._samples[0].at < snapshot.at - self.keep_s:
                self._samples.popleft()

    def samples(self) -> list[Snapshot]:
        with self._lock:
            return list(self._samples)


def percentile(sorted_values: list[float], q: float) -> float | None:
    """Nearest-rank percentile (0 < q <= 100) of already sorted values."""
    if not sorted_values:
        return None
    rank = max(1, -(-len(sorted_values) * q // 100))  # ceil(n * q / 100)
    return sorted_values[int(rank) - 1]


def pages_per_bucket(completions: Iterable[Completion], now: float,
                     window_s: float = HISTORY_S, bucket_s: float = 60.0
                     ) -> list[tuple[float, int]]:
    """(bucket start, pages read successfully in it) for every ``bucket_s`` of the last
    ``window_s``, the bucket holding ``now`` last; empty buckets count 0."""
    end = (now // bucket_s + 1) * bucket_s
    start = end - (window_s // bucket_s) * bucket_s
    counts: Counter = Counter(c.finished_at // bucket_s * bucket_s for c in completions
                              if start <= c.finished_at < end)
    n = int((end - start) // bucket_s)
    return [(start + i * bucket_s, counts.get(start + i * bucket_s, 0)) for i in range(n)]


@dataclass(frozen=True)
class RollingLatency:
    at: float
    pages: int  # read successfully in the window before ``at``
    p50_s: float
    p95_s: float
    p99_s: float


def rolling_latency(completions: Iterable[Completion], times: Iterable[float],
                    window_s: float = 300.0) -> list[RollingLatency]:
    """Page latency percentiles over the ``window_s`` before each of ``times`` (the
    history's sample times), like a rate over [5m]; times with no page are left out."""
    done = sorted(completions, key=lambda c: c.finished_at)
    finished = [c.finished_at for c in done]
    out = []
    for at in times:
        lo, hi = bisect_right(finished, at - window_s), bisect_right(finished, at)
        values = sorted(c.latency_s for c in done[lo:hi])
        if values:
            out.append(RollingLatency(at, len(values), percentile(values, 50),
                                      percentile(values, 95), percentile(values, 99)))
    return out


class ApplianceMetrics:
    """One appliance's registry, its collector and the dashboard's history."""

    def __init__(self, appliance: Appliance):
        # a proxy: the appliance owns these metrics (through its scheduler's job and
        # metrics_for's weak map), not the other way round
        self.appliance = weakref.proxy(appliance)
        self.totals = PageTotals()
        self.history = History()
        self._lock = threading.Lock()
        self.registry = CollectorRegistry()
        self.registry.register(self)
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)

    # --- reading ---

    def catch_up(self, now: float | None = None) -> PageTotals:
        """Fold in the attempts stored since the last call."""
        now = time.time() if now is None else now
        default_engine = self.appliance.workers[0].spec.engine
        with self._lock:
            while True:
                rows = queries.attempts_after(self.appliance.db, self.totals.last_id,
                                              READ_BATCH, default_engine)
                self.totals.add(rows, now)
                if len(rows) < READ_BATCH:
                    break
            self.totals.trim(now)
            return self.totals

    def recent_completions(self) -> list[Completion]:
        with self._lock:
            return list(self.totals.recent)

    def snapshot(self, now: float | None = None) -> Snapshot:
        in_flight = queries.pages_in_flight(self.appliance.db)
        memory = self.appliance.memory.status()
        ram = psutil.virtual_memory()
        return Snapshot(
            at=time.time() if now is None else now,
            queued={lane.value: in_flight.get((lane.value, "queued"), 0) for lane in Lane},
            running={lane.value: in_flight.get((lane.value, "running"), 0) for lane in Lane},
            vram_used_bytes=memory["used_bytes"], vram_total_bytes=memory["total_bytes"],
            vram_source=memory["source"], ram_used_bytes=int(ram.total - ram.available),
            ram_total_bytes=int(ram.total))

    def sample(self) -> Snapshot:
        """One history sample (the scheduler's job; the dashboard calls it too)."""
        snapshot = self.snapshot()
        self.history.add(snapshot)
        self.catch_up(snapshot.at)
        return snapshot

    def endpoints(self, now: float | None = None) -> list[EndpointStatus]:
        """The remote endpoints, in config order; none without [[engine.remote]]."""
        answers = self.appliance.dispatcher.endpoint_answers
        statuses = []
        for worker in list(self.appliance.workers):
            endpoint = worker.spec.options.get("endpoint")
            if endpoint is None:
                continue
            statuses.append(EndpointStatus(
                name=endpoint["name"], model=endpoint["model"],
                max_concurrency=endpoint["max_concurrency"], in_flight=len(worker.jobs),
                state=str(worker.state), out=worker.out,
                answered=answers.snapshot(endpoint["name"], now)))
        return statuses

    def exposition(self) -> bytes:
        return generate_latest(self.registry)

    # --- the collector ---

    def collect(self) -> Iterator[Metric]:
        appliance = self.appliance
        db = appliance.db
        totals = self.catch_up()
        with self._lock:
            attempts = dict(totals.attempts)
            repair_levels = dict(totals.repair_levels)
            histograms = [(name, doc, buckets.cumulative(), buckets.sum) for name, doc, buckets
                          in (("ocr_page_queue_wait_seconds",
                               "Time a page waited, from its document's arrival to the start "
                               "of its successful reading.", totals.queue_wait),
                              ("ocr_page_service_seconds",
                               "Time a successful reading took, from claim to result.",
                               totals.service),
                              ("ocr_page_confidence",
                               "Confidence (0-1) of successful machine readings.",
                               totals.confidence))]

        documents = CounterMetricFamily(
            "ocr_documents_accepted", "Documents accepted and stored, by source (upload, api, "
            "watch, cli); those refused for their content are stored failed and counted.",
            labels=["source"])
        for source, n in sorted(queries.documents_by_source(db).items()):
            documents.add_metric([source], n)
        yield documents

        refused = CounterMetricFamily(
            "ocr_documents_refused", "Submissions refused before anything was stored, by "
            "source, lane and code (queue_full: HTTP 429; disk_full: HTTP 507).",
            labels=["source", "lane", "code"])
        for (source, lane, code), n in sorted(appliance.intake.refusals.snapshot().items()):
            refused.add_metric([source, lane, code], n)
        yield refused

        pages = CounterMetricFamily(
            "ocr_pages", "Page reading attempts, by engine and outcome (ok, error, timeout, "
            "crashed, degenerate, preempted); a retried page counts once per attempt.",
            labels=["engine", "outcome"])
        for (engine, outcome), n in sorted(attempts.items()):
            pages.add_metric([engine, outcome], n)
        yield pages

        failed = CounterMetricFamily("ocr_pages_failed", "Pages that ended failed, by reason "
                                     "code.", labels=["code"])
        for code, n in sorted(queries.failed_pages_by_code(db).items()):
            failed.add_metric([code], n)
        yield failed

        yield CounterMetricFamily("ocr_pages_repaired", "Successful readings whose Markdown "
                                  "was repaired in place (repair level 1, flag repaired).",
                                  value=repair_levels.get(1, 0))
        yield CounterMetricFamily("ocr_pages_degraded", "Successful readings degraded to "
                                  "plain text (repair level 2, flag degraded).",
                                  value=repair_levels.get(2, 0))

        for name, doc, buckets, total in histograms:
            histogram = HistogramMetricFamily(name, doc)
            histogram.add_metric([], buckets, sum_value=total)
            yield histogram

        in_flight = queries.pages_in_flight(db)
        queued = GaugeMetricFamily("ocr_queue_depth", "Pages waiting to be read, by lane.",
                                   labels=["lane"])
        running = GaugeMetricFamily("ocr_pages_running", "Pages being read, by lane.",
                                    labels=["lane"])
        for lane in Lane:
            queued.add_metric([lane.value], in_flight.get((lane.value, "queued"), 0))
            running.add_metric([lane.value], in_flight.get((lane.value, "running"), 0))
        yield queued
        yield running

        backlog = queries.review_backlog(db)
        yield GaugeMetricFamily("ocr_review_backlog_pages", "Pages waiting for review.",
                                value=backlog["waiting"])
        yield GaugeMetricFamily("ocr_review_backlog_locked_pages", "Pages waiting for review "
                                "that a reviewer holds now.", value=backlog["locked"])
        by_reason = GaugeMetricFamily("ocr_review_backlog_reason_pages", "Pages waiting for "
                                      "review, by reason code (a page may have several).",
                                      labels=["reason"])
        for reason, n in sorted(backlog["by_reason"].items()):
            by_reason.add_metric([reason], n)
        yield by_reason
        actions = CounterMetricFamily("ocr_review_actions", "Reviewer actions, by action.",
                                      labels=["action"])
        for action, n in sorted(queries.review_action_counts(db).items()):
            actions.add_metric([action], n)
        yield actions

        yield from self._memory()
        yield from self._workers()
        yield from self._endpoints()

    def _memory(self) -> Iterator[Metric]:
        sampler = self.appliance.memory
        status = sampler.status()
        labels = [status["device"], status["source"] or "none"]
        for name, doc, key in (
                ("ocr_vram_used_bytes", "Memory in use on the device the watermarks watch "
                 "(source nvml: the GPU; host: host RAM on a host without NVML).",
                 "used_bytes"),
                ("ocr_vram_total_bytes", "Memory of the device the watermarks watch.",
                 "total_bytes"),
                ("ocr_vram_peak_used_bytes", "Highest memory use sampled since the start.",
                 "peak_used_bytes")):
            gauge = GaugeMetricFamily(name, doc, labels=["device", "source"])
            if status["source"] is not None:  # none before the first sample
                gauge.add_metric(labels, status[key])
            yield gauge
        state = GaugeMetricFamily("ocr_vram_watermark_state", "1 for the memory watermarks' "
                                  "current state (ok: dispatching; paused: above the high "
                                  "watermark; critical: preempting), 0 for the others.",
                                  labels=["state"])
        for name in WATERMARK_STATES:
            state.add_metric([name], float(status["state"] == name))
        yield state
        moves = CounterMetricFamily("ocr_vram_watermark_transitions", "Watermark transitions "
                                    "since the start, by kind (pause, resume, preempt, "
                                    "relieve).", labels=["kind"])
        for kind, n in sorted(sampler.watermarks.counts.items()):
            moves.add_metric([kind], n)
        yield moves
        ram = psutil.virtual_memory()
        yield GaugeMetricFamily("ocr_host_memory_used_bytes", "Host RAM in use (total minus "
                                "available).", value=ram.total - ram.available)
        yield GaugeMetricFamily("ocr_host_memory_total_bytes", "Host RAM.", value=ram.total)

    def _workers(self) -> Iterator[Metric]:
        workers = list(self.appliance.workers)
        restarts = CounterMetricFamily("ocr_worker_restarts", "Engine worker restarts since "
                                       "the start (after a crash, a timeout or a failed "
                                       "start), by slot.", labels=["slot"])
        recycles = CounterMetricFamily("ocr_worker_recycles", "Engine workers replaced by the "
                                       "leak guard between pages, by slot.", labels=["slot"])
        for worker in workers:
            restarts.add_metric([str(worker.slot)], worker.restarts)
            recycles.add_metric([str(worker.slot)], worker.recycled)
        yield restarts
        yield recycles
        states = Counter(str(w.state) for w in workers)
        gauge = GaugeMetricFamily("ocr_workers", "Engine workers, by state.", labels=["state"])
        for name in WORKER_STATES:
            gauge.add_metric([name], states.get(name, 0))
        yield gauge
        yield GaugeMetricFamily("ocr_ready", "1 when every worker has warmed up and one can "
                                "take a page.", value=float(self.appliance.ready))

    def _endpoints(self) -> Iterator[Metric]:
        endpoints = self.endpoints()
        labels = ["endpoint", "model"]
        in_flight = GaugeMetricFamily("ocr_endpoint_pages_in_flight", "Pages sent to a remote "
                                      "endpoint and not answered yet.", labels=labels)
        capacity = GaugeMetricFamily("ocr_endpoint_max_concurrency", "Pages a remote endpoint "
                                     "is sent at once at most (its max_concurrency).",
                                     labels=labels)
        out = GaugeMetricFamily("ocr_endpoint_out", "1 while a remote endpoint is out of "
                                "service (it failed a request; its circuit breaker is open "
                                "and probes it), 0 while it is in service.", labels=labels)
        latency = HistogramMetricFamily("ocr_endpoint_page_seconds", "Time from sending a "
                                        "page to a remote endpoint to its reading, for the "
                                        "pages it read, since the start.", labels=labels)
        errors = CounterMetricFamily("ocr_endpoint_page_errors", "Pages a remote endpoint's "
                                     "worker answered failed since the start, by code "
                                     "(endpoint_unavailable: the endpoint failed the request "
                                     "and the page went back to the queue uncharged).",
                                     labels=[*labels, "code"])
        for endpoint in endpoints:
            values = [endpoint.name, endpoint.model]
            answered = endpoint.answered
            in_flight.add_metric(values, endpoint.in_flight)
            capacity.add_metric(values, endpoint.max_concurrency)
            out.add_metric(values, float(endpoint.out is not None))
            latency.add_metric(values, answered.latency, sum_value=answered.latency_sum_s)
            for code, n in answered.errors.items():
                errors.add_metric([*values, code], n)
        yield from (in_flight, capacity, out, latency, errors)


_BY_APPLIANCE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_BY_APPLIANCE_LOCK = threading.Lock()


def metrics_for(appliance: Appliance) -> ApplianceMetrics:
    """The appliance's metrics, made on first use; their history is sampled every
    ``SAMPLE_S`` by the appliance's scheduler once it runs."""
    with _BY_APPLIANCE_LOCK:
        metrics = _BY_APPLIANCE.get(appliance)
        if metrics is None:
            metrics = _BY_APPLIANCE[appliance] = ApplianceMetrics(appliance)
            appliance.scheduler.add_job(metrics.sample, "interval", seconds=SAMPLE_S,
                                        id="metrics-history", replace_existing=True,
                                        max_instances=1, coalesce=True)
        return metrics
