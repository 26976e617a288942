"""Repair a page's Markdown: fix the form in place, or degrade the page to plain text.

A VLM answer breaks the format contract in a few recurring ways, and
`blocks.format_problems` is the one judge of "broken". `repair` answers at one of
three levels:

- 0: nothing to do; the input comes back unchanged, byte for byte.
- 1: small, local fixes that keep every word of the document:
  unwrap a ```markdown answer fence (its closing fence may be missing), strip the
  model's chatter before and after the answer, close an unclosed code fence, mend
  pipe tables (split off a text line glued under a table, rejoin rows a blank line
  cut off, add or fix the delimiter row, pad short rows, widen the table for extra
  cells, close a row cut off before its trailing pipe), and balance display math
  `$$` and clearly unbalanced inline math `$` (never currency such as "$12.50").
- 2: `format_problems` still objects after level 1 (an HTML table, say): the page
  degrades to plain text and the caller flags it "degraded".

Level 2 representation: `Repaired.markdown` holds plain text, not Markdown. Given
the engine's positioned `lines`, it is one line per non-empty recognised line in
the engine's reading order, and `Repaired.lines` holds those same lines, so text
line i sits at `Repaired.lines[i].box` (the JSON output keeps the positions).
Without lines it is `markdown_to_text` of the level-1 result, raw HTML reduced
to its visible text.

Extra table cells: a row with more cells than the header first loses trailing
empty cells; if it still has more, the whole table widens (empty header cells,
"---" in the delimiter row, every other row padded). Merging extras into the last
cell would mix two cells' text and dropping them would lose words; widening keeps
every cell's text in a cell of its own.

Each fix is named "name" or "name:line N" (1-based, in the text as it stood when
that fix was made). A healthy corpus repairs under 3 % of its pages at level 1 and
under 0.5 % at level 2; `repair_rates` measures both.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from markdown_it.token import Token

from appliance.page import Line
# pads counts exactly as the judge counts it.
from appliance.quality.blocks import MARKDOWN_PARSER, table_cells, format_problems, parse_blocks
from appliance.quality.markdown import markdown_to_text

LEVEL1_HEALTHY_RATE = 0.03  # healthy: under 3 % of pages need a level-1 fix
LEVEL2_HEALTHY_RATE = 0.005  # healthy: under 0.5 % of pages degrade to plain text

_MAX_ROUNDS = 4  # a fix can expose another (a closed fence reveals a table); 2 suffice in practice


@dataclass
class Repaired:
    markdown: str  # level 2: plain text, see the module docstring
    level: int  # 0 nothing to do, 1 fixed in place, 2 degraded to plain text
    fixes: list[str] = field(default_factory=list)  # what level 1 did
    problems: list[str] = field(default_factory=list)  # left after level 1; [] unless level 2
    lines: list[Line] = field(default_factory=list)  # level 2 with positions: line i of markdown


def repair(markdown: str, lines: list[Line] | None = None) -> Repaired:
    """Repair `markdown` at the lowest level that satisfies `format_problems`."""
    text = _split(markdown)
    fixes: list[str] = []
    for _ in range(_MAX_ROUNDS):
        before = len(fixes)
        for step in _STEPS:
            text = step(text, fixes)
        if len(fixes) == before:
            break
    repaired = "\n".join(text) if fixes else markdown
    problems = format_problems(repaired)
    if not problems:
        return Repaired(repaired, 1 if fixes else 0, fixes)
    kept = [line for line in lines or [] if line.text.strip()]
    if kept:
        plain = "\n".join(" ".join(line.text.split()) for line in kept)
    else:
        plain = _plain_text(repaired)
    return Repaired(plain, 2, fixes, problems, kept)


def repair_rates(levels: Iterable[int]) -> dict:
    """Level-1 and level-2 rates over pages' repair levels, and whether both are healthy."""
    counts = Counter(levels)
    if set(counts) - {0, 1, 2}:
        raise ValueError(f"repair levels are 0, 1 or 2, got {sorted(set(counts) - {0, 1, 2})}")
    pages = sum(counts.values())
    level1_rate = counts[1] / pages if pages else 0.0
    level2_rate = counts[2] / pages if pages else 0.0
    return {
        "pages": pages,
        "level1": counts[1],
        "level2": counts[2],
        "level1_rate": level1_rate,
        "level2_rate": level2_rate,
        "healthy": level1_rate < LEVEL1_HEALTHY_RATE and level2_rate < LEVEL2_HEALTHY_RATE,
    }


def _plain_text(markdown: str) -> str:
    """`markdown_to_text`, with raw HTML blocks (an HTML table, say) reduced to their
    visible text first, as `parse_blocks` reads them."""
    text = _split(markdown)
    visible = {block.line: block.text for block in parse_blocks(markdown) if block.kind == "html"}
    for token in reversed(_parse(text)):
        if token.type == "html_block" and token.map[0] in visible:
            start, end = token.map
            text[start:end] = visible[start].split("\n")
    return markdown_to_text("\n".join(text))


# --- helpers ------------------------------------------------------------------------

_PIPE = re.compile(r"(?<!\\)\|")
_PREFIX = re.compile(r"^[ \t>]*")  # indentation and blockquote markers
_DELIMITER_CELL = re.compile(r"\s*:?-+:?\s*")
_DELIMITER_LIKE = re.compile(r"^[|:\-\s]+$")  # as format_problems spots a would-be delimiter row


def _split(markdown: str) -> list[str]:
    # The line numbering markdown-it and format_problems use.
    return re.sub(r"\r\n?", "\n", markdown).split("\n")


def _parse(text: list[str]) -> list[Token]:
    return [token for token in MARKDOWN_PARSER.parse("\n".join(text)) if token.map]


def _covered(tokens: list[Token], types: set[str]) -> set[int]:
    return {i for t in tokens if t.type in types for i in range(*t.map)}


def _prefix(line: str) -> str:
    """The container prefix of a line, as a prefix for a line inserted next to it."""
    return re.sub(r"[^ \t>]", " ", _PREFIX.match(line).group())


def _body(line: str) -> str:
    return _PREFIX.sub("", line).strip()


def _nonblank(text: list[str]) -> list[int]:
    return [i for i, line in enumerate(text) if line.strip()]


# --- chatter and the answer fence ---------------------------------------------------
# Only whole lines at the very start or end of the answer, matched in full and
# case-insensitively. Each pattern names what the model talks about (the text, the
# transcription, the image), so document content that merely starts with "Here"
# ("Here are the terms:") or ends politely stays.

_ACK = r"(?:(?:sure|certainly|of course|okay|ok|absolutely)[!.,]?\s+)?"
_HERE = r"(?:here(?:'s|\s+is|\s+are)|below\s+is|the\s+following\s+is)\s+(?:the|a|an|your)\s+"
_WHAT = (r"(?:(?:full|complete|extracted|transcribed|converted|requested|ocr)\s+)*(?:text|"
         r"transcription|markdown|contents?|conversion|output|ocr\s+(?:output|result|text))")
_FROM = (r"(?:\s+(?:of|from|in|on|for)\s+(?:the|this|your)\s+(?:provided\s+|given\s+|uploaded\s+)?"
         r"(?:document|image|page|scan|picture|photo|file|pdf))?")
_AS_MARKDOWN = r"(?:,?\s+(?:in|as|formatted\s+as|converted\s+to)\s+markdown(?:\s+format)?)?"
_IMAGE = r"(?:the|this)\s+(?:image|picture|photo|scan|screenshot)\s+"
_SHOWS = r"(?:shows|contains|depicts|displays|appears\s+to\s+(?:be|show|contain))\b"

_LEADING_CHATTER = [
    # "Here is the text:", "Sure! Here's the transcription of the document:",
    # "Here is the Markdown:", "Below is the extracted text from the image in Markdown format:"
    re.compile(_ACK + _HERE + _WHAT + _FROM + _AS_MARKDOWN + r"\s*[:.]", re.IGNORECASE),
    # "The image shows a scanned invoice from ACME Ltd:"  (a description, then a colon)
    re.compile(_IMAGE + _SHOWS + r"[^\n]{0,160}:", re.IGNORECASE),
    # A bare acknowledgement on a line of its own: "Sure!", "Certainly."
    re.compile(r"(?:sure|certainly|of course|absolutely)[!.]?", re.IGNORECASE),
]

_IF_YOU = r"(?:you\s+(?:need|want|would\s+like|'d\s+like)|you'd\s+like|there(?:'s|\s+is)|i\s+can)\b"
_MORE = (r"\b(?:anything\s+else|any(?:thing)?\s+(?:other|further|more|changes|adjustments|"
         r"modifications|corrections)|further\s+(?:help|assistance)|more\s+help|me\s+to)\b")

_TRAILING_CHATTER = [
    # "Let me know if you need anything else.", "Please let me know if you'd like any changes!"
    # (not "Please let me know if you have any questions.": a letter may end so)
    re.compile(r"(?:please\s+)?let\s+me\s+know\s+if\s+" + _IF_YOU + r"[^\n]{0,60}?" + _MORE
               + r"[^\n]{0,80}", re.IGNORECASE),
    # "I hope this helps!", "Hope that helps."
    re.compile(r"(?:i\s+)?hope\s+(?:this|that)\s+helps\b[^\n]{0,60}", re.IGNORECASE),
    # "Is there anything else I can help you with?"
    re.compile(r"is\s+there\s+anything\s+else\b[^\n]{0,80}\?", re.IGNORECASE),
    # "Feel free to ask if you have any questions about the transcription."
    re.compile(r"feel\s+free\s+to\s+(?:ask|let\s+me\s+know|reach\s+out)\b[^\n]{0,120}",
               re.IGNORECASE),
]

_WRAPPER = re.compile(r" {0,3}(`{3,}|~{3,})[ \t]*(?:markdown|md)[ \t]*", re.IGNORECASE)


def _strip_chatter(text: list[str], fixes: list[str]) -> list[str]:
    text = list(text)
    while True:
        lines = _nonblank(text)
        if len(lines) < 2:  # chatter alone is the whole answer: leave it to the judge
            return text
        first, last = lines[0], lines[-1]
        if any(p.fullmatch(text[first].strip()) for p in _LEADING_CHATTER):
            fixes.append(f"stripped_chatter:line {first + 1}")
            del text[first:lines[1]]  # the line and the blank lines under it
        elif any(p.fullmatch(text[last].strip()) for p in _TRAILING_CHATTER):
            fixes.append(f"stripped_chatter:line {last + 1}")
            del text[lines[-2] + 1:last + 1]  # the line and the blank lines above it
        else:
            return text


def _unwrap_fence(text: list[str], fixes: list[str]) -> list[str]:
    lines = _nonblank(text)
    if not lines or not (opening := _WRAPPER.fullmatch(text[lines[0]])):
        return text
    first, last = lines[0], lines[-1]
    fence = opening.group(1)
    closing = re.compile(rf" {{0,3}}{re.escape(fence[0])}{{{len(fence)},}}[ \t]*")
    inner = text[first + 1:last]
    # The last line closes the wrapper unless it closes a fence opened inside it.
    closed = last > first and closing.fullmatch(text[last])
    if closed and not _unclosed_fences(inner, _parse(inner)):
        fixes.append("unwrapped_markdown_fence")
        return text[:first] + inner + text[last + 1:]
    fixes.append("unwrapped_markdown_fence:unclosed")
    return text[:first] + text[first + 1:]


# --- code fences --------------------------------------------------------------------


def _unclosed_fences(text: list[str], tokens: list[Token]) -> list[Token]:
    found = []
    for token in tokens:
        if token.type != "fence":
            continue
        start, end = token.map
        closing = re.compile(rf"[\s>]*{re.escape(token.markup[0])}{{{len(token.markup)},}}\s*")
        if end - start < 2 or not closing.fullmatch(text[end - 1]):
            found.append(token)
    return found


def _close_fences(text: list[str], fixes: list[str]) -> list[str]:
    text = list(text)
    for token in reversed(_unclosed_fences(text, _parse(text))):
        start, end = token.map
        last = max([i for i in range(start, end) if text[i].strip()], default=start)
        opener = text[start]
        indent = _prefix(opener[:opener.index(token.markup)])
        text.insert(last + 1, indent + token.markup)
        fixes.append(f"closed_code_fence:line {start + 1}")
    return text


# --- tables -------------------------------------------------------------------------


def _tables(tokens: list[Token]) -> list[Token]:
    return [t for t in tokens if t.type == "table_open"]


def _split_table_from_text(text: list[str], fixes: list[str]) -> list[str]:
    """A line without a pipe right under a table is a table row to markdown-it."""
    text = list(text)
    for table in reversed(_tables(_parse(text))):
        start, end = table.map
        if len(table_cells(text[start])) < 2:
            continue  # in a one-column table a row needs no pipe: no telling text from row
        for i in range(start + 2, end):
            if not _PIPE.search(text[i]):
                text.insert(i, _prefix(text[i]).rstrip())
                fixes.append(f"split_table_from_text:line {i + 1}")
                break
    return text


def _join_table_rows(text: list[str], fixes: list[str]) -> list[str]:
    """Rows cut off a table by a blank line (no header, no delimiter) go back to it."""
    text = list(text)
    tokens = _parse(text)
    paragraphs = {t.map[0]: t.map[1] for t in tokens if t.type == "paragraph_open"}
    for table in reversed(_tables(tokens)):
        end = table.map[1]
        after = next((i for i in range(end, len(text)) if text[i].strip()), None)
        if after is None or after == end or after not in paragraphs:
            continue
        rows = text[after:paragraphs[after]]
        if all(_body(row).startswith("|") and not _is_delimiter(row) for row in rows):
            del text[end:after]
            fixes.append(f"joined_table_rows:line {after + 1}")
    return text


def _is_delimiter(line: str) -> bool:
    body = _body(line)
    return "|" in body and "-" in body and bool(_DELIMITER_LIKE.match(body))


def _delimiter_row(line: str, columns: int) -> str:
    """`line` as a delimiter row of `columns` cells, keeping the alignments it has."""
    cells = [c.strip() if _DELIMITER_CELL.fullmatch(c) else "---" for c in table_cells(line)]
    cells = (cells + ["---"] * columns)[:columns]
    return _prefix(line) + "|" + "|".join(cells) + "|"


def _add_delimiter_rows(text: list[str], fixes: list[str]) -> list[str]:
    """Two or more pipe rows in a paragraph, none a delimiter row: the first is the header."""
    text = list(text)
    for paragraph in reversed([t for t in _parse(text) if t.type == "paragraph_open"]):
        start, end = paragraph.map
        rows = [i for i in range(start, end) if _body(text[i]).startswith("|")]
        runs: list[list[int]] = []
        for i in rows:
            if runs and runs[-1][-1] == i - 1:
                runs[-1].append(i)
            else:
                runs.append([i])
        for run in reversed(runs):
            header = text[run[0]]
            if len(run) < 2 or any(_is_delimiter(text[i]) for i in run) or len(table_cells(header)) < 2:
                continue
            text.insert(run[0] + 1, _delimiter_row(header, len(table_cells(header))))
            fixes.append(f"added_delimiter_row:line {run[0] + 2}")
    return text


def _fix_delimiter_rows(text: list[str], fixes: list[str]) -> list[str]:
    """A header and a delimiter row that markdown-it refused: count or form disagree."""
    text = list(text)
    tokens = _parse(text)
    skip = _covered(tokens, {"fence", "code_block", "html_block", "table_open"})
    for i in range(len(text) - 1):
        if i in skip or i + 1 in skip or "|" not in text[i] or not _is_delimiter(text[i + 1]):
            continue
        fixed = _delimiter_row(text[i + 1], len(table_cells(text[i])))
        if fixed != text[i + 1]:
            text[i + 1] = fixed
            fixes.append(f"fixed_delimiter_row:line {i + 2}")
    return text


def _closed(line: str) -> bool:
    body = _body(line)
    return body.endswith("|") and not body.endswith("\\|")


def _row(line: str, cells: list[str]) -> str:
    return _prefix(line) + "| " + " | ".join(cell.strip() for cell in cells) + " |"


def _equalise_tables(text: list[str], fixes: list[str]) -> list[str]:
    text = list(text)
    for table in reversed(_tables(_parse(text))):
        start, end = table.map
        header = len(table_cells(text[start]))
        rows = {}
        for i in range(start + 2, end):
            cells = table_cells(text[i])
            while len(cells) > header and not cells[-1].strip():
                cells.pop()  # extra empty cells carry no text
            rows[i] = cells
        columns = max([header, *(len(cells) for cells in rows.values())])
        if columns > header:
            text[start] = _row(text[start], table_cells(text[start]) + [""] * (columns - header))
            text[start + 1] = _delimiter_row(text[start + 1], columns)
            fixes.append(f"widened_table:line {start + 1} ({columns} columns)")
        pipe_style = _closed(text[start])
        for i, cells in rows.items():
            count = len(table_cells(text[i]))
            if len(cells) < count:
                fixes.append(f"trimmed_table_row:line {i + 1}")
            elif len(cells) < columns:
                fixes.append(f"padded_table_row:line {i + 1}")
            elif pipe_style and _body(text[i]).startswith("|") and not _closed(text[i]):
                text[i] = text[i].rstrip() + " |"
                fixes.append(f"closed_table_row:line {i + 1}")
                continue
            else:
                continue
            text[i] = _row(text[i], cells + [""] * (columns - len(cells)))
    return text


# --- math ---------------------------------------------------------------------------

_DISPLAY = re.compile(r"(?<!\\)\$\$")
_INLINE = re.compile(r"(?<![\\$])\$(?!\$)")
_CURRENCY = re.compile(r" ?\d")  # what follows a "$" that is money: "$12.50", "$ 3"
_CODE_SPAN = re.compile(r"(`+).+?\1")
_LATEX = re.compile(r"\\[A-Za-z]+|[\^_{]")
_TRAILING_PUNCT = re.compile(r"[\s.,;:!?]*$")
# A word that ends an open formula: prose, not a variable ("dx") or a LaTeX command.
_PROSE = re.compile(r"(?:[A-Za-z]{3,}|is|in|of|to|at|as|by|on|or|an|be|we|it|if)[.,;:!?]*",
                    re.IGNORECASE)


def _formula_end(rest: str) -> int:
    """Where a formula opened just before `rest` ends: before the first prose word, or
    at the end of the line; trailing punctuation and spaces stay outside."""
    end = len(rest)
    for word in re.finditer(r"\S+", rest):
        if _PROSE.fullmatch(word.group()):
            end = word.start()
            break
    return _TRAILING_PUNCT.search(rest[:end]).start()


def _paragraphs(text: list[str], skip: set[int]) -> list[list[int]]:
    """Runs of non-blank lines outside code: the units math must balance in."""
    groups: list[list[int]] = [[]]
    for i, line in enumerate(text):
        if i in skip or not line.strip():
            groups.append([])
        else:
            groups[-1].append(i)
    return [group for group in groups if group]


def _balance_display_math(text: list[str], fixes: list[str]) -> list[str]:
    text = list(text)
    code = _covered(_parse(text), {"fence", "code_block"})
    groups = _paragraphs(text, code)
    counts = [sum(len(_DISPLAY.findall(text[i])) for i in group) for group in groups]
    if sum(counts) % 2 == 0:
        return text  # format_problems counts the whole page; so does the repair
    for group, count in reversed(list(zip(groups, counts))):
        if count % 2 == 0:
            continue
        # Paired in order, the last delimiter is the one left open.
        line = max(i for i in group if _DISPLAY.search(text[i]))
        last = list(_DISPLAY.finditer(text[line]))[-1]
        after = text[line][last.end():] + "".join(text[i] for i in group if i > line)
        before = text[line][:last.start()] + "".join(text[i] for i in group if i < line)
        if after.strip() or count > 1:
            text.insert(group[-1] + 1, _prefix(text[group[-1]]) + "$$")
            fixes.append(f"balanced_display_math:line {line + 1}")
        elif before.strip():  # math, then a closing $$ whose opener is missing
            text.insert(group[0], _prefix(text[group[0]]) + "$$")
            fixes.append(f"balanced_display_math:line {line + 1}")
        else:  # a lone $$ with nothing to enclose
            del text[line]
            fixes.append(f"dropped_stray_display_math:line {line + 1}")
    return text


def _balance_inline_math(text: list[str], fixes: list[str]) -> list[str]:
    """Close the last inline `$` of a paragraph left open, when what follows it on its
    line is clearly LaTeX (a command, ^, _ or {): before the first prose word, or at
    the end of the line. Money never counts: a "$" followed by a digit is currency."""
    text = list(text)
    tokens = _parse(text)
    skip = _covered(tokens, {"fence", "code_block", "html_block"})
    for group in _paragraphs(text, skip):
        dollars = []  # (line, column) of every "$" that may be math
        for i in group:
            if _body(text[i]).startswith("|"):
                continue  # table rows: a cell's math is not worth the risk
            masked = _CODE_SPAN.sub(lambda m: " " * len(m.group()), text[i])
            dollars += [(i, m.start()) for m in _INLINE.finditer(masked)
                        if not _CURRENCY.match(masked, m.end())]
        if len(dollars) % 2 == 0:
            continue
        i, column = dollars[-1]
        rest = text[i][column + 1:]
        if rest[:1].isspace() or "$" in rest or any("$" in text[j] for j in group if j > i):
            continue
        formula = rest[:_formula_end(rest)]
        if not _LATEX.search(formula):
            continue
        end = column + 1 + len(formula)
        text[i] = text[i][:end] + "$" + text[i][end:]
        fixes.append(f"balanced_inline_math:line {i + 1}")
    return text


_STEPS: list[Callable[[list[str], list[str]], list[str]]] = [
    _strip_chatter,
    _unwrap_fence,
    _close_fences,
    _split_table_from_text,
    _join_table_rows,
    _add_delimiter_rows,
    _fix_delimiter_rows,
    _equalise_tables,
    _balance_display_math,
    _balance_inline_math,
]
