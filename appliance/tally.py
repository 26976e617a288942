"""Counts of events that leave no trace in the store, kept in this process (a
submission refused with 429 is not stored): intake counts them, ``/metrics`` reads
them. Apart from ``metrics`` so that counting does not bring Prometheus and FastAPI
into the parts that count."""

from __future__ import annotations

import threading
from collections import Counter


class Tally:
    """A thread-safe count of events by key, for what leaves no trace in the store
    (a submission refused with 429 is not stored)."""

    def __init__(self):
        self._counts: Counter = Counter()
        self._lock = threading.Lock()

    def add(self, key: tuple, n: int = 1) -> None:
        with self._lock:
            self._counts[key] += n

    def snapshot(self) -> dict[tuple, int]:
        with self._lock:
            return dict(self._counts)
