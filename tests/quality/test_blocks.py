from __future__ import annotations

from appliance.quality.blocks import MarkdownBlock, format_problems, parse_blocks
from appliance.quality.markdown import markdown_to_text

CLEAN = """# Invoice *No.* 42

Billed to **ACME** Sdn Bhd.

- item one
  - nested detail
- item two

| Item | Qty |
|------|----:|
| Pen  | 2   |
| Ink  | 1   |

```python
total = 3
```
"""


def test_clean_document_blocks_and_no_problems():
    blocks = parse_blocks(CLEAN)
    assert [(b.kind, b.line) for b in blocks] == [
        ("heading", 0), ("paragraph", 2), ("list", 4), ("table", 8), ("code", 13)]
    heading, paragraph, bullets, table, code = blocks
    assert (heading.text, heading.level) == ("Invoice No. 42", 1)
    assert paragraph.text == "Billed to ACME Sdn Bhd."
    assert bullets.text == "item one\nnested detail\nitem two"
    assert table.rows == [["Item", "Qty"], ["Pen", "2"], ["Ink", "1"]]
    assert table.text == "Item | Qty\nPen | 2\nInk | 1"
    assert code.text == "total = 3"
    assert format_problems(CLEAN) == []


def test_to_dict_drops_empty_fields():
    assert MarkdownBlock("paragraph", "hi", line=3).to_dict() == {"kind": "paragraph", "text": "hi",
                                                                  "line": 3}
    assert parse_blocks("## Two")[0].to_dict() == {"kind": "heading", "text": "Two", "level": 2, "line": 0}


def test_other_block_kinds():
    source = "> quoted *words*\n\n    indented code\n\n---\n\n$$\nx_1^2 + \\alpha\n$$\n"
    blocks = parse_blocks(source)
    assert [b.kind for b in blocks] == ["quote", "code", "rule", "math"]
    assert blocks[0].text == "quoted words"
    assert blocks[1].text == "indented code"
    assert blocks[3].text == "x_1^2 + \\alpha"  # LaTeX kept raw


def test_html_table_is_html_block_and_a_problem():
    source = "Intro\n\n<table><tr><td>1</td><td>&amp;2</td></tr><tr><td>3</td></tr></table>\n"
    html = parse_blocks(source)[1]
    assert (html.kind, html.rows, html.text) == ("html", None, "1 | &2\n3")
    assert format_problems(source) == ["line 3: HTML table instead of a Markdown table"]


def test_an_html_table_whose_cells_span_is_a_table_and_no_problem():
    # the one HTML the format allows: a pipe table cannot hold a cell over two columns
    source = ('Intro\n\n<table>\n<tr><th></th><th colspan="2">Finland</th></tr>\n'
              '<tr><td>1995</td><td>15.1</td><td>&amp;7</td></tr>\n</table>\n')
    table = parse_blocks(source)[1]
    assert (table.kind, table.rows) == ("table", [["", "Finland"], ["1995", "15.1", "&7"]])
    assert table.spans == [[[1, 1], [1, 2]], [[1, 1], [1, 1], [1, 1]]]
    assert format_problems(source) == []
    assert markdown_to_text(source) == "Intro\n\n\tFinland\n1995\t15.1\t&7"


def test_ragged_table_rows_are_reported_from_source():
    source = "| A | B | C |\n|---|---|---|\n| 1 | 2 | 3 |\n| 1 | 2 | 3 | 4 |\n| 1 |\n"
    # markdown-it pads and truncates, so the parsed rows look regular
    assert parse_blocks(source)[0].rows[2:] == [["1", "2", "3"], ["1", "", ""]]
    assert format_problems(source) == [
        "line 4: table row has 4 cells, header has 3",
        "line 5: table row has 1 cell, header has 3",
    ]


def test_escaped_pipe_is_not_a_cell_border():
    assert format_problems("| a | b |\n|---|---|\n| x \\| y | z |\n") == []


def test_table_like_lines_that_are_not_a_table():
    source = "| A | B |\n|---|---|---|\n| 1 | 2 |\n"
    assert parse_blocks(source)[0].kind == "paragraph"
    assert format_problems(source) == [
        "line 1: looks like a table but is not one (header has 2 cells, delimiter row has 3)"]


def test_unclosed_code_fence():
    source = "Text\n\n~~~~\ncode\n~~~\n"  # a shorter fence does not close a longer one
    assert format_problems(source) == ["line 3: code fence ~~~~ is never closed"]
    assert format_problems("```\ncode\n```\n") == []


def test_unbalanced_display_math():
    source = "$$\na = b\n$$\n\nThen $$ c\n\n```\n$$ in code does not count\n```\n"
    assert format_problems(source) == ["line 5: unbalanced display math (3 $$ delimiters)"]


def test_answer_wrapped_in_markdown_fence():
    source = "\n```markdown\n# Title\n\n| a | b |\n```\n"
    assert format_problems(source) == ["line 2: the whole answer is wrapped in a ```markdown fence"]
    assert format_problems("Example:\n\n```markdown\n# Title\n```\n") == []


def test_problems_inside_code_are_ignored():
    source = "```\n<table>\n| a | b |\n|---|---|---|\n```\n"
    assert format_problems(source) == []
