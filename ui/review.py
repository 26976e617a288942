"""The review console: Gradio Blocks mounted at "/review", behind a login.

A clerk works through the pages that routing sent to review, all day, mostly from
the keyboard:

- the top line counts what waits (in all, being reviewed, by reason); filters (doc
  type, folder, reason, age) narrow both the queue table and "Next page";
- "Next page" (N) locks the oldest highest-priority page for this reviewer (the lock
  runs out after ``review.lock_minutes``; two reviewers never hold one page) and
  shows why it is here and its confidence above the page image (with the
  low-confidence lines boxed on it, zoomable), the editable Markdown and a preview;
- every action (approve, save correction, reject as unreadable, rerun at a higher
  resolution or with the other engine, skip) has a key, and opens the next page.

OCR text is untrusted: the editor is a plain textarea, the preview goes through
``safe_markdown`` (and Gradio's sanitiser), everything else from a document is
escaped. The reviewer's name is the login's (``gr.Request.username``), never a field.

The handlers (``open_next``, ``perform``, ``page_view``, ``queue_rows``, ...) are
plain functions of the ``ReviewService`` and values; ``build_review_ui`` only wires
them to components.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

import gradio as gr
import pandas as pd
from fastapi import FastAPI
from fastapi.responses import RedirectResponse
from PIL import Image

from appliance.config import DOC_TYPES
from appliance.engines import registry
from appliance.errors import ApplianceError, LockLost
from appliance.quality.routing import REVIEW_CODES
from appliance.review import TURNS, ReviewFilter, ReviewPage, ReviewService
from ui import fields_form
from ui.auth import LOGOUT_PATH, Sessions, mount_signed_in
from ui.components import MARKDOWN_VIEW_CSS, escape_markdown_text, safe_markdown, safe_markdown_view
from ui.i18n import (EN, LANGUAGE_PATH, doc_type_text, label, language_of, plural,
                     reason_name, reason_text, status_text, text, texts)
from ui.page_image import ZOOM_CSS, ZOOMABLE, annotate_page

if TYPE_CHECKING:
    from appliance.daemon import Appliance

log = logging.getLogger(__name__)

MOUNT_PATH = "/review"
QUEUE_LIMIT = 200
REFRESH_S = 5.0
ACTION_CONCURRENCY = 8  # reviewers acting at once (each action is a short transaction)
EXCERPT_CHARS = 160
ANY = ""  # the "no filter" choice of every filter dropdown
AGE_CHOICES = [(label("any_age"), ""), (label("age_10m"), "600"), (label("age_1h"), "3600"),
               (label("age_4h"), "14400"), (label("age_1d"), "86400")]
QUEUE_HEADER_KEYS = ["queue_document", "queue_page", "queue_type", "queue_folder", "queue_why",
                     "queue_confidence", "queue_waiting", "queue_reviewer"]
QUEUE_HEADERS = texts(QUEUE_HEADER_KEYS)
# of the table's width, so that each header fits and a long "Why" wraps in its column
QUEUE_WIDTHS = ["19%", "6%", "8%", "9%", "31%", "10%", "8%", "9%"]
OTHER_PAGE_HEADER_KEYS = ["queue_page", "other_status", "queue_confidence", "other_text"]
OTHER_PAGE_HEADERS = texts(OTHER_PAGE_HEADER_KEYS)
INTERNAL_ERROR_TEXT = text("review_internal_error")
START_TEXT = text("review_start")

# action: (button id, label, key). The key works alone while no text field has the
# focus, and with Alt everywhere (in the editor too); Save is Ctrl+S (Cmd+S) or Alt+S,
# never the plain key. E enters the editor, Esc leaves it; + - 0 zoom the page image.
ACTIONS = {
    "next": ("review-next", "Next page", "n"),
    "approve": ("review-approve", "Approve", "a"),
    "correct": ("review-save", "Save correction", "s"),
    "reject": ("review-reject", "Reject as unreadable", "x"),
    "rerun_resolution": ("review-rerun-resolution", "Rerun at higher resolution", "h"),
    "rerun_engine": ("review-rerun-engine", "Rerun with the other engine", "o"),
    "turn_right": ("review-turn-right", "Turn right and read again", "r"),
    "turn_around": ("review-turn-around", "Turn upside down and read again", "t"),
    "turn_left": ("review-turn-left", "Turn left and read again", "l"),
    "skip": ("review-skip", "Skip", "k"),
    "revert": ("review-revert", "Revert my edits", "u"),
}
# the turns a reviewer asks for (clockwise from the page as it is shown)
TURN_ACTIONS = dict(zip(("turn_right", "turn_around", "turn_left"), TURNS))
SAVE_KEY_LABEL = "Ctrl+S"
PLAIN_KEYS = {key: button for action, (button, _label, key) in ACTIONS.items()
              if action != "correct"} | {
    "e": "review-editor", "+": "review-zoom-in", "=": "review-zoom-in",
    "-": "review-zoom-out", "0": "review-zoom-fit"}
# by KeyboardEvent.code, so that the characters a layout puts on Alt (macOS) do not matter
ALT_KEYS = {f"Key{key.upper()}": button for button, _label, key in ACTIONS.values()}
CTRL_KEYS = {"s": "review-save"}
ZOOM_STEP = 1.25


# --- Gradio-independent logic -------------------------------------------------


def make_filter(doc_type: str | None = ANY, folder: str | None = ANY, reason: str | None = ANY,
                min_age_s: str | float | None = ANY) -> ReviewFilter:
    """The filter dropdowns' values as a ``ReviewFilter`` ("" means any)."""
    return ReviewFilter(doc_type=doc_type or None, folder=folder or None,
                        reason=reason or None,
                        min_age_s=float(min_age_s) if min_age_s not in (None, "") else None)


def is_filtered(where: ReviewFilter) -> bool:
    return any(v is not None for v in (where.doc_type, where.folder, where.reason,
                                       where.min_age_s))


def age_text(since: float | None, now: float | None = None, lang: str = EN) -> str:
    if since is None:
        return ""
    seconds = max(0.0, (now or time.time()) - since)
    if seconds < 60:
        return text("just_now", lang)
    if seconds < 3600:
        return text("age_min", lang, n=int(seconds // 60))
    if seconds < 86400:
        return text("age_h", lang, n=f"{seconds / 3600:.1f}")
    return text("age_d", lang, n=f"{seconds / 86400:.1f}")


def confidence_text(confidence: float | None, lang: str = EN) -> str:
    return text("unknown", lang) if confidence is None else f"{confidence:.2f}"


def counts_text(counts: dict, reviewer: str | None = None, lang: str = EN) -> str:
    """The queue in one line, e.g. "**12** pages wait · 2 being reviewed · low_confidence 10"
    (the reasons by their names in ``lang``: ``reason_name``)."""
    waiting, locked = counts.get("waiting", 0), counts.get("locked", 0)
    parts = [plural("review_counts", waiting, lang), text("review_locked", lang, n=locked)]
    by_reason = counts.get("by_reason") or {}
    if by_reason:
        parts.append(text("review_by_reason", lang, reasons=", ".join(
            f"{escape_markdown_text(reason_name(code, lang))} {n}"
            for code, n in sorted(by_reason.items()))))
    line = " · ".join(parts)
    return (line + text("review_signed_in", lang, name=escape_markdown_text(reviewer))
            if reviewer else line)


Choices = list[tuple[str, str]]


def filter_choices(counts: dict, watch_folders: list[str], doc_types: list[str],
                   reason_codes: list[str], lang: str = EN) -> tuple[Choices, Choices, Choices]:
    """Dropdown entries (label, value) for doc type, folder and reason; "" is "any".
    Types and reasons are named in ``lang``; folders as they are."""
    def entries(any_key: str, values: list[str], bucket: str, name=str) -> Choices:
        found = counts.get(bucket) or {}
        return [(text(any_key, lang), ANY)] + [(f"{name(v)} ({found.get(v, 0)})", v)
                                               for v in sorted(set(values) | set(found))]
    return (entries("any_type", doc_types, "by_doc_type",
                    lambda v: v if lang == EN else doc_type_text(v, lang)),
            entries("any_folder", watch_folders, "by_folder"),
            entries("any_reason", reason_codes, "by_reason", lambda v: reason_name(v, lang)))


def queue_rows(service: ReviewService, where: ReviewFilter = ReviewFilter(),
               limit: int = QUEUE_LIMIT, lang: str = EN) -> list[list[str]]:
    """The waiting pages that match ``where``, in the order "Next page" takes them."""
    now = time.time()
    return [[item.document_name, f"{item.page_number}/{item.page_count}",
             item.doc_type if lang == EN else doc_type_text(item.doc_type, lang),
             item.folder or "", "; ".join(reason_text(r, lang) for r in item.reasons),
             confidence_text(item.confidence, lang),
             age_text(item.waiting_since, now, lang), item.locked_by or ""]
            for item in service.queue(where, limit)]


def highlights_text(highlights: list[dict], lang: str = EN, penalties: list[str] = ()) -> str:
    """The low-confidence lines or tokens as a numbered list (escaped: OCR text); where
    there is none, the ``penalties`` that lowered the page's confidence (their names
    are codes, never translated)."""
    if not highlights and penalties:
        return text("low_confidence_lowered", lang,
                    penalties=", ".join(escape_markdown_text(p) for p in penalties))
    if not highlights:
        return text("low_confidence_none", lang)
    lines = [text("low_confidence_head", lang, n=len(highlights)), ""]
    for number, mark in enumerate(highlights, 1):
        read = escape_markdown_text(str(mark.get("text", ""))) or text("empty_text", lang)
        lines.append(text("low_confidence_item", lang, number=number, text=read,
                          score=confidence_text(mark.get("score"), lang)))
    return "\n".join(lines)


def _excerpt(text: str) -> str:
    flat = " ".join((text or "").split())
    return flat if len(flat) <= EXCERPT_CHARS else flat[:EXCERPT_CHARS - 1] + "…"


def other_engine(engine: str | None, available: tuple[str, ...]) -> str | None:
    """The engine a rerun "with the other engine" uses, or None if there is none."""
    others = [e for e in available if e != engine]
    return others[0] if engine in available and others else None


@dataclass
class PageView:
    """What the console shows for the open page (or for no page)."""

    page_id: int | None = None
    title: str = START_TEXT  # our words, with document facts escaped
    image: Image.Image | Path | None = None
    markdown: str = ""  # the machine's reading, as the editor starts
    highlights: str = ""
    other_pages: list[list[str]] = field(default_factory=list)
    engine: str | None = None
    # the document's key fields: {"document_id", "page" (this page's number), "fields"};
    # None when its type has none or they are not read yet
    key_fields: dict | None = None
    # the reading order of the page's blocks, as numbered on the image ("1 2 3"); empty
    # for a page read whole (no blocks)
    order: str = ""


def page_title(page: ReviewPage, now: float | None = None, lang: str = EN) -> str:
    """Why the page is here (as it stands now: ``why_here``), its confidence and where
    it comes from, prominently."""
    item = page.item
    reasons = (", ".join(escape_markdown_text(reason_text(r, lang)) for r in item.reasons)
               or text("none_left", lang))  # named in lang, each as recorded too
    doc_type = item.doc_type if lang == EN else doc_type_text(item.doc_type, lang)
    facts = [text("fact_type", lang, value=escape_markdown_text(doc_type))]
    if item.folder:
        facts.append(text("fact_folder", lang, value=escape_markdown_text(item.folder)))
    if page.engine:
        facts.append(text("page_read_by", lang, engine=escape_markdown_text(page.engine)))
    if item.waiting_since:
        facts.append(text("review_waiting_for", lang, age=age_text(item.waiting_since, now,
                                                                     lang)))
    if item.locked_until:
        facts.append(text("review_yours_until", lang,
                          time=f"{datetime.fromtimestamp(item.locked_until):%H:%M}"))
    return (text("review_page_title", lang, name=escape_markdown_text(item.document_name),
                 n=item.page_number, count=item.page_count) + "\n\n"
            + text("review_why", lang, confidence=confidence_text(item.confidence, lang),
                   reasons=reasons) + "\n\n" + " · ".join(facts))


def document_fields(service: ReviewService, page: ReviewPage | None) -> list[dict] | None:
    """The newest reading of the page's document's key fields (None: none)."""
    found = service.fields(page.item.document_id) if page else None
    return found.fields if found else None


def page_view(page: ReviewPage | None, where: ReviewFilter = ReviewFilter(),
              fields: list[dict] | None = None, lang: str = EN) -> PageView:
    """What to show for ``page``; ``fields`` are its document's key fields (their
    evidence on this page is boxed on the image)."""
    if page is None:
        return PageView(title=text("review_empty", lang, filtered=text(
            "review_empty_filtered", lang) if is_filtered(where) else ""))
    number = page.item.page_number
    image = None
    if page.image_path is not None:
        try:
            image = annotate_page(page.image_path, page.highlights + fields_form.field_highlights(
                fields, number, page.to_image), blocks=page.blocks)
        except OSError:
            log.warning("review page image unreadable page=%s path=%s", page.item.page_id,
                        page.image_path)
    return PageView(
        page_id=page.item.page_id, title=page_title(page, lang=lang),
        image=image, markdown=page.markdown, highlights=highlights_text(
            page.highlights, lang, page.signals.get("penalties") or ()),
        other_pages=[[str(p["number"]), status_text(str(p["status"]), lang),
                      confidence_text(p["confidence"], lang),
                      _excerpt(p["text"])] for p in page.other_pages],
        engine=page.engine,
        key_fields=None if fields is None else {
            "document_id": page.item.document_id, "page": number, "fields": fields},
        order=" ".join(str(number) for number in range(1, len(page.blocks) + 1)))


def reorder(service: ReviewService, page_id: int | None, order: str, lang: str = EN
            ) -> tuple[str | None, str]:
    """The page's Markdown with its blocks in the reviewer's ``order`` (the numbers on
    the image, "1 3 2"), and a message; None and the reason when it cannot be."""
    if page_id is None:
        return None, text("review_open_first", lang)
    count = len(service.open_page(page_id).blocks)
    numbers = order.replace(",", " ").split()
    if not count or sorted(numbers) != sorted(str(n) for n in range(1, count + 1)):
        return None, (text("review_order_bad", lang, count=count, example=" ".join(
            str(n) for n in range(count, 0, -1))) if count else text("review_order_whole", lang))
    markdown = service.reordered(page_id, [int(n) - 1 for n in numbers])
    return markdown, text("review_order_done", lang)


def open_next(service: ReviewService, reviewer: str, where: ReviewFilter = ReviewFilter(),
              leaving: int | None = None, lang: str = EN) -> tuple[PageView, str]:
    """Lock and open the next page for ``reviewer``, freeing the one they are
    ``leaving`` (the page open when they pressed N): (the view, a message)."""
    try:
        page = service.next_page(reviewer, where, leaving)
    except ApplianceError as exc:
        return PageView(title=text("review_start", lang)), exc.message
    return page_view(page, where, document_fields(service, page), lang), ""


def held_page(service: ReviewService, reviewer: str) -> ReviewPage | None:
    """The page ``reviewer`` holds (after a reload), opened again; None if none."""
    if not any(item.locked_by == reviewer for item in service.queue(limit=10_000)):
        return None
    return service.next_page(reviewer)


def _same_text(a: str, b: str) -> bool:
    return a.replace("\r\n", "\n").strip() == b.replace("\r\n", "\n").strip()


def perform(service: ReviewService, reviewer: str, action: str, page_id: int | None, *,
            markdown: str = "", original: str = "", note: str = "", engine: str | None = None,
            available_engines: tuple[str, ...] = (registry.FALLBACK,),
            where: ReviewFilter = ReviewFilter(), lang: str = EN) -> tuple[str, PageView | None]:
    """Do ``action`` on the open page; then open the next one.

    Returns (message, view): view is the next page's (or the empty queue's), or None
    when the action did not happen and the open page stays as it is (the message
    says why: an edit would be lost, the lock ran out, ...).
    """
    if page_id is None:
        return text("review_no_page", lang), None
    edited = not _same_text(markdown or "", original or "")
    try:
        if action == "approve":
            if edited:
                return text("review_edited", lang), None
            service.approve(reviewer, page_id)
            done = text("review_approved", lang)
        elif action == "correct":
            if edited:
                service.correct(reviewer, page_id, markdown)
                done = text("review_corrected", lang)
            else:  # nothing to correct: the machine's reading stands
                service.approve(reviewer, page_id)
                done = text("review_unchanged", lang)
        elif action == "reject":
            service.reject(reviewer, page_id, " ".join((note or "").split()))
            done = text("review_rejected", lang)
        elif action == "rerun_resolution":
            service.rerun(reviewer, page_id, higher_resolution=True)
            done = text("review_rerun_higher", lang)
        elif action == "rerun_engine":
            other = other_engine(engine, available_engines)
            if other is None:
                return text("review_no_other", lang), None
            service.rerun(reviewer, page_id, engine=other)
            done = text("review_rerun_other", lang, engine=other)
        elif action in TURN_ACTIONS:
            service.rerun(reviewer, page_id, turn_deg=TURN_ACTIONS[action])
            done = text("review_turned", lang)
        elif action == "skip":
            service.skip(reviewer, page_id)
            done = text("review_skipped", lang)
        else:
            raise ValueError(f"unknown review action {action!r}")
    except LockLost as exc:
        return exc.message, None
    except ApplianceError as exc:
        return f"{exc.message} [{exc.code}]", None
    log.info("review action=%s page=%s reviewer=%s", action, page_id, reviewer)
    view, problem = open_next(service, reviewer, where, lang=lang)
    return problem or (text("review_next_open", lang, done=done) if view.page_id else done), view


def save_fields(appliance: Appliance, reviewer: str, page_id: int | None,
                key_fields: dict | None, values: list[str | None], lang: str = EN
                ) -> tuple[str, PageView | None]:
    """"Save fields": the inputs' changed ``values`` (in the order of
    ``key_fields["fields"]``) as ``reviewer``'s corrections. Returns (a status line, the
    page's view with the fields checked again), or (why not, None) when nothing was saved."""
    if page_id is None or not key_fields:
        return text("review_no_fields_page", lang), None
    changes = fields_form.changed_values(key_fields["fields"], values)
    if not changes:
        return text("review_no_field_changed", lang), None
    try:
        saved = appliance.correct_fields(key_fields["document_id"], changes, reviewer)
        page = appliance.review.open_page(page_id)
    except ApplianceError as exc:
        return escape_markdown_text(exc.message), None
    log.info("review fields corrected doc=%s fields=%s reviewer=%s", key_fields["document_id"],
             ",".join(changes), reviewer)
    return (fields_form.saved_text(changes, saved.fields, lang),
            page_view(page, fields=saved.fields, lang=lang))


# --- Gradio wiring ---------------------------------------------------------------

HERE = Path(__file__).parent
CSS = (HERE / "review.css").read_text()
KEYS_JS = (HERE / "review_keys.js").read_text()


def shortcuts_js() -> str:
    """The keyboard shortcuts' script with this console's key maps."""
    return KEYS_JS.replace("__REVIEW_KEYS__", json.dumps({
        "plain": PLAIN_KEYS, "alt": ALT_KEYS, "ctrl": CTRL_KEYS, "step": ZOOM_STEP,
        "fields": fields_form.FORM_ID, "fieldsSave": fields_form.SAVE_ID}))


def _label(action: str) -> str:
    _button, label, key = ACTIONS[action]
    return f"{label} ({SAVE_KEY_LABEL if action == 'correct' else key.upper()})"


def shortcuts_help() -> str:
    keys = [f"**{SAVE_KEY_LABEL if action == 'correct' else key.upper()}** {label.lower()}"
            for action, (_button, label, key) in ACTIONS.items()]
    return ("Keys: " + " · ".join(keys) + " · **E** edit the text, **Esc** leave it · "
            "**+ − 0** zoom · in the editor hold **Alt** (Alt+A approves, Alt+N opens the "
            "next page) · in the key fields **Tab** moves on, **Enter** or **Ctrl+S** saves "
            "them.")


def _engine_label(engine: str | None, available: tuple[str, ...], lang: str = EN
                  ) -> tuple[str, bool]:
    other = other_engine(engine, available)
    if other is None:
        return text("btn_no_engine", lang), False
    return text("btn_rerun_with", lang, engine=other), True


def build_review_ui(appliance: Appliance) -> gr.Blocks:
    service: ReviewService = appliance.review
    settings = appliance.settings
    available = appliance.readings()
    watch_names = [w.name or Path(w.path).name for w in settings.watch]
    fields_size = fields_form.form_size(appliance.dispatcher.field_specs)

    def reviewer_of(request: gr.Request | None) -> str:
        name = getattr(request, "username", None) if request is not None else None
        if not name:  # the mount has auth: only a logged-in request gets here
            raise gr.Error(text("review_log_in", language_of(request)))
        return name

    with gr.Blocks(title=text("review_title"), analytics_enabled=False,
                   delete_cache=(3600, 3600)) as blocks:
        with gr.Row(equal_height=True):
            gr.Markdown(label("review_heading"), scale=0, min_width=120)
            counts_md = gr.Markdown(elem_id="review-counts", scale=4)
            gr.Button(label("language_switch"), link=f"{LANGUAGE_PATH}?next={MOUNT_PATH}/",
                      size="sm", scale=0, min_width=90, variant="secondary",
                      elem_id="review-language")
            gr.Button(label("log_out"), link=LOGOUT_PATH, size="sm", scale=0,
                      min_width=90, variant="secondary", elem_id="review-log-out")
        with gr.Row(equal_height=True):
            doc_type = gr.Dropdown(label=label("filter_type"), choices=[(label("any_type"), ANY)], value=ANY,
                                   allow_custom_value=True, scale=1, min_width=140)
            folder = gr.Dropdown(label=label("folder"), choices=[(label("any_folder"), ANY)], value=ANY,
                                 allow_custom_value=True, scale=1, min_width=140)
            reason = gr.Dropdown(label=label("reason"), choices=[(label("any_reason"), ANY)], value=ANY,
                                 allow_custom_value=True, scale=1, min_width=140)
            age = gr.Dropdown(label=label("age"), choices=AGE_CHOICES, value="", scale=1,
                              min_width=140)
            next_btn = gr.Button(label("btn_next"), variant="primary", elem_id="review-next",
                                 scale=1, min_width=160)
        title = gr.Markdown(label("review_start"), elem_id="review-why")
        message = gr.Markdown(elem_id="review-message")
        with gr.Row():
            approve = gr.Button(label("btn_approve"), variant="primary", elem_id="review-approve")
            save = gr.Button(label("btn_correct"), variant="primary", elem_id="review-save")
            reject = gr.Button(label("btn_reject"), variant="stop", elem_id="review-reject")
            rerun_resolution = gr.Button(label("btn_rerun_resolution"),
                                         elem_id="review-rerun-resolution")
            engine_label, engine_ok = _engine_label(None, available)  # drawn again at load
            rerun_engine = gr.Button(engine_label, interactive=engine_ok,
                                     elem_id="review-rerun-engine")
            turns = {action: gr.Button(label(f"btn_{action}"), elem_id=ACTIONS[action][0])
                     for action in TURN_ACTIONS}
            skip = gr.Button(label("btn_skip"), elem_id="review-skip")
        with gr.Row():
            with gr.Column(scale=5):
                image = gr.Image(label=label("page_image"), type="pil", format="png",
                                 interactive=False, height=900, elem_id="review-image",
                                 elem_classes=[ZOOMABLE], buttons=["fullscreen", "download"])
                with gr.Row():
                    zoom_out = gr.Button(label("zoom_out"), size="sm", min_width=60,
                                         elem_id="review-zoom-out")
                    zoom_fit = gr.Button(label("zoom_fit"), size="sm", min_width=60,
                                         elem_id="review-zoom-fit")
                    zoom_in = gr.Button(label("zoom_in"), size="sm", min_width=60,
                                        elem_id="review-zoom-in")
            with gr.Column(scale=4):
                with gr.Accordion(label("key_fields"), open=True, visible=False,
                                  elem_id=fields_form.FORM_ID) as fields_box:
                    field_inputs = [gr.Textbox(lines=1, max_lines=1, visible=False,
                                               elem_id=f"review-field-{i}")
                                    for i in range(fields_size)]
                    fields_save = gr.Button(label("save_fields"), size="sm",
                                            elem_id=fields_form.SAVE_ID)
                    fields_status = safe_markdown_view(elem_id="review-fields-status")
                editor = gr.Textbox(label=label("editor"), lines=24,
                                    max_lines=60, interactive=True, elem_id="review-editor",
                                    autoscroll=False)
                with gr.Row():
                    revert = gr.Button(label("btn_revert"), size="sm", elem_id="review-revert")
                with gr.Row(equal_height=True):
                    order_box = gr.Textbox(label=label("reading_order"), lines=1, max_lines=1, scale=4,
                                           elem_id="review-order")
                    apply_order = gr.Button(label("apply_order"), size="sm", scale=1,
                                            elem_id="review-apply-order")
                note = gr.Textbox(label=label("reject_note"),
                                  lines=1, max_lines=2, elem_id="review-note")
            with gr.Column(scale=4):
                gr.Markdown(label("preview"))
                preview = safe_markdown_view(container=True,
                                             padding=True, max_height=900,
                                             elem_id="review-preview")
        highlights = safe_markdown_view(elem_id="review-highlights", container=True,
                                        padding=True)
        with gr.Accordion(label("other_pages"), open=True):
            others = gr.Dataframe(headers=OTHER_PAGE_HEADERS, datatype="str",
                                  interactive=False, column_count=len(OTHER_PAGE_HEADERS),
                                  wrap=True, max_height=300, elem_id="review-other-pages")
        with gr.Accordion(label("queue"), open=True):
            queue = gr.Dataframe(headers=QUEUE_HEADERS, datatype="str", interactive=False,
                                 column_count=len(QUEUE_HEADERS), wrap=True, max_height=400,
                                 column_widths=QUEUE_WIDTHS,
                                 label=label("queue_label"),
                                 elem_id="review-queue")
        gr.Markdown(label("keys_help"), elem_id="review-keys")

        page_id = gr.State(None)
        original = gr.State("")
        engine = gr.State(None)
        queue_key = gr.State("")
        key_fields = gr.State(None)
        filters = [doc_type, folder, reason, age]
        fields_outputs = [key_fields, fields_box, *field_inputs, fields_status]
        page_outputs = [page_id, original, engine, title, image, editor, preview, highlights,
                        others, rerun_engine, note, order_box, *fields_outputs]

        def fields_updates(view: PageView, status: str = "", lang: str = EN) -> list:
            fields = view.key_fields["fields"] if view.key_fields else None
            return [view.key_fields, gr.Accordion(visible=fields is not None),
                    *fields_form.input_updates(fields, fields_size, lang),
                    safe_markdown(status or fields_form.form_note(fields, fields_size, lang))]

        def page_updates(view: PageView, lang: str = EN) -> list:
            engine_text, ok = _engine_label(view.engine, available, lang)
            return [view.page_id, view.markdown, view.engine,
                    gr.Markdown(view.title), view.image, view.markdown,
                    safe_markdown(view.markdown), safe_markdown(view.highlights),
                    pd.DataFrame(view.other_pages,
                                 columns=texts(OTHER_PAGE_HEADER_KEYS, lang)),
                    gr.Button(engine_text, interactive=ok and view.page_id is not None), "",
                    view.order, *fields_updates(view, lang=lang)]

        def overview(type_value, folder_value, reason_value, age_value, known,
                     request: gr.Request) -> list:
            """Counts, filter choices and queue rows; nothing is sent when nothing changed
            (an open dropdown is not redrawn under the clerk's pointer)."""
            lang = language_of(request)
            counts = service.counts()
            types, folders, reasons = filter_choices(counts, watch_names, list(DOC_TYPES),
                                                     list(REVIEW_CODES), lang)
            rows = queue_rows(service, make_filter(type_value, folder_value, reason_value,
                                                   age_value), lang=lang)
            key = json.dumps([counts, rows, lang])
            if key == known:
                return [gr.skip()] * len(overview_outputs)
            return [counts_text(counts, getattr(request, "username", None), lang),
                    gr.Dropdown(choices=types), gr.Dropdown(choices=folders),
                    gr.Dropdown(choices=reasons),
                    pd.DataFrame(rows, columns=texts(QUEUE_HEADER_KEYS, lang)), key]

        overview_outputs = [counts_md, doc_type, folder, reason, queue, queue_key]

        def on_load(request: gr.Request):
            reviewer = reviewer_of(request)
            lang = language_of(request)
            start = PageView(title=text("review_start", lang))
            try:
                page = held_page(service, reviewer)
            except ApplianceError as exc:
                return [*page_updates(start, lang), exc.message]
            if page is None:
                return [*page_updates(start, lang), ""]
            return [*page_updates(page_view(page, fields=document_fields(service, page),
                                            lang=lang), lang),
                    text("review_held", lang)]

        def on_next(open_page, type_value, folder_value, reason_value, age_value,
                    request: gr.Request):
            reviewer = reviewer_of(request)
            lang = language_of(request)
            try:
                view, problem = open_next(service, reviewer, make_filter(
                    type_value, folder_value, reason_value, age_value), leaving=open_page,
                    lang=lang)
            except Exception:
                log.exception("opening the next review page failed reviewer=%s", reviewer)
                return [*([gr.skip()] * len(page_outputs)), text("review_internal_error", lang)]
            return [*page_updates(view, lang), problem]

        def action_handler(action: str):
            def handler(pid, edited, machine_text, why, page_engine, type_value, folder_value,
                        reason_value, age_value, request: gr.Request):
                reviewer = reviewer_of(request)
                lang = language_of(request)
                where = make_filter(type_value, folder_value, reason_value, age_value)
                try:
                    text_message, view = perform(
                        service, reviewer, action, pid, markdown=edited or "",
                        original=machine_text or "", note=why or "", engine=page_engine,
                        available_engines=available, where=where, lang=lang)
                except Exception:
                    log.exception("review action failed action=%s page=%s", action, pid)
                    text_message, view = text("review_internal_error", lang), None
                if view is None:
                    return [*([gr.skip()] * len(page_outputs)), text_message]
                return [*page_updates(view, lang), text_message]
            return handler

        def on_save_fields(data: dict, request: gr.Request):
            reviewer = reviewer_of(request)
            lang = language_of(request)
            try:
                status, view = save_fields(appliance, reviewer, data[page_id], data[key_fields],
                                           [data[box] for box in field_inputs], lang)
            except Exception:
                log.exception("saving key fields failed page=%s", data[page_id])
                status, view = text("review_internal_error", lang), None
            if view is None:
                # the title, the image and the form stay as they are
                return [*([gr.skip()] * (len(fields_outputs) + 1)), safe_markdown(status)]
            # why the page is here, with the fields checked again
            return [gr.Markdown(view.title), view.image, *fields_updates(view, status, lang)]

        def on_apply_order(pid, order, request: gr.Request):
            try:
                markdown, text_message = reorder(service, pid, order or "", language_of(request))
            except ApplianceError as exc:
                markdown, text_message = None, exc.message
            if markdown is None:
                return gr.skip(), gr.skip(), text_message
            return markdown, safe_markdown(markdown), text_message

        def on_revert(machine_text, request: gr.Request):
            return (machine_text, safe_markdown(machine_text or ""),
                    text("review_reverted", language_of(request)))

        refresh = dict(fn=overview, inputs=[*filters, queue_key], outputs=overview_outputs,
                       show_progress="hidden", concurrency_limit=ACTION_CONCURRENCY,
                       concurrency_id="review-refresh", api_visibility="private")
        blocks.load(on_load, outputs=[*page_outputs, message], api_visibility="private"
                    ).then(**refresh)
        gr.Timer(REFRESH_S).tick(trigger_mode="once", **refresh)
        for dropdown in filters:
            dropdown.change(**refresh)
        busy = dict(trigger_mode="once", concurrency_limit=ACTION_CONCURRENCY,
                    concurrency_id="review-actions", api_visibility="private")
        next_btn.click(on_next, inputs=[page_id, *filters], outputs=[*page_outputs, message],
                       **busy).then(**refresh)
        action_inputs = [page_id, editor, original, note, engine, *filters]
        for button, action in ((approve, "approve"), (save, "correct"), (reject, "reject"),
                               (rerun_resolution, "rerun_resolution"),
                               (rerun_engine, "rerun_engine"), (skip, "skip"),
                               *((button, action) for action, button in turns.items())):
            button.click(action_handler(action), inputs=action_inputs,
                         outputs=[*page_outputs, message], **busy).then(**refresh)
        fields_save_inputs = {page_id, key_fields, *field_inputs}
        for trigger in (fields_save.click, *(box.submit for box in field_inputs)):
            trigger(on_save_fields, inputs=fields_save_inputs,
                    outputs=[title, image, *fields_outputs], **busy)
        # cheap and per reviewer: no queueing behind other reviewers' keystrokes
        revert.click(on_revert, inputs=original, outputs=[editor, preview, message],
                     concurrency_limit=None, api_visibility="private")
        for trigger in (apply_order.click, order_box.submit):
            trigger(on_apply_order, inputs=[page_id, order_box],
                    outputs=[editor, preview, message], **busy)
        editor.change(lambda text: safe_markdown(text or ""), inputs=editor, outputs=preview,
                      trigger_mode="always_last", show_progress="hidden",
                      concurrency_limit=None, api_visibility="private")
        zoom_in.click(None, js=f"() => window.reviewZoom && window.reviewZoom({ZOOM_STEP})")
        zoom_out.click(None, js=f"() => window.reviewZoom && window.reviewZoom({1 / ZOOM_STEP})")
        zoom_fit.click(None, js="() => window.reviewZoom && window.reviewZoom(0)")
    return blocks


def mount_review(app: FastAPI, appliance: Appliance, sessions: Sessions) -> None:
    """Mount the review console at "/review" of ``app``, for signed-in accounts of
    ``review.users_file`` (``ui.auth``). Call it before the UI's "/" mount."""
    blocks = build_review_ui(appliance)

    @app.get(MOUNT_PATH, include_in_schema=False)
    def review_root() -> RedirectResponse:  # the mount answers "/review/" only
        return RedirectResponse(f"{MOUNT_PATH}/")

    mount_signed_in(app, blocks, MOUNT_PATH, sessions, title_key="review_title",
                    footer_links=[],  # no Gradio settings or API page: see ui/app.py run_history=False, ssr_mode=False,
                    show_error=False,  # a clerk sees our messages, never an exception's
                    mcp_server=False, css=CSS + ZOOM_CSS + MARKDOWN_VIEW_CSS, js=shortcuts_js())
