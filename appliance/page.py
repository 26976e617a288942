"""The page model: what a recogniser finds on a page (lines, their words and boxes) and
a page's reading, shared by the engines that make it, the reading that orders it and
everything downstream. A line is made once and never changed: the reading that orders
and marks it makes new lines. It imports nothing of the appliance.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from enum import StrEnum

# a selection mark's (a check box's) states, and the token that stands for it in a
# page's text, as the Document Intelligence service names and writes them (``raster.marks``)
SELECTED, UNSELECTED = "selected", "unselected"
MARK_TOKENS = {SELECTED: ":selected:", UNSELECTED: ":unselected:"}
_MARK_TOKEN = re.compile(r"(?<!\S):(?:un)?selected:(?!\S)")
VERTICAL_ASPECT = 1.5  # as RapidOCR's: a crop this much taller than wide is read turned
SCRIPT_SHARE = 0.5  # of a column's letters at least, in a script written in columns
# Han (with its extensions and compatibility forms), kana: scripts written without
# spaces between words. Hangul is written with them and counts as other scripts do.
UNSPACED = re.compile(r"[\u3040-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
# Han (with its extensions and compatibility forms), kana, Hangul syllables
_VERTICAL_SCRIPT = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af"
                              r"\uf900-\ufaff]")


class Structure(StrEnum):
    """What a line of the page's body is in its Markdown (``reading.markdown``)."""

    HEADING = "heading"
    LIST = "list"
    TABLE = "table"
    TEXT = "text"


class Furniture(StrEnum):
    """What a line of the page's furniture is (``reading.furniture``): the running
    header at its top, the footer at its foot (and what is printed up its side
    margin), a page number at either."""

    HEADER = "header"
    FOOTER = "footer"
    PAGE_NUMBER = "page_number"


@dataclass(frozen=True)
class Word:
    """One word of a line: its text, its box [x0, y0, x1, y1] in page pixels and its
    score, the least sure of its characters; None where the reading gives none (a
    vision model's words placed on another reading's boxes, ``outputs.placement``)."""

    text: str
    box: Sequence[float]
    score: float | None = None

    def to_dict(self) -> dict:
        return {"text": self.text, "box": self.box, "score": self.score}

    @classmethod
    def from_dict(cls, data: dict) -> Word:
        return cls(text=data["text"], box=data["box"], score=data.get("score"))


@dataclass(frozen=True)
class Line:
    """One recognised text line: its text, its box [x0, y0, x1, y1] in page pixels, its
    score; once the page is read, the reading-order index of the block it belongs to
    and its role there, in the body (``structure``) or in the furniture; its words."""

    text: str
    box: list[float]
    score: float
    block: int | None = None
    structure: Structure | None = None
    furniture: Furniture | None = None
    words: list[Word] | None = None  # where the engine gives them

    @property
    def role(self) -> str | None:
        """The line's role as the outputs name it: a line of the furniture has no
        structure, so one name serves both."""
        return self.furniture or self.structure

    def to_dict(self) -> dict:
        """As stored and written in the JSON output: ``role`` for both roles."""
        return {"text": self.text, "box": self.box, "score": self.score, "block": self.block,
                "role": self.role and self.role.value,
                "words": None if self.words is None else [word.to_dict() for word in self.words]}

    @classmethod
    def from_dict(cls, data: dict) -> Line:
        role, words = data.get("role"), data.get("words")
        return cls(text=data["text"], box=data["box"], score=data.get("score", 0.0),
                   block=data.get("block"),
                   words=None if words is None else [Word.from_dict(word) for word in words],
                   furniture=_member(Furniture, role), structure=_member(Structure, role))


def _member(kind: type[StrEnum], value: str | None) -> StrEnum | None:
    """The member of ``kind`` named ``value``; None for another value or none."""
    try:
        return kind(value)
    except ValueError:
        return None


@dataclass(frozen=True)
class Block:
    """A region of the page read as rows, in reading order (``reading.order``): its
    rows, each left to right; where it is the page's header or footer, which. A block
    of ``vertical`` text has a row for each column, right to left."""

    rows: list[list[Line]]
    furniture: Furniture | None = None
    vertical: bool = False

    @property
    def lines(self) -> list[Line]:
        return [line for row in self.rows for line in row]

    @property
    def box(self) -> list[float]:
        boxes = [line.box for line in self.lines]
        return [min(b[0] for b in boxes), min(b[1] for b in boxes),
                max(b[2] for b in boxes), max(b[3] for b in boxes)]


@dataclass(frozen=True)
class Unread:
    """A reader of line boxes (the classic engine, a PDF's own text) finds a page's lines;
    reading them (their order, blocks and roles, the page's text and Markdown) is a
    stage of its own (``pipeline.read``), so that what the engine found can be read
    again under other rules or settings. What that stage needs besides the lines."""

    page_height: float  # in the lines' pixels
    lean_deg: float = 0.0  # how far the lines descend to the right


@dataclass(frozen=True)
class Recognition:
    """What an engine returns for one page image: its reading, or, where ``unread`` is
    set, the lines it found, which the read stage reads. Each stage after the engine
    makes a new one (``noted``, ``flagged``, ``dataclasses.replace``)."""

    text: str
    markdown: str
    lines: list[Line] = field(default_factory=list)
    finish_reason: str = "stop"
    # per generated token: "t" its text, "lp" its log-probability, "h" the entropy (nats)
    tokens: list[dict] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)  # e.g. fallback, tiled, truncated
    provenance: dict = field(default_factory=dict)  # prompt version, ladder rung, ...
    # a vision engine's answer to the document type's field question (``Question``):
    # the value printed for each field, or None; None when it was not asked
    field_answer: dict | None = None
    unread: Unread | None = None
    # the page's barcodes (``engines.barcodes``): format, value, polygon in the lines' pixels
    barcodes: list[dict] = field(default_factory=list)
    # its selection marks (``raster.marks``): state, confidence, box in the lines' pixels
    selection_marks: list[dict] = field(default_factory=list)

    @classmethod
    def found(cls, lines: list[Line], page_height: float, lean_deg: float = 0.0
              ) -> Recognition:
        """The lines a reader of line boxes found, for the read stage to read."""
        return cls(text="", markdown="", lines=lines, unread=Unread(page_height, lean_deg))

    def noted(self, entries: dict) -> Recognition:
        """This reading with ``entries`` in its provenance."""
        return replace(self, provenance={**self.provenance, **entries})

    def flagged(self, flag: str) -> Recognition:
        return replace(self, flags=[*self.flags, flag])

    def to_dict(self) -> dict:
        return {**asdict(self), "lines": [line.to_dict() for line in self.lines]}

    @classmethod
    def from_dict(cls, data: dict) -> Recognition:
        unread = data.get("unread")
        return cls(**{**data, "lines": [Line.from_dict(line) for line in data.get("lines", [])],
                      "unread": Unread(**unread) if unread else None})


def is_mark(text: str) -> bool:
    """Whether ``text`` is a selection mark's token: a line or word that was found, not
    read."""
    return text in MARK_TOKENS.values()


def without_marks(text: str) -> str:
    """``text`` without its selection marks' tokens: what was read of it."""
    return _MARK_TOKEN.sub("", text)


def unspaced(ch: str) -> bool:
    """Whether ``ch`` is a character of a script written without spaces."""
    return bool(UNSPACED.match(ch))


def is_column(box, text: str) -> bool:
    """Whether a line of ``text`` in ``box`` is a column of vertical text."""
    x0, y0, x1, y1 = box
    letters = [ch for ch in text if ch.isalnum()]
    if x1 <= x0 or y1 - y0 < VERTICAL_ASPECT * (x1 - x0) or len(letters) < 2:
        return False
    return sum(bool(_VERTICAL_SCRIPT.match(ch)) for ch in letters) >= SCRIPT_SHARE * len(letters)
