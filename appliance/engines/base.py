"""The Engine protocol: what every recognizer (classic OCR, llama.cpp VLM) offers.

Nothing outside ``appliance/engines`` imports an engine library; the rest of the
appliance sees only these types.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
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
