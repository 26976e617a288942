"""UI building blocks shared by the tabs.

OCR output is untrusted text: a scanned page can say ``<script>`` or
``<img src=x onerror=...>`` and an engine may transcribe it verbatim. Gradio's
Markdown component sanitises HTML in the browser (``sanitize_html=True``);
``safe_markdown`` additionally neutralises everything that could become markup
before the value leaves the server, so no single layer has to be perfect.
"""

from __future__ import annotations

import re
from pathlib import Path

import gradio as gr

from appliance.quality.html_tables import HTML_TABLE, read_table, spans, table_lines

# A "<" that can open raw HTML (a tag, closing tag, comment, declaration or
# processing instruction; an autolink too) and is not backslash-escaped already.
_RAW_HTML_OPEN = re.compile(r"(?<!\\)((?:\\\\)*)<(?=[A-Za-z/!?])")
# The page markers export.render() writes: "<!-- page 3 -->" or
# "<!-- page 3: failed (code): message -->".
_PAGE_COMMENT = re.compile(r"<!--\s*(page \d+)(?::\s*(.*?))?\s*-->", re.DOTALL)
_LINK_OPEN = re.compile(r"\]\(")  # inline link or image: [text](dest), ![alt](src)
_LINK_DEFINITION = re.compile(r"\]:")  # reference definition: [label]: dest
_MERMAID_FENCE = re.compile(r"^([ \t>]*(?:`{3,}|~{3,})[ \t]*)mermaid", re.IGNORECASE | re.MULTILINE)
_ASCII_PUNCTUATION = re.compile(r"([!-/:-@\[-`{-~])")
# the CSS the apps that hold Markdown views load (a wide table scrolls)
MARKDOWN_VIEW_CSS = (Path(__file__).parent / "markdown_view.css").read_text()
_KEPT_TABLE = re.compile(r"\x00(\d+)\x00")  # where a table whose cells span was set aside


def escape_markdown_text(text: str) -> str:
    """``text`` shown literally by any CommonMark renderer (every ASCII punctuation escaped)."""
    return _ASCII_PUNCTUATION.sub(r"\\\1", " ".join(text.split()))


def _page_note(match: re.Match) -> str:
    page, detail = match.group(1), match.group(2)
    note = page.capitalize() if not detail else f"{page.capitalize()} {detail}"
    return f"*{escape_markdown_text(note)}*"


def safe_markdown(markdown: str) -> str:
    """Markdown that renders the same text but can no longer produce HTML of its own.

    - the page markers written by the exporter become visible italic notes;
    - every unescaped ``<`` that could open a tag, comment or autolink becomes
      ``&lt;``, so raw HTML (``<script>``, ``<img onerror=...>``) shows as text;
      the one HTML the format allows, a table whose cells span, is written again
      from its cells (``quality.html_tables``: table tags, spans and escaped text,
      nothing else);
    - inline links and images lose their destination syntax and reference
      definitions are broken, so no ``javascript:`` URL or remote image survives;
    - Mermaid code fences are shown as plain code instead of being drawn.

    Idempotent: sanitising twice gives the same result. Inside code spans an
    escaped ``<`` shows as ``&lt;``; that cosmetic cost is accepted rather than
    guessing where code spans are (a wrong guess would let HTML through).
    """
    kept: list[str] = []

    def set_aside(match: re.Match) -> str:
        rows = read_table(match.group())
        if not spans(rows):
            return match.group()  # escaped below, as any other HTML
        kept.append("\n".join(table_lines(rows)))
        return f"\x00{len(kept) - 1}\x00"

    text = HTML_TABLE.sub(set_aside, markdown.replace("\x00", ""))
    text = _PAGE_COMMENT.sub(_page_note, text)
    text = _RAW_HTML_OPEN.sub(r"\1&lt;", text)
    text = _LINK_OPEN.sub(r"]\\(", text)
    text = _LINK_DEFINITION.sub(r"]\\:", text)
    text = _MERMAID_FENCE.sub(r"\1text", text)
    return _KEPT_TABLE.sub(lambda match: kept[int(match.group(1))], text)


def safe_markdown_view(**kwargs) -> gr.Markdown:
    """A Markdown view for untrusted text. Values sent to it must go through
    ``safe_markdown`` first; the browser-side sanitiser stays on as a second layer.

    The app that holds it loads MARKDOWN_VIEW_CSS. LaTeX rendering is off (OCR text
    with dollar signs is not math, and KaTeX is one more interpreter of untrusted
    input). A plain function, not a component subclass:
    Gradio writes a .pyi stub beside every subclass at import time, which fails on
    a read-only installation.
    """
    return gr.Markdown(sanitize_html=True, latex_delimiters=[], **kwargs)
