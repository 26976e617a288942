"""The ``classic`` engine: RapidOCR (PP-OCR ONNX models shipped in the wheel) on the CPU.

It needs no download and no GPU, so it is the default when no GGUF model is
installed, the fast path for simple pages and a second opinion for the VLM.

Output conventions:
- ``lines`` are in reading order: lines are grouped into horizontal bands (see
  ``reading_order``), bands top to bottom, lines left to right within a band.
- ``text``: one band per line, the lines of a band joined by a single space.
- ``markdown``: the same bands, with a blank line where the gap between two bands
  is wider than PARAGRAPH_GAP x the median line height, and every character that
  Markdown could read as markup escaped, so OCR text never turns into a heading, a
  list, a link or raw HTML.

Reading order is band-based, so two text columns are read across, not down; pages
with a real layout are the VLM's job.
"""

from __future__ import annotations

import logging
import statistics
import time
from importlib.metadata import version
from pathlib import Path

import numpy as np
from PIL import Image
from rapidocr import RapidOCR

from appliance.engines.base import Line, PageRequest, Recognition
from appliance.errors import EngineError
from appliance.quality.markdown import escape_markdown

log = logging.getLogger(__name__)

# A gap between bands wider than this many median line heights starts a paragraph.
PARAGRAPH_GAP = 1.2



def make_rapidocr(threads: int) -> RapidOCR:
    # intra_op threads parallelise inside each ONNX node; inter_op only matters in
    # onnxruntime's parallel execution mode, which RapidOCR does not use.
    # RapidOCR ignores a value above os.cpu_count() and then uses every core.
    # The per-line 180-degree classifier is off: the one shipped in the wheel
    # (ch_ppocr_mobile_v2.0_cls) turns about one upright line per page upside
    # down; a page's orientation is a whole-page decision, not a per-line guess.
    return RapidOCR(params={
        "Global.log_level": "warning",
        "Global.use_cls": False,
        # Detection input: RapidOCR's default scales the SHORT side up to 736 px, so a
        # 736x100 label strip became 5400x736 (1.6 s instead of 0.1 s). Cap the long
        # side instead, as for whole pages.
        "Det.limit_type": "max",
        "Det.limit_side_len": 2000,
        "EngineConfig.onnxruntime.intra_op_num_threads": threads,
        "EngineConfig.onnxruntime.inter_op_num_threads": 1,
    })


def bare_loop(pages: list[Path], *, threads: int = 2, **_engine_options) -> float:
    """The yardstick for `appliance bench`: RapidOCR on each page file, nothing else.
    Returns the seconds it took."""
    ocr = make_rapidocr(threads)
    with Image.open(pages[0]) as image:
        ocr(image.convert("RGB"))  # warm-up, as a worker's: models load on first use
    start = time.perf_counter()
    for path in pages:
        with Image.open(path) as image:
            ocr(image.convert("RGB"))
    return time.perf_counter() - start


# How lines become text and Markdown (reading_order, bands_to_markdown): bump it when
# they change, so the result cache does not serve the old rendering.
RECIPE = "bands/v1"


class ClassicEngine:
    """RapidOCR behind the Engine protocol; one instance per worker process."""

    name = "classic"

    def __init__(self, threads: int = 4):
        self._ocr: RapidOCR | None = make_rapidocr(threads)
        cfg = self._ocr.cfg
        self._model_id = (
            f"rapidocr-{version('rapidocr')}/"
            f"{cfg.Det.ocr_version.value}_det_{cfg.Det.model_type.value}"
            f"+{cfg.Rec.ocr_version.value}_rec_{cfg.Rec.model_type.value}"
        )

    @property
    def model_id(self) -> str:
        return self._model_id

    def recipe(self, request: PageRequest) -> str:
        return RECIPE

    def recognize(self, image: Image.Image, request: PageRequest) -> Recognition:
        if self._ocr is None:
            raise EngineError("the classic engine was closed; the worker must create a new one")
        started = time.perf_counter()
        try:
            result = self._ocr(image.convert("RGB"))
        except Exception as exc:  # any failure inside RapidOCR/onnxruntime is an engine failure
            raise EngineError(f"classic OCR failed: {exc}") from exc
        lines = []
        if result.boxes is not None and result.txts is not None:
            lines = [
                Line(text=text.strip(), box=_quad_to_box(quad), score=float(score))
                for quad, text, score in zip(result.boxes, result.txts, result.scores)
                if text.strip()
            ]
        bands = reading_order(lines)
        log.debug(
            "event=classic_recognize doc_type=%s lines=%d bands=%d ms=%d",
            request.doc_type, len(lines), len(bands), (time.perf_counter() - started) * 1000,
        )
        return Recognition(
            text=bands_to_text(bands),
            markdown=bands_to_markdown(bands),
            lines=[line for band in bands for line in band],
        )

    def close(self) -> None:
        self._ocr = None


def reading_order(lines: list[Line]) -> list[list[Line]]:
    """Group lines into horizontal bands, top to bottom, each band left to right.

    Lines are taken by vertical centre; a line joins the current band when it
    overlaps the band vertically by more than half the smaller of the two heights,
    otherwise it starts a new band. The band grows to cover its lines.
    """
    bands: list[list[Line]] = []
    top = bottom = 0.0
    for line in sorted(lines, key=lambda item: ((item.box[1] + item.box[3]) / 2, item.box[0])):
        y0, y1 = line.box[1], line.box[3]
        overlap = min(y1, bottom) - max(y0, top)
        if bands and overlap > min(y1 - y0, bottom - top) / 2:
            bands[-1].append(line)
            top, bottom = min(top, y0), max(bottom, y1)
        else:
            bands.append([line])
            top, bottom = y0, y1
    return [sorted(band, key=lambda item: item.box[0]) for band in bands]


def bands_to_text(bands: list[list[Line]]) -> str:
    return "\n".join(" ".join(line.text for line in band) for band in bands)


def bands_to_markdown(bands: list[list[Line]]) -> str:
    """Escaped band text, with a blank line between paragraphs."""
    if not bands:
        return ""
    median_height = statistics.median(line.box[3] - line.box[1] for band in bands for line in band)
    out = [escape_markdown(" ".join(line.text for line in bands[0]))]
    for previous, band in zip(bands, bands[1:]):
        gap = min(line.box[1] for line in band) - max(line.box[3] for line in previous)
        if gap > PARAGRAPH_GAP * median_height:
            out.append("")
        out.append(escape_markdown(" ".join(line.text for line in band)))
    return "\n".join(out)




def _quad_to_box(quad: np.ndarray) -> list[float]:
    xs, ys = quad[:, 0], quad[:, 1]
    return [float(xs.min()), float(ys.min()), float(xs.max()), float(ys.max())]
