"""The languages of a result's content, as the service gives them (``features=languages``).

The service detects the primary language of each text line and lists, in the result's
``languages``, a locale (ISO 639-1, or BCP 47 where the script matters:
``zh-Hans``, ``zh-Hant``), a confidence and the spans of the content in it. Here each
line of a page's text is one such line: its language is lingua's (an n-gram model of
each language, in its wheel; nothing is downloaded), among the locales configured in
``[di] languages`` only, so that lingua loads the models of those alone, and only once a
request asks for languages. A script that one configured language alone writes
(Chinese, Japanese, Korean, Cyrillic, ... in the default) is told by its characters and
needs no model; the default lists one language a script, so none is loaded. Two or more
languages of one script need the models of each, 30 to 40 MB a language (English,
German, French and Spanish: 148 MB).

- A line too short to tell among the languages of its script (``Total``, ``Qty``
  among English, French and German) takes the language of the document's other such
  lines, read together, unless its own evidence is clearly stronger (``OWN_EVIDENCE``).
- A Chinese line is Simplified or Traditional by the characters that only one of the
  two forms writes (CC-CEDICT's, from zhon: 发 and 發, 这 and 這); a line of characters
  both forms share (人民, 工作) takes the form of the last line before it that tells,
  else of the first after it, else Simplified.
- A line without letters (an amount, a date) has no language of its own and breaks no
  run: consecutive lines of one language are one span, from the first one's start to
  the last one's end, within a page. Each locale is one entry, its spans in content
  order, its confidence lingua's for its text read together (for Chinese, times the
  share of its telling characters in that form, each side counted one more, so that
  text of shared characters alone is 0.5).
"""

from __future__ import annotations

import functools
import html
import itertools
import re
from dataclasses import dataclass

import regex

from appliance.locales import SIMPLIFIED, TRADITIONAL, base
from appliance.page import without_marks

LANGUAGES = "languages"  # the add-on feature, and the result's list
CHINESE = "zh"  # a line's language before its form is told
# a short line keeps its own language over the document's only where lingua finds it
# this many times likelier (among the default and six Latin languages of Europe,
# "Rechnung Nr. 12345" in an English document: 0.99 German against 0.001 English;
# "Total": 0.22 Spanish against 0.13 English)
OWN_EVIDENCE = 2.0

_LETTER = regex.compile(r"\p{L}")
_HTML_TAG = re.compile(r"</?[A-Za-z][^<>]*>")  # a Markdown table's cells in HTML
_LINE = re.compile(r"[^\n]+")


@dataclass
class _Line:
    start: int  # in the content, code points
    end: int
    text: str  # what is read of it: no selection mark's token, no tag
    scores: dict[str, float]  # locale (zh: either form) -> lingua's confidence
    locale: str = ""


def languages(content: str, pages: list[tuple[int, int]],
              locales: tuple[str, ...]) -> list[dict]:
    """The ``languages`` of a result whose ``content`` holds each page's text at
    ``pages`` (offset, length), told apart among ``locales``; spans in code points."""
    detector = _detector(locales)
    by_page = [[line for match in _LINE.finditer(content, start, start + length)
                if (line := _line(match, detector))] for start, length in pages]
    lines = [line for page in by_page for line in page]
    _decide(lines, detector)
    runs: dict[str, list[list[_Line]]] = {}
    for page in by_page:
        for line, previous in zip(page, [None, *page]):
            if previous is not None and previous.locale == line.locale:
                runs[line.locale][-1].append(line)
            else:
                runs.setdefault(line.locale, []).append([line])
    return [{"locale": locale,
             "confidence": round(_confidence(locale, [line for run in found for line in run],
                                             detector), 4),
             "spans": [{"offset": run[0].start, "length": run[-1].end - run[0].start}
                       for run in found]}
            for locale, found in runs.items()]


def _line(match: re.Match, detector) -> _Line | None:
    text = without_marks(html.unescape(_HTML_TAG.sub(" ", match.group())))
    if not _LETTER.search(text):
        return None
    scores = {_locale(value.language): value.value
              for value in detector.compute_language_confidence_values(text)}
    if not any(scores.values()):  # letters of no configured language's script
        return None
    start = match.start() + len(match.group()) - len(match.group().lstrip())
    end = match.end() - (len(match.group()) - len(match.group().rstrip()))
    return _Line(start, end, text, scores)


def _decide(lines: list[_Line], detector) -> None:
    """Each line's locale: its likeliest, the document's where its own evidence is weak,
    Chinese in the form its characters (or its neighbours') write."""
    unsure = [line for line in lines if max(line.scores.values()) < 1.0]
    usual = None
    if unsure:
        together = detector.compute_language_confidence_values(
            "\n".join(line.text for line in unsure))
        usual = _locale(together[0].language)
    for line in lines:
        own = max(line.scores, key=line.scores.get)
        if usual and line.scores[own] < OWN_EVIDENCE * line.scores.get(usual, 0.0):
            own = usual
        line.locale = own
    chinese = [line for line in lines if line.locale == CHINESE]
    told = [_form(line.text) for line in chinese]
    after = list(itertools.accumulate(reversed(told), lambda later, form: form or later))[::-1]
    before = list(itertools.accumulate(told, lambda earlier, form: form or earlier))
    for line, earlier, later in zip(chinese, before, after):
        line.locale = earlier or later or SIMPLIFIED


def _form(text: str) -> str | None:
    """Simplified or Traditional, by the characters only one form writes; None: a tie."""
    simplified, traditional = _telling(text)
    if simplified == traditional:
        return None
    return SIMPLIFIED if simplified > traditional else TRADITIONAL


def _telling(text: str) -> tuple[int, int]:
    """How many characters of ``text`` only the Simplified form writes, and only the
    Traditional."""
    simplified, traditional = _one_form_only()
    return sum(ch in simplified for ch in text), sum(ch in traditional for ch in text)


@functools.cache
def _one_form_only() -> tuple[frozenset[str], frozenset[str]]:
    """The characters that only Simplified Chinese writes, and only Traditional: of
    CC-CEDICT's, as zhon lists them."""
    from zhon import cedict

    simplified, traditional = set(cedict.simplified), set(cedict.traditional)
    return frozenset(simplified - traditional), frozenset(traditional - simplified)


def _confidence(locale: str, lines: list[_Line], detector) -> float:
    text = "\n".join(line.text for line in lines)
    if locale not in (SIMPLIFIED, TRADITIONAL):
        return detector.compute_language_confidence(text, _language(locale))
    simplified, traditional = _telling(text)
    agree, other = ((simplified, traditional) if locale == SIMPLIFIED
                    else (traditional, simplified))
    return detector.compute_language_confidence(text, _language(CHINESE)) * (
        (agree + 1) / (agree + other + 2))


def _locale(language) -> str:
    """lingua's language as a locale; Chinese as ``CHINESE`` until its form is told."""
    return language.iso_code_639_1.name.lower()


def _language(locale: str):
    from lingua import IsoCode639_1, Language

    return Language.from_iso_code_639_1(IsoCode639_1.from_str(base(locale)))


@functools.cache
def _detector(locales: tuple[str, ...]):
    """lingua's detector for ``locales``, one a process for each set. Its models load
    at the first line that needs them, and stay."""
    from lingua import LanguageDetectorBuilder

    return LanguageDetectorBuilder.from_languages(
        *{_language(locale) for locale in locales}).build()
