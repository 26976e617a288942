"""Every engine the appliance can run, declared once.

An entry says what the rest of the appliance needs to know about an engine: the
options it is built with from ``[engine]``, what it can do (read a page with the end
of the previous one, read several pages at once, ...), and how the worker and
`appliance bench` create it. Code outside ``appliance/engines`` asks the registry
about capabilities and never compares engine names, so adding an engine is adding an
entry here. The names themselves ("llama", "classic") are data: config values, API
form values and what a result records.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from appliance.engines.names import (
    AUTO, CONFIG_NAMES, ENGINE_NAMES, FALLBACK, LLAMA, PDF_TEXT, REMOTE,
)
from appliance.errors import ConfigError

if TYPE_CHECKING:
    from appliance.config import EngineSettings
    from appliance.engines.base import Engine


@dataclass(frozen=True)
class EngineEntry:
    name: str
    library: str  # what reads the pages, for the operator
    options: Callable[[EngineSettings], dict]  # its constructor options from [engine]
    create: Callable[[dict], Engine]  # in the worker that owns it
    bare_loop: Callable[[list[Path], dict], float]  # `appliance bench`'s yardstick
    page_context: bool = False  # reads a page with the end of the previous one
    model_files: bool = False  # needs engine.model and engine.mmproj (held on the card)
    parallel_slots: bool = False  # reads engine.parallel pages at once on one copy of the weights
    logprobs: bool = False  # its confidence comes from token log-probabilities
    fallback: str | None = None  # the engine it keeps inside for pages it cannot read
    # reads on another host: one worker per [[engine.remote]] endpoint, admitted by the
    # endpoint's max_concurrency and its circuit breaker, not by this host's memory
    remote: bool = False


# Engine libraries are imported only in the process that runs the engine.

def _create_classic(options: dict) -> Engine:
    from appliance.engines.classic import ClassicEngine

    # A worker's cores read as many pages at once, one core each: ONNX Runtime spreads
    # one page over two cores less well (two receipts at once on one thread each: 522 ms
    # a page; one on two threads: 619 ms; FUNSD forms 2.4 s against 2.6 s). A page the
    # worker holds alone takes them all (``engines.base.WideWhenAlone``).
    threads = options.get("threads", 1)
    return ClassicEngine(threads=threads, slots=threads)


def _bare_classic(pages: list[Path], options: dict) -> float:
    from appliance.engines.classic import bare_loop
    return bare_loop(pages, **options)


def _create_llama(options: dict) -> Engine:
    from appliance.engines.llama.engine import LlamaEngine
    return LlamaEngine(**options)


def _bare_llama(pages: list[Path], options: dict) -> float:
    from appliance.engines.llama.engine import bare_loop
    return bare_loop(pages, **options)


def _create_remote(options: dict) -> Engine:
    from appliance.engines.remote.engine import RemoteEngine
    return RemoteEngine(**options)


def _bare_remote(pages: list[Path], options: dict) -> float:
    from appliance.engines.remote.engine import bare_loop
    return bare_loop(pages, **options)


def _vision_options(engine: EngineSettings) -> dict:
    """What every vision engine is built with: its page semantics."""
    return {"threads": engine.threads, "retry_ladder": engine.retry_ladder,
            "max_tokens": engine.max_tokens, "fixed_tokens": engine.fixed_tokens,
            "auto_tiling": engine.auto_tiling}


def _llama_options(engine: EngineSettings) -> dict:
    return {"model": str(engine.model), "mmproj": str(engine.mmproj), "n_ctx": engine.n_ctx,
            "n_batch": engine.n_batch, "n_gpu_layers": engine.n_gpu_layers,
            "flash_attn": engine.flash_attn, **_vision_options(engine),
            # "auto" until the daemon's memory plan has chosen the number
            "parallel": engine.parallel}


ENGINES: dict[str, EngineEntry] = {entry.name: entry for entry in (
    EngineEntry(LLAMA, "llama.cpp", _llama_options, _create_llama, _bare_llama, page_context=True,
                model_files=True, parallel_slots=True, logprobs=True, fallback=FALLBACK),
    # the endpoint ({"endpoint": one [[engine.remote]] table}) is added per worker
    EngineEntry(REMOTE, "OpenAI-compatible server", _vision_options, _create_remote, _bare_remote,
                page_context=True, logprobs=True, fallback=FALLBACK, remote=True),
    EngineEntry(FALLBACK, "RapidOCR", lambda engine: {"threads": engine.threads}, _create_classic,
                _bare_classic),
)}


def names() -> tuple[str, ...]:
    """The engines a request, a watched folder or a reviewer may ask for."""
    return ENGINE_NAMES


def readers() -> tuple[str, ...]:
    """What a page's result may name as its reader, for a filter on it: the engines and
    the PDF text reader (a born-digital page read from its own text)."""
    return (*ENGINE_NAMES, PDF_TEXT)


def config_names() -> tuple[str, ...]:
    """What engine.name may be."""
    return CONFIG_NAMES


def entry(name: str) -> EngineEntry:
    try:
        return ENGINES[name]
    except KeyError:
        raise ConfigError(f"unknown engine {name!r}; use one of "
                          f"{', '.join(repr(n) for n in ENGINES)}") from None


def model_engine() -> EngineEntry:
    """The engine that reads with a model file pair: what `auto` prefers, and what
    `appliance bench --shape` runs."""
    return next(e for e in ENGINES.values() if e.model_files)


def remote_engine() -> EngineEntry:
    """The engine that reads on [[engine.remote]] endpoints."""
    return next(e for e in ENGINES.values() if e.remote)


def configured(name: str) -> EngineEntry:
    """The engine ``engine.name = name`` asks for on this host; `auto` asks for the
    model engine and settles for FALLBACK when its files are missing or broken
    (``strict`` is False)."""
    return model_engine() if name == AUTO else entry(name)


def reads_remote(name: str) -> bool:
    """Whether ``engine.name = name`` sends pages to the [[engine.remote]] endpoints."""
    return name == AUTO or entry(name).remote


def reads_local(name: str) -> bool:
    """Whether ``engine.name = name`` runs an engine on this host."""
    return name == AUTO or not entry(name).remote


def strict(name: str) -> bool:
    """Whether ``engine.name = name`` must run exactly that engine (no fallback to
    FALLBACK when the model files are missing or broken)."""
    return name != AUTO


def may_run_fallback(name: str) -> bool:
    """Whether ``engine.name = name`` may end up with FALLBACK reading the pages."""
    return not strict(name) or name == FALLBACK


def readings(name: str) -> tuple[str, ...]:
    """The engines whose reading workers running ``name`` can give: their own, and
    that of the engine they keep for fallbacks (a reviewer's or a client's pick)."""
    fallback = entry(name).fallback
    return (name,) if fallback is None else (name, fallback)
