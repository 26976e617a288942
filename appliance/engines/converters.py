r"""Markdown from each model family's own answer format.

The appliance stores a page as Markdown that passes
`appliance.quality.blocks.format_problems`, but the OCR model families answer in
formats of their own. `to_markdown(output_format, answer)` converts one answer; the
format names and where each comes from:

- ``markdown``: Gemma 3 / Gemma 4 asked for Markdown. The answer is kept as it is,
  except that an HTML ``<table>`` left in it becomes a pipe table (HTML rebuilt from
  its cells where they span).
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

A table whose cells span columns or rows (an HTML or an OTSL table) is HTML, rebuilt
from its cells by ``quality.html_tables``: a pipe table cannot hold a span, and a
merged value repeated in each of its cells would read as two data points.
"""

from __future__ import annotations

import json
import re

from appliance.quality.html_tables import MAX_SPAN, Cell, read_table, spans, table_lines

# --- tables ---------------------------------------------------------------------------

_TABLE_TAG = re.compile(r"<table\b|</table\s*>", re.IGNORECASE)


def _html_table(source: str) -> str:
    """A model's HTML table, as ``_table`` writes it."""
    return _table(read_table(source))


def _table(rows: list[list[Cell]]) -> str:
    """A pipe table; HTML rebuilt from the cells where they span
    (``quality.html_tables``), which pipes cannot hold."""
    for row in rows:
        for cell in row:
            cell.text = _cell_math(cell.text)
    if spans(rows):
        return "\n".join(table_lines(rows))
    return _pipe_table([[cell.text for cell in row] for row in rows])


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
    return _cell_math(text).replace("|", "\\|")


def _cell_math(text: str) -> str:
    return _CELL_MATH.sub(lambda m: f"${next(g for g in m.groups() if g is not None).strip()}$",
                          " ".join(text.split()))


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
_OTSL_SPANNED = ("lcel", "ucel", "xcel")  # the slots a cell's span covers
_CHART_DELIMITER = re.compile(r"^[\s|:-]+$")


def _paddleocr_vl(answer: str) -> str:
    if _OTSL_TOKEN.search(answer):
        return _html_markdown(_otsl_table(answer))
    return _html_markdown(_chart_table(answer))


def _otsl_table(answer: str) -> str:
    """OTSL as a table: every cell token opens a slot, its text runs to the next token;
    <lcel> widens the span of the cell left of it, <ucel> of the cell above, <xcel>
    both. Written as ``_table`` writes a table."""
    slots: list[list[list[str]]] = [[]]  # rows of [token, text]
    for i, part in enumerate(_OTSL_TOKEN.split(answer)):
        if i % 2:  # a token name
            if part == "nl":
                slots.append([])
            else:
                slots[-1].append([part, ""])
        elif part.strip():
            if not slots[-1]:
                slots[-1].append(["fcel", ""])
            slots[-1][-1][1] += part
    slots = [row for row in slots if row]
    rows = []
    for r, row in enumerate(slots):
        cells = []
        for c, (token, text) in enumerate(row):
            if token in _OTSL_SPANNED:
                if text.strip() and cells:  # text the model put in a span's slot
                    cells[-1].text += " " + text
                continue
            colspan = next((n for n in range(1, len(row) - c) if row[c + n][0] != "lcel"),
                           len(row) - c)
            rowspan = next((n for n in range(1, len(slots) - r)
                            if c >= len(slots[r + n]) or slots[r + n][c][0] != "ucel"),
                           len(slots) - r)
            cells.append(Cell(" ".join(text.split()), min(rowspan, MAX_SPAN),
                              min(colspan, MAX_SPAN), header=token == "ched"))
        rows.append(cells)
    return _table(rows)


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
