"""Chinese, Japanese and Korean text for the search index.

Such text is written without spaces between its words, and FTS5's unicode61 tokenizer
keeps a whole run of it as one token, so a search found it only by the whole run.
Beside the word index (``pagetext``, Porter stems for Latin text), ``pagegrams`` holds
each run of CJK characters as its overlapping pairs and then its last character alone:
"植株高度" is "植株 株高 高度 度". A query's run is the phrase of its pairs, which
finds exactly the pages where those characters stand together, and a single
character is a prefix that finds any pair it starts or a run it ends. The lone last
character also keeps one run's pairs from making a phrase with the next run's.

A page's text keeps its printed lines, and a paragraph of such text wraps wherever its
line is full, inside a word ("第一次独" over "处"): a run is read whole across a line
break (``unwrapped``), so the search finds the word the break cut.
"""

from __future__ import annotations

import re

# Han (with its extensions and compatibility forms), kana and Hangul
_CJK = ("[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
        "\U00020000-\U0003134f]")
CJK_RUN = re.compile(f"{_CJK}+")
# one line break between two such characters (a blank line is a paragraph's end)
_WRAP = re.compile(f"(?<={_CJK})[^\\S\\n]*\\n[^\\S\\n]*(?={_CJK})")


def unwrapped(text: str) -> str:
    """``text`` with each CJK run whole across the line breaks it wraps over."""
    return _WRAP.sub("", text)


def run_grams(run: str) -> list[str]:
    return [run[i:i + 2] for i in range(len(run) - 1)]


def cjk_grams(text: str | None) -> str:
    """What ``pagegrams`` holds for ``text``: "" when it has no CJK character."""
    return " ".join(" ".join([*run_grams(run), run[-1]])
                    for run in CJK_RUN.findall(unwrapped(text or "")))


def cjk_runs(words: str) -> list[str]:
    return CJK_RUN.findall(words)


def grams_query(words: str) -> str | None:
    """The CJK runs of a search as an FTS5 query of ``pagegrams`` (every run must be on
    the page); None when it has none."""
    phrases = [f'"{" ".join(run_grams(run))}"' if len(run) > 1 else f'"{run}" *'
               for run in cjk_runs(words)]
    return " ".join(phrases) or None
