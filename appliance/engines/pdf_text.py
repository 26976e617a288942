"""Born-digital PDF pages read from their own text (``pdf.text_layer``).

A PDF page that shows text of its own (the searchable PDF's "own text",
``raster.pdf_content.shows_text``) is read from it: pdfium's text page gives each
character with its box, font size and render mode, in the pixels of the page as it
was rendered. The characters become lines and words (a new line where the baseline
moves, the text runs back or a gap wider than ``LINE_GAP`` em opens: a table's cells
and a page's columns are lines of their own, as the OCR detector finds them), and
the lines go through the same read stage as an OCR reading's (``pipeline.read``:
reading order and Markdown): one page tree, whichever reader. A page whose text runs
sideways or upside down (``text_turn``) gives its lines turned level, on the page turned
as much (``turned_level``; the worker turns its image and records the turn).

Per page the reader is chosen, and why is recorded (``Verdict``, the provenance's
``text_layer``):

- ``text``: the layer passes every check; its reading is exact.
- ``ocr``: the page shows no text, or a check failed: the page is rendered and read
  by the engine as any scan.
- ``mixed``: the layer passes, and pictures on the page smaller than a scan
  (``pdf.scan_min_area``; a stamp, a pasted scan) hold text: each is read by OCR from
  its own pixels (not the text drawn under or over it) and its lines join the
  layer's, except lines the layer already has.

The checks, each named in the provenance with its value and its limit
(``[pdf]``):

- ``chars``: how many characters the layer holds, counted before any is read (a page
  holds tens of thousands; millions are an input built to blow up the outputs);
- ``unicode``: the share of characters with no Unicode mapping (pdfium's map error:
  a Type 3 font or an embedded font without ToUnicode), private-use, replacement or
  control characters;
- ``outside``: the share of characters whose box lies off the page;
- ``duplicates``: the share of characters drawn again on themselves;
- ``invisible_ocr``: where most of the text is invisible (render mode 3: a scanner's
  or an earlier OCR's layer over the picture of the page), the CER of a quick OCR
  (the classic reader) of a sample of its lines against the layer's text;
- ``ink``: the share of the page's ink (dark pixels) that no character box covers,
  outside the pictures read by OCR (text drawn as outlines, a scan under a partial
  layer).

``prefer`` trusts any layer that passes ``unicode``; ``ignore`` reads every page by
OCR (the appliance before this module).
"""

from __future__ import annotations

import hashlib
import math
import re
import statistics
import unicodedata
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from importlib.metadata import version
from pathlib import Path

import numpy as np
from PIL import Image
from rapidfuzz import fuzz
from rapidfuzz.distance import Levenshtein

from appliance.config import PdfSettings
from appliance.engines.base import PageRequest
from appliance.engines.cache import ResultCache, image_digest
from appliance.engines.names import PDF_TEXT
from appliance.engines.symbol_fonts import drawn, symbol_marks
from appliance.page import Line, Recognition, Word, unspaced
from appliance.raster import INK_LEVEL, PageRendering, open_pdf, to_rgb
from appliance.raster.pdf_content import shows_text as page_shows_text
from appliance.raster.preprocess import mapped_box
from appliance.raster.turning import quarter_turn

AUTO, IGNORE, PREFER = "auto", "ignore", "prefer"
MODES = (AUTO, IGNORE, PREFER)
TEXT, OCR, MIXED = "text", "ocr", "mixed"  # the readers a page may get
NAME = PDF_TEXT  # the reader's name where a result records its engine
# how characters become lines and words: bump it when that changes, so the result
# cache does not serve the old reading
RECIPE = "text-layer/v5"

LINE_GAP = 1.2  # em of white between two characters of a row that ends a line
# A word space: 0.2 to 0.33 em in common fonts (Noto CJK's is 0.224). pdfium infers a
# space wherever characters stand apart, and a justified Chinese line stands every
# character apart ("传 统 IP 网 络"): in a line with Chinese or Japanese, a space it
# inferred is kept only where the white is wider than the line's own letter spacing by
# this much (``_line``).
WORD_SPACE_EM = 0.25
# RapidOCR's line boxes on the born-digital eval pages are 1.06-1.28 times as tall as
# the font's (ascent to descent): a line the same 0.2 em taller keeps the reading
# order's gaps (``reading.order.SECTION_GAP``) as they are for the same page scanned;
# without it a table of 2-em rows fell apart into one section a row
BOX_PAD = 0.1
_INVISIBLE = 3  # FPDF_TEXTRENDERMODE_INVISIBLE
_INVISIBLE_SHARE = 0.5  # the layer counts as invisible when this share of it is
_SAMPLE_MIN_CHARS = 3  # a sampled line has at least this many characters
_INK_DPI = 50  # the page is judged for ink at about this resolution
_RULE_INCHES = 1.0  # a straight run of ink this long is a rule (no glyph stroke is)
OCR_LINE_MIN_SCORE = 0.5  # a picture's OCR line below this is noise (a photo's texture)
SAME_TEXT = 80  # a picture's line this similar (0-100) to the layer's text there is a twin
_HIGH_SURROGATE = re.compile("[\ud800-\udbff]")  # a character past U+FFFF: its first unit
_LOW_SURROGATE = re.compile("[\udc00-\udfff]")  # ... and its second
_SURROGATE = re.compile("[\ud800-\udfff]")
# pdfium's code for a hyphen that ends a line (its own text drops it, joining the word):
# read as the hyphen printed there, as OCR reads it
_LINE_END_HYPHEN = 0x02


@dataclass
class Char:
    text: str
    box: tuple[float, float, float, float]  # in the rendered page's pixels
    size: float  # the font size in those pixels
    invisible: bool
    unmapped: bool
    generated: bool  # inserted by pdfium (a space or a line break it inferred)
    turn: int = 0  # degrees its line runs turned counterclockwise on the page: 0, 90, 180, 270
    mirrored: bool = False  # drawn mirror-wise (a reflecting matrix), no turn sets it level

    @property
    def space(self) -> bool:
        return self.text.isspace()


@dataclass
class Picture:
    box: tuple[float, float, float, float]  # in the rendered page's pixels
    image: Image.Image | None  # its own pixels, for OCR (pictures below scan size only)


@dataclass
class Check:
    value: float
    limit: float

    @property
    def passed(self) -> bool:
        return self.value <= self.limit


@dataclass
class Verdict:
    """Which reader a page got and why: ``reason`` is ``trusted``, ``no_text`` or the
    first check that failed."""

    reader: str
    reason: str
    mode: str
    checks: dict[str, Check] = field(default_factory=dict)
    ocr_lines: int = 0  # read by OCR in the pictures of a mixed page
    # degrees clockwise the page is turned for its reading, its lines given on the page
    # so turned: as far as its text runs counterclockwise (``text_turn``), or a reviewer's
    turn: int = 0

    def to_dict(self) -> dict:
        return {"reader": self.reader, "reason": self.reason, "mode": self.mode,
                "checks": {name: {**asdict(check), "passed": check.passed}
                           for name, check in self.checks.items()},
                "ocr_lines": self.ocr_lines, "turn": self.turn}


def model_id() -> str:
    return f"pdfium-{version('pypdfium2')}"


class TextLayerReader:
    """What the result cache keys a text-layer reading by (as an engine's): the
    reader, pdfium's version, the recipe with the settings and the OCR reader of a
    mixed page's pictures."""

    name = NAME

    def __init__(self, settings: PdfSettings, mode: str, ocr_model: str):
        self.settings, self.mode, self.ocr_model = settings, mode, ocr_model

    @property
    def model_id(self) -> str:
        return model_id()

    def recipe(self, request: PageRequest) -> str:
        return (f"{RECIPE}:{self.mode}:"
                f"{asdict(self.settings)}:{self.ocr_model}:{request.doc_type}")


@dataclass
class TextLayer:
    """A page's shown characters and pictures, in the pixels of ``size``."""

    chars: list[Char]
    pictures: list[Picture]
    size: tuple[int, int]

    def digest(self) -> str:
        """Identifies the layer's characters and boxes (a cache key's part: two PDFs
        that render alike may hold different text)."""
        digest = hashlib.sha256()
        for char in self.chars:
            digest.update(f"{char.text}{char.box}{char.invisible}{char.unmapped};".encode())
        return digest.hexdigest()


def shows_text(path: Path, index: int, password: str | None) -> bool:
    """Whether page ``index`` shows text of its own, as the searchable PDF judges it."""
    import pikepdf

    with pikepdf.open(path, password=password or "") as pdf:
        return page_shows_text(pdf.pages[index].obj)


def chars_check(path: Path, index: int, password: str | None, settings: PdfSettings) -> Check:
    """How many characters page ``index``'s text layer holds, against ``max_page_chars``."""
    with open_pdf(path, password) as pdf:
        page = pdf[index]
        textpage = page.get_textpage()
        try:
            return Check(textpage.count_chars(), settings.max_page_chars)
        finally:
            textpage.close()
            page.close()


def read_layer(path: Path, index: int, password: str | None, size: tuple[int, int],
               scan_min_area: float, min_picture_area: float) -> TextLayer:
    """The characters and pictures of page ``index``, mapped onto a rendering of the
    page of ``size`` pixels (what ``raster.render_page`` made)."""
    import ctypes

    import pypdfium2.raw as pdfium_c

    with open_pdf(path, password) as pdf:
        page = pdf[index]
        textpage = page.get_textpage()
        try:
            to_device = _page_to_device(page, size)
            chars = []
            # each text object's render mode and its font's marks (``symbol_fonts``)
            objects: dict[int, tuple[int, dict[int, str] | None]] = {}
            matrix = pdfium_c.FS_MATRIX()
            for i in range(textpage.count_chars()):
                code = pdfium_c.FPDFText_GetUnicode(textpage, i)
                generated = bool(pdfium_c.FPDFText_IsGenerated(textpage, i))
                x0, y0, x1, y1 = textpage.get_charbox(i, loose=True)
                (a, b), (c, d) = _apply(to_device, (x0, y1)), _apply(to_device, (x1, y0))
                box = (min(a, c), min(b, d), max(a, c), max(b, d))
                scale = abs(to_device[1, 1]) or abs(to_device[0, 1])
                linear = _char_matrix(textpage, i, matrix)
                size_px = (pdfium_c.FPDFText_GetFontSize(textpage, i) * scale
                           * math.sqrt(abs(linear[0] * linear[3] - linear[1] * linear[2])))
                mode, marks = 0, None
                if not generated:
                    obj = pdfium_c.FPDFText_GetTextObject(textpage, i)
                    key = ctypes.cast(obj, ctypes.c_void_p).value or 0
                    if key not in objects:
                        objects[key] = ((pdfium_c.FPDFTextObj_GetTextRenderMode(obj),
                                         symbol_marks(obj)) if obj else (0, None))
                    mode, marks = objects[key]
                text = ("-" if code == _LINE_END_HYPHEN
                        else (marks and drawn(marks, code))
                        or (chr(code) if 0 < code < 0x110000 else "\ufffd"))
                chars.append(Char(text, box,
                                  size_px, mode == _INVISIBLE,
                                  bool(pdfium_c.FPDFText_HasUnicodeMapError(textpage, i)),
                                  generated, *_direction(to_device, linear)))
            pictures = []
            area = float(size[0] * size[1]) or 1.0
            for obj in page.get_objects(filter=(pdfium_c.FPDF_PAGEOBJ_IMAGE,)):
                left, bottom, right, top = obj.get_bounds()
                (a, b), (c, d) = _apply(to_device, (left, top)), _apply(to_device, (right, bottom))
                box = (max(0.0, min(a, c)), max(0.0, min(b, d)),
                       min(float(size[0]), max(a, c)), min(float(size[1]), max(b, d)))
                share = max(0.0, box[2] - box[0]) * max(0.0, box[3] - box[1]) / area
                if share < min_picture_area:
                    continue
                image = None
                if share < scan_min_area:
                    image = to_rgb(obj.get_bitmap(render=True).to_pil())
                    turns = page.get_rotation() // 90
                    if turns:
                        image = image.rotate(-90 * turns, expand=True)
                pictures.append(Picture(box, image))
        finally:
            textpage.close()
            page.close()
    return TextLayer(_whole_characters(chars), pictures, size)


def _char_matrix(textpage, index: int, matrix) -> tuple[float, float, float, float]:
    """Character ``index``'s matrix (the text matrix and the CTM: a, b, c, d), which
    sizes and turns it: Acrobat Distiller sets text in a font of size 1 scaled tenfold,
    arXiv stamps its papers up the margin. pdfium's font size alone is the font's.
    ``matrix``: an FS_MATRIX to fill."""
    import ctypes

    import pypdfium2.raw as pdfium_c

    if not pdfium_c.FPDFText_GetMatrix(textpage, index, ctypes.byref(matrix)):
        return 1.0, 0.0, 0.0, 1.0
    return matrix.a, matrix.b, matrix.c, matrix.d


def _direction(to_device: np.ndarray, linear: tuple[float, float, float, float]
               ) -> tuple[int, bool]:
    """Which way a character's line runs on the rendered page: 0 (left to right), 90
    (up), 180 (right to left, upside down) or 270 (down), from the direction its
    matrix advances in; and whether it is drawn mirrored (its up and its advance turn
    the other way round than a glyph's in pixels, whose y runs down)."""
    advance = to_device[:2, :2] @ np.array([linear[0], linear[1]])
    up = to_device[:2, :2] @ np.array([linear[2], linear[3]])
    dx, dy = advance
    if abs(dx) >= abs(dy):
        turn = 0 if dx >= 0 else 180
    else:
        turn = 90 if dy < 0 else 270
    return turn, bool(dx * up[1] - dy * up[0] > 0)


def _whole_characters(chars: list[Char]) -> list[Char]:
    """The characters with each one outside the Basic Multilingual Plane whole: pdfium
    gives one (CJK Extension B's "𠮷" in a Japanese or Hong Kong name) as its two UTF-16
    surrogates, each a character of its own in the same box. A surrogate without its
    pair is U+FFFD, as any code that is no character."""
    whole: list[Char] = []
    for char in chars:
        if whole and _LOW_SURROGATE.match(char.text) and _HIGH_SURROGATE.match(whole[-1].text):
            pair = (whole[-1].text + char.text).encode("utf-16-le", "surrogatepass")
            whole[-1] = replace(whole[-1], text=pair.decode("utf-16-le"))
        else:
            whole.append(char)
    return [replace(char, text="\ufffd") if _SURROGATE.match(char.text) else char
            for char in whole]


def _page_to_device(page, size: tuple[int, int]) -> np.ndarray:
    """The 3x3 affine from the page's user space to the pixels of its rendering at
    ``size`` (pdfium's own display matrix: CropBox, /Rotate)."""
    import ctypes

    import pypdfium2.raw as pdfium_c

    fine = 64  # pdfium answers whole device units: ask on a finer grid
    x, y = ctypes.c_int(), ctypes.c_int()

    def device(px: float, py: float) -> tuple[float, float]:
        pdfium_c.FPDF_PageToDevice(page, 0, 0, size[0] * fine, size[1] * fine, 0, px, py,
                                   ctypes.byref(x), ctypes.byref(y))
        return x.value / fine, y.value / fine

    span = 1000.0
    origin, across, up = device(0, 0), device(span, 0), device(0, span)
    return np.array([[(across[0] - origin[0]) / span, (up[0] - origin[0]) / span, origin[0]],
                     [(across[1] - origin[1]) / span, (up[1] - origin[1]) / span, origin[1]],
                     [0.0, 0.0, 1.0]])


def _apply(matrix: np.ndarray, point: tuple[float, float]) -> tuple[float, float]:
    x, y = point
    return (float(matrix[0, 0] * x + matrix[0, 1] * y + matrix[0, 2]),
            float(matrix[1, 0] * x + matrix[1, 1] * y + matrix[1, 2]))


# --- characters to lines ---------------------------------------------------------------


def layer_lines(chars: list[Char]) -> list[Line]:
    """The characters as lines of words, in the order the PDF draws them (reading
    order comes after, from the boxes)."""
    lines, run = [], []
    last: Char | None = None  # the run's last character that is not a space
    for char in chars:
        if char.generated and char.text in "\r\n":
            lines.append(run)
            run, last = [], None
            continue
        # the characters of one glyph (a ligature's "f" and "i") share its box
        if last is not None and not char.space and char.box != last.box:
            em = max(last.size, char.size, 1.0)
            start, _end, across = _along(char, last.turn)
            _start, end, last_across = _along(last, last.turn)
            gap = start - end
            if (char.turn != last.turn or abs(across - last_across) >= 0.5 * em
                    or gap > LINE_GAP * em or gap < -0.5 * em):
                lines.append(run)
                run, last = [], None
        run.append(char)
        if not char.space:
            last = char
    lines.append(run)
    return [line for line in (_line(run) for run in lines) if line is not None]


def _along(char: Char, turn: int) -> tuple[float, float, float]:
    """Where ``char`` starts and ends along a line turned by ``turn`` degrees, and its
    centre across it, as if the line were turned level."""
    x0, y0, x1, y1 = char.box
    return {0: (x0, x1, (y0 + y1) / 2), 90: (-y1, -y0, (x0 + x1) / 2),
            180: (-x1, -x0, -(y0 + y1) / 2), 270: (y0, y1, -(x0 + x1) / 2)}[turn]


def _line(chars: list[Char]) -> Line | None:
    words, word = [], []
    tracking = _tracking(chars)
    for index, char in enumerate([*chars, None]):
        if char is not None and char.generated and char.space and tracking is not None \
                and word and index + 1 < len(chars) and not chars[index + 1].space:
            after = chars[index + 1]
            em = max(word[-1].size, after.size, 1.0)
            if after.box[0] - word[-1].box[2] < tracking + WORD_SPACE_EM * em:
                continue  # letter spacing, not a word space
        if char is None or char.space:
            if word:
                words.append(word)
            word = []
        else:
            word.append(char)
    if not words:
        return None
    entries = [Word("".join(c.text for c in word), _padded(word), 1.0) for word in words]
    return Line(text=" ".join(entry.text for entry in entries),
                box=_union(entry.box for entry in entries), score=1.0, words=entries)


def _tracking(chars: list[Char]) -> float | None:
    """The letter spacing of a line with Chinese or Japanese: the median white between
    two such characters side by side (about 0 set solid, more in a justified line), in
    pixels; None for a line without two side by side."""
    visible = [char for char in chars if not char.space]
    white = [right.box[0] - left.box[2] for left, right in zip(visible, visible[1:])
             if unspaced(left.text) and unspaced(right.text)]
    return statistics.median(white) if white else None


def _padded(word: list[Char]) -> list[float]:
    """A word's box as the OCR detector draws one: its characters' boxes (the font's
    ascent to descent) and BOX_PAD em around them."""
    x0, y0, x1, y1 = _union(c.box for c in word)
    pad = BOX_PAD * max(c.size for c in word)
    return [x0 - pad / 2, y0 - pad, x1 + pad / 2, y1 + pad]


def _union(boxes) -> list[float]:
    boxes = list(boxes)
    return [min(b[0] for b in boxes), min(b[1] for b in boxes),
            max(b[2] for b in boxes), max(b[3] for b in boxes)]


# --- the checks ------------------------------------------------------------------------


def _unmapped(char: Char) -> bool:
    if char.unmapped or char.text == "\ufffd":
        return True
    category = unicodedata.category(char.text)
    return category in ("Co", "Cs") or (category == "Cc" and not char.text.isspace())


def unicode_check(shown: list[Char], settings: PdfSettings) -> Check:
    bad = sum(1 for char in shown if _unmapped(char))
    return Check(round(bad / len(shown), 4), settings.max_unmapped_share)


def outside_check(shown: list[Char], size: tuple[int, int], settings: PdfSettings) -> Check:
    width, height = size
    off = sum(1 for c in shown
              if not (0 <= (c.box[0] + c.box[2]) / 2 <= width
                      and 0 <= (c.box[1] + c.box[3]) / 2 <= height))
    return Check(round(off / len(shown), 4), settings.max_outside_share)


def duplicates_check(shown: list[Char], settings: PdfSettings) -> Check:
    """Characters drawn where the same character already stands (within a fifth of an
    em): a layer written twice, or text stacked on itself."""
    seen: set[tuple[str, int, int]] = set()
    twice = 0
    for char in shown:
        grid = max(char.size, 1.0) / 5
        spot = (char.text, round(char.box[0] / grid), round(char.box[1] / grid))
        twice += spot in seen
        seen.add(spot)
    return Check(round(twice / len(shown), 4), settings.max_duplicate_share)


def invisible_check(lines: list[Line], image: Image.Image, settings: PdfSettings,
                    ocr: Callable[[Image.Image], Recognition]) -> Check:
    """The CER of a quick OCR of a sample of the invisible layer's lines (spread over
    the page, each cut from the rendering and stacked in one strip) against their
    text in the layer."""
    candidates = [line for line in lines
                  if sum(not ch.isspace() for ch in line.text) >= _SAMPLE_MIN_CHARS]
    count = min(settings.invisible_sample_lines, len(candidates))
    if not count:
        return Check(1.0, settings.max_invisible_cer)
    step = len(candidates) / count
    sample = [candidates[int(i * step)] for i in range(count)]
    crops = []
    for line in sample:
        x0, y0, x1, y1 = line.box
        pad = 0.25 * (y1 - y0)
        crops.append(image.crop((max(0, round(x0 - pad)), max(0, round(y0 - pad)),
                                 min(image.width, round(x1 + pad)),
                                 min(image.height, round(y1 + pad)))))
    gap = max(8, round(max(crop.height for crop in crops) / 2))
    strip = Image.new("RGB", (max(crop.width for crop in crops) + 2 * gap,
                              sum(crop.height + gap for crop in crops) + gap), "white")
    top = gap
    for crop in crops:
        strip.paste(crop, (gap, top))
        top += crop.height + gap
    read = "".join(ocr(strip).text.split())
    layer = "".join("".join(line.text for line in sample).split())
    return Check(round(Levenshtein.normalized_distance(layer, read), 4),
                 settings.max_invisible_cer)


def ink_check(shown: list[Char], pictures: list[Picture], page: PageRendering,
              settings: PdfSettings) -> Check:
    """The share of the page's ink outside every character box (a pixel around each)
    and every picture read by OCR, judged on a rendering at about ``_INK_DPI``. Ruling
    lines (a straight run of ink ``_RULE_INCHES`` long) are not text and not counted."""
    import cv2

    preview = page.preview(_INK_DPI)
    dark = (np.asarray(preview.convert("L")) < INK_LEVEL).astype(np.uint8)
    run = max(2, round(_RULE_INCHES * float(preview.info.get("dpi", (_INK_DPI,))[0])))
    rules = (cv2.morphologyEx(dark, cv2.MORPH_OPEN, np.ones((1, run), np.uint8))
             | cv2.morphologyEx(dark, cv2.MORPH_OPEN, np.ones((run, 1), np.uint8)))
    ink = (dark & ~rules).astype(bool)
    total = int(ink.sum())
    if not total:
        return Check(0.0, settings.max_uncovered_ink)
    covered = np.zeros_like(ink)
    sx, sy = ink.shape[1] / page.size[0], ink.shape[0] / page.size[1]
    boxes = [c.box for c in shown] + [p.box for p in pictures if p.image is not None]
    for x0, y0, x1, y1 in boxes:
        covered[max(0, int(y0 * sy) - 1):int(y1 * sy) + 2,
                max(0, int(x0 * sx) - 1):int(x1 * sx) + 2] = True
    return Check(round(int((ink & ~covered).sum()) / total, 4), settings.max_uncovered_ink)


# --- the page --------------------------------------------------------------------------


def judge(layer: TextLayer, page: PageRendering, mode: str, settings: PdfSettings,
          ocr: Callable[[Image.Image], Recognition]) -> tuple[Verdict, list[Line]]:
    """The verdict on a page that shows text, and its layer's lines. The checks run in
    order of cost; the first that fails decides."""
    shown = [char for char in layer.chars if not char.generated and not char.space]
    if not shown:
        return Verdict(OCR, "no_text", mode), []
    lines = layer_lines(layer.chars)
    verdict = Verdict(TEXT, "trusted", mode)
    checks = [("unicode", lambda: unicode_check(shown, settings))]
    if mode == AUTO:
        invisible = sum(char.invisible for char in shown) / len(shown) >= _INVISIBLE_SHARE
        checks += [("outside", lambda: outside_check(shown, layer.size, settings)),
                   ("duplicates", lambda: duplicates_check(shown, settings)),
                   ("ink", lambda: ink_check(shown, layer.pictures, page, settings))]
        if invisible:
            checks.append(("invisible_ocr", lambda: invisible_check(lines, page.image, settings, ocr)))
    for name, run in checks:
        verdict.checks[name] = check = run()
        if not check.passed:
            verdict.reader, verdict.reason = OCR, name
            return verdict, lines
    return verdict, lines


def text_turn(chars: list[Char]) -> int:
    """How far counterclockwise the page's text runs: the turn of more than half its
    shown characters (a table set sideways on an upright page, a page upside down),
    0 where no turn has them or they are drawn mirrored (no turn sets them level)."""
    shown = [char for char in chars if not char.generated and not char.space]
    turns = Counter(char.turn for char in shown if not char.mirrored)
    if not turns:
        return 0
    turn, count = turns.most_common(1)[0]
    return turn if count > len(shown) / 2 else 0


def turned_level(lines: list[Line], turn: int, size: tuple[int, int]
                 ) -> tuple[list[Line], int]:
    """``lines`` of a page of ``size`` placed on the page turned ``turn`` degrees
    clockwise (as ``preprocess`` turns it, which records the map back): level where its
    text runs as far counterclockwise. And the turned page's height."""
    rotate = (360 - turn) % 360
    matrix = quarter_turn(rotate, *size)
    level = [replace(line, box=mapped_box(line.box, matrix),
                     words=[replace(word, box=mapped_box(word.box, matrix))
                            for word in line.words] if line.words else line.words)
             for line in lines]
    return level, size[0] if rotate in (90, 270) else size[1]


def picture_lines(layer: TextLayer, lines: list[Line],
                  ocr: Callable[[Image.Image], Recognition]) -> list[Line]:
    """The lines OCR reads in the page's pictures (below scan size), in page pixels,
    without those the layer already has there."""
    found = []
    for picture in layer.pictures:
        if picture.image is None or min(picture.image.size) < 8:
            continue
        x0, y0, x1, y1 = picture.box
        sx, sy = (x1 - x0) / picture.image.width, (y1 - y0) / picture.image.height

        def placed(box):
            return [x0 + box[0] * sx, y0 + box[1] * sy, x0 + box[2] * sx, y0 + box[3] * sy]

        for line in ocr(picture.image).lines:
            if line.score < OCR_LINE_MIN_SCORE:
                continue
            moved = Line(text=line.text, box=placed(line.box), score=line.score,
                         words=[replace(word, box=placed(word.box)) for word in line.words]
                         if line.words else None)
            if not _in_layer(moved, lines):
                found.append(moved)
    return found


def _in_layer(line: Line, lines: list[Line]) -> bool:
    """Whether the layer has this text where the line stands (a picture of text that
    the layer also holds: a scan with its OCR layer)."""
    x0, y0, x1, y1 = line.box
    there = " ".join(other.text for other in lines
                     if x0 <= (other.box[0] + other.box[2]) / 2 <= x1
                     and y0 <= (other.box[1] + other.box[3]) / 2 <= y1)
    return bool(there) and fuzz.partial_ratio(line.text, there) >= SAME_TEXT


def read_page(page: PageRendering, mode: str, settings: PdfSettings,
              ocr: Callable[[Image.Image], Recognition], cache: ResultCache | None,
              reader: TextLayerReader, request: PageRequest, turn_deg: int | None = None,
              ) -> tuple[dict, Recognition | None, str | None]:
    """The PDF ``page``'s own text: the verdict (``Verdict.to_dict``), its lines as found
    (unread, for the read stage; None where the page goes to OCR) and its result cache
    key. ``ocr`` is the quick reader of the invisible check's sample and of pictures.
    ``turn_deg``: a reviewer's turn of the page, clockwise, in place of its text's own.
    Of the checks, only that one renders the page at full resolution. A reading is cached under the layer's
    characters and a light rendering's pixels with ``reader``'s recipe, never under an
    OCR reading's key: ``ignore`` never gets a text-layer reading from the cache, nor
    ``auto`` an OCR reading of a page it reads from its text."""
    path, index, password = page.path, page.index, page.password
    if not shows_text(path, index, password):
        return Verdict(OCR, "no_text", mode).to_dict(), None, None
    chars = chars_check(path, index, password, settings)
    if not chars.passed:
        verdict = Verdict(OCR, "chars", mode)
        verdict.checks["chars"] = chars
        return verdict.to_dict(), None, None
    layer = read_layer(path, index, password, page.size, settings.scan_min_area,
                       settings.min_picture_area)
    key = cache.key(f"{image_digest(page.preview(_INK_DPI))}:{layer.digest()}:{turn_deg}",
                    reader, request) if cache else None
    if key and (cached := cache.get(key)) is not None:
        return cached.provenance["text_layer"], cached.flagged("cached"), key
    verdict, lines = judge(layer, page, mode, settings, ocr)
    if verdict.reader == OCR:
        return verdict.to_dict(), None, None
    found = picture_lines(layer, lines, ocr)
    if found:
        verdict.reader, verdict.ocr_lines = MIXED, len(found)
    lines, height = lines + found, page.size[1]
    verdict.turn = text_turn(layer.chars) if turn_deg is None else turn_deg
    if verdict.turn:
        lines, height = turned_level(lines, verdict.turn, layer.size)
    recognition = Recognition.found(lines, page_height=height).noted(
        {"text_layer": verdict.to_dict()})
    if key:
        cache.put(key, recognition)
    return verdict.to_dict(), recognition, key
