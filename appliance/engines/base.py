"""The Engine protocol: what every recognizer (classic OCR, llama.cpp VLM) offers.

Nothing outside ``appliance/engines`` imports an engine library; the rest of the
appliance sees only these types.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from PIL import Image

from appliance.raster.synthetic import render_text_page

if TYPE_CHECKING:
    from appliance.raster.layout import Layout


@dataclass
class PageRequest:
    doc_type: str = "generic"
    engine: str | None = None  # "classic" asks a vision engine for its classic reading
    attempt: int = 1  # 1-based; picks the rung of the engine's retry ladder
    deadline: float | None = None  # time.monotonic() by which the engine must answer
    context: str = ""  # the end of the previous page, for engines that can use it
    # set by the worker to take the page back (memory critical): the engine stops
    # reading it soon and raises PagePreempted
    cancel: threading.Event | None = field(default=None, compare=False)
    # how a page set in columns is cut into regions a vision engine reads one after the
    # other (the page pipeline's: ``reading.regions.column_regions``); None: full-width
    # strips
    columns: Callable[[Layout, int, int], list[tuple[int, int, int, int]] | None] | None = (
        field(default=None, compare=False))


@dataclass(frozen=True)
class Question:
    """A question about a page whose answer is a JSON object: vision engines constrain
    their output to ``schema`` (llama.cpp grammars; a server's ``response_format``), so
    an answer that ends within ``max_tokens`` is valid JSON by construction."""

    text: str  # the instructions, after the page image
    schema: dict  # the JSON Schema of the answer
    max_tokens: int  # enough for the longest answer the schema allows
    version: str  # for the provenance, as a prompt's


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


class PagesInHand:
    """The pages this process is reading now: a worker's page threads count each page
    in for all of its stages (``pipeline.host``). An engine that shares the worker's
    cores among the pages it reads at once may give them all to a page read alone."""

    # A page is alone only this long after the worker last held two or more: between
    # one page's answer and the next page the supervisor sends (about 0.1 s), the page
    # still in hand must not take every core.
    SETTLE_S = 0.5

    def __init__(self):
        self._count = 0
        self._fell_to_one_at = -math.inf  # time.monotonic()
        self._lock = threading.Lock()

    @contextmanager
    def reading(self) -> Iterator[None]:
        with self._lock:
            self._count += 1
        try:
            yield
        finally:
            with self._lock:
                self._count -= 1
                if self._count == 1:
                    self._fell_to_one_at = time.monotonic()

    def alone(self) -> bool:
        """Whether no page but (at most) the caller's is being read, nor was a moment ago."""
        return self._count <= 1 and time.monotonic() - self._fell_to_one_at >= self.SETTLE_S


PAGES_IN_HAND = PagesInHand()


class WideWhenAlone:
    """An ONNX Runtime session made twice, on a page's share of the worker's cores
    (``share``) and on all of them (``wide``). Each run takes the wide one while its
    page is the only one the worker is reading (``PAGES_IN_HAND``), so a page alone, or
    the last of a batch, leaves no core idle (README, issue 54). A run begun wide when
    a second page comes in oversubscribes the cores for that run alone, not for the
    rest of the page."""

    def __init__(self, share, wide):
        self.share, self.wide = share, wide

    def run(self, *args, **kwargs):
        return (self.wide if PAGES_IN_HAND.alone() else self.share).run(*args, **kwargs)

    def __getattr__(self, name: str):  # inputs, outputs, metadata: the same model's
        return getattr(self.share, name)


def warmup_image() -> Image.Image:
    """A small built-in page that exercises the full recognition path."""
    return render_text_page(["Warm-up page", "Invoice 2024", "Total 118.50"],
                            width=320, height=320, font_size=28, margin=16)


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
