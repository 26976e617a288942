"""Text placed on positions: a reading's words on the boxes of another reading of
the same page.

A vision model's answer has no word boxes; the classic engine's reading of the same
page has them. ``place_text`` aligns the model's words to the classic words (a word
alignment, ``align``) and gives the model's reading lines with word boxes, so that
hOCR, ALTO and text layers can place it. The same alignment puts a reviewer's
correction on the machine's positions. How much of the text found a word of its own
is the placement ``rate``; a page placed poorly is flagged.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, replace

from appliance.page import Line, Recognition

POOR_PLACEMENT = 0.6  # under this share of words matched, the positions are doubtful


@dataclass
class Placed:
    """A word on a position: its box, its score, and the line, block and role of the
    line it stands on."""

    text: str
    box: tuple[float, float, float, float]
    score: float | None
    line: int  # the index of its line in the source reading
    block: int | None = None
    role: str | None = None


def words_of(lines: list[dict] | list[Line]) -> list[Placed]:
    """The words of a reading's lines (stored dicts, or an engine's Lines): their own,
    or for a line without word boxes its words along the box, each as wide as its
    share of the characters."""
    placed = []
    for index, line in enumerate(lines):
        line = line if isinstance(line, dict) else line.to_dict()
        for word in line.get("words") or _split(line["text"], line["box"], line.get("score")):
            if word["text"].strip():
                placed.append(Placed(word["text"], tuple(word["box"]), word.get("score"), index,
                                     line.get("block"), line.get("role")))
    return placed


def _split(text: str, box: list[float], score: float | None) -> list[dict]:
    x0, y0, x1, y1 = box
    per_char = (x1 - x0) / max(1, len(text))
    words, start = [], 0
    for token in text.split(" "):
        if token:
            words.append({"text": token, "score": score,
                          "box": [x0 + start * per_char, y0,
                                  x0 + (start + len(token)) * per_char, y1]})
        start += len(token) + 1
    return words


def align(source: list[Placed], target: list[str],
          score: float | None) -> tuple[list[Placed], float]:
    """``target`` words on the positions of ``source`` words, and the share of them
    that matched a source word. A word kept takes its box; a run of changed words
    shares the boxes of the run it replaced, in proportion to their lengths; an added
    word stands where the word it comes before starts. Dropped source words leave
    their boxes empty. ``score``: each placed word's (None: the source word's)."""
    if not source or not target:
        return [], 0.0
    matcher = difflib.SequenceMatcher(a=[p.text.casefold() for p in source],
                                      b=[w.casefold() for w in target], autojunk=False)
    out: list[Placed] = []
    matched = 0
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        new = target[j1:j2]
        if tag == "equal":
            matched += len(new)
            out += [_moved(p, text, p.box, score) for p, text in zip(source[i1:i2], new)]
        elif tag == "replace":
            out += _share(source[i1:i2], new, score)
        elif tag == "insert":  # at the start of the word it comes before, else after the last
            anchor = source[i1] if i1 < len(source) else source[-1]
            x0, y0, x1, y1 = anchor.box
            x = x0 if i1 < len(source) else x1
            out += [_moved(anchor, text, (x, y0, x, y1), score) for text in new]
    return out, matched / len(target)


def _moved(p: Placed, text: str, box, score: float | None) -> Placed:
    return Placed(text, box, p.score if score is None else score, p.line, p.block, p.role)


def _share(old: list[Placed], new: list[str], score: float | None) -> list[Placed]:
    """New words over the boxes of the old ones they replace: one for one when they
    are as many; else the old words' characters are laid end to end and each new word
    takes its share of them, within the old word its middle falls in."""
    if len(old) == len(new):
        return [_moved(p, text, p.box, score) for p, text in zip(old, new)]
    spans, at = [], 0
    for p in old:
        spans.append((at, at + len(p.text), p))
        at += len(p.text)
    scale = at / max(1, sum(len(text) for text in new))
    placed, position = [], 0
    for text in new:
        low, high = position * scale, (position + len(text)) * scale
        position += len(text)
        start, end, p = next((s for s in spans if s[1] > (low + high) / 2), spans[-1])
        x0, y0, x1, y1 = p.box
        per_char = (x1 - x0) / max(1, end - start)
        left = x0 + (max(low, start) - start) * per_char
        right = x0 + (min(high, end) - start) * per_char
        placed.append(_moved(p, text, (left, y0, max(left, right), y1), score))
    return placed


def lines_of(placed: list[Placed]) -> list[dict]:
    """Placed words as a reading's lines (grouped by their source line, in its order):
    text, box, score (the least sure word's), block, role and words."""
    by_line: dict[int, list[Placed]] = {}
    for p in placed:
        by_line.setdefault(p.line, []).append(p)
    lines = []
    for index in sorted(by_line):
        words = by_line[index]
        scores = [w.score for w in words if w.score is not None]
        lines.append({"text": " ".join(w.text for w in words),
                      "box": list(union(w.box for w in words)),
                      "score": min(scores) if scores else None, "block": words[0].block,
                      "role": words[0].role,
                      "words": [{"text": w.text, "box": list(w.box), "score": w.score}
                                for w in words]})
    return lines


def union(boxes) -> tuple[float, float, float, float]:
    boxes = list(boxes)
    return (min(b[0] for b in boxes), min(b[1] for b in boxes),
            max(b[2] for b in boxes), max(b[3] for b in boxes))


def place_text(recognition: Recognition, positions: list[Line]) -> Recognition:
    """Give a reading without positions (a vision model's) lines with word boxes: its
    words aligned to ``positions``, another reading's lines of the same page image. The
    placement (source, rate, words) goes into its provenance; under POOR_PLACEMENT
    the page is flagged ``poorly_placed``."""
    placed, rate = align(words_of(positions), (recognition.text or "").split(), score=None)
    recognition = replace(recognition, lines=[Line.from_dict(line) for line in lines_of(placed)]
                          ).noted({"placement": {"rate": round(rate, 4), "words": len(placed)}})
    return recognition.flagged("poorly_placed") if rate < POOR_PLACEMENT else recognition
