"""Chinese, Japanese and Korean text for the search index.

Such text is written without spaces between its words, and FTS5's unicode61 tokenizer
keeps a whole run of it as one token, so a search found it only by the whole run.
Beside the word index (``pagetext``, Porter stems for Latin text), ``pagegrams`` holds
each run of CJK characters as its overlapping pairs and then its last character alone:
"植株高度" is "植株 株高 高度 度". A query's run is the phrase of its pairs, which
finds exactly the pages where those characters stand together, and a single
character is a prefix that finds any pair it starts or a run it ends. The lone last
character also keeps one run's pairs from making a phrase with the next run's.
"""

from __future__ import annotations

import re

# Han (with its extensions and compatibility forms), kana and Hangul
CJK_RUN = re.compile("[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
                     "\U00020000-\U0003134f]+")


def run_grams(run: str) -> list[str]:
    return [run[i:i + 2] for i in range(len(run) - 1)]


def cjk_grams(text: str | None) -> str:
    """What ``pagegrams`` holds for ``text``: "" when it has no CJK character."""
    return " ".join(" ".join([*run_grams(run), run[-1]])
                    for run in CJK_RUN.findall(text or ""))


def cjk_runs(words: str) -> list[str]:
    return CJK_RUN.findall(words)


def grams_query(words: str) -> str | None:
    """The CJK runs of a search as an FTS5 query of ``pagegrams`` (every run must be on
    the page); None when it has none."""
    phrases = [f'"{" ".join(run_grams(run))}"' if len(run) > 1 else f'"{run}" *'
               for run in cjk_runs(words)]
    return " ".join(phrases) or None
