"""Engines: the recognizers, and the worker processes that host them.

Nothing outside this package imports an engine library (rapidocr, llama_cpp);
``registry`` declares each engine and what it can do. Before anything else, ``native``
loads the native libraries in the order they must load.
"""

from __future__ import annotations

from appliance.engines import native

native.load_first()

from pathlib import Path  # noqa: E402

from appliance.engines import registry  # noqa: E402
from appliance.engines.base import Engine, PageRequest  # noqa: E402

__all__ = ["Engine", "PageRequest", "bare_loop", "create_engine"]


def create_engine(name: str, options: dict) -> Engine:
    """Build an engine inside the worker process that will own it."""
    return registry.entry(name).create(options)


def bare_loop(name: str, options: dict, pages: list[Path]) -> float:
    """Seconds the engine's own library takes on these page files, with none of the
    appliance around it: the yardstick `appliance bench` compares the daemon with."""
    return registry.entry(name).bare_loop(pages, options)
