"""The documents workspace: the Documents tab (upload with options, search, filters,
sorting, server-side paging, a list with progress and search snippets, actions on the
ticked documents) and the Document tab it opens (``ui/document_tab.py``).

Every read goes through ``appliance.library``. The list refreshes on a timer: a tick
reads the listed documents again (and, when a document is open, that document's row, to
see whether its view changed) and writes nothing. The rows stay where they are
(``ui/listing.py`` says why); an unchanged list is not sent again, so a ticked checkbox or
an open menu is not redrawn under the pointer.
"""

from __future__ import annotations

import hashlib
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Iterator

import gradio as gr

from appliance.api import DOCS_PATH
from appliance.config import DOC_TYPES
from appliance.daemon import Appliance
from appliance.engines import registry
from appliance.library import DocStatus
from appliance.metrics import metrics_for
from ui.actions import ACTIONS, download_zip, may_delete, perform, picked_text
from ui.auth import LOGOUT_PATH
from ui.components import escape_markdown_text, safe_markdown, safe_markdown_view
from ui.confirm_delete import ConfirmDelete
from ui.document_status import remaining_s
from ui.document_tab import DocumentTab
from ui.listing import (
    ANY, FIELDS_CHOICES, LIST_CSS, LIST_JS, NEWEST, PAGER_MOVES, SORT_CHOICES, SOURCE_CHOICES,
    Listed, browse_query, pager_offset, pager_text, results_html, search_sort,
)
from ui.upload import (LANE_CHOICES, TEXT_LAYER_CHOICES, UPLOAD_HEADERS, UploadChoices,
                       handle_upload, upload_rows)

REFRESH_S = 2.0
PACE_PAGES = 50  # the pages read last, whose median service time paces the estimates
PAGER_LABELS = {"first": "« First", "previous": "‹ Previous", "next": "Next ›",
                "last": "Last »"}


def user_line(appliance: Appliance, username: str | None) -> str:
    """Who is signed in and what they may do (empty where no login is configured)."""
    if not username:
        return ""
    user = appliance.users.get(username)
    role = user.role if user else "unknown"
    line = f"Signed in as **{escape_markdown_text(username)}** ({escape_markdown_text(role)})"
    if not may_delete(appliance, username):
        line += " · deleting is for administrators"
    return line


@contextmanager
def workspace_tabs(appliance: Appliance, download_dir: Path) -> Iterator[None]:
    """The Documents and Document tabs, first in a tab bar whose other tabs the
    with-block adds (an opened document switches the bar to its tab). The workspace's
    states and timer come after the bar: among a gr.Tabs' children they shift the
    places of the tabs after them, and Gradio then draws the Dashboard tab twice."""
    settings = appliance.settings
    with gr.Tabs() as tabs:
        with gr.Tab("Documents", id="documents"):
            # who is signed in, what they may do, and the way out (in this tab: a link of
            # the Markdown would open a new one and leave this one signed in on screen)
            with gr.Row(equal_height=True):
                user = gr.Markdown(elem_id="workspace-user")
                # the REST API's docs (Gradio's own "Use via API" page has no route to show)
                gr.Button("API docs", link=DOCS_PATH, link_target="_blank", size="sm", scale=0,
                          min_width=100, elem_id="workspace-api-docs")
                sign_out = gr.Button("Sign out", link=LOGOUT_PATH, size="sm", scale=0,
                                     min_width=100, visible=False, elem_id="workspace-sign-out")
            with gr.Accordion("Upload", open=True):
                with gr.Row():
                    upload = gr.File(label="Drop documents here (PDF, TIFF, PNG, JPEG, ...)",
                                     file_count="multiple", type="filepath", scale=2,
                                     elem_id="upload-files")
                    with gr.Column(scale=3):
                        with gr.Row():
                            doc_type = gr.Dropdown(label="Document type", choices=list(DOC_TYPES),
                                                   value="generic", elem_id="upload-type")
                            lane = gr.Dropdown(label="Lane", choices=LANE_CHOICES,
                                               value=LANE_CHOICES[0][1], elem_id="upload-lane")
                            # shown where there is a choice: a vision engine and its classic reader
                            readings = appliance.readings()
                            engine = gr.Dropdown(label="Read with", value="", interactive=True,
                                                 choices=[("the configured engine", ""), *readings],
                                                 visible=len(readings) > 1, elem_id="upload-engine")
                            text_layer = gr.Dropdown(label="A PDF's own text", value="",
                                                     choices=TEXT_LAYER_CHOICES,
                                                     elem_id="upload-text-layer")
                        with gr.Row():
                            tags = gr.Textbox(label="Tags (comma-separated)", elem_id="upload-tags")
                            password = gr.Textbox(label="Password of an encrypted PDF (used to "
                                                        "read it, never stored)", type="password",
                                                  elem_id="upload-password")
                upload_results = gr.Dataframe(headers=UPLOAD_HEADERS, datatype="str",
                                              label="Last upload", interactive=False, wrap=True,
                                              column_count=len(UPLOAD_HEADERS))
            with gr.Row(equal_height=True):
                search = gr.Textbox(label="Search", scale=4, elem_id="documents-search",
                                    placeholder="words of the text, or of the name")
                sort = gr.Dropdown(label="Sort", choices=SORT_CHOICES, value=NEWEST,
                                   scale=1, elem_id="documents-sort")
                search_button = gr.Button("Search", variant="primary", scale=0, min_width=100,
                                          elem_id="documents-search-button")
            with gr.Row():
                statuses = gr.Dropdown(label="Status", choices=list(DocStatus), value=[],
                                       multiselect=True, elem_id="filter-status")
                type_filter = gr.Dropdown(label="Type", choices=[("any type", ANY), *DOC_TYPES],
                                          value=ANY, elem_id="filter-type")
                tag = gr.Textbox(label="Tag", elem_id="filter-tag")
                source = gr.Dropdown(label="Source", choices=SOURCE_CHOICES, value=ANY,
                                     elem_id="filter-source")
                folder = gr.Dropdown(label="Watched folder", value=ANY, elem_id="filter-folder",
                                     choices=[("any folder", ANY), *(w.name or Path(w.path).name
                                                                     for w in settings.watch)])
            with gr.Row():
                engine_filter = gr.Dropdown(label="Engine", value=ANY, elem_id="filter-engine",
                                            choices=[("any engine", ANY), *registry.names()])
                fields = gr.Dropdown(label="Key fields", choices=FIELDS_CHOICES, value=ANY,
                                     elem_id="filter-fields")
                since = gr.DateTime(label="From (day)", include_time=False, type="timestamp",
                                    elem_id="filter-since")
                until = gr.DateTime(label="To (day)", include_time=False, type="timestamp",
                                    elem_id="filter-until")
            with gr.Row(equal_height=True):
                pager = {move: gr.Button(PAGER_LABELS[move], size="sm", scale=0, min_width=110,
                                         elem_id=f"documents-{move}") for move in PAGER_MOVES}
                refresh_button = gr.Button("Refresh list", size="sm", scale=0, min_width=110,
                                           elem_id="documents-refresh")
                page_line = gr.Markdown(elem_id="documents-count")
            with gr.Row(equal_height=True):
                picked_line = gr.Markdown("No document ticked.", elem_id="documents-picked")
                bulk = {action: gr.Button(f"{label} (ticked)", size="sm",
                                          elem_id=f"bulk-{action}", visible=action != "delete",
                                          variant="stop" if action == "delete" else "secondary")
                        for action, (label, _past) in ACTIONS.items()}
                zip_button = gr.Button("Download ticked (.zip)", size="sm", elem_id="bulk-zip")
            confirm = ConfirmDelete(appliance, "bulk")
            zip_file = gr.File(label="Outputs of the ticked documents", visible=False,
                               elem_id="bulk-zip-file")
            message = safe_markdown_view(elem_id="documents-message")
            results = gr.HTML("", js_on_load=LIST_JS, css_template=LIST_CSS,
                              elem_id="documents-list")
        with gr.Tab("Document", id="document"):
            document = DocumentTab(appliance, download_dir)
        yield  # the tab bar's other tabs

    filters = [search, statuses, type_filter, tag, source, folder, since, until, engine_filter,
               fields, sort]
    list_key, listed, picked = gr.State(""), gr.State(Listed()), gr.State([])
    list_outputs = [results, page_line, list_key, listed]

    def pace():
        """Each document's time left at the pace of the pages read last."""
        recent = metrics_for(appliance).recent_completions()[-PACE_PAGES:]
        times = [c.service_s for c in recent]
        return lambda view: remaining_s(view, times, len(appliance.workers))

    def drawn(rows: Listed, views: dict, known: str, changed: bool) -> list:
        """[the list, its count line, its key]: the list only when it differs from ``known``."""
        shown = results_html(rows, views, not appliance.review_unstaffed(), pace())
        key = hashlib.sha256(shown.encode()).hexdigest()
        line = pager_text(rows.query.offset if rows.query else 0, len(rows.ids), rows.total,
                          changed)
        return [gr.skip() if key == known else shown, line, key]

    unchanged = [gr.skip()] * len(list_outputs)  # before the first query has run

    def run(query) -> list:
        """A query runs: the rows it finds become the list."""
        if query is None:
            return unchanged
        found = appliance.library.find(query)
        if found.total and query.offset >= found.total:  # the last page emptied
            query = replace(query, offset=pager_offset("last", query.offset, found.total))
            found = appliance.library.find(query)
        rows = Listed.of(query, found)
        return [*drawn(rows, {view.doc.id: view for view in found.documents}, "", False), rows]

    def redrawn(rows: Listed, known: str) -> list:
        """The listed rows as they are now, where they were; and whether the query finds
        others by now."""
        if rows.query is None:
            return unchanged
        changed = rows.differs(appliance.library.find(rows.query))
        return [*drawn(rows, appliance.library.documents(list(rows.ids)), known, changed),
                gr.skip()]

    def on_query(*values):
        """A new query: its rows, and the message about the rows before cleared."""
        return [*run(browse_query(*values)), ""]

    def on_search(*values):
        *controls, sort_value = values
        order = search_sort(controls[0], sort_value)
        return [gr.Dropdown(value=order), *on_query(*controls, order)]

    def pager_handler(move: str):
        def handler(rows: Listed):
            return run(rows.query and replace(
                rows.query, offset=pager_offset(move, rows.query.offset, rows.total)))
        return handler

    def on_refresh(rows: Listed):
        return run(rows.query)

    def on_tick(rows, known, latest, document_id, index, shown):
        return [*redrawn(rows, known), *document.refresh(latest, document_id, index, shown)]

    def on_open(latest, evt: gr.EventData):
        """The document in its tab, without the message about the one open before."""
        return [gr.Tabs(selected="document"), "",
                *document.open(latest, str(evt.document), int(getattr(evt, "page", 0) or 0))]

    def on_pick(evt: gr.EventData):
        chosen = [str(d) for d in getattr(evt, "documents", None) or []]
        return chosen, picked_text(appliance, chosen)

    def acted(action: str, chosen: list[str], username: str | None) -> str:
        return safe_markdown(perform(appliance, action, chosen, username))

    def bulk_handler(action: str):
        def handler(chosen, request: gr.Request):
            return acted(action, chosen, getattr(request, "username", None))
        return handler

    def on_zip(chosen):
        path, text = download_zip(appliance, chosen, download_dir / "zips")
        # a str: Gradio 6.31's FileData refuses a Path
        return (gr.File(value=str(path) if path else None, visible=path is not None),
                safe_markdown(text))

    def on_upload(files, type_value, lane_value, tag_text, engine_name, secret, own_text):
        uploaded = handle_upload(appliance, files, UploadChoices(
            type_value, lane_value, tag_text or "", engine_name or "", secret or "",
            own_text or ""))
        return upload_rows(appliance, uploaded), None, ""  # the password is not kept

    def on_load(request: gr.Request):
        username = getattr(request, "username", None)
        allowed = gr.Button(visible=may_delete(appliance, username))
        return user_line(appliance, username), gr.Button(visible=bool(username)), allowed, allowed

    private = dict(api_visibility="private")
    querying = dict(inputs=filters, show_progress="hidden", concurrency_limit=8,
                    concurrency_id="documents-query", **private)
    refresh = dict(fn=on_query, outputs=[*list_outputs, message], **querying)
    gr.on([search.submit, search_button.click], fn=on_search,
          outputs=[sort, *list_outputs, message], **querying)
    # the sort on .input: the search's own change of it has run its query already
    gr.on([tag.submit, tag.blur, sort.input,
           *(control.change for control in (statuses, type_filter, source, folder, since,
                                             until, engine_filter, fields))], **refresh)
    for move, button in pager.items():
        button.click(pager_handler(move), inputs=listed, outputs=list_outputs, **private)
    refresh_button.click(on_refresh, inputs=listed, outputs=list_outputs, **private)
    gr.Timer(REFRESH_S).tick(
        on_tick, inputs=[listed, list_key, document.latest, document.document_id,
                         document.page_index, document.shown_key],
        outputs=[*list_outputs, *document.outputs], show_progress="hidden",
        trigger_mode="once", concurrency_limit=8, concurrency_id="documents-refresh",
        **private)
    results.open(on_open, inputs=document.latest,
                 outputs=[tabs, document.message, *document.outputs], **private)
    # every tick runs, in order (one at a time), each with the whole choice: Gradio
    # runs a deferred "always_last" event without its data, and a quick second tick
    # was lost
    results.pick(on_pick, outputs=[picked, picked_line], show_progress="hidden",
                 trigger_mode="multiple", concurrency_limit=1, **private)
    # after an action the rows are drawn again where they are
    after_action = dict(fn=lambda rows: redrawn(rows, ""), inputs=listed, outputs=list_outputs,
                        show_progress="hidden", **private)
    for action, button in bulk.items():
        if action != "delete":  # Delete asks first
            button.click(bulk_handler(action), inputs=picked, outputs=message,
                         trigger_mode="once", concurrency_limit=4,
                         concurrency_id="document-actions", **private).then(**after_action)
    confirm.wire(bulk["delete"], [picked], list, message,
                 lambda asked, username: [acted("delete", asked, username)], [message]
                 ).then(**after_action)
    zip_button.click(on_zip, inputs=picked, outputs=[zip_file, message], trigger_mode="once",
                     concurrency_limit=2, concurrency_id="documents-zip", **private)
    upload.upload(on_upload, inputs=[upload, doc_type, lane, tags, engine, password, text_layer],
                  outputs=[upload_results, upload, password], concurrency_limit=4,
                  **private).then(**refresh)
    gr.on(triggers=None, fn=on_load,
          outputs=[user, sign_out, bulk["delete"], document.actions["delete"]],
          **private).then(**refresh)
