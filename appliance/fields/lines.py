"""A document's accepted lines as the field rules read them: their text, boxes, words
and confidence, the evidence a value on them gives, and the rows of print that OCR
split into several lines."""

from __future__ import annotations

from dataclasses import dataclass

from appliance.outputs.tree import PageTree
from appliance.page import Word


@dataclass
class Evidence:
    page: int  # 1-based
    box: tuple[int, int, int, int]  # on the page as rendered, in pixels
    text: str  # the whole line the value stands on

    def as_dict(self) -> dict:
        return {"page": self.page, "box": list(self.box), "text": self.text}


@dataclass
class ReadLine:
    page: PageTree
    order: int  # in reading order over the document
    text: str
    box: tuple[float, float, float, float]  # in the tree's frame
    words: list[Word]
    confidence: float

    def evidence(self, span: tuple[int, int] | None = None) -> Evidence:
        """The line, or the words of it that ``span`` (character offsets) covers."""
        box = self.box
        if span is not None:
            covered, start = [], 0
            for word in self.words:
                end = start + len(word.text)
                if start < span[1] and end > span[0]:
                    covered.append(word.box)
                start = end + 1
            if covered:
                box = (min(b[0] for b in covered), min(b[1] for b in covered),
                       max(b[2] for b in covered), max(b[3] for b in covered))
        return Evidence(self.page.number, self.page.pixels(box), self.text)

    @property
    def height(self) -> float:
        return max(self.box[3] - self.box[1], 1.0)


def read_lines(pages: list[PageTree]) -> list[ReadLine]:
    lines = []
    for page in pages:
        if page.status != "done":
            continue
        for block in page.blocks:
            for line in block.lines:
                if not line.words:
                    continue
                scores = [w.score for w in line.words if w.score is not None]
                lines.append(ReadLine(page, len(lines), line.text, line.box, line.words,
                                   sum(scores) / len(scores) if scores else 1.0))
    return lines


def rows(lines: list[ReadLine], columns: bool = True) -> list[ReadLine]:
    """The lines of a page top down, those that OCR split along one printed row
    ("POTTERS" "GARDEN SDN" "BHD") joined left to right: pieces of one band and size,
    close beside each other, or with ``columns`` False, across the whole band (an item,
    its quantity and its amount). A logo or a line standing on end is no part of a row
    of columns."""
    def lying(line: ReadLine) -> bool:
        return not columns or line.box[2] - line.box[0] > line.height

    bands: list[list[ReadLine]] = []
    for line in sorted(lines, key=lambda ln: (ln.box[1], ln.box[0])):
        band = next((band for band in bands if lying(line) and lying(band[0])
                     and overlap(band[0].box[1], band[0].box[3], line.box[1], line.box[3])
                     > 0.6 * line.height
                     and max(band[0].height, line.height) < 1.5 * min(band[0].height, line.height)),
                    None)
        if band is None:
            bands.append([line])
        else:
            band.append(line)
    printed = []
    for band in bands:
        pieces = sorted(band, key=lambda ln: ln.box[0])
        row = [pieces[0]]
        for piece in pieces[1:]:
            if not columns or piece.box[0] - max(ln.box[2] for ln in row) < 2 * piece.height:
                row.append(piece)
            else:  # another column
                printed.append(joined(row))
                row = [piece]
        printed.append(joined(row))
    return sorted(printed, key=lambda row: (row.box[1], row.box[0]))


def joined(lines: list[ReadLine]) -> ReadLine:
    """Lines read as one, in the given order."""
    if len(lines) == 1:
        return lines[0]
    return ReadLine(lines[0].page, min(ln.order for ln in lines), " ".join(ln.text for ln in lines),
                    (min(ln.box[0] for ln in lines), min(ln.box[1] for ln in lines),
                     max(ln.box[2] for ln in lines), max(ln.box[3] for ln in lines)),
                    [w for ln in lines for w in ln.words], min(ln.confidence for ln in lines))


def overlap(a0: float, a1: float, b0: float, b1: float) -> float:
    return max(0.0, min(a1, b1) - max(a0, b0))
