r"""Markdown from each model family's own answer format.

The appliance stores a page as Markdown that passes
`appliance.quality.blocks.format_problems`, but the OCR model families answer in
formats of their own. `to_markdown(output_format, answer)` converts one answer; the
format names and where each comes from:

- ``markdown``: Gemma 3 / Gemma 4 asked for Markdown. The answer is kept as it is,
  except that an HTML ``<table>`` left in it becomes a pipe table.
- ``html_markdown``: Markdown or plain text with HTML tables and LaTeX, the latter
  often in ``\[ \]`` / ``\( \)`` delimiters. LightOnOCR-1/2 (image only, no prompt;
  lightonai/LightOnOCR README: "Markdown: HTML tables, LaTeX math"), GLM-OCR
  ("Text Recognition:", "Table Recognition:" answers a bare ``<table>``,
  "Formula Recognition:"), HunyuanOCR (its doc_parse prompt asks for Markdown with
  HTML tables and LaTeX formulas). Tables become pipe tables, display LaTeX a
  ``$$`` block of its own, inline ``\( \)`` becomes ``$ $``.
- ``paddleocr_vl``: PaddleOCR-VL / -1.5 answer one element per task prompt ("OCR:",
  "Table Recognition:", "Formula Recognition:", "Chart Recognition:"): plain text,
  an OTSL table (``<fcel>`` cell, ``<ecel>`` empty cell, ``<lcel>``/``<ucel>``/
  ``<xcel>`` spanned cells, ``<nl>`` row end), LaTeX in ``\[ \]``, or chart rows
  ``a | b`` without a delimiter row (PaddlePaddle/ERNIE docs/paddleocr_vl_sft.md §8.1).
- ``dots_layout_json``: dots.ocr's prompt_layout_all_en answer, a JSON list of
  ``{"bbox", "category", "text"}`` cells whose text is Markdown, HTML (Table) or
  LaTeX (Formula) (rednote-hilab/dots.ocr dots_ocr/utils/prompts.py).
- ``deepseek_grounding``: DeepSeek-OCR's ``<image>\n<|grounding|>Convert the document
  to markdown.`` answer: Markdown blocks, each led by
  ``<|ref|>label<|/ref|><|det|>[[x1, y1, x2, y2]]<|/det|>``.

Spanned table cells are left blank rather than repeated: each text appears once, so a
merged value does not read as two data points.
"""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser

# --- tables ---------------------------------------------------------------------------

_TABLE_TAG = re.compile(r"<table\b|</table\s*>", re.IGNORECASE)
_MAX_SPAN = 100  # a runaway rowspan/colspan from a looping model must not blow up the table


class _TableReader(HTMLParser):
    """Rows of (text, rowspan, colspan) cells of one HTML table; text inside a nested
    table belongs to the outer cell."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.rows: list[list[list]] = []
        self._cell: list | None = None
        self._depth = 0

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self._depth += 1
        elif self._depth == 1 and tag == "tr":
            self.rows.append([])
        elif self._depth == 1 and tag in ("td", "th"):
            if not self.rows:
                self.rows.append([])
            spans = dict(attrs)
            self._cell = [[], _span(spans.get("rowspan")), _span(spans.get("colspan"))]
            self.rows[-1].append(self._cell)
        elif self._cell is not None and tag in ("br", "td", "th", "tr", "p", "div", "li"):
            self._cell[0].append(" ")  # <br> and nested blocks separate words

    def handle_endtag(self, tag):
        if tag == "table":
            self._depth -= 1
        elif self._depth == 1 and tag in ("td", "th"):
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell[0].append(data)


def _span(value: str | None) -> int:
    try:
        return min(max(int(value or 1), 1), _MAX_SPAN)
    except ValueError:
        return 1


def _html_table(source: str) -> str:
    reader = _TableReader()
    # A cut-off answer can end inside a tag ("<t"); the parser would keep it as text.
    reader.feed(re.sub(r"<[^>]*$", "", source))
    reader.close()
    placed: dict[tuple[int, int], str] = {}
    for r, row in enumerate(reader.rows):
        c = 0
        for parts, rowspan, colspan in row:
            while (r, c) in placed:
                c += 1
            for dr in range(min(rowspan, len(reader.rows) - r)):
                for dc in range(colspan):
                    placed[r + dr, c + dc] = "".join(parts) if dr == dc == 0 else ""
            c += colspan
    width = max((c for _, c in placed), default=-1) + 1
    return _pipe_table([[placed.get((r, c), "") for c in range(width)]
                        for r in range(len(reader.rows))])


def _pipe_table(rows: list[list[str]]) -> str:
    """A GFM pipe table, the first row as header; short rows padded with empty cells."""
    width = max((len(row) for row in rows), default=0)
    if not width:
        return ""
    lines = ["| " + " | ".join(_cell(text) for text in row + [""] * (width - len(row))) + " |"
             for row in rows]
    lines.insert(1, "|" + " --- |" * width)
    return "\n".join(lines)


# A cell holds no block: its display or inline LaTeX becomes inline $ $.
_CELL_MATH = re.compile(r"\$\$(.+?)\$\$|\\\[(.+?)\\\]|\\\((.+?)\\\)")


def _cell(text: str) -> str:
    text = _CELL_MATH.sub(lambda m: f"${next(g for g in m.groups() if g is not None).strip()}$",
                          " ".join(text.split()))
    return text.replace("|", "\\|")


def _tables(text: str) -> str:
    """Every HTML table (nested ones counted, a cut-off one running to the end) as a
    pipe table set off by blank lines."""
    out, start, depth, opened = [], 0, 0, 0
    for tag in _TABLE_TAG.finditer(text):
        if tag.group().lower().startswith("<table"):
            if depth == 0:
                out.append(text[start:tag.start()])
                opened = tag.start()
            depth += 1
        elif depth:
            depth -= 1
            if depth == 0:
                out.append(f"\n\n{_html_table(text[opened:tag.end()])}\n\n")
                start = tag.end()
    if depth:
        out.append(f"\n\n{_html_table(text[opened:])}\n\n")
    else:
        out.append(text[start:])
    return "".join(out)


# --- LaTeX ----------------------------------------------------------------------------

# \[ \] counts only on lines of its own: in running text "\[1\]" is Markdown's escape
# for brackets. Not after a backslash: "\\[3pt]" is a row break inside an environment.
_DISPLAY_MATH = re.compile(r"(?<!\\)\$\$(.+?)(?<!\\)\$\$|^[ \t]*\\\[(.+?)(?<!\\)\\\][ \t]*$",
                           re.DOTALL | re.MULTILINE)
_INLINE_MATH = re.compile(r"(?<!\\)\\\((.+?)(?<!\\)\\\)", re.DOTALL)


def _latex(text: str) -> str:
    """Display math as a $$ paragraph of its own (a blank line inside would end it)."""

    def display(match: re.Match) -> str:
        body = match.group(1) if match.group(1) is not None else match.group(2)
        body = "\n".join(line for line in body.strip().splitlines() if line.strip())
        return f"\n\n$$\n{body}\n$$\n\n" if body else ""

    text = _DISPLAY_MATH.sub(display, text)
    return _INLINE_MATH.sub(lambda m: f"${m.group(1).strip()}$", text)


# --- formats --------------------------------------------------------------------------


def _markdown(answer: str) -> str:
    return _tables(answer)


def _html_markdown(answer: str) -> str:
    return _latex(_tables(answer))


_OTSL_TOKEN = re.compile(r"<(fcel|ecel|lcel|ucel|xcel|ched|rhed|srow|nl)>")
_CHART_DELIMITER = re.compile(r"^[\s|:-]+$")


def _paddleocr_vl(answer: str) -> str:
    if _OTSL_TOKEN.search(answer):
        return _html_markdown(_otsl_table(answer))
    return _html_markdown(_chart_table(answer))


def _otsl_table(answer: str) -> str:
    """OTSL as a pipe table: every cell token opens a cell, text runs to the next
    token; <lcel>/<ucel>/<xcel> are the blank slots of a span."""
    rows: list[list[str]] = [[]]
    for i, part in enumerate(_OTSL_TOKEN.split(answer)):
        if i % 2:  # a token name
            if part == "nl":
                rows.append([])
            else:
                rows[-1].append("")
        elif part.strip():
            if not rows[-1]:
                rows[-1].append("")
            rows[-1][-1] += part
    return _pipe_table([row for row in rows if row])


def _chart_table(answer: str) -> str:
    """PaddleOCR-VL's chart answer, "a | b" lines with no delimiter row, as a table;
    anything else unchanged."""
    lines = [line for line in answer.strip().splitlines() if line.strip()]
    if len(lines) < 2 or not all("|" in line for line in lines) \
            or any(_CHART_DELIMITER.match(line) for line in lines):
        return answer
    return _pipe_table([[cell.strip() for cell in line.split("|")] for line in lines])


_HEADING = re.compile(r"#{1,6}(?=\s)")
_LIST_MARKER = re.compile(r"\s*(?:[-*+]|\d+[.)])\s")
_MATH_WRAPPER = re.compile(r"^\s*(?:\$\$|\$|\\\[|\\\()(.*?)(?:\$\$|\$|\\\]|\\\))\s*$", re.DOTALL)
# Furniture and pictures carry no body text (a Picture has no text by the prompt's rule);
# dots.ocr's own *_nohf.md and the other families' page prompts leave headers/footers out.
_DOTS_DROPPED = {"Picture", "Page-header", "Page-footer"}


def _heading(text: str, level: int) -> str:
    """One heading line; a level the model wrote ("## ...") is kept."""
    text = " ".join(text.split())
    return text if not text or _HEADING.match(text) else f"{'#' * level} {text}"


def _dots_layout_json(answer: str) -> str:
    cells = _dots_cells(answer)
    if not cells:  # not layout JSON at all (prompt_ocr answers Markdown) or nothing readable
        return _html_markdown(answer)
    blocks = []
    for cell in cells:
        category, text = cell.get("category"), str(cell.get("text") or "").strip()
        if category in _DOTS_DROPPED or not text:
            continue
        if category == "Title":
            text = _heading(text, 1)
        elif category == "Section-header":
            text = _heading(text, 2)
        elif category == "List-item" and not _LIST_MARKER.match(text):
            text = f"- {text}"
        elif category == "Formula":
            unwrapped = _MATH_WRAPPER.match(text)
            text = f"$$\n{(unwrapped.group(1) if unwrapped else text).strip()}\n$$"
        blocks.append(text)
    return _html_markdown("\n\n".join(blocks))


def _dots_cells(answer: str) -> list[dict]:
    """The cells of a layout answer. The model often stops early (token limit, or a
    repetition loop cut off): the complete cells are kept, and the text of a cell cut
    mid-string is kept as far as it goes."""
    start = answer.find("[")
    if start < 0:
        return []
    decoder, cells, i = json.JSONDecoder(), [], start + 1
    while True:
        while i < len(answer) and answer[i] in " \t\r\n,":
            i += 1
        if i >= len(answer) or answer[i] == "]":
            return cells
        try:
            cell, i = decoder.raw_decode(answer, i)
        except ValueError:
            return cells + _cut_cell(answer[i:])
        if isinstance(cell, dict):
            cells.append(cell)


def _cut_cell(rest: str) -> list[dict]:
    category = re.search(r'"category"\s*:\s*"([^"]*)"', rest)
    text = re.search(r'"text"\s*:\s*"((?:[^"\\]|\\.)*)', rest)
    if not category or not text:
        return []
    raw = re.sub(r"\\u[0-9a-fA-F]{0,3}$", "", text.group(1))  # a \uXXXX escape cut short
    try:
        value = json.loads(f'"{raw}"')
    except ValueError:
        value = raw
    return [{"category": category.group(1), "text": value}]


_GROUNDING_REF = re.compile(r"<\|ref\|>(.*?)<\|/ref\|>", re.DOTALL)
# A box runs to <|/det|>; the model sometimes writes a broken one ("<|det|>[0.5ex] ")
# and never closes it, so an unclosed box ends with its line.
_GROUNDING_DET = re.compile(r"<\|det\|>.*?(?:<\|/det\|>|$)", re.MULTILINE)
_DEEPSEEK_NOISE = re.compile(r"<｜end▁of▁sentence｜>|</?center>")
_DEEPSEEK_HEADINGS = {"title": 1, "sub_title": 2}


def _deepseek_grounding(answer: str) -> str:
    parts = _GROUNDING_REF.split(_DEEPSEEK_NOISE.sub("", answer))
    blocks = [_GROUNDING_DET.sub("", parts[0]).strip()]
    for label, text in zip(parts[1::2], parts[2::2]):
        text = _GROUNDING_DET.sub("", text).strip()
        level = _DEEPSEEK_HEADINGS.get(label.strip())
        blocks.append(_heading(text, level) if level and text else text)
    return _html_markdown("\n\n".join(block for block in blocks if block))


_CONVERTERS = {
    "markdown": _markdown,
    "html_markdown": _html_markdown,
    "paddleocr_vl": _paddleocr_vl,
    "dots_layout_json": _dots_layout_json,
    "deepseek_grounding": _deepseek_grounding,
}


def to_markdown(output_format: str, answer: str) -> str:
    """`answer` in `output_format` (see the module docstring) as Markdown."""
    try:
        convert = _CONVERTERS[output_format]
    except KeyError:
        raise ValueError(f"unknown output format {output_format!r}; "
                         f"known: {', '.join(_CONVERTERS)}") from None
    return re.sub(r"\n{3,}", "\n\n", convert(answer)).strip()
