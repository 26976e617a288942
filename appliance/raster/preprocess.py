"""Page clean-up before recognition, the same for every engine.

``preprocess`` runs these steps in this order; each can be switched off in
``[preprocess]``, is timed, and says what it did in a :class:`StepRecord` that goes
into the page result's provenance:

1. orientation: turn the page by 0/90/180/270 degrees. The text-line geometry tells
   a page lying on its side (lines run vertically) from one that is upright or upside
   down; a text-direction classifier (``classify_upside_down``, the engine side's
   RapidOCR classifier in a worker) then votes on straightened crops of up to
   ``ORIENTATION_CROPS`` of the page's longest lines: 0 or 180, and for a page on its
   side, which way round. A page the geometry finds on its side turns only when a
   text detector (``text_boxes``, the engine side's RapidOCR detector, run only then)
   also finds more text boxes running down the page than across it: monospaced print
   stacks its characters in columns that the projections take for lines, and 17 of 544
   real receipts were turned on their side and read as nothing before this check.
   Without a classifier only the geometry runs: an upright or upside-down page is left
   as it is, and a page on its side too (a guess would be wrong half of the time, and
   upside down reads worse than sideways).
2. deskew: rotate the lines level when they lean by at least
   ``settings.deskew_min_angle_deg``, on a canvas grown so no corner is cut off, the
   new corners filled with the colour of the page's edge.
3. crop: remove uniform borders (black scanner edges, grey platens, blank margins)
   down to the content plus a margin; never into a text line. It follows deskew so the
   corners deskew filled are trimmed too.
4. contrast: stretch the lightness so the ink is dark and the paper white; the colour
   (LAB a/b) is untouched and nothing is binarised. Pages whose contrast is already
   good are left alone. It follows crop so a black border does not count as ink.
5. denoise (off by default): remove specks, isolated dots of ink far smaller than
   the print's dots and commas, which scanners and faxes leave on paper.
6. resolution: scale a larger page down to its document type's profile
   (``RESOLUTION_PROFILES``), one rung up the ladder at a time while the print would
   still be smaller than the profile's minimum character height; enlarge a smaller
   page only when its print is too small to read as it is (``READABLE_CHAR_HEIGHT_PX``),
   and only as far as its print needs to reach that minimum (enlarging adds no detail,
   only pixels for the engine to read); never above ``max_pixels``. Last, so
   every earlier step works on the full-resolution scan.

What the records say (``StepRecord.detail``; every step that ran has one, and a step
that looked but changed nothing says why under ``skipped``; ``layout_ms`` appears on
the step that ran the layout analysis):

- orientation: ``rotated_deg`` (counter-clockwise turn applied), ``lines``
  (horizontal / vertical), ``text_boxes`` (``across`` and ``down``, where the geometry
  found the lines running down), ``votes`` (count and weight of upright and inverted answers)
  or ``classifier: None``; a turn given (``turn_deg``) instead records ``by`` whom:
  ``reviewer``, or ``pdf-text`` for a born-digital page whose own text runs turned;
- deskew: ``angle_deg`` (the lean measured, counter-clockwise positive; the page was
  turned by minus that), ``fill`` (the colour of the new corners);
- crop: ``box`` [left, top, right, bottom] kept, ``removed`` (share of the area);
- contrast: ``ink_level``, ``paper_level`` (lightness before), ``gain``;
- denoise: ``specks_removed``, ``max_speck_px``;
- resolution: ``profile``, ``long_side``, ``scale``, ``steps_up``, ``char_height_px``
  (after scaling), ``min_char_height_px``, ``size``, and ``below_min_char_height`` /
  ``capped_by_max_pixels`` when the print stays small.

Orientation and deskew, the steps that turn the page, are in ``turning``; the page the
steps share and their records in ``workpage``; the other steps here.

One layout analysis (``appliance.raster.layout.analyze``) of the page as it came in
serves orientation, deskew, crop and resolution: the skew and the print size do not
change when the page is turned or cropped, and the line boxes are carried through
each step's geometry.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass
from typing import Callable

import cv2
import numpy as np
from PIL import Image

from appliance.config import DOC_TYPES, PreprocessSettings
from appliance.raster.turning import (REVIEWER, ClassifyUpsideDown, TextBoxDirections, deskew,
                                      orientation, turned)
from appliance.raster.workpage import StepRecord, WorkPage

log = logging.getLogger(__name__)

# crop
CROP_ANALYSIS_LONG_SIDE = 1000
BORDER_TOLERANCE = 24  # grey levels a border pixel may differ from its row's mean
BORDER_ALLOWANCE = 0.003  # share of a border row's pixels that may differ (dust, specks)
MIN_CROP_SHARE = 0.03  # crop only when at least this share of the area goes

# contrast
GOOD_CONTRAST = 160  # paper minus ink lightness (0-255) at or above which a page is left
MIN_CONTRAST = 16  # below this there is no ink to stretch (a blank page)
MAX_GAIN = 3.0
INK_PERCENTILE, PAPER_PERCENTILE = 0.5, 99.0


@dataclass(frozen=True)
class Profile:
    """Target size for one document type. ``min_char_height_px`` is in the unit of
    ``Layout.char_height_px``: a text line's height, about the font size in pixels."""

    long_side: int
    min_char_height_px: float


# At 1536 px an A4 page has 130 px per inch: 10-point print is about 18 px high, which
# both engines read well, and 8-point print moves up a rung. Generic pages are mostly
# letters, invoices and reports, so they share that profile.
RESOLUTION_PROFILES: dict[str, Profile] = {
    "generic": Profile(1536, 16),
    "receipt": Profile(1792, 16),  # long narrow strips: the long side is the length
    "invoice": Profile(1536, 16),
    "contract": Profile(1792, 16),  # dense body text, small print
    "report": Profile(1536, 16),
    "table": Profile(1792, 16),  # dense small figures
    "handwriting": Profile(2048, 24),  # strokes need more pixels than print
    "id_card": Profile(1024, 16),  # a small card: its print is large for its size
    "fapiao": Profile(1792, 16),  # a Chinese VAT invoice: dense characters in small boxes
}
# Print at least this high is read as it is, never enlarged: the recognisers scale each
# line to their own input height, and the detector finds print from here up. Enlarging
# FUNSD's 100-dpi forms (print 10-15 px) to 16 px cost a third more recognition time and
# read no better (30 forms: CER 7.17 % enlarged, 7.08 % not); print below it, on
# low-resolution scans, still reads better enlarged. A reviewer's boost enlarges any print.
READABLE_CHAR_HEIGHT_PX = 10.0
# "One profile up" is the next longer long side of any profile.
# Each rung of a reviewer's resolution boost wants print this much bigger.
BOOST_CHAR_FACTOR = 1.5
PROFILE_LADDER: tuple[int, ...] = tuple(sorted({p.long_side for p in RESOLUTION_PROFILES.values()}))
assert set(RESOLUTION_PROFILES) == set(DOC_TYPES), "every document type needs a profile"


def preprocess(image: Image.Image, settings: PreprocessSettings, *, doc_type: str = "generic",
               max_pixels: int | None = None,
               classify_upside_down: ClassifyUpsideDown | None = None,
               text_boxes: TextBoxDirections | None = None,
               resolution_boost: int = 0,
               turn_deg: int | None = None, turned_by: str = REVIEWER,
               ) -> tuple[Image.Image, list[StepRecord]]:
    """The cleaned page and one record per step that ran (none when disabled).

    ``resolution_boost``: read the page this many profile rungs sharper (a reviewer's
    rerun at higher resolution), with print that much bigger. ``turn_deg``: a turn of
    the page as it came, clockwise, in place of the orientation step's own, ``turned_by``
    whom: a reviewer's, or the way a born-digital page's own text runs.

    A grayscale (``L``) page stays grayscale, anything else becomes RGB. When no step
    changes a pixel, ``image`` itself is returned.
    """
    if doc_type not in RESOLUTION_PROFILES:
        raise ValueError(f"unknown document type {doc_type!r}; known: {', '.join(DOC_TYPES)}")
    if not settings.enabled and turn_deg is None:
        return image, []
    mode = "L" if image.mode in ("L", "1") else "RGB"
    working = image if image.mode == mode else image.convert(mode)
    page = WorkPage(np.asarray(working))

    steps: list[tuple[str, bool, Callable[[], dict]]] = [
        ("orientation", settings.orientation, lambda: orientation(page, classify_upside_down,
                                                                  text_boxes))
         if turn_deg is None
         else ("orientation", True, lambda: turned(page, turn_deg, turned_by)),
        ("deskew", settings.deskew, lambda: deskew(page, settings.deskew_min_angle_deg)),
        ("crop", settings.crop_borders, lambda: _crop(page)),
        ("contrast", settings.contrast, lambda: _contrast(page)),
        ("denoise", settings.denoise, lambda: _denoise(page)),
        ("resolution", settings.resolution_profiles,
         lambda: _resolution(page, RESOLUTION_PROFILES[doc_type], doc_type, max_pixels,
                             resolution_boost)),
    ]
    if not settings.enabled:  # the given turn alone
        steps = steps[:1]
    records = []
    for name, enabled, run in steps:
        if not enabled:
            continue
        start = time.perf_counter()
        page.moved = np.eye(3)
        detail = run()
        if not np.allclose(page.moved, np.eye(3)):  # the text layer maps boxes back with it
            detail["transform"] = [round(float(v), 6) for v in page.moved[:2].ravel()]
        records.append(StepRecord(name, round((time.perf_counter() - start) * 1000, 1), detail))
    log.debug("event=preprocess doc_type=%s %s", doc_type,
              " ".join(f"{r.step}_ms={r.ms:.0f}" for r in records))
    if not page.changed:
        return working, records
    return Image.fromarray(np.ascontiguousarray(page.pixels), mode), records


def to_original(steps: list[dict]) -> np.ndarray:
    """The 3x3 affine that maps the preprocessed page's pixels back to the page as it
    was rendered, from the steps' records (``StepRecord.to_dict``: each step that moved
    the pixels keeps its ``transform``, old coordinates to new, as 6 numbers)."""
    forward = np.eye(3)
    for step in steps:
        if (transform := step.get("detail", {}).get("transform")) is not None:
            forward = np.vstack([np.reshape(transform, (2, 3)), [0, 0, 1]]) @ forward
    return np.linalg.inv(forward)


def mapped_box(box, matrix: np.ndarray) -> list[float]:
    """``box`` [x0, y0, x1, y1] through the affine ``matrix`` (2 x 3, or 3 x 3 as
    ``to_original`` gives): the box holding its corners' images."""
    x0, y0, x1, y1 = box
    corners = np.asarray(matrix)[:2] @ [[x0, x1, x0, x1], [y0, y0, y1, y1], [1, 1, 1, 1]]
    return [float(corners[0].min()), float(corners[1].min()),
            float(corners[0].max()), float(corners[1].max())]


def _crop(page: WorkPage) -> dict:
    """``box``: [left, top, right, bottom] kept, in the pixels this step received."""
    detail: dict = {}
    page.layout(detail)  # its line boxes are what must never be cut
    height, width = page.pixels.shape[:2]
    gray = page.pixels if page.pixels.ndim == 2 else cv2.cvtColor(page.pixels, cv2.COLOR_RGB2GRAY)
    scale = min(1.0, CROP_ANALYSIS_LONG_SIDE / max(height, width))
    small = gray if scale == 1.0 else cv2.resize(
        gray, (max(1, round(width * scale)), max(1, round(height * scale))),
        interpolation=cv2.INTER_AREA)
    found = _content_box(small)
    text = page.line_boxes()
    if found is None and not text:
        return {**detail, "skipped": "blank page"}
    boxes = list(text)
    if found is not None:
        l, t, r, b = found
        boxes.append((math.floor(l / scale), math.floor(t / scale),
                      math.ceil(r / scale), math.ceil(b / scale)))
    left = min(box[0] for box in boxes)
    top = min(box[1] for box in boxes)
    right = max(box[2] for box in boxes)
    bottom = max(box[3] for box in boxes)
    margin = round(max(8.0, 0.01 * max(height, width), page.char_height() or 0.0))
    left, top = max(0, left - margin), max(0, top - margin)
    right, bottom = min(width, right + margin), min(height, bottom + margin)
    detail["box"] = [left, top, right, bottom]
    removed = 1 - (right - left) * (bottom - top) / (width * height)
    detail["removed"] = round(removed, 3)
    if removed < MIN_CROP_SHARE:
        return {**detail, "skipped": f"border under {MIN_CROP_SHARE:.0%} of the page"}
    page.update(page.pixels[top:bottom, left:right],
                np.array([[1.0, 0.0, -left], [0.0, 1.0, -top]]))
    return detail


def _content_box(gray: np.ndarray) -> tuple[int, int, int, int] | None:
    """The box left after peeling uniform rows and columns off each side, or None
    when everything is uniform.

    A row is uniform when nearly all its pixels are within BORDER_TOLERANCE of the
    row's mean, whatever that is (white margin, black scanner edge, grey
    platen). Rows are judged within the current columns and the other way round,
    repeated until nothing changes, so a black edge on the left does not keep a
    blank top margin's rows from being uniform.
    """
    top, bottom, left, right = 0, gray.shape[0], 0, gray.shape[1]
    for _ in range(8):
        rows = np.flatnonzero(_busy(gray[top:bottom, left:right], axis=1))
        if not len(rows):
            return None
        new_top, new_bottom = top + rows[0], top + rows[-1] + 1
        cols = np.flatnonzero(_busy(gray[new_top:new_bottom, left:right], axis=0))
        if not len(cols):
            return None
        new_left, new_right = left + cols[0], left + cols[-1] + 1
        if (new_top, new_bottom, new_left, new_right) == (top, bottom, left, right):
            break
        top, bottom, left, right = new_top, new_bottom, new_left, new_right
    return int(left), int(top), int(right), int(bottom)


def _busy(block: np.ndarray, axis: int) -> np.ndarray:
    """Per row (axis=1) or column (axis=0): whether it is not uniform.

    Judged against the row's mean, not its median (five times faster): a few specks
    move the mean of a uniform row by little, and a row that is partly border and
    partly page differs from any single value.
    """
    mean = block.mean(axis=axis, keepdims=True, dtype=np.float32)
    off = np.abs(block.astype(np.float32) - mean) > BORDER_TOLERANCE
    allowed = max(1, BORDER_ALLOWANCE * block.shape[axis])
    return np.count_nonzero(off, axis=axis) > allowed


# -- contrast ---------------------------------------------------------------------------

def _contrast(page: WorkPage) -> dict:
    """A linear stretch of the lightness: the ink (the darkest INK_PERCENTILE %) to
    black, the paper (PAPER_PERCENTILE) to white, at most MAX_GAIN times.

    Why not CLAHE: on a document it makes paper grain and JPEG blocks in blank areas
    as loud as the text, and halos around bold print; a global stretch cannot invert,
    halo or binarise anything. Colour pages are stretched in LAB's L channel only, so a
    red stamp stays the same red, only darker where the page was faded.
    """
    colour = page.pixels.ndim == 3
    lab = cv2.cvtColor(page.pixels, cv2.COLOR_RGB2LAB) if colour else None
    light = lab[..., 0] if colour else page.pixels
    ink, paper = (float(v) for v in np.percentile(light[::2, ::2],
                                                  [INK_PERCENTILE, PAPER_PERCENTILE]))
    detail = {"ink_level": round(ink), "paper_level": round(paper)}
    if paper - ink >= GOOD_CONTRAST:
        return {**detail, "skipped": f"contrast already good ({paper - ink:.0f} of 255)"}
    if paper - ink < MIN_CONTRAST:
        return {**detail, "skipped": "no ink to stretch (blank or uniform page)"}
    gain = min(MAX_GAIN, 255.0 / (paper - ink))
    # keep the paper white: the stretch is anchored at the paper when the gain is capped
    table = np.clip(255.0 - (paper - np.arange(256)) * gain, 0, 255).astype(np.uint8)
    stretched = cv2.LUT(light, table)
    if colour:
        lab[..., 0] = stretched
        stretched = cv2.cvtColor(lab, cv2.COLOR_LAB2RGB)
    page.update(stretched, np.eye(3))
    return {**detail, "gain": round(gain, 2)}


# -- denoise ----------------------------------------------------------------------------

def _denoise(page: WorkPage) -> dict:
    """Remove specks: isolated ink components of at most a few pixels, replaced by the
    local background.

    A speck is at most (a tenth of the character height) squared in area, and has no
    larger ink within a third of the character height, so the dots on i and j,
    periods, commas and accents, which sit next to their letters, stay. Not a median
    filter over the page (it erases the one- and two-pixel strokes of small print)
    nor non-local means (seconds per page on a few cores).
    """
    detail: dict = {}
    page.layout(detail)
    char = page.char_height() or 20.0
    max_area = max(2, round((0.1 * char) ** 2))
    gray = page.pixels if page.pixels.ndim == 2 else cv2.cvtColor(page.pixels, cv2.COLOR_RGB2GRAY)
    ink = cv2.adaptiveThreshold(gray, 255, cv2.ADAPTIVE_THRESH_MEAN_C, cv2.THRESH_BINARY_INV,
                                25, 24)
    count, labels, stats, _ = cv2.connectedComponentsWithStats(ink, connectivity=8)
    small = stats[:, cv2.CC_STAT_AREA] <= max_area
    small[0] = False
    reach = max(1, round(char / 3))
    kernel = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * reach + 1, 2 * reach + 1))
    near_ink = cv2.dilate((~small)[labels].astype(np.uint8) & (labels > 0), kernel) > 0
    small[np.unique(labels[near_ink])] = False  # next to a letter: punctuation, a dot, an accent
    small[0] = False
    removed = int(np.count_nonzero(small))
    detail.update({"max_speck_px": max_area, "specks_removed": removed})
    if removed:
        specks = small[labels]
        background = cv2.medianBlur(page.pixels, 5)
        cleaned = page.pixels.copy()
        cleaned[specks] = background[specks]
        page.update(cleaned, np.eye(3))
    return detail


# -- resolution -------------------------------------------------------------------------

def _resolution(page: WorkPage, profile: Profile, doc_type: str, max_pixels: int | None,
                boost: int = 0) -> dict:
    detail: dict = {"profile": doc_type}
    if boost:  # a reviewer asked for a sharper reading: bigger print, a longer side
        rung = min(PROFILE_LADDER.index(profile.long_side) + boost, len(PROFILE_LADDER) - 1)
        profile = Profile(PROFILE_LADDER[rung],
                          profile.min_char_height_px * BOOST_CHAR_FACTOR ** boost)
        detail["boost"] = boost
    page.layout(detail)
    height, width = page.pixels.shape[:2]
    long_side = profile.long_side
    char = page.char_height()
    steps_up = 0
    if char is not None:
        rungs = [side for side in PROFILE_LADDER if side > long_side]
        while char * long_side / max(height, width) < profile.min_char_height_px and rungs:
            long_side = rungs.pop(0)
            steps_up += 1
    scale = long_side / max(height, width)
    if scale > 1:  # enlarging adds no detail: only print too small to read (or a reviewer's
        # boost), and only as far as the print needs
        enlarge = char is not None and (boost or char < READABLE_CHAR_HEIGHT_PX)
        scale = max(1.0, min(scale, profile.min_char_height_px / char)) if enlarge else 1.0
    capped = bool(max_pixels and width * height * scale * scale > max_pixels)
    if capped:
        scale = math.sqrt(max_pixels / (width * height))
    new_width, new_height = max(1, round(width * scale)), max(1, round(height * scale))
    detail.update({
        "long_side": long_side, "scale": round(scale, 3), "steps_up": steps_up,
        "char_height_px": round(char * scale, 1) if char is not None else None,
        "min_char_height_px": profile.min_char_height_px,
    })
    if char is not None and char * scale < profile.min_char_height_px:
        detail["below_min_char_height"] = True  # top of the ladder, or the pixel cap
    if capped:
        detail["capped_by_max_pixels"] = True
    if (new_width, new_height) == (width, height):
        return detail
    interpolation = cv2.INTER_AREA if scale < 1 else cv2.INTER_CUBIC
    resized = cv2.resize(page.pixels, (new_width, new_height), interpolation=interpolation)
    page.update(resized, np.diag([new_width / width, new_height / height, 1.0]), scale)
    detail["size"] = [new_width, new_height]
    return detail
