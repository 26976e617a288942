"""Selection marks (check boxes) on a page image: small square outlines standing alone,
selected where ink fills some of their inside (a tick, a cross, a fill), unselected
where it is empty.

How, on the image the engine read, so that a mark's box is in the pixels of the page's
lines:

1. Ink, as the layout analysis finds it (``raster.layout.ink_mask``): darker than its
   neighbourhood.
2. Straight strokes: the ink opened by a horizontal and by a vertical run a box's side
   long at least; a tick or a cross, slanting, goes, and so does most of a letter.
3. Frames: each component of those strokes whose box is a square of a check box's size,
   its four sides drawn, and no stroke leaving it. A check box is about as tall as the
   page's text (the recogniser's lines, else the print the layout analysis measures);
   a grid's cells are holes in one component as large as the grid, never components of
   their own, and a ruling the box stands on makes it part of a longer stroke.
4. A square that is a character: one inside a word the recogniser read (an ``O`` of
   a typewriter, ``口``, ``日``, ``田`` of Chinese) is a letter of that word, unless the
   word holds a box's symbol (RapidOCR reads some boxes as ``□`` or ``☐``). A box
   the recogniser passed over lies in no word, even where its line's box holds it.
5. The state: the share of the frame's inside that is ink, the frame's strokes left out.
"""

from __future__ import annotations

from dataclasses import replace

import cv2
import numpy as np
from PIL import Image

from appliance.page import MARK_TOKENS, SELECTED, UNSELECTED, Line, Recognition, Word
from appliance.raster.layout import analyze, gray_pixels, ink_mask

# A box's side against the median height of the page's text lines. Measured on FUNSD
# forms 0001123541, 13149651, 00837285, 80310840a (lines 10-14 px, boxes 7-16 px) and
# the Pillow form of tests/api (lines 40 px, boxes 29 px).
MIN_SIDE = 0.45
MAX_SIDE = 1.8
MIN_SIDE_PX = 6  # a smaller square cannot be told from a letter or a speck
SQUARE = 1.3  # the longer side of a box over its shorter side, at most
# The share of each side that holds ink: a scanned box's sides have gaps (FUNSD's
# 100-dpi scans lose up to a fifth of a side); a letter's bowl covers little of its
# corners.
SIDE_INK = 0.75
STROKE_SHARE = 0.2  # of the side: the band a side's stroke is looked for in
# the thickest a side's stroke is, of the side: FUNSD's 7-9 px boxes have 2 px strokes
STROKE_MOST = 0.25
HALF = 0.5  # a row or column of a frame's strokes inked this much is a side's stroke
# The share of the inside that is ink above which a box is selected: empty boxes on
# the FUNSD forms above hold under 0.03 (specks, a side's thickness), ticked and
# crossed ones 0.12 and more.
FILLED = 0.08
# what a recogniser reads a box as, where it reads it
BOX_SYMBOLS = frozenset("□☐☑☒▢")
SOLID = 0.85  # inked inside as much as this: a bullet or a black square, not a box


def find_marks(image: Image.Image, lines: list[Line]) -> list[dict]:
    """The selection marks on ``image``, top to bottom: ``state`` (``selected`` or
    ``unselected``), ``confidence`` and ``box`` [x0, y0, x1, y1] in its pixels.
    ``lines``: the text the recogniser found on it, in the same pixels (none where a
    vision model read it)."""
    text_height = _text_height(image, lines)
    if text_height is None:  # no text: no form to tick
        return []
    low = max(MIN_SIDE_PX, MIN_SIDE * text_height)
    high = MAX_SIDE * text_height
    ink = ink_mask(gray_pixels(image))
    run = max(3, round(low * SIDE_INK))
    strokes = (cv2.morphologyEx(ink, cv2.MORPH_OPEN, np.ones((1, run), np.uint8))
               | cv2.morphologyEx(ink, cv2.MORPH_OPEN, np.ones((run, 1), np.uint8)))
    contours, hierarchy = cv2.findContours(strokes, cv2.RETR_CCOMP, cv2.CHAIN_APPROX_SIMPLE)
    words = [word for line in lines for word in _words(line)
             if not BOX_SYMBOLS.intersection(word.text)]
    marks = []
    for contour, (_next, _previous, _child, parent) in zip(contours, hierarchy[0]
                                                            if hierarchy is not None else []):
        x, y, w, h = cv2.boundingRect(contour)
        if parent != -1 or not (low <= min(w, h) and max(w, h) <= high
                                and max(w, h) <= SQUARE * min(w, h)):
            continue
        frame = strokes[y:y + h, x:x + w] > 0
        sides = _sides(frame)
        inside = _inside(ink[y:y + h, x:x + w] > 0, frame)
        box = [float(x), float(y), float(x + w), float(y + h)]
        if (sides < SIDE_INK or inside >= SOLID
                or any(_within(box, word.box) for word in words)):
            continue
        selected = inside >= FILLED
        # how clear the evidence is: the frame's weakest side, and how far the inside
        # stands from the line between empty and ticked
        clarity = min(1.0, abs(inside - FILLED) / FILLED)
        marks.append({"state": SELECTED if selected else UNSELECTED,
                      "confidence": round(sides * (0.5 + 0.5 * clarity), 3), "box": box})
    return sorted(marks, key=lambda mark: (mark["box"][1], mark["box"][0]))


def _text_height(image: Image.Image, lines: list[Line]) -> float | None:
    """The median height of the page's lines of text running across it, else the print
    size the layout analysis measures on ``image``."""
    heights = [line.box[3] - line.box[1] for line in lines
               if line.box[2] - line.box[0] > line.box[3] - line.box[1]]
    if heights:
        return float(np.median(heights))
    return analyze(image).char_height_px


def _words(line: Line) -> list[Word]:
    """The line's words; the line as one where the recogniser gave none."""
    return line.words or [Word(line.text, line.box, line.score)]


def _sides(frame: np.ndarray) -> float:
    """The least share of a side of ``frame`` (a box's straight strokes) that holds ink
    in the band along that side."""
    band = max(1, round(STROKE_SHARE * min(frame.shape)))
    return float(min(frame[:band].any(axis=0).mean(), frame[-band:].any(axis=0).mean(),
                     frame[:, :band].any(axis=1).mean(), frame[:, -band:].any(axis=1).mean()))


def _inside(ink: np.ndarray, frame: np.ndarray) -> float:
    """The share of ink inside a box's frame: within the rows and columns its strokes
    run along (``frame``: its straight strokes; ``ink``: all the ink in its bounds). A
    stroke is the ink next to them: opening thins a stroke a pixel wider than its run."""
    strokes = ink & (cv2.dilate(frame.astype(np.uint8), np.ones((3, 3), np.uint8)) > 0)
    rows, columns = strokes.mean(axis=1) > HALF, strokes.mean(axis=0) > HALF
    top, bottom = _edge(rows), len(rows) - _edge(rows[::-1])
    left, right = _edge(columns), len(columns) - _edge(columns[::-1])
    inner = ink[top:bottom, left:right]
    return float(np.count_nonzero(inner)) / inner.size if inner.size else 0.0


def _edge(drawn: np.ndarray) -> int:
    """Where a side's stroke ends, from the start of ``drawn`` (whether each row or
    column is the stroke's): past the blank before it (a scan's shadow) and its own
    rows, no deeper than ``STROKE_MOST`` of the side (a cross in a small box inks
    every row)."""
    start = int(np.argmax(drawn))
    end = start + int(np.argmin(drawn[start:])) if not drawn[start:].all() else len(drawn)
    return min(max(end, start + 1), start + max(1, round(STROKE_MOST * len(drawn))))


def _within(box: list[float], other: list[float]) -> bool:
    """Whether the centre of ``box`` lies in ``other``."""
    x, y = (box[0] + box[2]) / 2, (box[1] + box[3]) / 2
    return other[0] <= x <= other[2] and other[1] <= y <= other[3]


def with_marks(recognition: Recognition, marks: list[dict]) -> Recognition:
    """``recognition`` with its selection ``marks``; where its lines are still to be
    read (``Recognition.unread``), each mark a line of its own, its token
    (``:selected:``, ``:unselected:``) its text and its confidence its score, so that
    the reading places it among the words of its row (``_beside_marks``). A reading
    already made (a vision model's) keeps its text: its marks are given beside it."""
    if recognition.unread is None or not marks:
        return replace(recognition, selection_marks=marks)
    lines = [kept for line in recognition.lines if (kept := _beside_marks(line, marks)).text]
    lines += [Line(MARK_TOKENS[mark["state"]], mark["box"], mark["confidence"],
                   words=[Word(MARK_TOKENS[mark["state"]], mark["box"], mark["confidence"])])
              for mark in marks]
    return replace(recognition, lines=lines, selection_marks=marks)


def _beside_marks(line: Line, marks: list[dict]) -> Line:
    """``line`` beside the marks that stand in its box: without the box symbols of the
    words a mark stands in, its box narrowed to its words (the recogniser's line box
    takes in a box before its first word, which the reading would then read first)."""
    inside = [mark for mark in marks if _within(mark["box"], line.box)]
    if not inside:
        return line
    words = [replace(word, text="".join(ch for ch in word.text if ch not in BOX_SYMBOLS))
             if any(_within(mark["box"], word.box) for mark in inside) else word
             for word in _words(line)]
    words = [word for word in words if word.text]
    if not words:
        return replace(line, text="")
    box = [min(w.box[0] for w in words), min(w.box[1] for w in words),
           max(w.box[2] for w in words), max(w.box[3] for w in words)]
    return replace(line, text=" ".join(word.text for word in words), box=box,
                   words=words if line.words else None)
