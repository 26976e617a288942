"""A document's state in words, for the documents browser, the document view and the
upload's results: how far it is, why it failed, what it waits for, and about how long
its remaining pages take at the recent pace."""

from __future__ import annotations

import math

from appliance.errors import said_as, specifics
from appliance.export import document_error
from appliance.library import DocumentView, PageStatus
from ui.i18n import EN, TEXTS, plural, said_value, text

NO_REVIEWER_TEXT = text("no_reviewer")


def error_text(code: str | None, message: str | None, lang: str = EN) -> str:
    """An error as a person reads it, then its reason code, which is never translated. In
    English the library's message; in another language the code's sentence, with the
    message's specifics (a file name, a page, a number) after it."""
    if not code and not message:
        return ""
    if not code:
        return message or ""
    return f"{error_words(code, message, lang) or text('failed_reason', lang)} [{code}]"


def error_words(code: str, message: str | None, lang: str = EN) -> str:
    """A failure in ``lang`` without its code: the code's sentence and, after it, what
    the message says of its case, in ``lang`` where the library said it by a key of
    ``errors.SAID`` (a kind of file it names too), else as the library gave it. In
    English the library's message."""
    key = f"error_{code}"
    if lang == EN or key not in TEXTS:
        return message or ""
    sentence, said = text(key, lang), specifics(code, message)
    if (found := said_as(code, message)) and f"said_{found[0]}" in TEXTS:
        case, values = found
        said = text(f"said_{case}", lang,
                    **{name: said_value(value, lang) for name, value in values.items()})
    if said:
        sentence = text("error_specifics", lang, sentence=sentence, specifics=said)
    return sentence


def page_progress(view: DocumentView) -> tuple[int, int]:
    """(pages done, pages in total)."""
    return view.page_counts[PageStatus.DONE], view.doc.page_count


def pages_read(view: DocumentView) -> tuple[int, int]:
    """(pages the machine has read, of them those waiting for a person's review)."""
    waiting = view.page_counts[PageStatus.REVIEW]
    return view.page_counts[PageStatus.DONE] + waiting, waiting


def document_problem(view: DocumentView, lang: str = EN) -> str:
    """Why a document (or some of its pages) failed, in plain words; empty if nothing did.
    The pages' own reasons need ``view`` with its pages (``Library.document``)."""
    error = document_error(view)
    return error_text(error["code"], error["message"], lang) if error else ""


def review_text(view: DocumentView, reviewers_exist: bool, lang: str = EN) -> str:
    """What a document waiting for review needs: a person (and who can be one)."""
    said = plural("review_needed", view.page_counts[PageStatus.REVIEW], lang)
    if not reviewers_exist:
        said += ("；" if lang != EN else "; ") + text("no_reviewer", lang)
    return said


def status_details(view: DocumentView, reviewers_exist: bool = True, lang: str = EN) -> str:
    """The details of a document's status: why it failed, or what it waits for."""
    if view.page_counts[PageStatus.REVIEW]:
        return review_text(view, reviewers_exist, lang)
    return document_problem(view, lang)


def remaining_s(view: DocumentView, service_times: list[float], readers: int) -> float | None:
    """About how long the document's unread pages take at the recent pace: in rounds of
    ``readers`` pages at once, each the median of the recent ``service_times``. None
    while none of its pages is being read (a queued document's wait depends on what is
    ahead of it) or no page was read lately."""
    if not view.page_counts[PageStatus.RUNNING] or not service_times:
        return None
    unread = view.page_counts[PageStatus.QUEUED] + view.page_counts[PageStatus.RUNNING]
    median = sorted(service_times)[len(service_times) // 2]
    return math.ceil(unread / max(1, readers)) * median


def duration_text(seconds: float, lang: str = EN) -> str:
    if seconds < 60:
        return text("duration_s", lang, n=max(1, round(seconds)))
    if seconds < 3600:
        return text("duration_min", lang, n=round(seconds / 60))
    return text("duration_h", lang, n=f"{seconds / 3600:.1f}")
