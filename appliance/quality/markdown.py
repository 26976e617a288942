"""Between Markdown and plain text: the words of an engine's Markdown, and text made
literal Markdown."""

from __future__ import annotations

import re

from appliance.quality.html_tables import HTML_TABLE, read_table

_TABLE_SEPARATOR = re.compile(r"^\s*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$")
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+")
_BULLET = re.compile(r"^(\s*)[-*+]\s+")
_EMPHASIS = re.compile(r"(\*\*|__|\*|_)(?=\S)(.+?)(?<=\S)\1")
_CELL_BORDER = re.compile(r"(?<!\\)\|")
_ESCAPE = re.compile(r"\\([\\`*_{}\[\]()#+\-.!|<>~=])")
_INLINE_MARKUP = re.compile(r"([\\`*_\[\]<>|~])")
# Block markers that only mean something at the start of a line: headings, block
# quotes (already escaped inline), bullets, ordered items ("1." and "1)"), setext
# underlines ("===").
_LEADING_MARKER = re.compile(r"^(#|-|\+|=)")
_LEADING_ORDERED = re.compile(r"^(\d{1,9})([.)])(?=\s|$)")  # "12." opens a list, "12.50" not


def markdown_to_text(markdown: str) -> str:
    """Drop the markup, keep the words: table cells become tab-separated (an HTML
    table's too), separator rows, heading marks, bullets and emphasis go, escapes are
    resolved."""
    markdown = HTML_TABLE.sub(lambda table: "\n".join(
        "\t".join(cell.text for cell in row) for row in read_table(table.group())), markdown)
    lines = []
    for line in markdown.splitlines():
        if _TABLE_SEPARATOR.match(line) and "-" in line:
            continue
        stripped = line.strip()
        if stripped.startswith("|") and stripped.endswith("|") and len(stripped) > 1:
            line = "\t".join(cell.strip() for cell in _CELL_BORDER.split(stripped[1:-1]))
        line = _HEADING.sub("", line)
        line = _BULLET.sub(r"\1", line)
        line = _EMPHASIS.sub(r"\2", line)
        lines.append(_ESCAPE.sub(r"\1", line))
    return "\n".join(lines).strip()


def escape_markdown(text: str) -> str:
    """``text`` as literal Markdown: inline markup everywhere, block markers at the start."""
    text = _INLINE_MARKUP.sub(r"\\\1", text.strip())
    text = _LEADING_MARKER.sub(r"\\\1", text)
    return _LEADING_ORDERED.sub(r"\1\\\2", text)
