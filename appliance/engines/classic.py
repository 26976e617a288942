"""The ``classic`` engine: RapidOCR (PP-OCR ONNX models shipped in the wheel) on the CPU.

It needs no download and no GPU, so it is the default when no GGUF model is
installed, the fast path for simple pages and a second opinion for the VLM.

It finds the page's lines (their text, boxes, words and scores), not their reading:
``Recognition.unread`` says so, and the read stage (``pipeline.read``) orders them and
writes the page's text and Markdown. The result cache holds what it found.
"""

from __future__ import annotations

import logging
import math
import time
from importlib.metadata import version
from pathlib import Path

import cv2
import numpy as np
from PIL import Image
from rapidocr import RapidOCR

from appliance.engines.base import PageRequest, WideWhenAlone, timed_reading
from appliance.errors import EngineError
from appliance.page import VERTICAL_ASPECT, Line, Recognition, Word, is_column
from appliance.raster import INK_LEVEL

log = logging.getLogger(__name__)


REC_HEIGHT = 48  # the recogniser's input height (PP-OCR's)
REC_MIN_WIDTH = 240  # the narrowest input a line crop is padded to, in pixels


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
        # One line crop per recogniser run: a batch is padded to its widest crop, so a
        # form's short labels batched with its long lines are read at their width (at
        # RapidOCR's default of 6, up to a sixth more recognition time on an idle
        # machine; README, issue 54).
        "Rec.rec_batch_num": 1,
        # ... and a short one padded to 5 line heights, not RapidOCR's 6.7 (320 px): a
        # form's labels and a receipt's prices are read in a sixth less time. Less
        # padding reads forms worse (160 px: order-free CER 7.33 -> 7.51 % on 90 held-out
        # FUNSD forms; 240 px: 7.38 %; README, issue 54).
        "Rec.rec_img_shape": [3, REC_HEIGHT, REC_MIN_WIDTH],
    })


def bare_loop(pages: list[Path], *, threads: int = 2, **_engine_options) -> float:
    """The yardstick for `appliance bench`: RapidOCR on each page file, nothing else.
    Returns the seconds it took."""
    ocr = make_rapidocr(threads)
    return timed_reading(pages, lambda image: ocr(image.convert("RGB")))


LEAN_MIN_ASPECT = 3.0
# What the engine finds, besides its model: bump it when that changes (lines, words,
# the turned reading, the bullets), so that the result cache does not serve what it
# found before.
RECIPE = "lines/v4"
# A list's bullet the detector passed over (a dot is too small for it to box; 29 on
# 425 real pages replayed, none found before): a solid, roundish blob of ink
# BULLET_SIZE of the line's height across (the dots measured 0.2 to 0.35; a check box
# is a capital's height, 0.58), level with its middle, within BULLET_REACH line
# heights left of its text, and the only ink BULLET_CLEAR line heights left of it (a
# column's last full stop beside the gutter has its words beside it). A ticked box
# fills its square (1.0), a dot a disc (0.6 to 0.9 as scanned): BULLET_FILL; a box
# crossed ("☒") inks the corners a dot leaves empty.
BULLET_SIZE = (0.2, 0.45)
BULLET_FILL = (0.6, 0.92)
BULLET_REACH = 2.0
BULLET_CLEAR = 5.0
BULLET = "•"


class ClassicEngine:
    """RapidOCR behind the Engine protocol; one instance per worker process."""

    name = "classic"

    def __init__(self, threads: int = 4, slots: int = 1):
        """``threads`` cores, shared by ``slots`` pages read at once (one RapidOCR, whose
        ONNX Runtime sessions take concurrent runs); a page its worker reads alone
        takes them all (``WideWhenAlone``)."""
        self.slots = slots
        share = max(1, threads // slots)
        self._ocr: RapidOCR | None = make_rapidocr(share)
        self._ocr.cal_rec_boxes = character_quads
        if threads > share:
            for mine, wide in zip(_sessions(self._ocr), _sessions(make_rapidocr(threads))):
                mine.session = WideWhenAlone(mine.session, wide.session)
        cfg = self._ocr.cfg
        self._model_id = (
            f"rapidocr-{version('rapidocr')}/"
            f"{cfg.Det.ocr_version.value}_det_{cfg.Det.model_type.value}"
            f"+{cfg.Rec.ocr_version.value}_rec_{cfg.Rec.model_type.value}"
        )

    @property
    def model_id(self) -> str:
        return self._model_id

    def reader(self, request: PageRequest) -> tuple[str, str]:
        return self.name, self.model_id

    def recipe(self, request: PageRequest) -> str:
        return RECIPE

    def recognize(self, image: Image.Image, request: PageRequest) -> Recognition:
        if self._ocr is None:
            raise EngineError("the classic engine was closed; the worker must create a new one")
        started = time.perf_counter()
        try:
            # per character: its confidence and box (RapidOCR's per-word scores are those
            # of the word's first characters, so words are built here from characters)
            page = image.convert("RGB")
            result = self._ocr(page, return_word_box=True, return_single_char_box=True)
        except Exception as exc:  # any failure inside RapidOCR/onnxruntime is an engine failure
            raise EngineError(f"classic OCR failed: {exc}") from exc
        lines, lean = [], 0.0
        if result.boxes is not None and result.txts is not None:
            chars = result.word_results or [None] * len(result.txts)
            lines = [_line(quad, text, score, line_chars)
                     for quad, text, score, line_chars in zip(result.boxes, result.txts,
                                                              result.scores, chars)
                     if text.strip()]
            lines = self._read_turned(page, lines)
            lean = _lean(result.boxes)
            ink = np.asarray(page.convert("L")) < INK_LEVEL
            lines = [_with_bullet(ink, line) for line in lines]
        log.debug(
            "event=classic_recognize doc_type=%s lines=%d ms=%d",
            request.doc_type, len(lines), (time.perf_counter() - started) * 1000,
        )
        return Recognition.found(lines, page_height=image.height, lean_deg=lean)

    def _read_turned(self, page: Image.Image, lines: list[Line]) -> list[Line]:
        """``lines`` with those printed up or down the page read again: RapidOCR turns
        a tall crop a quarter left, which sets text printed top to bottom upright (a
        spine) and text printed bottom to top (a journal's "Downloaded from ..." up the
        left margin) upside down. Each such line, joined with the pieces of it the
        detector cut apart (one above the other, no more than its height apart), is
        read both ways; the better scored reading stands, without character boxes
        unless it is the line RapidOCR read whole."""
        pieces: list[list[Line]] = []
        for line in sorted(filter(_up_the_page, lines), key=lambda line: line.box[1]):
            if pieces and _one_turned_line(pieces[-1][-1], line):
                pieces[-1].append(line)
            else:
                pieces.append([line])
        turned = {id(piece): group for group in pieces for piece in group}
        read = []
        for line in lines:
            group = turned.get(id(line))
            if group is None:
                read.append(line)
            elif line is group[0]:  # the line read whole stands where its top piece stood
                read.append(self._read_both_ways(page, group))
        return read

    def _read_both_ways(self, page: Image.Image, pieces: list[Line]) -> Line:
        box = [min(piece.box[0] for piece in pieces), pieces[0].box[1],
               max(piece.box[2] for piece in pieces), max(piece.box[3] for piece in pieces)]
        crop = page.crop(tuple(round(value) for value in box))
        try:  # the recogniser alone (a call of the whole pipeline keeps its switches)
            both = self._ocr.recognize_txt([np.asarray(crop.rotate(angle, expand=True))[:, :, ::-1]
                                            for angle in (90, -90)])  # BGR, as its own crops
        except Exception as exc:
            raise EngineError(f"classic OCR failed: {exc}") from exc
        score, text = max(zip(both.scores, both.txts))
        if (len(pieces) == 1 and score <= pieces[0].score) or not text.strip():
            return pieces[0]
        return Line(text=text.strip(), box=box, score=float(score))

    def close(self) -> None:
        self._ocr = None


def _sessions(ocr: RapidOCR) -> list:
    """The detector's and the recogniser's session wrappers of ``ocr``, their models
    loaded (RapidOCR loads them at its first page; rapidocr 3.x keeps the ONNX Runtime
    session in each as ``session``)."""
    return [ocr._load_det_model().session, ocr._load_rec_model().session]


def character_quads(crops: list[np.ndarray], quads: np.ndarray, found,
                    single_characters: bool = True):
    """RapidOCR's per-character boxes (``rapidocr.cal_rec_boxes.CalRecBoxes``, which
    ``RapidOCR`` calls as ``cal_rec_boxes``), in a few array operations a line instead
    of Python per point: RapidOCR's took 37 ms of a 2.2 s form page, a sixth of the time
    the worker held Python's lock; these 6 ms (issue 54). The same cells pixel for
    pixel, each character its share of the line's recogniser columns; each character
    paired with its own confidence (RapidOCR's pairs the n-th character with the n-th
    confidence counting the spaces). ``found``: the recogniser's output, its
    ``word_results`` replaced. Always per character (``single_characters``), as the
    classic engine asks."""
    found.word_results = tuple(
        _line_character_quads(crop, quad, text, info) if crop.size else ()
        for crop, quad, text, info in zip(crops, quads, found.txts, found.word_results))
    return found


def _line_character_quads(crop: np.ndarray, quad: np.ndarray, text: str, info) -> tuple:
    """(character, confidence, quad in the page's pixels) of each character of one line
    that RapidOCR read from ``crop``, cut from the page at ``quad``."""
    if not text or not info.line_txt_len:
        return ()
    height, width = crop.shape[:2]
    column = width / info.line_txt_len
    spread = [(cols[-1] - cols[0]) * column / (len(cols) - 1)
              for cols in info.word_cols if len(cols) > 1]
    char_width = sum(spread) / len(spread) if spread else width / len(text)
    centres = (np.array([c for cols in info.word_cols for c in cols], dtype=np.float64)
               + 0.5) * column
    left = np.maximum(np.trunc(centres - char_width / 2), 0)
    right = np.minimum(np.trunc(centres + char_width / 2), width)
    overlap = np.maximum(right[:-1] - left[1:], 0)  # neighbours meet half way
    right[:-1] -= overlap / 2
    left[1:] += overlap - overlap / 2
    corners = np.stack([np.stack([left, right, right, left], axis=1),
                        np.repeat([[0.0, 0.0, height, height]], len(left), axis=0)], axis=2)
    corners = corners.reshape(-1, 2)
    origin = np.trunc(quad.min(axis=0))
    shifted = (quad - origin).astype(np.float32)
    crop_width = int(np.linalg.norm(shifted[0] - shifted[1]))
    crop_height = int(np.linalg.norm(shifted[0] - shifted[3]))
    if _turned(quad):  # RapidOCR turned the crop a quarter left; turn its points back
        corners = np.stack([crop_width - corners[:, 1], corners[:, 0]], axis=1)
    upright = np.array([[0, 0], [crop_width, 0], [crop_width, crop_height], [0, crop_height]],
                       dtype=np.float32)
    _, inverse = cv2.invert(cv2.getPerspectiveTransform(shifted, upright))
    mapped = np.hstack([corners, np.ones((len(corners), 1))]) @ inverse.T
    points = np.trunc(mapped[:, :2] / mapped[:, 2:] + origin).astype(int).reshape(-1, 4, 2)
    characters = [ch for word in info.words for ch in word]
    confidences = [conf for ch, conf in zip(text, info.confs) if not ch.isspace()]
    return tuple(zip(characters, confidences, points.tolist()))


def _turned(quad: np.ndarray) -> bool:
    """Whether RapidOCR read the line at ``quad`` turned: its crop VERTICAL_ASPECT
    times taller than wide (``CalRecBoxes.get_box_direction``)."""
    edges = [float(np.linalg.norm(quad[i] - quad[(i + 1) % 4])) for i in range(4)]
    width, height = max(edges[0], edges[2]), max(edges[1], edges[3])
    return width < 1e-6 or round(height / width, 2) >= VERTICAL_ASPECT


def _line(quad, text: str, score, chars) -> Line:
    box, text = _quad_to_box(quad), text.strip()
    return Line(text=text, box=box, score=float(score),
                words=_words(text, chars, is_column(box, text)))


def _with_bullet(ink: np.ndarray, line: Line) -> Line:
    """``line`` with the bullet that stands left of its text, where one does
    (BULLET_SIZE, BULLET_FILL, BULLET_REACH, BULLET_CLEAR): "• " before its text, a word
    of its own. The detector's box may hold the dot or cut it: the text starts at its
    first word. ``ink``: the page's pixels dark enough to be ink."""
    x0, y0, x1, y1 = (int(round(value)) for value in line.box)
    height = y1 - y0
    if height <= 0 or x1 - x0 < height or line.text.startswith(BULLET):
        return line
    start = int(min(word.box[0] for word in line.words)) if line.words else x0
    left = max(0, int(start - BULLET_CLEAR * height))
    crop = ink[max(0, y0):y1, left:start].astype(np.uint8)
    if not crop.size:
        return line
    _count, labels, stats, _centres = cv2.connectedComponentsWithStats(crop, connectivity=8)
    # what touches the text's start is its first letter, which the word's box cut
    blobs = [(number, stat) for number, stat in enumerate(stats) if number
             and stat[cv2.CC_STAT_AREA] >= 3
             and stat[cv2.CC_STAT_LEFT] + stat[cv2.CC_STAT_WIDTH] < crop.shape[1]]
    if len(blobs) != 1:
        return line
    number, stat = blobs[0]
    x, y, width, tall, area = (int(value) for value in stat)
    # a dot leaves the corners of its box empty; a box, ticked or crossed, fills them
    corners = sum(labels[row, column] == number
                  for row in (y, y + tall - 1) for column in (x, x + width - 1))
    low, high = BULLET_SIZE
    if not (corners <= 1 and low * height <= min(width, tall) and max(width, tall) <= high * height
            and max(width, tall) <= 1.5 * min(width, tall)
            and BULLET_FILL[0] <= area / (width * tall) <= BULLET_FILL[1]
            and abs(y + tall / 2 - height / 2) <= height / 4
            and crop.shape[1] - BULLET_REACH * height <= x
            and x + width <= crop.shape[1] - 0.15 * height):  # not a letter of the line
        return line
    box = [float(left + x), float(max(0, y0) + y), float(left + x + width),
           float(max(0, y0) + y + tall)]
    words = [Word(BULLET, box, line.score), *line.words] if line.words else None
    return Line(text=f"{BULLET} {line.text}", box=[min(box[0], line.box[0]), *line.box[1:]],
                score=line.score, words=words)


def _up_the_page(line: Line) -> bool:
    """Whether ``line`` is text of a script written in rows, printed up or down the
    page: a crop RapidOCR read turned, whose letters are no column's
    (``reading.vertical``)."""
    x0, y0, x1, y1 = line.box
    return y1 - y0 >= VERTICAL_ASPECT * (x1 - x0) and not is_column(line.box, line.text)


def _one_turned_line(above: Line, below: Line) -> bool:
    """Whether two lines printed up the page are pieces of one: one over the other
    across most of the narrower's width, no more than a line's height (its width)
    apart."""
    overlap = min(above.box[2], below.box[2]) - max(above.box[0], below.box[0])
    width = min(above.box[2] - above.box[0], below.box[2] - below.box[0])
    return overlap >= width / 2 and below.box[1] - above.box[3] <= width


def _words(text: str, chars, column: bool = False) -> list[Word] | None:
    """The line's words from its characters (text, confidence, quad each; spaces are
    not among them): each word's box and its least sure character's confidence; in a
    column of vertical text (``reading.vertical``) each character is a word, on its
    own box, as hOCR, ALTO and the PDF's text layer place them. None when the
    characters do not match the text."""
    words = list("".join(text.split())) if column else text.split()
    if not chars or sum(len(word) for word in words) != len(chars):
        return None
    result, start = [], 0
    for word in words:
        mine = chars[start:start + len(word)]
        start += len(word)
        quads = np.array([quad for _char, _conf, quad in mine], dtype=np.float32).reshape(-1, 2)
        result.append(Word(word, _quad_to_box(quads),
                           round(min(float(conf) for _char, conf, _quad in mine), 4)))
    return result


def _lean(quads) -> float:
    """How far the page's text lines descend to the right, in degrees: the median slope
    of the top edges of the line quads (RapidOCR's detector fits each line a rotated
    rectangle) among lines at least LEAN_MIN_ASPECT times longer than tall, whose
    slope a pixel of rounding does not swing. 0.0 without such lines."""
    slopes = [math.degrees(math.atan2(quad[1][1] - quad[0][1], quad[1][0] - quad[0][0]))
              for quad in quads
              if quad[1][0] - quad[0][0] >= LEAN_MIN_ASPECT * max(1.0, quad[3][1] - quad[0][1])]
    return float(np.median(slopes)) if slopes else 0.0


def _quad_to_box(quad: np.ndarray) -> list[float]:
    xs, ys = quad[:, 0], quad[:, 1]
    return [float(xs.min()), float(ys.min()), float(xs.max()), float(ys.max())]
