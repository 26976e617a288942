from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest

from appliance.page import Line
from appliance.quality.blocks import format_problems, parse_blocks
from appliance.quality.repair import (
    LEVEL1_HEALTHY_RATE,
    LEVEL2_HEALTHY_RATE,
    Repaired,
    repair,
    repair_rates,
)

CORPUS = Path(__file__).parents[1] / "fixtures" / "broken_markdown"
CASES = {name: case for name, case in json.loads((CORPUS / "cases.json").read_text()).items()
         if not name.startswith("_")}


def _words(text: str) -> Counter:
    return Counter(re.findall(r"\w+", text))


def _source(name: str) -> str:
    return (CORPUS / f"{name}.md").read_text()


def test_corpus_is_complete():
    sources = {p.stem for p in CORPUS.glob("*.md") if not p.name.endswith(".expected.md")}
    assert sources == set(CASES)
    assert len([c for c in CASES.values() if c["level"] > 0]) >= 15
    for name, case in CASES.items():
        assert (CORPUS / f"{name}.expected.md").exists() == (case["level"] > 0), name


@pytest.mark.parametrize("name", sorted(CASES))
def test_corpus_case(name):
    case, source = CASES[name], _source(name)
    result = repair(source)
    expected = (CORPUS / f"{name}.expected.md").read_text() if case["level"] else source
    assert (result.level, result.fixes) == (case["level"], case["fixes"])
    assert result.markdown == expected
    if result.level <= 1:
        assert result.problems == []
        assert format_problems(result.markdown) == []
        # no word of the document is lost: only chatter and the fence's info word go
        kept = _words(source) - sum((_words(text) for text in case["dropped"]), Counter())
        assert not kept - _words(result.markdown)
        # idempotent
        assert repair(result.markdown) == Repaired(result.markdown, 0)
    else:  # says why it degraded, in format_problems' words
        left = {re.sub(r"^line \d+: ", "", problem) for problem in format_problems(source)}
        assert result.problems
        assert {re.sub(r"^line \d+: ", "", problem) for problem in result.problems} <= left


@pytest.mark.parametrize("name", sorted(CASES))
def test_token_cap_anywhere(name):
    """The answer cut off at (every ninth) character: level 1 stays lossless and idempotent."""
    source, dropped = _source(name), CASES[name]["dropped"]
    allowed = sum((_words(text) for text in dropped), Counter())
    for cut in range(0, len(source) + 1, 9):
        result = repair(source[:cut])
        if result.level <= 1:
            assert repair(result.markdown).level == 0, cut
            assert not _words(source[:cut]) - _words(result.markdown) - allowed, cut


def test_level1_keeps_every_table_cell():
    source = _source("ragged_table")
    # markdown-it drops extra cells silently, so read the original cells from the source
    before = [cell.strip() for line in source.splitlines() if line.startswith("|")
              for cell in line.strip("|").split("|") if cell.strip() and "---" not in cell]
    rows = next(b.rows for b in parse_blocks(repair(source).markdown) if b.kind == "table")
    assert sorted(before) == sorted(cell for row in rows for cell in row if cell)
    assert rows[0] == ["Region", "Q1", "Q2", "Q3", "Q4", ""]  # widened with an empty header cell
    assert rows[3] == ["East", "1,511", "1,480", "1,602", "1,733", "revised"]


def test_level2_degrades_to_plain_text():
    result = repair(_source("html_table"))
    assert result.level == 2
    assert result.problems == ["line 3: HTML table instead of a Markdown table"]
    assert result.markdown == "Shipping manifest\n\nContainer | Seal\nMSKU 204117-3 | A99812"
    assert "<" not in result.markdown and result.lines == []


def test_level2_with_positions_is_one_line_per_recognised_line():
    lines = [Line("Shipping  manifest", [40, 30, 400, 60], 0.98),
             Line("   ", [0, 0, 1, 1], 0.1),  # nothing recognised: no text line
             Line("Container Seal", [40, 90, 380, 110], 0.91),
             Line("MSKU 204117-3\nA99812", [40, 120, 380, 140], 0.87)]
    result = repair(_source("html_table"), lines)
    assert result.level == 2
    assert result.markdown.split("\n") == [
        "Shipping manifest", "Container Seal", "MSKU 204117-3 A99812"]
    assert result.lines == [lines[0], lines[2], lines[3]]  # text line i sits at lines[i].box


def test_lines_are_ignored_when_the_markdown_is_fine():
    lines = [Line("Total", [0, 0, 10, 10], 0.9)]
    assert repair("# Total\n", lines) == Repaired("# Total\n", 0)
    fixed = repair("Here is the text:\n\n# Total\n", lines)
    assert (fixed.markdown, fixed.level, fixed.lines) == ("# Total\n", 1, [])


# --- valid Markdown comes back unchanged ----------------------------------------------


@pytest.mark.parametrize("source", [
    "",
    "# Heading\n\nSome *text* and a list:\n\n- one\n- two\n",
    "| a | b |\n|---|---|\n| 1 | 2 |\n",
    "| a |\n|---|\n| 1 |\nnot a row to split\n",  # one column: a row needs no pipe
    "```python\nprint('$$')\n```\n",
    "$$\nx^2\n$$\n",
    "The item costs $12.50, the box $3 and shipping US$ 4.",
    "Inline $x_1$ and $\\alpha$ math, and $5 cash.\n",
    "Windows line endings\r\n\r\n| a | b |\r\n|---|---|\r\n| 1 | 2 |\r\n",
    "Example:\n\n```markdown\n# Title\n```\n",  # a markdown fence that is not the whole answer
    "Here is the text of clause 5: the seller warrants title.\n",
    "> Note\n>\n> | a | b |\n> |---|---|\n> | 1 | 2 |\n",
    "1. Sure.\n2. Certainly.\n",
])
def test_valid_markdown_is_unchanged(source):
    assert format_problems(source) == []
    assert repair(source) == Repaired(source, 0)


# --- level 1, fix by fix ----------------------------------------------------------------


def test_unwrap_tilde_and_longer_fences():
    assert repair("~~~md\n# T\n~~~\n").markdown == "# T\n"
    nested = "````markdown\n# T\n\n```\ncode\n```\n````\n"
    assert repair(nested).markdown == "# T\n\n```\ncode\n```\n"


def test_unwrap_keeps_a_closing_fence_that_closes_an_inner_block():
    result = repair("```markdown\n# T\n\n```sh\nls\n```")
    assert result.markdown == "# T\n\n```sh\nls\n```"
    assert result.fixes == ["unwrapped_markdown_fence:unclosed"]


@pytest.mark.parametrize("chatter", [
    "Here is the text:",
    "Here's the text:",
    "Sure! Here's the transcription of the document:",
    "Certainly. Here is the Markdown:",
    "Here is the Markdown:",
    "Here is the OCR output of the scan:",
    "Below is the full text of the page, formatted as Markdown:",
    "The image shows a handwritten note:",
    "This scan appears to be an invoice from ACME, transcribed below:",
    "Sure!",
])
def test_leading_chatter_is_stripped(chatter):
    result = repair(f"{chatter}\n\n# Invoice 7\n\nTotal 12.00\n")
    assert result.markdown == "# Invoice 7\n\nTotal 12.00\n"
    assert result.fixes == ["stripped_chatter:line 1"]


@pytest.mark.parametrize("chatter", [
    "Let me know if you need anything else.",
    "Please let me know if you'd like any changes to the formatting!",
    "Let me know if there is anything else I can do.",
    "I hope this helps!",
    "Hope that helps.",
    "Is there anything else I can help you with?",
    "Feel free to ask if you need further assistance.",
])
def test_trailing_chatter_is_stripped(chatter):
    result = repair(f"# Invoice 7\n\nTotal 12.00\n\n{chatter}\n")
    assert result.markdown == "# Invoice 7\n\nTotal 12.00\n"
    assert result.fixes == ["stripped_chatter:line 5"]


@pytest.mark.parametrize("content", [
    "Here are the terms:",  # starts with Here, is content
    "Here is the summary of our findings:",
    "Here is the text of the agreement between the parties:",
    "The image shows the company logo",  # no colon: a caption, not an announcement
    "Please let me know if you have any questions.",  # a letter's closing line
    "We hope this agreement serves both parties well.",
])
def test_content_that_looks_chatty_is_kept(content):
    for source in (f"{content}\n\nBody text.\n", f"Body text.\n\n{content}\n"):
        assert repair(source).level == 0


def test_chatter_alone_is_not_stripped():
    assert repair("Here is the text:\n").markdown == "Here is the text:\n"


def test_close_code_fence_keeps_markup_and_indentation():
    assert repair("Text\n\n~~~~\ncode\n\n").markdown == "Text\n\n~~~~\ncode\n~~~~\n\n"
    result = repair("- step one\n\n  ```sh\n  make\n")
    assert result.markdown == "- step one\n\n  ```sh\n  make\n  ```\n"
    assert format_problems(result.markdown) == []
    quoted = repair("> ```\n> code\n")
    assert quoted.markdown == "> ```\n> code\n> ```\n"


def test_short_row_padded_and_closed():
    result = repair("| a | b | c |\n|---|---|---|\n| 1")
    assert result.markdown == "| a | b | c |\n|---|---|---|\n| 1 |  |  |"
    assert result.fixes == ["padded_table_row:line 3"]


def test_extra_empty_cells_are_trimmed_not_widened():
    result = repair("| a | b |\n|---|---|\n| 1 | 2 | | |\n")
    assert result.markdown == "| a | b |\n|---|---|\n| 1 | 2 |\n"
    assert result.fixes == ["trimmed_table_row:line 3"]


def test_extra_cells_widen_the_table_and_keep_alignment():
    result = repair("| a | b |\n|:--|--:|\n| 1 | 2 | 3 |\n| 4 | 5 |\n")
    assert result.markdown == "| a | b |  |\n|:--|--:|---|\n| 1 | 2 | 3 |\n| 4 | 5 |  |\n"


def test_delimiter_row_fixes_keep_alignment():
    assert repair("| a | b | c |\n|:-:|--:|\n| 1 | 2 | 3 |\n").markdown == \
        "| a | b | c |\n|:-:|--:|---|\n| 1 | 2 | 3 |\n"
    assert repair("| a | b |\n|--- ---|---|\n| 1 | 2 |\n").markdown == \
        "| a | b |\n|---|---|\n| 1 | 2 |\n"


def test_missing_delimiter_row_needs_two_pipe_rows():
    assert repair("| just one pipe row |\n").level == 0
    assert repair("| a | b |\n| 1 | 2 |\n").markdown == "| a | b |\n|---|---|\n| 1 | 2 |\n"


def test_table_in_blockquote_is_mended_inside_the_quote():
    result = repair("> | a | b |\n> |---|---|\n> | 1 |\n")
    assert result.markdown == "> | a | b |\n> |---|---|\n> | 1 |  |\n"
    assert format_problems(result.markdown) == []


def test_stray_display_math_delimiter_is_dropped():
    result = repair("Text\n\n$$\n\nMore text\n")
    assert result.markdown == "Text\n\n\nMore text\n"
    assert result.fixes == ["dropped_stray_display_math:line 3"]


def test_display_math_on_one_line_is_closed():
    result = repair("Energy: $$E = mc^2\n")
    assert result.markdown == "Energy: $$E = mc^2\n$$\n"
    assert format_problems(result.markdown) == []


@pytest.mark.parametrize("source, expected", [
    ("so $\\int_0^1 f(x) dx.", "so $\\int_0^1 f(x) dx$."),
    ("Let $x_1 be the first root.", "Let $x_1$ be the first root."),
    ("where $a^2 + b^2", "where $a^2 + b^2$"),
    ("Pay $5 now and $x^2 later", "Pay $5 now and $x^2$ later"),
])
def test_inline_math_is_closed(source, expected):
    assert repair(source).markdown == expected


@pytest.mark.parametrize("source", [
    "Costs $12.50 per unit",  # money
    "Costs $ 12 per unit",
    "A $x variable without LaTeX",  # unbalanced, but not clearly math
    "Costs `$x^2` in code",
    "| $x^2 | 1 |\n|---|---|\n| a | b |\n",  # table cells are left alone
])
def test_inline_dollars_that_are_not_clearly_math_are_left(source):
    assert repair(source).level == 0


def test_line_numbers_follow_the_text_as_fixed():
    result = repair("Here is the text:\n\n| a | b |\n|---|---|\n| 1 |\n")
    assert result.fixes == ["stripped_chatter:line 1", "padded_table_row:line 3"]


# --- rates ------------------------------------------------------------------------------


def test_repair_rates():
    assert (LEVEL1_HEALTHY_RATE, LEVEL2_HEALTHY_RATE) == (0.03, 0.005)
    healthy = repair_rates([0] * 998 + [1] * 2)
    assert healthy == {"pages": 1000, "level1": 2, "level2": 0, "level1_rate": 0.002,
                       "level2_rate": 0.0, "healthy": True}
    too_many_degraded = repair_rates([0] * 199 + [2])  # 0.5 % is not under 0.5 %
    assert (too_many_degraded["level2_rate"], too_many_degraded["healthy"]) == (0.005, False)
    too_many_fixed = repair_rates([0] * 97 + [1] * 3)
    assert (too_many_fixed["level1_rate"], too_many_fixed["healthy"]) == (0.03, False)
    assert repair_rates([])["healthy"] is True
    with pytest.raises(ValueError):
        repair_rates([0, 3])


def test_rates_over_the_corpus_are_unhealthy_as_they_should_be():
    levels = [repair(_source(name)).level for name in CASES]
    rates = repair_rates(levels)
    assert rates["pages"] == len(CASES) and not rates["healthy"]
