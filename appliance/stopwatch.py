"""Timing a piece of work stage by stage: the page's stages in a worker
(``pipeline.stages``) and a document's outputs (``export``), which `appliance bench`
tables."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager


class Stopwatch:
    """Stage timings in the order the stages ran: ``{stage}_ms``."""

    def __init__(self) -> None:
        self.ms: dict[str, float] = {}

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        """Time the block as stage ``name``; a stage that fails is not timed."""
        start = time.perf_counter()
        yield
        self.ms[f"{name}_ms"] = (time.perf_counter() - start) * 1000
