"""Gutters: vertical white between the boxes of a page's lines, found without pixels
(``find_gutters``), on the page turned level by the lean the engine measured
(``levelled``); and the lines a detector ran across a gutter, cut there
(``split_at_gutters``). The reading order (``reading.order``) cuts a region down the
gutters whose sides read as columns.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from appliance.page import Line, Word
from appliance.reading.lines import PROSE_WORDS, median_height, word_count

# A gutter is at least this many median line heights wide. Typeset reports keep theirs
# narrow: one of the real report pages measured has 18 px of white between columns of
# 37 px lines, journals an em (a line height's 0.7) of white where the line boxes
# leave a third of it, and a recogniser's word boxes, which reach beyond their ink,
# 4 to 8 px of 20; word spaces inside a line are not gutters (the lines hold them).
# 0.4 read justified columns an em apart as one.
MIN_GUTTER = 0.2
# Lines joined across such a gutter, running text on both sides, before they are cut
# there: a paragraph's lines line up a word gap now and then (three lines of a
# FUNSD form's note did); pages measure alike from 5 to 8.
SPLIT_LINES = 6
# Lines that may cross a gutter (titles, captions, footers across the columns).
MAX_SPANNERS = 4
MAX_SPANNER_SHARE = 0.2


def find_gutters(lines: list[Line], height: float) -> list[tuple[float, list[Line], float]]:
    """Candidate gutters, cleanest and widest first: (x, the lines that cross it, its
    width).

    A gutter is a run of x at least MIN_GUTTER line heights wide that at most
    MAX_SPANNERS of the lines cross (and at most MAX_SPANNER_SHARE of them).
    """
    width = int(max(line.box[2] for line in lines)) + 2
    cover = np.zeros(width + 1, dtype=np.int32)
    for line in lines:
        cover[int(line.box[0])] += 1
        cover[int(line.box[2]) + 1] -= 1
    cover = np.cumsum(cover)[:width]
    allowed = min(MAX_SPANNERS, int(len(lines) * MAX_SPANNER_SHARE))
    left_edge = int(min(line.box[0] for line in lines))
    candidates = {}
    for crossing in range(allowed + 1):
        quiet = np.flatnonzero(cover[left_edge:] <= crossing) + left_edge
        for run in np.split(quiet, np.flatnonzero(np.diff(quiet) > 1) + 1):
            if len(run) and run[-1] - run[0] + 1 >= MIN_GUTTER * height:
                x = _whitest(cover, run)
                spanners = [line for line in lines if line.box[0] < x < line.box[2]]
                candidates[x] = (len(spanners), -(run[-1] - run[0]), x, spanners)
    return [(x, spanners, -negative_width) for _c, negative_width, x, spanners
            in sorted(candidates.values(), key=lambda item: item[:2])]


def _whitest(cover: np.ndarray, run: np.ndarray) -> float:
    """The middle of the widest stretch of ``run`` that the fewest lines cover: where a
    line of a ragged column reaches into a gutter, the gutter is beside it."""
    lowest = cover[run].min()
    whitest = run[cover[run] == lowest]
    stretches = np.split(whitest, np.flatnonzero(np.diff(whitest) > 1) + 1)
    widest = max(stretches, key=len)
    return float(widest[0] + widest[-1]) / 2


def levelled(lines: list[Line], lean_deg: float) -> list[Line]:
    """The lines as the page turned by ``-lean_deg`` would place them: each moved as
    its centre would move, keeping its width and height (a line that leans with the
    page is level then). The turned page is shifted back to where the lines' top-left
    corner was, so no coordinate turns negative (the gutter search indexes an array by
    x). The lines themselves where the page does not lean."""
    if not lean_deg:
        return lines
    angle = math.radians(lean_deg)
    cos, sin = math.cos(angle), math.sin(angle)
    moves = []
    for x0, y0, x1, y1 in (line.box for line in lines):
        x, y = (x0 + x1) / 2, (y0 + y1) / 2
        moves.append((x * cos + y * sin - x, y * cos - x * sin - y))
    left = min(line.box[0] for line in lines) - min(
        line.box[0] + dx for line, (dx, _dy) in zip(lines, moves))
    top = min(line.box[1] for line in lines) - min(
        line.box[1] + dy for line, (_dx, dy) in zip(lines, moves))
    return [replace(line, box=[line.box[0] + dx + left, line.box[1] + dy + top,
                               line.box[2] + dx + left, line.box[3] + dy + top])
            for line, (dx, dy) in zip(lines, moves)]


def split_at_gutters(lines: list[Line], lean_deg: float) -> list[Line]:
    """The lines with each one that runs across a gutter cut in two there. A detector
    joins the lines of two columns into one where the gutter is no wider than the
    white between words (justified columns an em apart); the words' own boxes still
    leave the gutter white down the page, where the lines' boxes cover it. A cut
    needs the words' boxes (engines that give them) and a gutter across which at least
    SPLIT_LINES lines join running text to running text (PROSE_WORDS words on each
    side), or fewer such lines across a gutter that columns of running text stand
    beside: a form's label and value, a receipt's item and price stay whole. Read as
    rows, the two halves read as the line did."""
    words = [(line, word) for line in lines for word in line.words or ()]
    if not words:
        return lines
    level = levelled(lines, lean_deg)
    shift = {id(line): (flat.box[0] - line.box[0], flat.box[1] - line.box[1])
             for line, flat in zip(lines, level)}
    ink = [Line(text=word.text, box=_moved(word.box, shift[id(line)]), score=0.0)
           for line, word in words]
    ink += [flat for flat in level if not flat.words]
    height = median_height(lines)
    cuts: dict[int, list[float]] = {}
    for x, _crossing, _width in find_gutters(ink, height):
        across = {id(line): x - shift[id(line)][0] for line, flat in zip(lines, level)
                  if line.words and flat.box[0] < x < flat.box[2]}
        if _joined_across(lines, across) or _column_gutter(lines, across, x, shift, height):
            for key, at in across.items():
                cuts.setdefault(key, []).append(at)
    if not cuts:
        return lines
    return [piece for line in lines for piece in _cut_line(line, cuts.get(id(line), []))]


def _joined_across(lines: list[Line], across: dict[int, float]) -> bool:
    """Whether SPLIT_LINES of the lines ``across`` the gutter (their ids: the gutter's x
    in their own coordinates) join running text to running text there."""
    return sum(_joins_running_text(line, across[id(line)])
               for line in lines if id(line) in across) >= SPLIT_LINES


def _column_gutter(lines: list[Line], across: dict[int, float], x: float,
                   shift: dict[int, tuple[float, float]], height: float) -> bool:
    """Whether the gutter at ``x`` (the levelled page's) stands between two columns of
    running text, SPLIT_LINES lines a side that end or start within a line height of
    it, and a line across it joins running text to running text: the columns hold
    without the few lines a detector ran across a gutter too narrow for its boxes."""
    beside = [0, 0]
    for line in lines:
        if id(line) in across or not line.words or word_count(line.text) < PROSE_WORDS:
            continue
        left = min(word.box[0] for word in line.words) + shift[id(line)][0]
        right = max(word.box[2] for word in line.words) + shift[id(line)][0]
        if x - height <= right <= x:
            beside[0] += 1
        elif x <= left <= x + height:
            beside[1] += 1
    return min(beside) >= SPLIT_LINES and any(
        _joins_running_text(line, across[id(line)]) for line in lines if id(line) in across)


def _joins_running_text(line: Line, x: float) -> bool:
    """Whether ``line`` holds running text (PROSE_WORDS words) on both sides of ``x``
    (its own coordinates)."""
    left = [word.text for word in line.words or () if word.box[2] <= x]
    right = [word.text for word in line.words or () if word.box[0] >= x]
    return min(word_count(" ".join(left)), word_count(" ".join(right))) >= PROSE_WORDS


def _moved(box: list[float], shift: tuple[float, float]) -> list[float]:
    return [box[0] + shift[0], box[1] + shift[1], box[2] + shift[0], box[3] + shift[1]]


def _cut_line(line: Line, xs: list[float]) -> list[Line]:
    """``line`` cut at each of ``xs`` (its own coordinates) that falls between two of
    its words; each piece as wide as its words (the gutter was measured by them, and
    a detector's box reaches into it), as tall as the line, with its score."""
    if not line.words:
        return [line]
    pieces: list[list[Word]] = [[]]
    for word in line.words:
        if pieces[-1] and any(pieces[-1][-1].box[2] <= x <= word.box[0] for x in xs):
            pieces.append([])
        pieces[-1].append(word)
    return [Line(text=" ".join(word.text for word in piece) if len(pieces) > 1 else line.text,
                 box=[min(word.box[0] for word in piece), line.box[1],
                      max(word.box[2] for word in piece), line.box[3]],
                 score=line.score, words=piece) for piece in pieces]
