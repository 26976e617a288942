"""One cheap look at a page's text layout: where the lines are, how big the print is,
how the lines run and how much they lean.

The preprocessing steps (orientation, deskew, crop, resolution) and the VLM's tiling
read the same :class:`Layout`, so a page is analysed once.

How (all on a grayscale copy whose long side is at most ``ANALYSIS_LONG_SIDE``):

1. Ink: a pixel darker than its neighbourhood's mean by ``INK_OFFSET`` grey levels
   (an adaptive threshold, so uneven lighting, faded print and grey paper work alike).
2. Glyphs: the ink's connected components, minus what cannot be a character: specks,
   ruling lines, frames, pictures, the edges of black scanner borders.
3. Direction and skew: the glyph pixels are projected across each candidate line
   direction within ``MAX_SKEW_DEG`` of the horizontal and of the vertical; text lines
   make the projection peaky (ink rows and blank gaps) only when the direction matches
   the lines. Coarse 1-degree steps, then 0.1-degree steps around the best. A page
   leaning more than MAX_SKEW_DEG is not recognised as such, and a best direction at
   the edge of the range is no peak: the lines count as level.
4. Lines: the glyphs smeared along that direction by 1.2 glyph heights (more than a
   word space, less than a column gap) and grouped again; each group's box is a text line (or a word standing alone).

Conventions:

- Boxes and sizes are in the input image's pixels.
- ``skew_deg`` is the lean of the text lines from their nearest axis, positive =
  counter-clockwise as seen on screen (a horizontal line rising to the right is
  positive), as PIL's ``Image.rotate`` and OpenCV's ``getRotationMatrix2D`` count
  angles. Rotating the image by ``-skew_deg`` straightens it. A page turned by a
  multiple of 90 degrees keeps its ``skew_deg``.
- ``char_height_px`` is the height of a typical text line measured across it (top of
  the ascenders to the bottom of the descenders), close to the font size in pixels;
  the median over the lines that are at least twice as long as they are thick.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from PIL import Image

try:
    import cv2
except ImportError:  # the llama engine imports this module on a GPU measuring host that
    cv2 = None       # may lack OpenCV; its benchmark never analyses a layout

Box = tuple[int, int, int, int]

ANALYSIS_LONG_SIDE = 1280
INK_OFFSET = 12  # grey levels below the local mean that count as ink
MAX_SKEW_DEG = 15.0
# A page lies on its side when the vertical projection is this much sharper than the
# horizontal one: ties (pages with little text, tables of numbers) stay upright.
VERTICAL_MARGIN = 1.15
MAX_PROJECTION_POINTS = 60_000
MIN_GLYPHS = 8  # fewer than this: no reliable direction, skew or print size


@dataclass
class Layout:
    """What :func:`analyze` found; see the module docstring for the conventions."""

    line_boxes: list[Box]  # (left, top, right, bottom), input pixels
    char_height_px: float | None  # None: no text found
    skew_deg: float | None  # None: too little text to tell
    vertical_lines: bool  # the lines run top to bottom: the page lies on its side
    ink_ratio: float  # share of the page's pixels that are ink
    density: float  # text lines per 1000 px of page extent across the lines
    # per line box: (length along the line, thickness across it), input pixels, measured
    # in the line's own frame (a leaning line's box is taller than the line)
    line_sizes: list[tuple[float, float]] = field(default_factory=list)

    @property
    def has_text(self) -> bool:
        return bool(self.line_boxes) and self.skew_deg is not None


def analyze(image: Image.Image | np.ndarray) -> Layout:
    """The text layout of a page (PIL image, or an RGB / grayscale uint8 array)."""
    if cv2 is None:
        raise ImportError("layout analysis needs OpenCV (opencv-python-headless)")
    gray = gray_pixels(image)
    height, width = gray.shape
    scale = min(1.0, ANALYSIS_LONG_SIDE / max(height, width))
    if scale < 1.0:
        gray = cv2.resize(gray, (max(1, round(width * scale)), max(1, round(height * scale))),
                          interpolation=cv2.INTER_AREA)
    ink = ink_mask(gray)
    ink_ratio = float(np.count_nonzero(ink)) / ink.size
    labels, all_stats, keep = _glyphs(ink)
    stats = all_stats[keep]
    if len(stats) < MIN_GLYPHS:
        return Layout([], None, None, False, ink_ratio, 0.0)

    glyph_mask = keep[labels].astype(np.uint8) * 255
    ys, xs = np.nonzero(glyph_mask)
    step = max(1, len(xs) // MAX_PROJECTION_POINTS)
    xs, ys = xs[::step].astype(np.float32), ys[::step].astype(np.float32)
    best_h = _best_angle(xs, ys, 0.0)
    best_v = _best_angle(xs, ys, 90.0)
    vertical = best_v[1] > VERTICAL_MARGIN * best_h[1]
    direction = best_v[0] if vertical else best_h[0]
    skew = direction - 90.0 if vertical else direction

    across = _glyph_size(stats, vertical)
    boxes_small, measures = _lines(glyph_mask, across, skew, vertical)
    inv = 1.0 / scale
    line_boxes = [(int(l * inv), int(t * inv), min(width, math.ceil(r * inv)),
                   min(height, math.ceil(b * inv))) for l, t, r, b in boxes_small]
    line_sizes = [(round(length * inv, 1), round(thick * inv, 1)) for length, thick in measures]
    real = [thick for length, thick in line_sizes if length >= 2 * thick]
    char_height = float(np.median(real or [thick for _, thick in line_sizes] or [0.0]))
    extent = width if vertical else height
    return Layout(
        line_boxes=line_boxes,
        char_height_px=round(char_height, 1) if char_height else None,
        skew_deg=round(float(skew), 2) + 0.0,  # + 0.0: no "-0.0" in the records
        vertical_lines=bool(vertical),
        ink_ratio=round(ink_ratio, 4),
        density=round(len(line_boxes) * 1000.0 / extent, 2),
        line_sizes=line_sizes,
    )


def gray_pixels(image: Image.Image | np.ndarray) -> np.ndarray:
    if isinstance(image, Image.Image):
        if image.mode != "L":
            image = image.convert("L")
        return np.asarray(image)
    if image.ndim == 2:
        return image
    return cv2.cvtColor(image, cv2.COLOR_RGB2GRAY)


def ink_mask(gray: np.ndarray) -> np.ndarray:
    """Pixels darker than their neighbourhood: 255 for ink, 0 for paper."""
    block = max(15, (min(gray.shape) // 40) | 1)  # odd, about 1/40 of the short side
    block = min(block, 51)
    return cv2.adaptiveThreshold(gray, 255, cv2.ADAPTIVE_THRESH_MEAN_C, cv2.THRESH_BINARY_INV,
                                 block, INK_OFFSET)


def _glyphs(ink: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The ink's components: (labels image, stats per label, whether each label looks
    like a character)."""
    count, labels, stats, _ = cv2.connectedComponentsWithStats(ink, connectivity=8)
    w = stats[:, cv2.CC_STAT_WIDTH]
    h = stats[:, cv2.CC_STAT_HEIGHT]
    area = stats[:, cv2.CC_STAT_AREA]
    biggest = max(8, max(ink.shape) // 12)
    long_side = np.maximum(w, h)
    short_side = np.maximum(1, np.minimum(w, h))
    keep = (
        (long_side >= 3) & (long_side <= biggest)   # specks; headline letters, pictures, frames
        & (area >= 4)
        & (long_side <= 12 * short_side)            # ruling lines, border edges
        & (area >= 0.08 * w * h)                    # hollow frames, checkbox outlines
    )
    keep[0] = False  # the background
    return labels, stats, keep


def _glyph_size(stats: np.ndarray, vertical: bool) -> float:
    """A typical glyph's extent across the lines (its height on an upright page).

    The median over character-shaped glyphs (not flatter than 1:2 along the line),
    weighted by area, so that dashed rules, underscores and dot leaders, many but
    small, do not pass for the print.
    """
    along = stats[:, cv2.CC_STAT_HEIGHT if vertical else cv2.CC_STAT_WIDTH]
    across = stats[:, cv2.CC_STAT_WIDTH if vertical else cv2.CC_STAT_HEIGHT]
    shaped = across >= 0.5 * along
    if np.count_nonzero(shaped) >= MIN_GLYPHS:
        across, weight = across[shaped], stats[shaped, cv2.CC_STAT_AREA]
    else:
        weight = stats[:, cv2.CC_STAT_AREA]
    order = np.argsort(across, kind="stable")
    cumulative = np.cumsum(weight[order])
    return float(across[order][np.searchsorted(cumulative, cumulative[-1] / 2)])


def _projection_score(xs: np.ndarray, ys: np.ndarray, angle_deg: float,
                      bins: int) -> float:
    """How peaky the projection across lines of direction ``angle_deg`` is: the sum of
    squared bin counts, relative to what points spread evenly over ``bins`` bins would
    give (1.0)."""
    a = math.radians(angle_deg)
    coord = xs * math.sin(a) + ys * math.cos(a)
    coord -= coord.min()
    hist = np.bincount(coord.astype(np.int32))
    total = float(len(xs))
    return float(np.dot(hist, hist)) * bins / (total * total)


def _best_angle(xs: np.ndarray, ys: np.ndarray, axis_deg: float) -> tuple[float, float]:
    """(angle, score) of the sharpest projection within MAX_SKEW_DEG of ``axis_deg``;
    angles in the convention of ``_projection_score`` (0 = horizontal lines).

    Every angle is scored against the evenly spread points of the level projection: a
    tilted one spreads over more bins, and scored against its own extent a wide, short
    table gained a bonus at the angle where its cells line up diagonally (a straight
    table was turned by 14 degrees)."""
    level = xs if axis_deg else ys
    bins = int(level.max() - level.min()) + 1
    coarse_x, coarse_y = xs[::2], ys[::2]
    coarse = np.arange(-MAX_SKEW_DEG, MAX_SKEW_DEG + 0.5, 1.0) + axis_deg
    scores = [_projection_score(coarse_x, coarse_y, angle, bins) for angle in coarse]
    peak = int(np.argmax(scores))
    if peak in (0, len(coarse) - 1):
        # No peak inside the range, only a slope towards its edge: specks of scanner
        # noise outnumber the glyphs, and a steeper projection merely spreads them
        # thinner. Taking the edge for a lean turned such pages by 16 degrees.
        return axis_deg, _projection_score(xs, ys, axis_deg, bins)
    centre = float(coarse[peak])
    fine = np.arange(centre - 1.0, centre + 1.05, 0.1)
    scores = [_projection_score(xs, ys, angle, bins) for angle in fine]
    best = int(np.argmax(scores))
    return float(fine[best]), float(scores[best])


def _lines(glyphs: np.ndarray, glyph_across: float, skew: float,
           vertical: bool) -> tuple[list[Box], list[tuple[float, float]]]:
    """Line boxes and (length, thickness) per line, in analysis pixels.

    The size of a line is measured on its own glyph pixels in the line's frame (turned
    by the skew), so a leaning line's box, which is taller than the line, does not
    count.
    """
    reach = max(3, round(1.2 * glyph_across))
    kernel = np.ones((reach, 1) if vertical else (1, reach), np.uint8)
    smeared = cv2.dilate(glyphs, kernel)
    count, labels, stats, _ = cv2.connectedComponentsWithStats(smeared, connectivity=8)
    ys, xs = np.nonzero(glyphs)
    owner = labels[ys, xs]
    a = math.radians(skew)
    xs, ys = xs.astype(np.float32), ys.astype(np.float32)
    across = xs * math.sin(a) + ys * math.cos(a)  # constant along a horizontal line
    along = xs * math.cos(a) - ys * math.sin(a)
    if vertical:
        across, along = along, across
    sizes = []
    for coord in (along, across):
        low = np.full(count, np.inf, np.float32)
        high = np.full(count, -np.inf, np.float32)
        np.minimum.at(low, owner, coord)
        np.maximum.at(high, owner, coord)
        sizes.append(high - low + 1)
    boxes: list[Box] = []
    measures: list[tuple[float, float]] = []
    for label in range(1, count):
        length, thick = float(sizes[0][label]), float(sizes[1][label])
        if not math.isfinite(length) or thick < 0.5 * glyph_across:
            continue  # a row of dots or dashes, a lone hyphen: not a text line
        left, top, w, h = (int(v) for v in stats[label, :4])
        half = reach // 2  # the smear grew the line by this much at both ends
        if vertical:
            top, h = top + half, max(1, h - 2 * half)
        else:
            left, w = left + half, max(1, w - 2 * half)
        boxes.append((left, top, left + w, top + h))
        measures.append((length, thick))
    # top to bottom on an upright page, left to right on a page on its side
    first, second = (0, 1) if vertical else (1, 0)
    order = sorted(range(len(boxes)), key=lambda i: (boxes[i][first], boxes[i][second]))
    return [boxes[i] for i in order], [measures[i] for i in order]
