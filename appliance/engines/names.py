"""The engines' names: configuration values, API form values and what a result
records. Nothing is imported here, so that the configuration checks an engine's name
without importing the registry (``engines.registry`` declares what each engine is and
does)."""

from __future__ import annotations

# engine.name: the model engine when its files pass their checks, else FALLBACK; and
# the [[engine.remote]] endpoints beside it, when there are any
AUTO = "auto"
LLAMA = "llama"  # a GGUF vision model through llama.cpp
REMOTE = "openai"  # engine.name: only the [[engine.remote]] endpoints read pages
FALLBACK = "classic"  # the embedded engine that needs no files
ENGINE_NAMES = (LLAMA, REMOTE, FALLBACK)  # the registry's entries, in its order
PDF_TEXT = "pdf-text"  # no engine: a PDF page's own text, as a result records its reader
CONFIG_NAMES = (AUTO, *ENGINE_NAMES)  # what engine.name may be
