"""GPU memory: sampling and watermarks.

- ``MemoryDevice``: ``sample()`` used/total and per-process memory. ``NvmlDevice``
  asks the NVIDIA driver; ``HostMemoryDevice`` reads host RAM (psutil), so the same
  logic guards CPU-only hosts. The tests stand a scripted device in for the card
  (``tests/fixtures/gpu.py``).
- ``Watermarks``: a pure hysteresis state machine; ``MemorySampler`` drives it.

What a model needs before it is loaded, and how much of it fits, is
``appliance.memory_plan``'s.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Protocol

import psutil

from appliance.errors import ConfigError

try:
    import pynvml
except ImportError:  # nvidia-ml-py missing: only host memory can be watched
    pynvml = None

log = logging.getLogger(__name__)

_LABELS = {"nvml": "GPU memory", "host": "host memory"}


# --- sampling ------------------------------------------------------------------------


@dataclass(frozen=True)
class MemorySample:
    used_bytes: int
    total_bytes: int
    source: str  # "nvml" or "host"; a test's device names itself
    per_pid: dict[int, int] = field(default_factory=dict)

    @property
    def fraction(self) -> float:
        return self.used_bytes / self.total_bytes if self.total_bytes > 0 else 0.0

    @property
    def label(self) -> str:
        """What was measured, for messages: GPU memory or host memory."""
        return _LABELS.get(self.source, "memory")


class MemoryDevice(Protocol):
    name: str

    def sample(self) -> MemorySample: ...

    def watch_pids(self, pids: Iterable[int]) -> None: ...  # the worker pids to report


class NvmlDevice:
    """One NVIDIA card through NVML. Per-pid figures are the driver's (host pid namespace)."""

    source = "nvml"

    def __init__(self, index: int = 0):
        if pynvml is None:
            raise RuntimeError("nvidia-ml-py is not installed")
        pynvml.nvmlInit()
        try:
            self._handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            raw = pynvml.nvmlDeviceGetName(self._handle)
        except pynvml.NVMLError:
            pynvml.nvmlShutdown()
            raise
        self.name = f"gpu{index} {raw.decode() if isinstance(raw, bytes) else raw}"

    @staticmethod
    def available(index: int = 0) -> bool:
        """Whether NVML answers and has card ``index``; False without a driver or library."""
        if pynvml is None:
            return False
        try:
            pynvml.nvmlInit()
        except pynvml.NVMLError:  # no driver, no library, no permission
            return False
        try:
            return index < pynvml.nvmlDeviceGetCount()
        except pynvml.NVMLError:
            return False
        finally:
            pynvml.nvmlShutdown()

    def sample(self) -> MemorySample:
        memory = pynvml.nvmlDeviceGetMemoryInfo(self._handle)
        try:
            processes = pynvml.nvmlDeviceGetComputeRunningProcesses(self._handle)
        except pynvml.NVMLError:  # not supported on this card or driver: totals only
            processes = []
        per_pid: dict[int, int] = {}
        for proc in processes:  # usedGpuMemory is None where the driver cannot tell
            per_pid[proc.pid] = per_pid.get(proc.pid, 0) + int(proc.usedGpuMemory or 0)
        return MemorySample(int(memory.used), int(memory.total), "nvml", per_pid)

    def watch_pids(self, pids: Iterable[int]) -> None:
        pass  # NVML lists every process on the card

    def close(self) -> None:  # once; NVML counts its inits
        pynvml.nvmlShutdown()


class HostMemoryDevice:
    """Host RAM, for CPU-only hosts: used = total - available; RSS of the watched pids."""

    source = "host"
    name = "host"

    def __init__(self):
        self._pids: set[int] = set()

    def watch_pids(self, pids: Iterable[int]) -> None:
        """Replace the set of pids whose RSS each sample reports."""
        self._pids = set(pids)

    def sample(self) -> MemorySample:
        memory = psutil.virtual_memory()
        per_pid = {}
        for pid in sorted(self._pids):
            try:
                per_pid[pid] = psutil.Process(pid).memory_info().rss
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                pass  # a worker that is gone: the supervisor registers its successor
        return MemorySample(int(memory.total - memory.available), int(memory.total), "host",
                            per_pid)


def open_device(index: int = 0) -> MemoryDevice:
    """The NVIDIA card when NVML answers, else host memory."""
    if NvmlDevice.available(index):
        return NvmlDevice(index)
    log.info("event=memory_device source=host reason=no_nvml")
    return HostMemoryDevice()


# --- watermarks ----------------------------------------------------------------------

OK, PAUSED, CRITICAL = "ok", "paused", "critical"


@dataclass(frozen=True)
class Transition:
    from_state: str
    to_state: str
    fraction: float

    @property
    def kind(self) -> str:
        """pause (stop dispatch), resume, preempt (free memory now), relieve (back to paused)."""
        if self.to_state == CRITICAL:
            return "preempt"
        if self.to_state == OK:
            return "resume"
        return "pause" if self.from_state == OK else "relieve"


class Watermarks:
    """Memory-pressure hysteresis: when to stop handing out pages, and when to preempt.

    - ``ok`` -> ``paused`` when the fraction rises above ``high``; back to ``ok`` only
      once it falls below ``low``. Values wandering between the two never toggle.
    - ``critical`` (which implies paused) after ``critical_samples`` consecutive
      samples above ``critical``: one spike is not enough. Entering it is a "preempt"
      transition the caller acts on (e.g. kill one worker's page); each further run of
      ``critical_samples`` samples above it repeats the preempt, in case the first
      freed too little. A sample at or below ``critical`` restarts the count and
      leaves ``critical`` for ``paused`` (or ``ok`` below ``low``).
    """

    def __init__(self, high: float = 0.85, low: float = 0.75, critical: float = 0.95,
                 critical_samples: int = 3):
        if not (0 < low < high <= critical) or critical_samples < 1:
            raise ConfigError(f"memory watermarks need 0 < low < high <= critical and "
                              f"critical_samples >= 1; got low {low}, high {high}, "
                              f"critical {critical}, critical_samples {critical_samples}")
        self.high, self.low, self.critical = high, low, critical
        self.critical_samples = critical_samples
        self._state = OK
        self._over = 0  # consecutive samples above `critical`
        self._counts = {"pause": 0, "resume": 0, "preempt": 0, "relieve": 0}

    @property
    def state(self) -> str:
        return self._state

    @property
    def dispatch_allowed(self) -> bool:
        return self._state == OK

    @property
    def counts(self) -> dict[str, int]:
        return dict(self._counts)

    def observe(self, fraction: float) -> list[Transition]:
        self._over = self._over + 1 if fraction > self.critical else 0
        moves = []
        if self._state == OK and fraction > self.high:
            moves.append(self._move(PAUSED, fraction))
        elif self._state != OK and fraction < self.low:
            moves.append(self._move(OK, fraction))
        elif self._state == CRITICAL and self._over == 0:
            moves.append(self._move(PAUSED, fraction))
        if self._over and self._over % self.critical_samples == 0:
            moves.append(self._move(CRITICAL, fraction))
        return moves

    def _move(self, to_state: str, fraction: float) -> Transition:
        transition = Transition(self._state, to_state, fraction)
        self._state = to_state
        self._counts[transition.kind] += 1
        return transition


class MemorySampler:
    """The thread that samples ``device`` every ``interval_s`` and feeds ``watermarks``.

    ``on_transition(transition)`` runs on this thread for every transition; a callback
    or sampling error is logged and the loop goes on. ``sample_once()`` is one step of
    the loop, for callers (and tests) that drive it themselves.
    """

    def __init__(self, device: MemoryDevice, watermarks: Watermarks | None = None,
                 interval_s: float = 0.2,
                 on_transition: Callable[[Transition], None] | None = None):
        self.device = device
        self.watermarks = watermarks or Watermarks()
        self.interval_s = interval_s
        self.on_transition = on_transition
        self.latest: MemorySample | None = None
        self.peak_used_bytes = 0
        self._lock = threading.Lock()  # one sample and its state change are read together
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def sample_once(self) -> list[Transition]:
        sample = self.device.sample()
        with self._lock:
            transitions = self.watermarks.observe(sample.fraction)
            self.latest = sample
            self.peak_used_bytes = max(self.peak_used_bytes, sample.used_bytes)
        for t in transitions:
            log.log(logging.WARNING if t.kind == "preempt" else logging.INFO,
                    "event=memory_%s from=%s to=%s fraction=%.3f source=%s", t.kind,
                    t.from_state, t.to_state, t.fraction, sample.source)
            if self.on_transition is not None:
                try:
                    self.on_transition(t)
                except Exception:
                    log.exception("event=memory_callback_failed kind=%s", t.kind)
        return transitions

    def start(self) -> None:
        if self._thread is not None and self._thread.is_alive():
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="memory-sampler", daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float = 5.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
            self._thread = None

    def _run(self) -> None:
        last_error = None
        while not self._stop.is_set():
            try:
                self.sample_once()
                last_error = None
            except Exception as exc:  # a transient driver error must not end the watch
                if str(exc) != last_error:  # log each new error once, not every interval
                    log.warning("event=memory_sample_failed device=%s error=%s",
                                self.device.name, exc)
                last_error = str(exc)
            self._stop.wait(self.interval_s)

    def status(self) -> dict:
        """For /readyz and the UI."""
        with self._lock:
            sample, state = self.latest, self.watermarks.state
        status = {"device": self.device.name, "state": state,
                  "dispatch_allowed": state == OK, "peak_used_bytes": self.peak_used_bytes}
        if sample is None:
            return status | {"source": None, "used_bytes": None, "total_bytes": None,
                             "fraction": None, "message": f"{state}: no memory sample yet"}
        return status | {"source": sample.source, "used_bytes": sample.used_bytes,
                         "total_bytes": sample.total_bytes, "fraction": sample.fraction,
                         "message": f"{state}: {sample.label} {sample.fraction * 100:.0f} %"}
