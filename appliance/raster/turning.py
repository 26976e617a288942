"""The first two preprocessing steps, which turn the page: orientation (by quarters,
from the text lines' geometry, a text-direction classifier and a text detector) and
deskew (level the lines). ``preprocess`` says what each step does and records."""

from __future__ import annotations

import math
from typing import Callable

import cv2
import numpy as np

from appliance.raster.layout import Layout
from appliance.raster.workpage import WorkPage

ClassifyUpsideDown = Callable[[list[np.ndarray]], list[tuple[bool, float]]]
# (across, down): the text boxes a text detector finds on a page, by the way they run
TextBoxDirections = Callable[[np.ndarray], tuple[int, int]]

ORIENTATION_CROPS = 12
GUESSED = "guessed"  # in the orientation record of a page turned on a guess
REVIEWER = "reviewer"  # ... by whom, of a page a person turned
# Before a page is turned by a quarter: this many text lines at least this many times
# longer than thick (single letters and short words are no evidence).
MIN_SIDEWAYS_LINES = 3
MIN_SIDEWAYS_LINE_ASPECT = 3.0
# Turn an apparently upright page by 180 degrees only on a clear verdict: the inverted
# votes' weight (each vote weighs 2 * confidence - 1) must reach this ...
MIN_INVERTED_WEIGHT = 0.6
# ... and outweigh the upright votes this many times. Most pages arrive upright, and
# the classifier misreads about one line in a page.
INVERTED_MAJORITY = 2.0
# A turn the classifier is not sure of is a guess (``GUESSED``), and the page is read
# both ways (``pipeline.stages``): where the upright votes are at least this share of
# all (a blurry upright receipt: 8 lines "inverted" against 4 upright) ...
SPLIT_VOTE_SHARE = 0.25
# ... or the inverted votes weigh less than this share of their number (synthetic pages
# blurred by 3.5 px, upright: 2.2 to 3.3 of 12 votes; the same pages upside down and
# blurred by 2.5 px: 5.0 to 7.4, by 1.5 px or less: 7.5 to 12).
SURE_WEIGHT_SHARE = 0.5


# -- orientation ------------------------------------------------------------------------

_ROTATE = {  # counter-clockwise degrees -> (cv2 code, coordinate map for a W x H image)
    90: (cv2.ROTATE_90_COUNTERCLOCKWISE, lambda w, h: np.array([[0, 1, 0], [-1, 0, w]])),
    180: (cv2.ROTATE_180, lambda w, h: np.array([[-1, 0, w], [0, -1, h]])),
    270: (cv2.ROTATE_90_CLOCKWISE, lambda w, h: np.array([[0, -1, h], [1, 0, 0]])),
}


def quarter_turn(rotate: int, width: int, height: int) -> np.ndarray:
    """The coordinate map (2 x 3, old to new) of a ``width`` x ``height`` page turned
    ``rotate`` degrees counter-clockwise (90, 180 or 270)."""
    return _ROTATE[rotate][1](width, height).astype(float)


def turned(page: WorkPage, clockwise_deg: int, by: str) -> dict:
    """A turn of the page as it came known before any vote, ``by`` whom: a reviewer's
    ("rotate and read again"), or the way a born-digital page's own text runs.
    ``rotated_deg`` counter-clockwise, as ``orientation`` records it."""
    rotate = (360 - clockwise_deg) % 360
    if rotate:
        height, width = page.pixels.shape[:2]
        page.update(cv2.rotate(page.pixels, _ROTATE[rotate][0]),
                    quarter_turn(rotate, width, height))
    return {"rotated_deg": rotate, "by": by}


def orientation(page: WorkPage, classify: ClassifyUpsideDown | None,
                text_boxes: TextBoxDirections | None) -> dict:
    """``rotated_deg``: the counter-clockwise turn applied (0, 90, 180 or 270)."""
    detail: dict = {}
    layout = page.layout(detail)
    if not layout.has_text:
        return {**detail, "rotated_deg": 0, "skipped": "no text lines found"}
    vertical = layout.vertical_lines
    detail["lines"] = "vertical" if vertical else "horizontal"
    if vertical and text_boxes is not None:
        across, down = text_boxes(page.pixels)
        detail["text_boxes"] = {"across": across, "down": down}
        if across >= down:
            return {**detail, "rotated_deg": 0,
                    "skipped": "the text detector finds lines across the page: the columns "
                               "of stacked characters run down it"}
    if vertical and not _sideways_evidence(layout):
        # a line or two of print projects as sharply across as along, and its "lines"
        # are then single letters: no evidence to turn a page by a quarter, which
        # ruins it when wrong
        return {**detail, "rotated_deg": 0,
                "skipped": "too little text to tell whether the page lies on its side"}
    if classify is None:
        detail["classifier"] = None
        if vertical:
            return {**detail, "rotated_deg": 0,
                    "skipped": "the page lies on its side, but without a classifier "
                               "90 and 270 degrees cannot be told apart"}
        return {**detail, "rotated_deg": 0, "note": "upside down not checked: no classifier"}

    crops = _line_crops(page.pixels, layout)
    if not crops:
        return {**detail, "rotated_deg": 0, "skipped": "no line long enough to classify"}
    answers = classify(crops)
    inverted = [2 * float(conf) - 1 for flipped, conf in answers if flipped]
    upright = [2 * float(conf) - 1 for flipped, conf in answers if not flipped]
    weight_inverted, weight_upright = sum(inverted), sum(upright)
    detail["votes"] = {"upright": len(upright), "inverted": len(inverted),
                       "upright_weight": round(weight_upright, 2),
                       "inverted_weight": round(weight_inverted, 2)}
    if vertical:
        # crops were turned clockwise: "upright" means the page's top is on its left.
        # A page on its side must turn one way or the other; a tie turns it clockwise.
        rotate = 90 if weight_inverted > weight_upright else 270
    else:
        clear = (weight_inverted >= MIN_INVERTED_WEIGHT
                 and weight_inverted >= INVERTED_MAJORITY * weight_upright)
        rotate = 180 if clear else 0
        if clear and (len(upright) >= SPLIT_VOTE_SHARE * len(answers)
                      or weight_inverted < SURE_WEIGHT_SHARE * len(answers)):
            detail[GUESSED] = True
    detail["rotated_deg"] = rotate
    if rotate:
        height, width = page.pixels.shape[:2]
        page.update(cv2.rotate(page.pixels, _ROTATE[rotate][0]),
                    quarter_turn(rotate, width, height))
    return detail


def _sideways_evidence(layout: Layout) -> bool:
    """Enough long text lines running top to bottom to trust a sideways verdict."""
    long_lines = sum(1 for length, thick in layout.line_sizes
                     if thick > 0 and length >= MIN_SIDEWAYS_LINE_ASPECT * thick)
    return long_lines >= MIN_SIDEWAYS_LINES


def _line_crops(pixels: np.ndarray, layout: Layout) -> list[np.ndarray]:
    """Straightened RGB crops of the longest lines of normal thickness, turned so a
    vertical line reads left to right when the page's top is on its left."""
    typical = layout.char_height_px or 0.0
    candidates = [
        (length, box, thick)
        for box, (length, thick) in zip(layout.line_boxes, layout.line_sizes)
        if length >= 2 * thick and 0.6 * typical <= thick <= 1.6 * typical
    ]
    candidates.sort(key=lambda item: -item[0])
    crops = []
    for length, box, thick in candidates[:ORIENTATION_CROPS]:
        crop = _line_crop(pixels, box, length, thick, layout.skew_deg or 0.0,
                          layout.vertical_lines)
        if crop.size:
            crops.append(crop if crop.ndim == 3 else cv2.cvtColor(crop, cv2.COLOR_GRAY2RGB))
    return crops


def _line_crop(pixels: np.ndarray, box, length: float, thick: float, skew: float,
               vertical: bool) -> np.ndarray:
    left, top, right, bottom = box
    pad = max(2, round(0.25 * thick))
    region = pixels[max(0, top - pad):bottom + pad, max(0, left - pad):right + pad]
    if vertical:
        region = cv2.rotate(region, cv2.ROTATE_90_CLOCKWISE)
    height, width = region.shape[:2]
    if abs(skew) >= 0.5:  # level the line about its centre (the box's centre)
        matrix = cv2.getRotationMatrix2D((width / 2, height / 2), -skew, 1.0)
        region = cv2.warpAffine(region, matrix, (width, height), flags=cv2.INTER_LINEAR,
                                borderMode=cv2.BORDER_REPLICATE)
    half_thick, half_length = thick / 2 + pad, length / 2 + pad
    y0, y1 = max(0, round(height / 2 - half_thick)), min(height, round(height / 2 + half_thick))
    x0, x1 = max(0, round(width / 2 - half_length)), min(width, round(width / 2 + half_length))
    return np.ascontiguousarray(region[y0:y1, x0:x1])


# -- deskew -----------------------------------------------------------------------------

def deskew(page: WorkPage, min_angle_deg: float) -> dict:
    """``angle_deg``: the lines' lean as measured (positive: counter-clockwise); the page
    is turned by minus that."""
    detail: dict = {}
    layout = page.layout(detail)
    if layout.skew_deg is None:
        return {**detail, "skipped": "no text lines found"}
    angle = layout.skew_deg
    detail["angle_deg"] = angle
    if abs(angle) < min_angle_deg:
        return {**detail, "skipped": f"angle {abs(angle):.2f} under {min_angle_deg:g}"}
    height, width = page.pixels.shape[:2]
    matrix = cv2.getRotationMatrix2D((width / 2, height / 2), -angle, 1.0)
    cos, sin = abs(matrix[0, 0]), abs(matrix[0, 1])
    new_width = math.ceil(height * sin + width * cos)
    new_height = math.ceil(height * cos + width * sin)
    matrix[0, 2] += (new_width - width) / 2
    matrix[1, 2] += (new_height - height) / 2
    fill = _edge_colour(page.pixels)
    rotated = cv2.warpAffine(page.pixels, matrix, (new_width, new_height), flags=cv2.INTER_CUBIC,
                             borderMode=cv2.BORDER_CONSTANT, borderValue=tuple(fill))
    page.update(rotated, matrix)
    detail["fill"] = fill
    return detail


def _edge_colour(pixels: np.ndarray) -> list[int]:
    """The median colour of the image's outermost pixels: the paper, or the border."""
    frame = max(2, min(pixels.shape[:2]) // 100)
    edges = np.concatenate([
        pixels[:frame].reshape(-1, *pixels.shape[2:]),
        pixels[-frame:].reshape(-1, *pixels.shape[2:]),
        pixels[:, :frame].reshape(-1, *pixels.shape[2:]),
        pixels[:, -frame:].reshape(-1, *pixels.shape[2:]),
    ])
    return [int(v) for v in np.atleast_1d(np.median(edges, axis=0))]


# -- crop -------------------------------------------------------------------------------
