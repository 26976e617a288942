"""What a worker process and its supervisor say to each other over their Pipe.

    supervisor -> worker    Job          read this page (answered by PageDone or PageFailed)
                            Cancel       take that page back (memory critical)
                            None         exit once nothing is in flight
    worker -> supervisor    Ready        the engine is loaded and warmed up
                            StartFailed  the engine could not start; the process exits
                            Availability a remote engine's endpoint went out or came back
                            PageDone     one job read
                            PageFailed   one job not read, and why

A worker reads up to ``Ready.slots`` jobs at once, so every answer names its job.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from appliance.page import Recognition


@dataclass(frozen=True)
class Job:
    job_id: int  # unique per supervisor: the answer names it
    original: Path
    kind: str
    page_index: int
    dpi: int
    max_pixels: int
    page_image: Path  # where the page as the engine saw it is kept (review shows it)
    doc_type: str
    engine: str | None
    attempt: int
    pdf_password: str | None
    deadline_s: float  # the engine stops itself after this; the supervisor kills later
    context: str = ""  # the end of the previous page's Markdown
    resolution_boost: int = 0  # a reviewer's rerun at higher resolution
    turn_deg: int | None = None  # a reviewer's turn of the page as it came, clockwise
    text_layer: str = "auto"  # a PDF page's own text: auto, ignore or prefer (engines.pdf_text)


@dataclass(frozen=True)
class Cancel:
    job_id: int


@dataclass(frozen=True)
class Ready:
    engine: str
    model_id: str
    pid: int
    warmup_ms: float
    slots: int  # jobs it reads at once


@dataclass(frozen=True)
class Availability:
    available: bool  # False: give this worker no page until it says True again
    reason: str = ""


@dataclass(frozen=True)
class StartFailed:
    code: str
    message: str


@dataclass(frozen=True)
class PageDone:
    job_id: int
    engine: str
    model_id: str
    timings_ms: dict[str, float]
    confidence: float
    signals: dict  # what the confidence was built from, with its penalties
    recognition: Recognition


@dataclass(frozen=True)
class PageFailed:
    job_id: int
    code: str  # an errors.py class's code
    message: str
    retryable: bool
    timings_ms: dict[str, float]
