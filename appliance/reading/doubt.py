"""Doubt about a page's reading order: where the blocks, as ordered, still read
running text across a gutter.

Two columns the column rules did not separate are read row by row: each row then
holds a line of the left column beside a line of the right one, and the Markdown
makes a two-column "table" of line pairs. A table's rows, a form's labels and values
and a receipt's items beside their prices hold at most one line of running text a
row. So ``DOUBT_ROWS`` rows in a row, each with two lines of running text or more
side by side, are a page whose order is in doubt: its confidence says so, and it is
routed to review (``layout_doubt``), whatever its characters' scores.
"""

from __future__ import annotations

from appliance.page import Block
from appliance.reading.lines import PROSE_WORDS, word_count

# Rows one after the other with two lines of running text side by side. Of 149 FUNSD
# forms, 20 synthetic invoices, 32 synthetic Chinese pages and 28 real report,
# magazine, table and form pages, none has more than two such rows in a row (4 FUNSD
# forms have two); two columns read across have one in each row they share.
DOUBT_ROWS = 4
# the reading's flag, the key of its reason in the provenance, and the review code
LAYOUT_DOUBT = "layout_doubt"


def layout_doubt(blocks: list[Block]) -> str | None:
    """Why the order of ``blocks`` is in doubt, for people; None when it is not."""
    for number, block in enumerate(blocks, 1):
        run = 0
        for row in block.rows:
            run = run + 1 if sum(word_count(line.text) >= PROSE_WORDS for line in row) >= 2 else 0
            if run >= DOUBT_ROWS:
                return (f"block {number} reads running text across a gutter in "
                        f"{DOUBT_ROWS} rows or more: columns may be interleaved")
    return None
