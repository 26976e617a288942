"""Plain text from the Markdown an engine wrote."""

from __future__ import annotations

import re

_TABLE_SEPARATOR = re.compile(r"^\s*\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$")
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+")
_BULLET = re.compile(r"^(\s*)[-*+]\s+")
_EMPHASIS = re.compile(r"(\*\*|__|\*|_)(?=\S)(.+?)(?<=\S)\1")
_CELL_BORDER = re.compile(r"(?<!\\)\|")
_ESCAPE = re.compile(r"\\([\\`*_{}\[\]()#+\-.!|<>~=])")


def markdown_to_text(markdown: str) -> str:
    """Drop the markup, keep the words: table cells become tab-separated, separator
    rows, heading marks, bullets and emphasis go, escapes are resolved."""
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
