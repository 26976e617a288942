"""The Document tab's Gradio wiring: the components of the document view
(``ui/document_view.py``), how to fill them for a document and page, and the tab's own
events (choosing a page, zooming, preparing the downloads, the actions on this one
document, turning the page shown). Opening a document or a page makes no download:
"Prepare downloads" makes them, and any change to the document takes them back
(``view_key``)."""

from __future__ import annotations

import threading
from pathlib import Path

import gradio as gr
import pandas as pd

from appliance.daemon import Appliance
from appliance.errors import NotFound
from appliance.export import FORMATS
from ui import fields_form
from ui.actions import ACTIONS, perform, turn_page
from ui.i18n import EN, label, language_of, text, texts
from ui.components import escape_markdown_text, safe_markdown, safe_markdown_view
from ui.confirm_delete import ConfirmDelete
from ui.document_view import (
    HISTORY_HEADER_KEYS, HISTORY_HEADERS, NO_DOCUMENT_TEXT, PageShown, field_rows, history_rows, show_document, show_page, thumbnails,
    view_key,
)
from ui.downloads import DOWNLOAD_LABELS, prepare_downloads
from ui.page_image import ZOOMABLE
from ui.review import TURN_ACTIONS

CHANGED_TEXT = text("downloads_changed")
ZOOM_JS = ("(percent) => { const el = document.getElementById('document-image'); "
           "if (el) el.style.setProperty('--page-zoom', String(percent / 100)); return []; }")


class LatestOpen:
    """The document a browser session opened last, and the lock its drawing events take.
    Gradio runs a session's events side by side, each with the states it read as it began:
    a tick that began before a click would draw the document it read over the one the
    click opened, and leave that one open."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.document_id: str | None = None

    def __deepcopy__(self, memo) -> LatestOpen:  # gr.State copies its value for each session
        return LatestOpen()


class DocumentTab:
    """Built inside the tab it fills; ``open``, ``redraw`` and ``refresh`` give the updates
    of ``outputs`` for a document."""

    def __init__(self, appliance: Appliance, download_dir: Path):
        self.appliance = appliance
        self.library = appliance.library
        self.download_dir = download_dir
        self.title = safe_markdown_view(value=label("no_document"), elem_id="document-title")
        self.review_link = gr.Button(label("open_review"), link="/review/", visible=False,
                                     variant="primary", size="sm", elem_id="open-review")
        with gr.Row():
            # Delete is shown to those who may delete (the workspace decides at load)
            self.actions = {action: gr.Button(label(f"action_{action}"), size="sm",
                                              elem_id=f"document-{action}",
                                              visible=action != "delete",
                                              variant="stop" if action == "delete" else
                                              "secondary")
                            for action in ACTIONS}
        self.confirm = ConfirmDelete(appliance, "document")
        self.message = safe_markdown_view(elem_id="document-message")
        with gr.Row():
            self.prepare = gr.Button(label("prepare_downloads"), size="sm", visible=False,
                                     elem_id="document-prepare-downloads")
            self.downloads = [gr.DownloadButton(DOWNLOAD_LABELS[fmt], visible=False, size="sm",
                                                elem_id=f"download-{fmt.replace('.', '-')}")
                              for fmt in FORMATS]
        self.note = safe_markdown_view(elem_id="document-note")
        self.thumbs = gr.Gallery(label=label("thumbnails"), columns=10, height=200,
                                 allow_preview=False, object_fit="contain", buttons=[],
                                 fit_columns=False, visible=False,
                                 elem_id="document-thumbnails")
        with gr.Row():
            with gr.Column(scale=5):
                self.image = gr.Image(label=label("page_image"), type="pil",
                                      format="png", interactive=False, height=900,
                                      elem_id="document-image", elem_classes=[ZOOMABLE],
                                      buttons=["fullscreen", "download"])
                zoom = gr.Slider(50, 400, value=100, step=25, label=label("zoom"),
                                 elem_id="document-zoom")
            with gr.Column(scale=4):
                self.page_choice = gr.Dropdown(label=label("page"), choices=[], value=None,
                                               interactive=True, elem_id="document-page")
                # the review console's turns, shown to those who may use it (the workspace
                # decides at load)
                with gr.Row():
                    self.turns = {action: gr.Button(label(f"page_{action}"), size="sm",
                                                    visible=False,
                                                    elem_id=f"document-{action.replace('_', '-')}")
                                  for action in TURN_ACTIONS}
                self.facts = safe_markdown_view(elem_id="document-page-facts")
                self.doubts = safe_markdown_view(elem_id="document-page-doubts")
                with gr.Tabs():
                    with gr.Tab(label("rendered"), id="rendered"):
                        # a line break in the Markdown is one on screen: receipts keep lines
                        self.body = safe_markdown_view(container=True, padding=True,
                                                       max_height=800, line_breaks=True,
                                                       elem_id="document-body")
                    with gr.Tab(label("text"), id="text"):
                        self.text = gr.Textbox(label=label("recognised_text"),
                                               interactive=False, lines=12, max_lines=40,
                                               buttons=["copy"], elem_id="document-text")
        with gr.Accordion(label("fields_readonly"),
                          visible=False) as self.fields_box:
            self.fields = gr.Dataframe(headers=fields_form.FIELD_HEADERS, datatype="str",
                                       interactive=False, wrap=True,
                                       column_count=len(fields_form.FIELD_HEADERS),
                                       elem_id="document-fields")
        with gr.Accordion(label("history"), open=True):
            self.history = gr.Dataframe(headers=HISTORY_HEADERS, datatype="str",
                                        interactive=False, wrap=True, max_height=400,
                                        column_count=len(HISTORY_HEADERS),
                                        elem_id="document-history")
        self.latest = gr.State(LatestOpen())
        self.document_id = gr.State(None)
        self.page_index = gr.State(0)
        self.shown_key = gr.State("")
        self.thumb_pages = gr.State([])  # the page index of each thumbnail
        self.page_outputs = [self.page_index, self.page_choice, self.image, self.facts,
                             self.doubts, self.body, self.text]
        self.download_outputs = [self.prepare, *self.downloads, self.note]
        self.outputs = [self.document_id, self.shown_key, self.title, self.review_link,
                        *self.download_outputs, self.thumbs, self.thumb_pages,
                        *self.page_outputs, self.fields_box, self.fields, self.history]
        self.header_outputs = [self.fields, self.history]
        self._wire(zoom)

    @staticmethod
    def headers(lang: str) -> list:
        """The updates of ``header_outputs``: the tables' headers in ``lang``."""
        return [pd.DataFrame(columns=texts(fields_form.FIELD_HEADER_KEYS, lang)),
                pd.DataFrame(columns=texts(HISTORY_HEADER_KEYS, lang))]

    def page_updates(self, document_id: str | None, index: int, lang: str = EN) -> list:
        shown = show_page(self.library, document_id, index, lang) if document_id else PageShown()
        return [index, gr.Dropdown(value=index), shown.image, safe_markdown(shown.facts),
                safe_markdown(shown.doubts), safe_markdown(shown.markdown), shown.text]

    def open(self, latest: LatestOpen, document_id: str | None, index: int = 0,
             lang: str = EN) -> list:
        """Every output for the document at page ``index`` (0-based), which the session
        has open from now on."""
        with latest.lock:
            latest.document_id = document_id
            return self._drawn(document_id, index, lang)

    def redraw(self, latest: LatestOpen, document_id: str | None, index: int,
               lang: str = EN) -> list:
        """The document drawn again, unless the session has opened another since."""
        with latest.lock:
            if not document_id or document_id != latest.document_id:
                return [gr.skip()] * len(self.outputs)
            return self._drawn(document_id, index, lang)

    def refresh(self, latest: LatestOpen, document_id: str | None, index: int,
                shown_key: str, lang: str = EN) -> list:
        """``redraw`` when the document changed since it was shown; else nothing."""
        if not document_id or self.current_key(document_id) == shown_key:
            return [gr.skip()] * len(self.outputs)
        return self.redraw(latest, document_id, index, lang)

    def current_key(self, document_id: str) -> str:
        try:
            return view_key(self.library.document(document_id), self.library.fields(document_id))
        except NotFound:  # deleted: say so once
            return ""

    def download_updates(self, offered: bool, files: dict[str, Path], note: str) -> list:
        """The updates of ``download_outputs``: "Prepare downloads" where ``offered``, else
        a button per file; and the note (Markdown)."""
        return [gr.Button(visible=offered),
                *(gr.DownloadButton(value=files.get(fmt), visible=fmt in files)
                  for fmt in FORMATS), safe_markdown(note)]

    def prepared(self, latest: LatestOpen, document_id: str | None, request: gr.Request) -> list:
        """The downloads of the document as it is now, unless the session has opened
        another while they were made."""
        if not document_id:
            return [gr.skip()] * len(self.download_outputs)
        lang = language_of(request)
        before = self.current_key(document_id)
        files, note = prepare_downloads(self.appliance, document_id, self.download_dir, lang)
        with latest.lock:
            if document_id != latest.document_id:
                return [gr.skip()] * len(self.download_outputs)
            if self.current_key(document_id) != before:  # some files may show it as it was
                return self.download_updates(True, {}, text("downloads_changed", lang))
            return self.download_updates(not files, files, escape_markdown_text(note))

    def _drawn(self, document_id: str | None, index: int, lang: str = EN) -> list:
        panel = show_document(self.appliance, document_id, lang)
        pages = self.library.document(document_id).doc.page_count if panel.key else 0
        index = min(max(0, index), max(0, pages - 1))
        shown, thumb_pages = thumbnails(self.library, document_id, self.download_dir /
                                        "thumbnails", lang) if panel.key else ([], [])
        fields = field_rows(self.library.fields(document_id), lang) if panel.key else None
        history = history_rows(self.library.history(document_id), lang) if panel.key else []
        page = self.page_updates(document_id if panel.key else None, index, lang)
        page[1] = gr.Dropdown(choices=[(text("page_choice", lang, n=n + 1, count=pages), n)
                                       for n in range(pages)],
                              value=index if pages else None)
        # a frame: its columns are the headers, in the person's language
        fields_table = pd.DataFrame(fields or [], columns=texts(fields_form.FIELD_HEADER_KEYS,
                                                                lang))
        history_table = pd.DataFrame(history, columns=texts(HISTORY_HEADER_KEYS, lang))
        return [document_id if panel.key else None, panel.key, safe_markdown(panel.title),
                gr.Button(visible=panel.in_review),
                *self.download_updates(panel.downloadable, {}, panel.note),
                gr.Gallery(value=shown, visible=bool(shown)), thumb_pages, *page, gr.Accordion(visible=fields is not None),
                fields_table, history_table]

    def _wire(self, zoom: gr.Slider) -> None:
        def on_thumbnail(thumb_pages, document_id, evt: gr.SelectData, request: gr.Request):
            return self.page_updates(document_id, thumb_pages[evt.index], language_of(request))

        def on_page(index, document_id, request: gr.Request):
            return self.page_updates(document_id, int(index or 0), language_of(request))

        def action_handler(action: str):
            def handler(latest, document_id, index, request: gr.Request):
                """The action's message, and the document shown again."""
                lang = language_of(request)
                message = perform(self.appliance, action, [document_id] if document_id else [],
                                  getattr(request, "username", None), lang)
                return [safe_markdown(message), *self.redraw(latest, document_id, index, lang)]
            return handler

        def turn_handler(degrees: int):
            def handler(latest, document_id, index, request: gr.Request):
                """What became of the turn, and the document shown again."""
                lang = language_of(request)
                message = turn_page(self.appliance, document_id, int(index or 0), degrees,
                                    getattr(request, "username", None), lang)
                return [safe_markdown(message), *self.redraw(latest, document_id, index, lang)]
            return handler

        def deleted(ids: list[str], username: str | None, lang: str) -> list:
            """Delete asked and answered: its message, and the document shown gone."""
            message = perform(self.appliance, "delete", ids, username, lang)
            return [safe_markdown(message), *self._drawn(ids[0] if ids else None, 0, lang)]

        private = dict(api_visibility="private")
        self.thumbs.select(on_thumbnail, inputs=[self.thumb_pages, self.document_id],
                           outputs=self.page_outputs, **private)
        self.page_choice.input(on_page, inputs=[self.page_choice, self.document_id],
                               outputs=self.page_outputs, **private)
        zoom.change(None, inputs=zoom, js=ZOOM_JS, **private)
        # a searchable PDF of a long scan keeps a core busy for seconds
        self.prepare.click(self.prepared, inputs=[self.latest, self.document_id],
                           outputs=self.download_outputs, trigger_mode="once",
                           concurrency_limit=2, concurrency_id="document-downloads", **private)
        for action, button in self.actions.items():
            if action != "delete":  # Delete asks first
                button.click(action_handler(action),
                             inputs=[self.latest, self.document_id, self.page_index],
                             outputs=[self.message, *self.outputs], trigger_mode="once",
                             concurrency_limit=4, concurrency_id="document-actions", **private)
        for action, button in self.turns.items():
            button.click(turn_handler(TURN_ACTIONS[action]),
                         inputs=[self.latest, self.document_id, self.page_index],
                         outputs=[self.message, *self.outputs], trigger_mode="once",
                         concurrency_limit=4, concurrency_id="document-actions", **private)
        self.confirm.wire(
            self.actions["delete"], [self.document_id],
            lambda document_id: [document_id] if document_id else [], self.message,
            deleted,
            [self.message, *self.outputs])
