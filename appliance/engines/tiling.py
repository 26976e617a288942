"""Cut a tall page into overlapping strips for the VLM, and stitch their transcriptions.

Why tiles: the vision encoder resizes every image to a fixed square input (Gemma 3:
896 x 896), so a whole A4 page at that size leaves small print a few pixels high.
Feeding full-width horizontal strips whose aspect is close to the encoder's keeps
the text at a readable scale. The caller picks ``tile_height`` from the page width
and the model's input aspect (a square model: ``tile_height ~= width``).

Why overlap: a strip boundary cuts through some text line. With overlapping strips
every line lies whole inside at least one strip; the price is that lines in the
overlap are transcribed twice, which :func:`stitch` removes again.

What stitch has to cope with, at each boundary between strip A (above) and strip B:

- lines of the overlap read twice, not always identically (a character, the case,
  the spacing, emphasis or heading markup may differ): compared fuzzily, line by
  line, except that lines differing in their digits are not trusted to be one line,
  because near-identical consecutive table rows differ in just that;
- the line cut by A's bottom edge read partially at the end of A, and the line cut
  by B's top edge read partially at the start of B: the longer reading is kept;
- a table crossing the boundary: B may open with the table's header again, or turn
  its first row into a header with a separator row under it; those are dropped so
  the table continues as one. Separator rows and blank lines are layout, not
  content, and never decide an overlap.

It does not re-join words hyphenated across the boundary, or recover text both
strips missed.

Why columns: a full-width strip of a page set in columns holds the tops of all its
columns side by side, and the next strip their continuations, so a model reading strip
after strip interleaves the columns. Such a page is cut into regions by the finder the
page's request carries (``PageRequest.columns``: the reading's ``reading.regions``),
each column one region read top to bottom in strips of its own width, and the regions
are read one after the other (:func:`plan_region_tiles`).
"""

from __future__ import annotations

import difflib
import functools
import logging
import math
import re
from dataclasses import dataclass

from PIL import Image


__all__ = ["TilingDecision", "crop_tiles", "decide_tiling", "plan_region_tiles", "plan_tiles",
           "stitch"]

log = logging.getLogger(__name__)

Box = tuple[int, int, int, int]

# Two readings of one line are the same line at or above this difflib ratio (after
# normalisation): one wrong character in a 10-character line still matches (0.9),
# while two different lines of a list or table rarely reach it.
MIN_LINE_RATIO = 0.8
# How many content lines at the end of a strip (and the start of the next) may be
# overlap. A 15% overlap of a dense strip holds well under 20 lines.
MAX_OVERLAP_LINES = 24
# A cut line read partially must keep at least this share of its characters in
# the order of the full reading, and be at least this long, to count as the same line.
MIN_PARTIAL_COVERAGE = 0.8
MIN_PARTIAL_CHARS = 4
# Square full-width strips only enlarge the print when the page is taller than wide;
# on a page less than this much taller, strips gain too little to pay for the seams.
TILE_MIN_GAIN = 0.2

_SEPARATOR_ROW = re.compile(r"^\s*\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$")
_HEADING_MARK = re.compile(r"^#{1,6}\s+")
_SPACES = re.compile(r"\s+")
_PIPE_SPACING = re.compile(r"\s*\|\s*")


# When to read a page in strips from the start (rather than only after an answer hit
# its token cap). The model sees the whole page squeezed into its square input, so a
# line of print shrinks by model_side / page height; below MIN_MODEL_CHAR_PX it is
# too small to read reliably. And a page with more text lines than MAX_LINES_PER_READ
# would outrun one answer's token budget. Starting points from the geometry of Gemma 3
# (896 px input, 14 px patches); tune them with `appliance eval` on your model.
MIN_MODEL_CHAR_PX = 11.0
MAX_LINES_PER_READ = 70


@dataclass(frozen=True)
class TilingDecision:
    tile: bool
    reason: str


def decide_tiling(width: int, height: int, *, char_height_px: float | None, line_count: int,
                  model_side: int) -> TilingDecision:
    """Whether to read a page as strips, from its print size and how much text it holds."""
    if char_height_px is None:
        return TilingDecision(False, "no text lines found")
    seen = char_height_px * model_side / height  # the squeeze is the page's height
    found = f"print {seen:.1f} px high at the model's input size, {line_count} text lines"
    if height <= width * (1 + TILE_MIN_GAIN):
        return TilingDecision(False, f"{found}; not tall enough for strips to help")
    if seen < MIN_MODEL_CHAR_PX:
        return TilingDecision(True, f"{found}; print under {MIN_MODEL_CHAR_PX:.0f} px")
    if line_count > MAX_LINES_PER_READ:
        return TilingDecision(True, f"{found}; over {MAX_LINES_PER_READ} lines")
    return TilingDecision(False, found)


def plan_tiles(width: int, height: int, *, tile_height: int, overlap: float = 0.15) -> list[Box]:
    """Full-width strips ``(left, top, right, bottom)`` covering the page top to bottom.

    ``overlap`` is the least share of ``tile_height`` that consecutive strips share.
    The strips are spread evenly between a first one flush with the top edge and a
    last one flush with the bottom edge, so every overlap is at least the one asked
    for and no strip hangs off the page. A page no taller than ``tile_height`` is
    one strip.
    """
    if width < 1 or height < 1:
        raise ValueError(f"page size must be positive, got {width}x{height}")
    if tile_height < 1:
        raise ValueError(f"tile_height must be positive, got {tile_height}")
    if not 0.0 <= overlap < 1.0:
        raise ValueError(f"overlap is a fraction of tile_height in [0, 1), got {overlap}")
    if height <= tile_height:
        return [(0, 0, width, height)]
    step = max(1, int(tile_height * (1.0 - overlap)))
    count = math.ceil((height - tile_height) / step) + 1
    tops = [round(i * (height - tile_height) / (count - 1)) for i in range(count)]
    return [(0, top, width, top + tile_height) for top in tops]


def plan_region_tiles(regions: list[Box], *, tile_height: int,
                      overlap: float) -> list[list[Box]]:
    """Each region's strips (:func:`plan_tiles` within it), in page pixels."""
    return [[(left + x0, top + y0, right + x0, bottom + y0)
             for left, top, right, bottom in plan_tiles(x1 - x0, y1 - y0,
                                                        tile_height=tile_height,
                                                        overlap=overlap)]
            for x0, y0, x1, y1 in regions]


def crop_tiles(image: Image.Image, boxes: list[Box]) -> list[Image.Image]:
    """The page image cut to each box, in order (boxes as :func:`plan_tiles` returns them)."""
    for box in boxes:
        left, top, right, bottom = box
        if not (0 <= left < right <= image.width and 0 <= top < bottom <= image.height):
            raise ValueError(f"tile {box} lies outside the {image.width}x{image.height} image")
    return [image.crop(box) for box in boxes]


def stitch(texts: list[str]) -> str:
    """Join per-strip transcriptions in reading order, dropping what the overlaps repeat."""
    stitched: list[str] = []
    for text in texts:
        lines = text.splitlines()
        if not any(line.strip() for line in lines):
            continue
        stitched = _join(stitched, lines) if stitched else lines
    return "\n".join(stitched)


@dataclass(frozen=True)
class _Overlap:
    """How the end of the upper strip lines up with the start of the lower one.

    ``a_start`` / ``b_start`` index the first paired content line of each side and
    ``length`` counts the pairs (0 when only a cut line is shared). ``a_cut``: the
    upper strip's last content line is a partial reading of the lower strip's line
    right after the pairs. ``b_cut``: the lower strip's first content line is a
    partial reading of the upper strip's line right before them.
    """

    a_start: int
    b_start: int
    length: int
    a_cut: bool
    b_cut: bool
    score: float


def _join(upper: list[str], lower: list[str]) -> list[str]:
    """Append ``lower`` to ``upper`` without the lines both strips read."""
    upper, lower = list(upper), _drop_repeated_table_header(upper, lower)
    ca = _content_indices(upper)
    cb = _content_indices(lower)
    if not ca or not cb:
        return upper + lower
    found = _find_overlap([_normalise(upper[i]) for i in ca], [_normalise(lower[j]) for j in cb])
    if found is None:
        log.debug("stitch: no overlap between strips, joined as is")
        return upper + lower

    k = found.length
    for offset in range(k):  # paired readings: keep the fuller one, in upper's copy
        i, j = ca[found.a_start + offset], cb[found.b_start + offset]
        if _pair_score(_normalise(upper[i]), _normalise(lower[j])) > _MISMATCH:
            upper[i] = _longer(upper[i], lower[j])
    if found.b_cut:
        i = ca[found.a_start - 1]
        upper[i] = _longer(upper[i], lower[cb[0]])
    if found.a_cut:  # the cut line now lives in lower, which follows
        j = cb[found.b_start + k]
        lower[j] = _longer(upper[ca[-1]], lower[j])
    if k:
        a_end = ca[found.a_start + k - 1] + 1
        b_start = cb[found.b_start + k - 1] + 1
    else:
        a_end, b_start = ca[-1], cb[0]
    log.debug("stitch: overlap of %d lines, score %.2f (upper cut=%s, lower cut=%s)",
              k, found.score, found.a_cut, found.b_cut)
    kept = lower[b_start:]
    if _ends_in_table_with_separator(upper[:a_end]):
        kept = _drop_leading_separator(kept)
    return upper[:a_end] + kept


# Pair scores. An exact repeat is the strongest evidence; a fuzzy one (a character
# or two apart) nearly as strong. Two lines alike except in their digits are more
# likely consecutive rows of a table or list ("| 10 | 0.00 |", "| 11 | 0.00 |") than
# one row read twice, so they count for nothing, and a line that differs counts
# against the alignment; a partial reading of a cut line counts for half.
_EXACT, _FUZZY, _DIGITS_DIFFER, _MISMATCH, _CUT = 1.0, 0.75, 0.0, -1.0, 0.5
_DIGITS = re.compile(r"\d+")


def _find_overlap(na: list[str], nb: list[str]) -> _Overlap | None:
    """The best alignment of a suffix of ``na`` with a prefix of ``nb``, or None.

    Lines are paired in order; up to one pair in four may disagree (a line read
    quite differently by the two strips). The suffix may leave out the upper strip's
    last line and the prefix the lower strip's first line when each is a partial
    reading of the line on the other side of the pairs. The best alignment has the
    highest score (see the pair scores), then the most pairs, then the fewest cuts;
    one scoring zero or less is no overlap.
    """
    best: _Overlap | None = None
    for a_cut in (False, True):
        for b_cut in (False, True):
            a_stop = len(na) - int(a_cut)
            b_first = int(b_cut)
            limit = min(MAX_OVERLAP_LINES, a_stop, len(nb) - b_first - int(a_cut))
            for k in range(limit + 1):
                a_start = a_stop - k
                if k == 0 and not (a_cut and not b_cut):
                    continue  # a bare cut line is one shared line: count it once
                if b_cut and a_start == 0:
                    continue
                if a_cut and not _partial(na[-1], nb[b_first + k]):
                    continue
                if b_cut and not _partial(nb[0], na[a_start - 1]):
                    continue
                scores = [_pair_score(na[a_start + t], nb[b_first + t]) for t in range(k)]
                if scores.count(_MISMATCH) > k // 4:
                    continue
                score = sum(scores) + _CUT * (int(a_cut) + int(b_cut))
                candidate = _Overlap(a_start, b_first, k, a_cut, b_cut, score)
                if score > 0 and (best is None or _rank(candidate) > _rank(best)):
                    best = candidate
    return best


def _rank(overlap: _Overlap) -> tuple[float, int, int]:
    return overlap.score, overlap.length, -(int(overlap.a_cut) + int(overlap.b_cut))


@functools.lru_cache(maxsize=4096)
def _pair_score(x: str, y: str) -> float:
    """How strongly two normalised lines are one line read twice (see the pair scores)."""
    if x == y:
        return _EXACT
    matcher = difflib.SequenceMatcher(None, x, y, autojunk=False)
    if matcher.real_quick_ratio() < MIN_LINE_RATIO or matcher.ratio() < MIN_LINE_RATIO:
        return _MISMATCH
    return _FUZZY if _DIGITS.findall(x) == _DIGITS.findall(y) else _DIGITS_DIFFER


@functools.lru_cache(maxsize=4096)
def _partial(x: str, y: str) -> bool:
    """Whether the shorter of two normalised lines is a (fuzzy) partial reading of the longer.

    A partial reading is shorter, keeps most of its characters in the longer one's
    order, and holds no number the longer lacks: only a number at its very start or
    end may be cut short. Without that last rule consecutive table rows
    (``|10|0.00|``, ``|11|0.00|``) would pass for readings of one another.
    """
    short, long = sorted((x, y), key=len)
    if len(short) < MIN_PARTIAL_CHARS or len(short) == len(long):
        return False
    numbers = set(_DIGITS.findall(long))
    inner = (m.group() for m in _DIGITS.finditer(short) if 0 < m.start() and m.end() < len(short))
    if any(number not in numbers for number in inner):
        return False
    blocks = difflib.SequenceMatcher(None, short, long, autojunk=False).get_matching_blocks()
    return sum(block.size for block in blocks) >= MIN_PARTIAL_COVERAGE * len(short)


def _longer(x: str, y: str) -> str:
    """Of two readings of one line, the fuller one (the first on a tie)."""
    return y if len(_normalise(y)) > len(_normalise(x)) else x


def _normalise(line: str) -> str:
    """The line as compared: case, spacing, emphasis and heading markup do not count."""
    line = _HEADING_MARK.sub("", line.strip()).replace("*", "")
    line = _SPACES.sub(" ", line.casefold())
    return _PIPE_SPACING.sub("|", line).strip()


def _is_content(line: str) -> bool:
    return bool(line.strip()) and not _SEPARATOR_ROW.match(line)


def _content_indices(lines: list[str]) -> list[int]:
    return [i for i, line in enumerate(lines) if _is_content(line)]


def _is_table_row(line: str) -> bool:
    return line.lstrip().startswith("|")


def _trailing_table(lines: list[str]) -> list[str]:
    """The Markdown table rows that end ``lines`` (trailing blank lines ignored)."""
    end = len(lines)
    while end and not lines[end - 1].strip():
        end -= 1
    start = end
    while start and _is_table_row(lines[start - 1]):
        start -= 1
    return lines[start:end]


def _ends_in_table_with_separator(lines: list[str]) -> bool:
    return any(_SEPARATOR_ROW.match(row) for row in _trailing_table(lines))


def _drop_leading_separator(lines: list[str]) -> list[str]:
    """Drop a separator row that a continued table does not need a second time."""
    if lines and _SEPARATOR_ROW.match(lines[0]):
        return lines[1:]
    return lines


def _drop_repeated_table_header(upper: list[str], lower: list[str]) -> list[str]:
    """Drop a header and separator atop ``lower`` that repeat those of the table ``upper`` ends in.

    A strip that starts inside a table shows the model rows without their header;
    some readings put the header back. If it is the header of the very table the
    upper strip is still in, the table continues and needs no second header.
    """
    table = _trailing_table(upper)
    if len(table) < 3 or not _SEPARATOR_ROW.match(table[1]):
        return lower
    first = next((i for i, line in enumerate(lower) if line.strip()), None)
    if first is None or first + 1 >= len(lower) or not _SEPARATOR_ROW.match(lower[first + 1]):
        return lower
    if _pair_score(_normalise(lower[first]), _normalise(table[0])) < _FUZZY:
        return lower
    return lower[:first] + lower[first + 2:]
