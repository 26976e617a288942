"""What the reading order and the Markdown share about lines: rows, print heights,
and how many words a line holds in any script."""

from __future__ import annotations

import math
import re
import statistics

from appliance.page import UNSPACED, Line

HEADING_RATIO = 1.3  # a heading's print is at least this much taller than the body's
# Running text: a line of at least this many words (a form's labels and values and a
# table's cells have one to three, a column of running text five or more).
PROSE_WORDS = 4
# Chinese and Japanese put no spaces between words: their characters are counted
# instead, at about this many to a word (a word of Chinese running text is one to
# four characters, two on average), so that a line of running text in either script
# holds as many words as the same line in a language with spaces.
UNSPACED_WORD_CHARS = 2
# The fewest characters of a script written without spaces a line needs to measure
# its print by their width (``char_pitch``), and the full-width punctuation that
# stands as wide as they do
PITCH_CHARS = 3
_FULL_WIDTH = re.compile(r"[\u3000-\u303f\uff01-\uff60]")
# A word of letters, not a code or a unit: three letters of an alphabet, or two
# characters of a script without spaces ("发票", "合計").
LETTER_WORD = re.compile(rf"[^\W\d_]{{3,}}|{UNSPACED.pattern}{{2,}}")


# A list's marker: a bullet, or an item's number or letter ("3.", "3)", "a)", "(b)"; in
# Chinese print "1、", "一、", "（二）"), before a space or, in a script written without
# spaces, its first character ("1.保持版本控制")
BULLET = re.compile(r"^\s*([•●▪■◦○‣∙·*+\-–➢❖❑⬥►▸➔✓])\s*(?=\S)")
_CHINESE_NUMBER = "[一二三四五六七八九十]{1,3}"
ENUMERATOR = re.compile(rf"^\s*(\(?\d{{1,3}}[.)]|\(?[a-zA-Z][.)]|(?:\d{{1,3}}|{_CHINESE_NUMBER})、|"
                        rf"[（(](?:\d{{1,3}}|{_CHINESE_NUMBER})[）)])"
                        rf"(?:\s+(?=\S)|(?={UNSPACED.pattern}))")


def starts_item(text: str) -> bool:
    """Whether ``text`` opens with a list's marker (``BULLET``, ``ENUMERATOR``)."""
    return bool(BULLET.match(text) or ENUMERATOR.match(text))


def word_count(text: str) -> int:
    """How many words ``text`` holds: those between spaces, where a run of characters
    of a script without spaces counts one word for each UNSPACED_WORD_CHARS of them."""
    count = 0
    for token in text.split():
        unspaced = len(UNSPACED.findall(token))
        count += max(1, math.ceil(unspaced / UNSPACED_WORD_CHARS)) if unspaced else 1
    return count


def char_pitch(lines: list[Line]) -> float | None:
    """How wide a character of ``lines`` is, where most of their characters are of a
    script written without spaces: those are as wide as the print is large, where
    their boxes' height says less (a detector pads a line of them by its glyphs).
    Such characters and full-width punctuation count one, other characters half and
    spaces a quarter; None for other lines, or under PITCH_CHARS of them."""
    width = chars = 0.0
    for line in lines:
        text = line.text.strip()
        unspaced = len(UNSPACED.findall(text))
        if unspaced < PITCH_CHARS or 2 * unspaced < len(text.replace(" ", "")):
            continue
        width += line.box[2] - line.box[0]
        chars += sum(1.0 if UNSPACED.match(ch) or _FULL_WIDTH.match(ch)
                     else 0.25 if ch == " " else 0.5 for ch in text)
    return width / chars if chars else None


def first_word(text: str) -> str:
    """The first word of ``text``: up to its first space or its first character in a
    script without spaces ("2。" of "2。便于"), or that character where it starts."""
    words = text.split()
    if not words:
        return ""
    unspaced = UNSPACED.search(words[0])
    return words[0][:max(1, unspaced.start())] if unspaced else words[0]


def first_word_width(line: Line) -> float:
    """About how wide the first word of ``line`` is with the space before it: its share
    of the line's characters (one character in a script without spaces)."""
    text = line.text.strip()
    if not text:
        return 0.0
    return (line.box[2] - line.box[0]) * (len(first_word(text)) + 1) / len(text)


def rows(lines: list[Line], height: float | None = None) -> list[list[Line]]:
    """Lines grouped into rows, top to bottom, each row left to right.

    A line joins the current row when its vertical centre is within half a line
    height of the row's mean centre. The mean, not the union of the row's boxes: a
    union grows with every line it takes and swallows the next row on a page that
    leans a little.
    """
    if not lines:
        return []
    height = height or median_height(lines)
    result: list[list[Line]] = []
    centres: list[float] = []
    for line in sorted(lines, key=lambda item: (centre(item), item.box[0])):
        if result and abs(centre(line) - statistics.fmean(centres)) <= height / 2:
            result[-1].append(line)
            centres.append(centre(line))
        else:
            result.append([line])
            centres = [centre(line)]
    return [sorted(row, key=lambda item: item.box[0]) for row in result]


def overlap(x0: float, x1: float, c0: float, c1: float) -> float:
    """How far the spans [x0, x1] and [c0, c1] overlap (negative: the gap between)."""
    return min(x1, c1) - max(x0, c0)


def centre(line: Line) -> float:
    return (line.box[1] + line.box[3]) / 2


def median_height(lines: list[Line]) -> float:
    return statistics.median(line_height(line) for line in lines)


def line_height(line: Line) -> float:
    return line.box[3] - line.box[1]
