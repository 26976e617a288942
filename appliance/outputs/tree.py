"""A finished document as the tree that hOCR, ALTO and a PDF text layer are written
from: pages, blocks in reading order, lines, words, each with its box in the pixels
of the page as it was rendered (before preprocessing turned, straightened, cropped or
scaled it: ``raster.preprocess.to_original`` maps the engine's boxes back)."""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field

import numpy as np

from appliance.raster.preprocess import to_original
from appliance.store import Database, queries
from appliance.store.models import PageResult, PageStatus

Box = tuple[float, float, float, float]  # x0, y0, x1, y1 in the rendered page's pixels


@dataclass
class Word:
    text: str
    box: Box
    confidence: float | None = None  # 0-1, where the engine gave one


@dataclass
class TextLine:
    box: Box
    words: list[Word]

    @property
    def text(self) -> str:
        return " ".join(word.text for word in self.words)


@dataclass
class TextBlock:
    box: Box
    lines: list[TextLine]
    role: str | None = None  # heading, list, table, text; None when unknown


@dataclass
class PageTree:
    number: int  # 1-based
    width: int  # the rendered page, in pixels
    height: int
    dpi: int  # at which it was rendered (an image's own resolution)
    status: str  # "done", or "failed" (failed or rejected: no text)
    blocks: list[TextBlock] = field(default_factory=list)
    # where the page's text has no positions (a vision model's reading no classic
    # reading could be aligned to), it is kept here, unplaced
    unplaced_text: str = ""


# --- from the store --------------------------------------------------------------------

UNKNOWN_DPI = 300  # an image file that does not say its resolution


def page_trees(db: Database, document_id: str) -> list[PageTree]:
    """The document's pages as trees, from their accepted results. A reviewer's
    correction keeps the positions of the machine's words it left as they were, and
    places the words it changed where the machine's stood (``align``)."""
    trees = []
    for page, result in queries.accepted_results(db, document_id):
        if page.status == PageStatus.FAILED or result is None:
            trees.append(PageTree(page.index + 1, 0, 0, UNKNOWN_DPI, "failed"))
            continue
        machine = result
        if (machine_id := (result.provenance or {}).get("machine_result")) is not None:
            machine = queries.page_result(db, machine_id) or result
        trees.append(_page_tree(page.index + 1, result, machine))
    return trees


def _page_tree(number: int, result: PageResult, machine: PageResult) -> PageTree:
    provenance = machine.provenance or {}
    rendered = provenance.get("rendered") or {}
    # results from before the rendered page was recorded: the page the engine read
    width, height = rendered.get("size") or provenance.get("image_size") or (0, 0)
    tree = PageTree(number, int(width), int(height), round(rendered.get("dpi") or UNKNOWN_DPI),
                    "done")
    words = _machine_words(machine.lines or [], to_original(provenance.get("preprocess") or []))
    if not words:  # a reading without positions (a vision model's): the text stays unplaced
        tree.unplaced_text = result.text or ""
        return tree
    if result is not machine:  # the reviewer's text on the machine's positions
        words = align(words, (result.text or "").split(), confidence=1.0)
    tree.blocks = _blocks(words)
    return tree


@dataclass
class _Placed:
    word: Word
    line: int  # the machine line it belongs to
    block: int | None
    role: str | None


def _machine_words(lines: list[dict], back: np.ndarray) -> list[_Placed]:
    placed = []
    for index, line in enumerate(lines):
        words = line.get("words") or _split(line["text"], line["box"], line.get("score"))
        for word in words:
            if word["text"].strip():
                placed.append(_Placed(Word(word["text"], _mapped(word["box"], back),
                                           word.get("score")),
                                      index, line.get("block"), line.get("role")))
    return placed


def _split(text: str, box: list[float], score: float | None) -> list[dict]:
    """A line without word boxes: its words along the box, each as wide as its share of
    the characters (spaces included)."""
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


def _mapped(box: list[float], back: np.ndarray) -> Box:
    """A box on the page the engine read, on the page as rendered: the bounding box
    of its corners mapped back."""
    x0, y0, x1, y1 = box
    corners = np.array([[x0, y0, 1], [x1, y0, 1], [x0, y1, 1], [x1, y1, 1]]) @ back.T
    return (float(corners[:, 0].min()), float(corners[:, 1].min()),
            float(corners[:, 0].max()), float(corners[:, 1].max()))


def align(source: list[_Placed], target: list[str], confidence: float | None) -> list[_Placed]:
    """``target`` words on the positions of ``source`` words, by a word alignment: a
    word kept takes its box; a run of changed words shares the boxes of the run it
    replaced, in proportion to their lengths; an added word sits where the word it
    comes before starts. Words dropped from the source leave their boxes empty."""
    matcher = difflib.SequenceMatcher(a=[p.word.text.casefold() for p in source],
                                      b=[w.casefold() for w in target], autojunk=False)
    out: list[_Placed] = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        new = target[j1:j2]
        if tag == "equal":
            out += [_Placed(Word(text, p.word.box, confidence), p.line, p.block, p.role)
                    for p, text in zip(source[i1:i2], new)]
        elif tag == "replace":
            out += _share(source[i1:i2], new, confidence)
        elif tag == "insert":  # at the start of the word it comes before, else after the last
            anchor = source[i1] if i1 < len(source) else source[-1]
            x0, y0, x1, y1 = anchor.word.box
            x = x0 if i1 < len(source) else x1
            out += [_Placed(Word(text, (x, y0, x, y1), confidence), anchor.line, anchor.block,
                            anchor.role) for text in new]
    return out


def _share(old: list[_Placed], new: list[str], confidence: float | None) -> list[_Placed]:
    """New words over the boxes of the old ones they replace: one for one when they
    are as many; else the old words' characters are laid end to end and each new word
    takes its share of them, within the old word its middle falls in."""
    if len(old) == len(new):
        return [_Placed(Word(text, p.word.box, confidence), p.line, p.block, p.role)
                for p, text in zip(old, new)]
    spans, at = [], 0
    for p in old:
        spans.append((at, at + len(p.word.text), p))
        at += len(p.word.text)
    scale = at / max(1, sum(len(text) for text in new))
    placed, position = [], 0
    for text in new:
        low, high = position * scale, (position + len(text)) * scale
        position += len(text)
        start, end, p = next((s for s in spans if s[1] > (low + high) / 2), spans[-1])
        x0, y0, x1, y1 = p.word.box
        per_char = (x1 - x0) / max(1, end - start)
        left = x0 + (max(low, start) - start) * per_char
        right = x0 + (min(high, end) - start) * per_char
        placed.append(_Placed(Word(text, (left, y0, max(left, right), y1), confidence),
                              p.line, p.block, p.role))
    return placed


def _blocks(words: list[_Placed]) -> list[TextBlock]:
    """Words grouped by their machine line, lines by their block in reading order."""
    lines: dict[int, list[_Placed]] = {}
    for placed in words:
        lines.setdefault(placed.line, []).append(placed)
    blocks: dict[int, TextBlock] = {}
    order = sorted(lines, key=lambda index: (lines[index][0].block is None,
                                             lines[index][0].block or 0, index))
    for index in order:
        members = lines[index]
        line = TextLine(_union(p.word.box for p in members), [p.word for p in members])
        key = members[0].block if members[0].block is not None else -1
        block = blocks.setdefault(key, TextBlock(line.box, [], members[0].role))
        block.lines.append(line)
        block.box = _union([block.box, line.box])
    return list(blocks.values())


def _union(boxes) -> Box:
    boxes = list(boxes)
    return (min(b[0] for b in boxes), min(b[1] for b in boxes),
            max(b[2] for b in boxes), max(b[3] for b in boxes))
