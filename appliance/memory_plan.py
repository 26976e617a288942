"""What an engine worker needs on the card before it is loaded, and how much fits.

- ``estimate_worker_bytes``: one worker process's bytes: its weights, projector and
  compute buffers once, plus a KV cache for each sequence slot (a page being read).
- ``plan_memory``: how many worker processes fit (``workers.count``), each reading how
  many pages at once (``engine.parallel``), under ``memory.vram_load_limit``.

The plan is made against the card's memory as sampled before the workers start (host
memory on a host without an NVIDIA GPU), so whatever else runs there is counted.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import TYPE_CHECKING

from appliance.errors import ConfigError, ModelDoesNotFit
from appliance.gpu import MemorySample

if TYPE_CHECKING:
    from appliance.config import Settings
    from appliance.gguf.pair import ModelInfo

GIB = 2**30
MIB = 2**20
SAFETY = 0.15  # what the estimate may miss (allocator slack, fragmentation)
# engine.parallel = "auto" reads at most this many pages at once. Decoding N pages
# together reads the weights once a step for all of them, so pages/min grow with N
# while the step is bound by memory bandwidth; past about 16 sequences it becomes
# compute-bound and every step slows with N, so one page's latency suffers for
# little more throughput (and each page's image encoding stalls all the others).
MAX_AUTO_SLOTS = 16
# On a host without a GPU, each page's image and prompt are evaluated on the CPU, one
# after another, stalling the pages in flight (2.3 s a page for the 1B shape on 2
# cores). Measured end to end there: 4 pages at once gave 1.26x the pages/min of one,
# 8 gave 1.30x at twice the latency, and every page more in flight pushes the last
# one's start nearer workers.page_timeout_s.
MAX_AUTO_SLOTS_CPU = 4

# Bytes per KV-cache element for llama.cpp's cache types (block bytes / block size).
KV_BYTES_PER_ELEMENT = {
    "f32": Fraction(4), "f16": Fraction(2), "bf16": Fraction(2),
    "q8_0": Fraction(34, 32), "q5_1": Fraction(24, 32), "q5_0": Fraction(22, 32),
    "q4_1": Fraction(20, 32), "q4_0": Fraction(18, 32), "iq4_nl": Fraction(18, 32),
}
MIN_COMPUTE_MARGIN_BYTES = 256 * MIB


def gib(n: float, digits: int = 1) -> str:
    return f"{n / GIB:.{digits}f} GiB"


@dataclass(frozen=True)
class WorkerEstimate:
    """What one engine worker holds on the card, in bytes, reading ``slots`` pages at once."""

    weights_bytes: int
    mmproj_bytes: int
    kv_slot_bytes: int  # one slot's KV cache, n_ctx tokens
    compute_bytes: int
    n_ctx: int
    cache_type: str
    gpu_layers: int
    n_layer: int
    quant: str
    slots: int = 1

    def at(self, slots: int) -> WorkerEstimate:
        return replace(self, slots=slots)

    @property
    def kv_cache_bytes(self) -> int:
        return self.slots * self.kv_slot_bytes

    @property
    def total_bytes(self) -> int:
        """Weights, projector and compute once; a KV cache per slot."""
        return self.weights_bytes + self.mmproj_bytes + self.compute_bytes + self.kv_cache_bytes

    def describe(self) -> str:
        return (f"{gib(self.total_bytes, 2)} per worker = weights "
                f"{gib(self.weights_bytes, 2)} ({self.quant}, {self.gpu_layers}/"
                f"{self.n_layer} layers) + mmproj {gib(self.mmproj_bytes, 2)} + compute "
                f"{gib(self.compute_bytes, 2)} + KV cache {self.slots} x "
                f"{gib(self.kv_slot_bytes, 2)} (n_ctx {self.n_ctx} per slot, {self.cache_type})")


def estimate_worker_bytes(info: ModelInfo, *, n_ctx: int, n_gpu_layers: int = -1,
                          cache_type: str = "f16",
                          compute_margin_bytes: int | None = None) -> WorkerEstimate:
    """The device memory one worker needs for ``info`` with one slot of ``n_ctx``
    (``.at(slots)`` for more).

    Weights are the model file's size (the tensors, mapped as stored). A slot's KV
    cache is n_ctx x n_layer x n_head_kv x head_dim x 2 (K and V) x bytes per element:
    an upper bound for Gemma's sliding-window layers, which llama.cpp may cache
    shorter. With partial offload (0 <= n_gpu_layers < n_layer) weights and KV cache
    scale by the offloaded fraction; the mmproj runs on the card either way. The
    compute margin, unless given, is max(256 MiB, 10 % of the offloaded weights): it
    covers llama.cpp's compute graph buffer, which grows with the model's width (and
    so with its size), the vision encoder's activations, and the per-process CUDA
    context and cuBLAS workspace, none of which the files show; 256 MiB is the floor
    that a small model still needs. It is counted once: the slots share one graph.
    """
    try:
        per_element = KV_BYTES_PER_ELEMENT[cache_type.lower()]
    except KeyError:
        raise ConfigError(f"unknown KV cache type {cache_type!r}: use one of "
                          f"{', '.join(KV_BYTES_PER_ELEMENT)}") from None
    n_ctx = n_ctx if n_ctx > 0 else info.context_length  # llama.cpp: 0 = the model's
    n_layer = max(info.n_layer, 1)
    layers = n_layer if n_gpu_layers < 0 else min(n_gpu_layers, n_layer)
    kv_full = math.ceil(n_ctx * n_layer * info.n_head_kv * info.head_dim * 2 * per_element)
    weights = info.model_size * layers // n_layer
    if compute_margin_bytes is None:
        compute_margin_bytes = max(MIN_COMPUTE_MARGIN_BYTES, weights // 10)
    return WorkerEstimate(weights, info.mmproj_size, kv_full * layers // n_layer,
                          compute_margin_bytes, n_ctx, cache_type.lower(), layers,
                          n_layer, info.quant)


@dataclass(frozen=True)
class MemoryPlan:
    workers: int  # processes to start; 0 when not even one fits
    configured: int  # workers.count
    parallel: int | str  # engine.parallel as asked: a number or "auto"
    estimate: WorkerEstimate  # one worker at the planned slots
    message: str

    @property
    def slots(self) -> int:
        return self.estimate.slots

    @property
    def total_bytes(self) -> int:
        return self.workers * self.estimate.total_bytes

    @property
    def refused(self) -> bool:
        return self.workers < 1

    @property
    def short(self) -> bool:
        """Fewer workers or slots fit than were asked for, and fewer will run."""
        asked = self.slots if self.parallel == "auto" else self.parallel
        return not self.refused and (self.workers < self.configured or self.slots < asked)

    def require(self) -> MemoryPlan:
        """The plan, or ``ModelDoesNotFit`` when not even one worker with one slot fits."""
        if self.refused:
            raise ModelDoesNotFit(self.message)
        return self


def plan_memory(estimate: WorkerEstimate, sample: MemorySample, *, workers: int,
                parallel: int | str = 1, load_limit: float = 0.90,
                safety: float = SAFETY) -> MemoryPlan:
    """How many workers, each with how many slots, fit:
    used + workers x (weights + mmproj + compute + slots x kv_slot) x (1 + safety)
    <= load_limit x total.

    Workers come first (as many of ``workers`` as fit with one slot each), then each
    gets the most slots that still fit: up to ``parallel``, or for "auto"
    MAX_AUTO_SLOTS (MAX_AUTO_SLOTS_CPU when the plan is made against host memory). Fewer than asked for run, and the message says so and what to change;
    not even one worker with one slot is a refusal.
    """
    budget = load_limit * sample.total_bytes - sample.used_bytes

    def need(slots: int) -> float:
        return estimate.at(slots).total_bytes * (1 + safety)

    fits = max(0, math.floor(budget / need(1)))
    count = min(workers, fits)
    most = MAX_AUTO_SLOTS_CPU if sample.source == "host" else MAX_AUTO_SLOTS
    asked = most if parallel == "auto" else parallel
    slots = max((n for n in range(1, asked + 1) if count * need(n) <= budget),
                default=1) if count else 1
    planned = estimate.at(slots)
    facts = (f"one worker with {slots} slot(s) needs {gib(need(slots))} with "
             f"{safety * 100:.0f} % safety ({planned.describe()}); "
             f"{gib(max(0.0, budget))} of {sample.label} is free below the "
             f"{load_limit * 100:.0f} % load limit ({gib(sample.used_bytes)} of "
             f"{gib(sample.total_bytes)} in use)")
    knobs = (f"a smaller quant than {estimate.quant} (engine.model), fewer offloaded "
             f"layers (engine.n_gpu_layers), a smaller context (engine.n_ctx = "
             f"{estimate.n_ctx})")
    shortfalls, settings = [], []
    if count < workers:
        shortfalls.append(f"only {fits} of {workers} configured workers fit, running {count}")
        settings.append(f"workers.count = {count}")
    if slots < asked and parallel != "auto":
        shortfalls.append(f"only {slots} of {parallel} slots (engine.parallel) fit, "
                          f"running {slots}")
        settings.append(f"engine.parallel = {slots}")
    if count < 1:
        message = (f"the model does not fit, not even one worker reading one page at a "
                   f"time: {facts}. To make it fit, use {knobs}, or fewer workers "
                   f"(workers.count = {workers}) if other workers already hold memory")
    elif shortfalls:
        message = (f"{'; '.join(shortfalls)} ({count} worker(s) x {slots} slot(s), "
                   f"{gib(count * planned.total_bytes, 2)} in all): {facts}. To run as "
                   f"configured, use {knobs}; or set {' and '.join(settings)}")
    else:
        cap = " (the most auto takes)" if parallel == "auto" and slots == most else ""
        message = (f"{count} worker(s) x {slots} slot(s) fit{cap}, "
                   f"{gib(count * planned.total_bytes, 2)} in all: {facts}")
    return MemoryPlan(count, workers, parallel, planned, message)


def plan_for(settings: Settings, info: ModelInfo, sample: MemorySample, *,
             parallel_slots: bool) -> MemoryPlan:
    """The plan for the configured engine: ``engine.parallel`` slots where the engine
    can read several pages at once (``parallel_slots``), else one."""
    engine = settings.engine
    estimate = estimate_worker_bytes(info, n_ctx=engine.n_ctx, n_gpu_layers=engine.n_gpu_layers)
    return plan_memory(estimate, sample, workers=settings.workers.count,
                       parallel=engine.parallel if parallel_slots else 1,
                       load_limit=settings.memory.vram_load_limit)
