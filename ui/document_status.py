"""A document's state in words, for the documents browser, the document view and the
upload's results: how far it is, why it failed, what it waits for, and about how long
its remaining pages take at the recent pace."""

from __future__ import annotations

import math

from appliance.export import document_error
from appliance.library import DocumentView, PageStatus

NO_REVIEWER_TEXT = ("no reviewer account exists, so nobody can check it: an administrator must "
                    "add one with `appliance users add NAME`")


def error_text(code: str | None, message: str | None) -> str:
    """An error as a person reads it: the message, then the reason code."""
    if not code and not message:
        return ""
    if not code:
        return message or ""
    return f"{message or 'failed'} [{code}]"


def page_progress(view: DocumentView) -> tuple[int, int]:
    """(pages done, pages in total)."""
    return view.page_counts[PageStatus.DONE], view.doc.page_count


def document_problem(view: DocumentView) -> str:
    """Why a document (or some of its pages) failed, in plain words; empty if nothing did.
    The pages' own reasons need ``view`` with its pages (``Library.document``)."""
    error = document_error(view)
    return error_text(error["code"], error["message"]) if error else ""


def review_text(view: DocumentView, reviewers_exist: bool) -> str:
    """What a document waiting for review needs: a person (and who can be one)."""
    waiting = view.page_counts[PageStatus.REVIEW]
    text = (f"a person has to check {waiting} page{'s' if waiting != 1 else ''} in the review "
            f"console (/review) before this document is finished")
    if not reviewers_exist:
        text += f"; {NO_REVIEWER_TEXT}"
    return text


def status_details(view: DocumentView, reviewers_exist: bool = True) -> str:
    """The details of a document's status: why it failed, or what it waits for."""
    if view.page_counts[PageStatus.REVIEW]:
        return review_text(view, reviewers_exist)
    return document_problem(view)


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


def duration_text(seconds: float) -> str:
    if seconds < 60:
        return f"{max(1, round(seconds))} s"
    if seconds < 3600:
        return f"{round(seconds / 60)} min"
    return f"{seconds / 3600:.1f} h"
