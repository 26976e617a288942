"""Engines: the recognizers, and the worker processes that host them.

Nothing outside this package imports an engine library (rapidocr, llama_cpp).
"""

from __future__ import annotations

from pathlib import Path

from appliance.engines.base import Engine, Line, PageRequest, Recognition
from appliance.errors import ConfigError

__all__ = ["Engine", "Line", "PageRequest", "Recognition", "bare_loop", "create_engine"]


def create_engine(name: str, options: dict) -> Engine:
    """Build an engine inside the worker process that will own it."""
    # Heavy imports, done only in the worker that owns the engine.
    if name == "classic":
        from appliance.engines.classic import ClassicEngine
        return ClassicEngine(threads=options.get("threads", 1))
    if name == "llama":
        from appliance.engines.llama.engine import LlamaEngine
        return LlamaEngine(**options)
    raise ConfigError(f"unknown engine '{name}'; use 'llama' or 'classic'")


def bare_loop(name: str, options: dict, pages: list[Path]) -> float:
    """Seconds the engine's own library takes on these page files, with none of the
    appliance around it: the yardstick `appliance bench` compares the daemon with."""
    if name == "classic":
        from appliance.engines.classic import bare_loop as classic_loop
        return classic_loop(pages, **options)
    if name == "llama":
        from appliance.engines.llama.engine import bare_loop as llama_loop
        return llama_loop(pages, **options)
    raise ConfigError(f"unknown engine '{name}'; use 'llama' or 'classic'")
