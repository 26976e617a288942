"""A finished document as the tree that hOCR, ALTO and a PDF text layer are written
from: pages, blocks in reading order, lines, words, each with its box in the pixels
of the page as the engine read it, and the page's ``to_page``: the affine that maps
them onto the page as it was rendered, before preprocessing turned, straightened,
cropped or scaled it (``raster.preprocess.to_original``).

The boxes stay in the engine's frame, where lines run straight across: hOCR and ALTO
take the boxes onto the rendered page (``PageTree.pixels``), whose axes a straightened
line does not follow; the PDF text layer is drawn in the engine's frame and put on the
page with the exact transform, so a line of a page that was straightened lies along
its ink."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from appliance.engines.pdf_text import OCR
from appliance.outputs.placement import Placed, align, union, words_of
from appliance.page import Furniture, Word
from appliance.raster.preprocess import mapped_box, to_original
from appliance.store import Database, queries
from appliance.store.models import Page, PageResult, PageStatus
from appliance.store.reviews import MACHINE_RESULT

Box = tuple[float, float, float, float]  # x0, y0, x1, y1
IDENTITY = (1.0, 0.0, 0.0, 0.0, 1.0, 0.0)


@dataclass
class TextLine:
    box: Box
    words: list[Word]
    # heading, list, table, text, or furniture (header, footer, page_number); None when
    # unknown
    role: str | None = None

    @property
    def text(self) -> str:
        return " ".join(word.text for word in self.words)


@dataclass
class TextBlock:
    box: Box
    lines: list[TextLine]
    # a line's role, or the furniture's: header, footer, or page_number for a page
    # number on its own
    role: str | None = None


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
    # the boxes' frame (the page as the engine read it) to the rendered page's pixels:
    # x' = a x + b y + c, y' = d x + e y + f, as (a, b, c, d, e, f)
    to_page: tuple[float, ...] = IDENTITY
    # how far the engine's lines drop per pixel across: the lean preprocessing measured
    # but found too small to straighten (a label and its value far to the right of it
    # stand that much apart)
    slope: float = 0.0
    # a vision model's values for the document type's fields, as printed on this page
    field_answer: dict | None = None
    # read from the PDF page's own text (engines.pdf_text), not by OCR
    own_text: bool = False
    # the machine's reading of its barcodes (engines.barcodes), in the boxes' frame
    barcodes: list[dict] = field(default_factory=list)
    # its selection marks (raster.marks), in the boxes' frame
    selection_marks: list[dict] = field(default_factory=list)

    @property
    def matrix(self) -> np.ndarray:
        """``to_page`` as a 3x3 matrix."""
        return np.vstack([np.reshape(self.to_page, (2, 3)), [0.0, 0.0, 1.0]])

    @property
    def text_angle(self) -> int:
        """Which way the text runs on the page as rendered, to the nearest quarter
        turn: counter-clockwise degrees, 0, 90, 180 or 270 (a page submitted on its
        side, turned upright by preprocessing; a straightening's few degrees are left
        to the boxes)."""
        dx, dy = self.matrix[:2, :2] @ (1.0, 0.0)
        return round(math.degrees(math.atan2(-dy, dx)) / 90) % 4 * 90  # y grows down

    def on_page(self, box: Box) -> Box:
        """A box of the tree on the page as rendered: the box holding its corners."""
        return tuple(mapped_box(box, self.matrix))

    def pixels(self, box: Box) -> tuple[int, int, int, int]:
        """A box of the tree on the page as rendered, in whole pixels: the smallest
        integer box holding it, clipped to the page."""
        return pixel_box(self.on_page(box), self.width, self.height)


def pixel_box(box: Box, width: int, height: int) -> tuple[int, int, int, int]:
    """The smallest integer box holding ``box``, clipped to the page (0..width,
    0..height), corners ordered so that x0 <= x1 and y0 <= y1."""
    x0, x1 = sorted((box[0], box[2]))
    y0, y1 = sorted((box[1], box[3]))
    eps = 1e-6  # 12.0000001 from a float transform is 12, not 13

    def clip(value: int, limit: int) -> int:
        return min(max(value, 0), max(limit, 0))

    return (clip(math.floor(x0 + eps), width), clip(math.floor(y0 + eps), height),
            clip(math.ceil(x1 - eps), width), clip(math.ceil(y1 - eps), height))


# --- from the store --------------------------------------------------------------------

UNKNOWN_DPI = 300  # an image file that does not say its resolution


def page_trees(db: Database, pages: list[tuple[Page, PageResult | None]]) -> list[PageTree]:
    """A document's pages as trees, from their accepted results (``pipeline.document``).
    A reviewer's correction keeps the positions of the machine's words it left as they
    were, and places the words it changed where the machine's stood (``placement.align``)."""
    trees = []
    for page, result in pages:
        if page.status == PageStatus.FAILED or result is None:
            trees.append(PageTree(page.index + 1, 0, 0, UNKNOWN_DPI, "failed"))
            continue
        machine = result
        if (machine_id := (result.provenance or {}).get(MACHINE_RESULT)) is not None:
            machine = queries.page_result(db, machine_id) or result
        trees.append(page_tree(page.index + 1, result, machine))
    return trees


def page_tree(number: int, result: PageResult, machine: PageResult | None = None) -> PageTree:
    """One page's tree from its accepted result; ``machine``: the machine reading a
    correction was made on (its positions), where ``result`` is a correction."""
    machine = machine or result
    provenance = machine.provenance or {}
    rendered = provenance.get("rendered") or {}
    # results from before the rendered page was recorded: the page the engine read
    width, height = rendered.get("size") or provenance.get("image_size") or (0, 0)
    tree = PageTree(number, int(width), int(height), round(rendered.get("dpi") or UNKNOWN_DPI),
                    "done")
    steps = provenance.get("preprocess") or []
    back = to_original(steps)
    tree.to_page = tuple(float(v) for v in back[:2].ravel())
    tree.slope = _unstraightened_slope(steps)
    # a person's corrected text stands over what the model read on the machine's page
    tree.field_answer = machine.field_answer if result is machine else None
    tree.own_text = (provenance.get("text_layer") or {}).get("reader", OCR) != OCR
    tree.barcodes = machine.barcodes or []
    tree.selection_marks = machine.selection_marks or []
    words = words_of(machine.lines or [])
    if not words:  # a reading without positions (a vision model's): the text stays unplaced
        tree.unplaced_text = result.text or ""
        return tree
    if result is not machine:  # the reviewer's text on the machine's positions
        words, _rate = align(words, (result.text or "").split(), score=1.0)
    tree.blocks = _blocks(words)
    return tree


def _unstraightened_slope(steps: list[dict]) -> float:
    for step in steps:
        detail = step.get("detail") or {}
        if step.get("step") == "deskew" and "transform" not in detail:
            # counter-clockwise lean: the lines rise to the right, and y grows downwards
            return -math.tan(math.radians(detail.get("angle_deg") or 0.0))
    return 0.0


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
                        [Word(p.text, p.box, p.score) for p in members], members[0].role)
        key = members[0].block if members[0].block is not None else -1
        block = blocks.setdefault(key, TextBlock(line.box, [], members[0].role))
        block.lines.append(line)
        block.box = union([block.box, line.box])
        # a header's page number is the header's
        if line.role in (Furniture.HEADER, Furniture.FOOTER):
            block.role = line.role
    return list(blocks.values())
