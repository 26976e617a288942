"""The Engine protocol: what every recognizer (classic OCR, llama.cpp VLM) offers.

Nothing outside ``appliance/engines`` imports an engine library; the rest of the
appliance sees only these types.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Protocol

from PIL import Image


@dataclass
class Line:
    """One recognised text line: its text, its box [x0, y0, x1, y1] in page pixels, its
    score; where the engine knows the page's structure, the reading-order index of the
    block it belongs to and its role there (heading, list, table, text); its words."""

    text: str
    box: list[float]
    score: float
    block: int | None = None
    role: str | None = None
    # the words, where the engine gives them: {"text", "box", "score"}, the score being
    # the least sure of the word's characters
    words: list[dict] | None = None


@dataclass
class PageRequest:
    doc_type: str = "generic"
    engine: str | None = None  # "classic" asks a vision engine for its classic reading
    attempt: int = 1  # 1-based; picks the rung of the engine's retry ladder
    deadline: float | None = None  # time.monotonic() by which the engine must answer
    context: str = ""  # the end of the previous page, for engines that can use it
    # where the page's header, footer and number go in its text (OutputSettings)
    page_furniture: str = "separate"
    # set by the worker to take the page back (memory critical): the engine stops
    # reading it soon and raises PagePreempted
    cancel: threading.Event | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Question:
    """A question about a page whose answer is a JSON object: vision engines constrain
    their output to ``schema`` (llama.cpp grammars; a server's ``response_format``), so
    an answer that ends within ``max_tokens`` is valid JSON by construction."""

    text: str  # the instructions, after the page image
    schema: dict  # the JSON Schema of the answer
    max_tokens: int  # enough for the longest answer the schema allows
    version: str  # for the provenance, as a prompt's


@dataclass
class Recognition:
    """What an engine returns for one page image."""

    text: str
    markdown: str
    lines: list[Line] = field(default_factory=list)
    finish_reason: str = "stop"
    # per generated token: "t" its text, "lp" its log-probability, "h" the entropy (nats)
    tokens: list[dict] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)  # e.g. fallback, tiled, truncated
    provenance: dict = field(default_factory=dict)  # prompt version, ladder rung, ...
    # a vision engine's answer to the document type's field question (``Question``):
    # the value printed for each field, or None; None when it was not asked
    field_answer: dict | None = None

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> Recognition:
        return cls(**{**data, "lines": [Line(**line) for line in data.get("lines", [])]})


class Engine(Protocol):
    name: str
    # pages it reads at once: ``recognize`` is called from up to this many threads
    slots: int

    @property
    def model_id(self) -> str:
        """Identifies the model behind the engine (name and version or file hash)."""

    def recipe(self, request: PageRequest) -> str:
        """Everything besides the image and the model that decides the answer (prompt
        version, ...): part of the result cache's key."""

    def reader(self, request: PageRequest) -> tuple[str, str]:
        """The engine name and model id that read a page asked for with ``request`` (a
        vision engine reads a request for "classic" with the classic reader it keeps)."""

    def recognize(self, image: Image.Image, request: PageRequest) -> Recognition: ...

    def close(self) -> None: ...


def timed_reading(pages: list[Path], read: Callable[[Image.Image], object]) -> float:
    """The seconds ``read`` takes over the page files, after one read of the first to
    warm up (as a worker's): each engine's bare loop for `appliance bench`."""
    def each(path: Path) -> None:
        with Image.open(path) as image:
            read(image)

    each(pages[0])
    start = time.perf_counter()
    for path in pages:
        each(path)
    return time.perf_counter() - start
