"""Nearest-rank percentiles: the one definition every benchmark report uses.

Kept apart from ``bench`` so that the engine benchmarks, which must run on a GPU host
that has none of the daemon's packages, can use it too.
"""

from __future__ import annotations

import math


def percentiles(values: list[float]) -> dict[str, float | None]:
    """Nearest-rank P50/P95/P99 of the values (None when there are none)."""
    ordered = sorted(values)

    def rank(pct: float) -> float | None:
        return ordered[max(0, math.ceil(pct / 100 * len(ordered)) - 1)] if ordered else None

    return {"p50": rank(50), "p95": rank(95), "p99": rank(99)}
