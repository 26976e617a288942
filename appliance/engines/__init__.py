"""Engines: the recognizers, and the worker processes that host them.

Nothing outside this package imports an engine library (rapidocr, llama_cpp).
"""

from __future__ import annotations

from appliance.engines.base import Engine, Line, PageRequest, Recognition
from appliance.errors import ConfigError

__all__ = ["Engine", "Line", "PageRequest", "Recognition", "create_engine"]


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
