"""What structure a page's Markdown has: its blocks, and what is wrong with its format.

`parse_blocks` turns Markdown into top-level blocks (heading, paragraph, list, table
with rows and cells, ...) for the JSON output and the evaluation. `format_problems`
lists what breaks the format contract: unclosed fences, ragged or unparsed pipe
tables, unbalanced display math, an answer wrapped in a ```markdown fence, and HTML
tables where a Markdown table belongs (an HTML table is one only where a cell spans
columns or rows, which a pipe table cannot hold). Both read the same markdown-it
token stream, so "is this a table" has one answer across the appliance.
"""

from __future__ import annotations

import html
import re
from dataclasses import asdict, dataclass

from markdown_it import MarkdownIt
from markdown_it.token import Token

from appliance.quality.html_tables import Cell, read_table, spans

MARKDOWN_PARSER = MarkdownIt("commonmark").enable("table")

_LIST_OPENERS = {"bullet_list_open", "ordered_list_open"}
_CODE_TOKENS = {"fence", "code_block"}
_WRAPPER_INFOS = {"markdown", "md"}

_CONTAINER_PREFIX = re.compile(r"^\s*(?:>\s*)*")  # blockquote markers and indentation
_CELL_SPLIT = re.compile(r"(?<!\\)\|")
_DELIMITER_ROW = re.compile(r"^[|:\-\s]+$")
_DISPLAY_MATH = re.compile(r"(?<!\\)\$\$")
_HTML_TABLE = re.compile(r"<table\b", re.IGNORECASE)
_HTML_CELL_END = re.compile(r"</t[dh]\s*>", re.IGNORECASE)
_HTML_BREAK = re.compile(r"<br\s*/?>|</(?:p|div|tr|li|h[1-6]|caption)\s*>", re.IGNORECASE)
_HTML_TAG = re.compile(r"<[^>]*>")


@dataclass
class MarkdownBlock:
    kind: str  # heading | paragraph | list | table | code | quote | html | math | rule
    text: str  # plain text; a table's cells joined by " | " per row, rows by "\n"
    level: int | None = None  # heading level 1-6
    rows: list[list[str]] | None = None  # table only: header row first, then body rows
    line: int = 0  # 0-based first source line
    # an HTML table whose cells span: [rows, columns] each cell of ``rows`` spans
    spans: list[list[list[int]]] | None = None

    def to_dict(self) -> dict:
        return {key: value for key, value in asdict(self).items() if value is not None}


def parse_blocks(markdown: str) -> list[MarkdownBlock]:
    """The top-level blocks of `markdown` in source order. A nested list is one "list"
    block; a blockquote is one "quote" block whatever it holds."""
    return [_block(group) for group in _top_level(MARKDOWN_PARSER.parse(markdown))]


def format_problems(markdown: str) -> list[str]:
    """Human-readable format problems, ordered by line; an empty list means valid."""
    tokens = MARKDOWN_PARSER.parse(markdown)
    lines = _source_lines(markdown)
    code = _covered(tokens, _CODE_TOKENS)
    found = [
        *_wrapped_answer(tokens, lines),
        *_unclosed_fences(tokens, lines),
        *_ragged_tables(tokens, lines),
        *_unparsed_tables(lines, code | _covered(tokens, {"html_block", "table_open"})),
        *_unbalanced_math(lines, code),
        *_html_tables(lines, code | _spanning_tables(tokens)),
    ]
    return [message for _, message in sorted(found, key=lambda item: item[0])]


def page_tail(markdown: str, max_chars: int = 600) -> str:
    """The end of a page, as context for reading the next one (seed 003 §5.3).

    A page that ends in a pipe table yields the table's header, delimiter row and last
    two rows, so the next page can continue the table with the same columns; any other
    page (an HTML table whose cells span too) yields its last lines, up to ``max_chars``.
    """
    blocks = parse_blocks(markdown)
    if blocks and blocks[-1].kind == "table" and blocks[-1].rows and not blocks[-1].spans:
        rows = blocks[-1].rows
        header, body = rows[0], rows[1:][-2:]
        lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header),
                 *("| " + " | ".join(row) + " |" for row in body)]
        return "\n".join(lines)[-max_chars:]
    tail = []
    for line in reversed(markdown.strip().splitlines()):
        if sum(len(kept) + 1 for kept in tail) + len(line) > max_chars:
            break
        tail.insert(0, line)
    return "\n".join(tail) or markdown.strip()[-max_chars:]


# --- blocks -------------------------------------------------------------------------


def _top_level(tokens: list[Token]) -> list[list[Token]]:
    """Group the flat token stream into one token list per top-level block."""
    groups: list[list[Token]] = []
    depth = 0
    for token in tokens:
        if depth == 0:
            groups.append([])
        groups[-1].append(token)
        depth += token.nesting
    return groups


def _block(group: list[Token]) -> MarkdownBlock:
    first = group[0]
    line = first.map[0] if first.map else 0
    if first.type == "heading_open":
        return MarkdownBlock("heading", _inline_text(group[1]), level=int(first.tag[1:]), line=line)
    if first.type == "paragraph_open":
        raw = group[1].content.strip()
        # No math plugin here: a paragraph fenced by $$ on both ends is display math,
        # and its LaTeX is kept raw (markdown-it would eat backslashes and underscores).
        if len(raw) >= 4 and raw.startswith("$$") and raw.endswith("$$"):
            return MarkdownBlock("math", raw[2:-2].strip(), line=line)
        return MarkdownBlock("paragraph", _inline_text(group[1]), line=line)
    if first.type == "table_open":
        rows = _table_rows(group)
        return MarkdownBlock("table", "\n".join(" | ".join(row) for row in rows), rows=rows,
                             line=line)
    if first.type in _CODE_TOKENS:
        return MarkdownBlock("code", first.content.rstrip("\n"), line=line)
    if first.type == "html_block":
        table = _spanning_table(first.content)
        if table is not None:
            rows = [[cell.text for cell in row] for row in table]
            return MarkdownBlock("table", "\n".join(" | ".join(row) for row in rows), rows=rows,
                         line=line, spans=[[[cell.rowspan, cell.colspan] for cell in row]
                                           for row in table])
        return MarkdownBlock("html", _html_text(first.content), line=line)
    if first.type == "hr":
        return MarkdownBlock("rule", "", line=line)
    if first.type == "blockquote_open":
        return MarkdownBlock("quote", _nested_text(group), line=line)
    return MarkdownBlock("list" if first.type in _LIST_OPENERS else "paragraph",
                         _nested_text(group), line=line)


def _inline_text(token: Token) -> str:
    """An inline token's words without markup: code spans and image alt text stay,
    emphasis and link syntax go, line breaks stay as newlines."""
    parts = []
    for child in token.children or []:
        if child.type in ("text", "text_special", "code_inline", "image"):
            parts.append(child.content)
        elif child.type in ("softbreak", "hardbreak"):
            parts.append("\n")
        elif child.type == "html_inline" and re.fullmatch(r"<br\s*/?>", child.content, re.I):
            parts.append("\n")
    return "".join(parts).strip()


def _table_rows(group: list[Token]) -> list[list[str]]:
    rows: list[list[str]] = []
    for token in group:
        if token.type == "tr_open":
            rows.append([])
        elif token.type == "inline":
            rows[-1].append(" ".join(_inline_text(token).split("\n")))
    return rows


def _nested_text(group: list[Token]) -> str:
    """One line per paragraph, heading, cell or code block inside a container."""
    texts = []
    for token in group:
        if token.type == "inline":
            texts.append(_inline_text(token))
        elif token.type in _CODE_TOKENS:
            texts.append(token.content.rstrip("\n"))
        elif token.type == "html_block":
            texts.append(_html_text(token.content))
    return "\n".join(text for text in texts if text)


def _spanning_table(source: str) -> list[list[Cell]] | None:
    """An HTML block that is a table where a cell spans columns or rows (the tables
    Markdown's pipes cannot hold): its rows; None for any other HTML."""
    if not _HTML_TABLE.match(source.lstrip()):
        return None
    rows = read_table(source)
    return rows if spans(rows) else None


def _html_text(source: str) -> str:
    """Visible text of raw HTML; table cells joined by " | " as for Markdown tables."""
    text = _HTML_BREAK.sub("\n", _HTML_CELL_END.sub(" | ", source))
    text = html.unescape(_HTML_TAG.sub("", text))
    lines = (re.sub(r"\s*\|$", "", " ".join(line.split())) for line in text.split("\n"))
    return "\n".join(line for line in lines if line)


# --- format problems ----------------------------------------------------------------
# Each check yields (0-based line, message) so the report can be ordered by line.


def _source_lines(markdown: str) -> list[str]:
    # markdown-it numbers lines after normalising \r\n and \r; str.splitlines would not agree.
    return re.sub(r"\r\n?", "\n", markdown).split("\n")


def _covered(tokens: list[Token], types: set[str]) -> set[int]:
    return {i for t in tokens if t.type in types and t.map for i in range(*t.map)}


def table_cells(line: str) -> list[str]:
    """A pipe-table row's cells, split the way markdown-it splits them."""
    row = _CONTAINER_PREFIX.sub("", line).strip()
    row = row.removeprefix("|")
    if row.endswith("|") and not row.endswith("\\|"):
        row = row[:-1]
    return _CELL_SPLIT.split(row)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def _wrapped_answer(tokens: list[Token], lines: list[str]):
    first = next((t for t in tokens if t.map), None)
    if first is None or first.type != "fence" or first.info.strip().lower() not in _WRAPPER_INFOS:
        return
    if all(not line.strip() for line in lines[: first.map[0]]):
        fence = first.markup + first.info.strip()
        yield first.map[0], f"line {first.map[0] + 1}: the whole answer is wrapped in a {fence} fence"


def _unclosed_fences(tokens: list[Token], lines: list[str]):
    for token in tokens:
        if token.type != "fence":
            continue
        start, end = token.map
        # markdown-it runs an unclosed fence to the end of its container; a closed
        # one ends on a line of at least as many of the same fence characters.
        char, length = re.escape(token.markup[0]), len(token.markup)
        closing = re.compile(rf"[\s>]*{char}{{{length},}}\s*")
        if end - start < 2 or not closing.fullmatch(lines[end - 1]):
            yield start, f"line {start + 1}: code fence {token.markup} is never closed"


def _ragged_tables(tokens: list[Token], lines: list[str]):
    # markdown-it pads short rows and drops extra cells without a word; the source does not lie.
    for token in tokens:
        if token.type != "table_open":
            continue
        start, end = token.map
        header = len(table_cells(lines[start]))
        for i in range(start + 2, end):
            cells = len(table_cells(lines[i]))
            if cells != header:
                yield i, f"line {i + 1}: table row has {_count(cells, 'cell')}, header has {header}"


def _unparsed_tables(lines: list[str], skip: set[int]):
    for i in range(len(lines) - 1):
        if i in skip or i + 1 in skip or "|" not in lines[i]:
            continue
        delimiter = _CONTAINER_PREFIX.sub("", lines[i + 1]).strip()
        if "|" in delimiter and "-" in delimiter and _DELIMITER_ROW.match(delimiter):
            header, columns = len(table_cells(lines[i])), len(table_cells(lines[i + 1]))
            detail = (f"header has {header} cells, delimiter row has {columns}"
                      if header != columns else "malformed delimiter row")
            yield i, f"line {i + 1}: looks like a table but is not one ({detail})"


def _unbalanced_math(lines: list[str], skip: set[int]):
    delimiters = [i for i, line in enumerate(lines) if i not in skip
                  for _ in _DISPLAY_MATH.finditer(line)]
    if len(delimiters) % 2:
        # Paired in order, the last delimiter is the one left open.
        last = delimiters[-1]
        yield last, f"line {last + 1}: unbalanced display math ({len(delimiters)} $$ delimiters)"


def _spanning_tables(tokens: list[Token]) -> set[int]:
    """The lines of HTML tables where a cell spans columns or rows: tables that Markdown's
    pipes cannot hold."""
    return {i for token in tokens if token.type == "html_block" and token.map
            and _spanning_table(token.content) is not None for i in range(*token.map)}


def _html_tables(lines: list[str], skip: set[int]):
    for i, line in enumerate(lines):
        if i not in skip and _HTML_TABLE.search(line):
            yield i, f"line {i + 1}: HTML table instead of a Markdown table"
