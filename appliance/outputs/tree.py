"""A finished document as the tree that hOCR, ALTO and a PDF text layer are written
from: pages, blocks in reading order, lines, words, each with its box in the pixels
of the page as it was rendered (before preprocessing turned, straightened, cropped or
scaled it: ``raster.preprocess.to_original`` maps the engine's boxes back)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from appliance.outputs.placement import Placed, align, union, words_of
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
    places the words it changed where the machine's stood (``placement.align``)."""
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
        words, _rate = align(words, (result.text or "").split(), score=1.0)
    tree.blocks = _blocks(words)
    return tree


def _machine_words(lines: list[dict], back: np.ndarray) -> list[Placed]:
    """The reading's words, their boxes mapped back onto the page as rendered."""
    return [replace(p, box=_mapped(p.box, back)) for p in words_of(lines)]


def _mapped(box, back: np.ndarray) -> Box:
    """A box on the page the engine read, on the page as rendered: the bounding box
    of its corners mapped back."""
    x0, y0, x1, y1 = box
    corners = np.array([[x0, y0, 1], [x1, y0, 1], [x0, y1, 1], [x1, y1, 1]]) @ back.T
    return (float(corners[:, 0].min()), float(corners[:, 1].min()),
            float(corners[:, 0].max()), float(corners[:, 1].max()))


def _blocks(words: list[Placed]) -> list[TextBlock]:
    """Words grouped by their line, lines by their block in reading order."""
    lines: dict[int, list[Placed]] = {}
    for placed in words:
        lines.setdefault(placed.line, []).append(placed)
    blocks: dict[int, TextBlock] = {}
    order = sorted(lines, key=lambda index: (lines[index][0].block is None,
                                             lines[index][0].block or 0, index))
    for index in order:
        members = lines[index]
        line = TextLine(union(p.box for p in members),
                        [Word(p.text, p.box, p.score) for p in members])
        key = members[0].block if members[0].block is not None else -1
        block = blocks.setdefault(key, TextBlock(line.box, [], members[0].role))
        block.lines.append(line)
        block.box = union([block.box, line.box])
    return list(blocks.values())
