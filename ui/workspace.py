"""The documents workspace: the Documents tab (upload with options, search, filters,
sorting, server-side paging, a list with progress and search snippets, actions on the
ticked documents, an administrator's API keys: ``ui/api_keys.py``) and the Document tab
it opens (``ui/document_tab.py``).

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
from appliance.daemon import Appliance
from appliance.engines import registry
from appliance.library import DocStatus
from appliance.metrics import metrics_for
from ui.actions import ACTIONS, download_zip, may_delete, may_review, perform, picked_text
from ui.api_keys import ApiKeysPanel
from ui.auth import LOGOUT_PATH
from ui.components import escape_markdown_text, safe_markdown, safe_markdown_view
from ui.confirm_delete import ConfirmDelete
from ui.document_status import remaining_s
from ui.document_tab import DocumentTab
from ui.i18n import EN, LANGUAGE_PATH, doc_type_choices, label, language_of, text
from ui.listing import (
    ANY, FIELDS_CHOICES, LIST_CSS, LIST_JS, NEWEST, PAGER_MOVES, SORT_CHOICES, SOURCE_CHOICES,
    Listed, browse_query, pager_offset, pager_text, results_html, search_sort,
)
from ui.upload import (LANE_CHOICES, TEXT_LAYER_CHOICES, UPLOAD_CSS, UploadChoices,
                       drop_summary_html, handle_upload, upload_html, upload_rows)

REFRESH_S = 2.0
PACE_PAGES = 50  # the pages read last, whose median service time paces the estimates
PAGER_LABELS = {move: label(f"pager_{move}") for move in PAGER_MOVES}


def user_line(appliance: Appliance, username: str | None, lang: str = EN) -> str:
    """Who is signed in and what they may do (empty where no login is configured)."""
    if not username:
        return ""
    user = appliance.users.get(username)
    role = user.role if user else "unknown"
    role_text = text(f"role_{role}", lang) if f"role_{role}" in ROLE_KEYS else role
    line = text("signed_in_as", lang, name=escape_markdown_text(username),
                role=escape_markdown_text(role_text))
    if not may_delete(appliance, username):
        line += text("delete_for_admins", lang)
    return line


ROLE_KEYS = {"role_admin", "role_reviewer", "role_unknown"}


@contextmanager
def workspace_tabs(appliance: Appliance, download_dir: Path) -> Iterator[None]:
    """The Documents and Document tabs, first in a tab bar whose other tabs the
    with-block adds (an opened document switches the bar to its tab). The workspace's
    states and timer come after the bar: among a gr.Tabs' children they shift the
    places of the tabs after them, and Gradio then draws the Dashboard tab twice."""
    settings = appliance.settings
    with gr.Tabs() as tabs:
        with gr.Tab(label("tab_documents"), id="documents"):
            # who is signed in, what they may do, and the way out (in this tab: a link of
            # the Markdown would open a new one and leave this one signed in on screen)
            with gr.Row(equal_height=True):
                user = gr.Markdown(elem_id="workspace-user")
                # the REST API's docs (Gradio's own "Use via API" page has no route to show)
                # the language: the other one than shown, kept in this browser (ui.i18n)
                gr.Button(label("language_switch"), link=f"{LANGUAGE_PATH}?next=/", size="sm",
                          scale=0, min_width=90, elem_id="workspace-language")
                gr.Button(label("api_docs"), link=DOCS_PATH, link_target="_blank", size="sm", scale=0,
                          min_width=100, elem_id="workspace-api-docs")
                sign_out = gr.Button(label("sign_out"), link=LOGOUT_PATH, size="sm", scale=0,
                                     min_width=100, visible=False, elem_id="workspace-sign-out")
            keys = ApiKeysPanel(appliance)  # an administrator's only
            # folded after a drop: the list below is in view, and the line under the
            # panel says what became of the files
            with gr.Accordion(label("upload"), open=True, elem_id="upload-panel") as upload_panel:
                with gr.Row():
                    upload = gr.File(label=label("upload_files"),
                                     file_count="multiple", type="filepath", scale=2,
                                     elem_id="upload-files")
                    with gr.Column(scale=3):
                        with gr.Row():
                            doc_type = gr.Dropdown(label=label("document_type"), choices=doc_type_choices(),
                                                   value="generic", elem_id="upload-type")
                            lane = gr.Dropdown(label=label("lane"), choices=LANE_CHOICES,
                                               value=LANE_CHOICES[0][1], elem_id="upload-lane")
                            # shown where there is a choice: a vision engine and its classic reader
                            readings = appliance.readings()
                            engine = gr.Dropdown(label=label("read_with"), value="", interactive=True,
                                                 choices=[(label("configured_engine"), ""),
                                                          *readings],
                                                 visible=len(readings) > 1, elem_id="upload-engine")
                            text_layer = gr.Dropdown(label=label("text_layer"), value="",
                                                     choices=TEXT_LAYER_CHOICES,
                                                     elem_id="upload-text-layer")
                        with gr.Row():
                            tags = gr.Textbox(label=label("tags_input"), elem_id="upload-tags")
                            password = gr.Textbox(label=label("pdf_password"), type="password",
                                                  elem_id="upload-password")
                upload_results = gr.HTML("", css_template=UPLOAD_CSS, elem_id="upload-results")
            drop_summary = gr.HTML("", css_template=UPLOAD_CSS, visible=False,
                                   elem_id="upload-summary")
            with gr.Row(equal_height=True):
                search = gr.Textbox(label=label("search"), scale=4, elem_id="documents-search",
                                    placeholder=label("search_placeholder"))
                sort = gr.Dropdown(label=label("sort"), choices=SORT_CHOICES, value=NEWEST,
                                   scale=1, elem_id="documents-sort")
                search_button = gr.Button(label("search"), variant="primary", scale=0, min_width=100,
                                          elem_id="documents-search-button")
            # folded unless asked for (its label counts the filters set): the list stays
            # in view on a laptop's screen
            filters_box = gr.Accordion(label("filters"), open=False, elem_id="documents-filters")
            with filters_box, gr.Row():
                statuses = gr.Dropdown(label=label("filter_status"), value=[],
                                       choices=[(label(f"status_{s}"), s.value) for s in DocStatus],
                                       multiselect=True, elem_id="filter-status")
                type_filter = gr.Dropdown(label=label("filter_type"),
                                          choices=[(label("any_type"), ANY), *doc_type_choices()],
                                          value=ANY, elem_id="filter-type")
                tag = gr.Textbox(label=label("filter_tag"), elem_id="filter-tag")
                source = gr.Dropdown(label=label("filter_source"), choices=SOURCE_CHOICES, value=ANY,
                                     elem_id="filter-source")
                folder = gr.Dropdown(label=label("filter_folder"), value=ANY, elem_id="filter-folder",
                                     choices=[(label("any_folder"), ANY), *(w.name or Path(w.path).name
                                                                     for w in settings.watch)])
            with filters_box, gr.Row():
                engine_filter = gr.Dropdown(label=label("filter_engine"), value=ANY, elem_id="filter-engine",
                                            choices=[(label("any_engine"), ANY),
                                                     *registry.readers()])
                fields = gr.Dropdown(label=label("filter_fields"), choices=FIELDS_CHOICES, value=ANY,
                                     elem_id="filter-fields")
                since = gr.DateTime(label=label("filter_since"), include_time=False, type="timestamp",
                                    elem_id="filter-since")
                until = gr.DateTime(label=label("filter_until"), include_time=False, type="timestamp",
                                    elem_id="filter-until")
                clear_filters = gr.Button(label("clear_filters"), size="sm", scale=0,
                                          min_width=110, elem_id="filters-clear")
            with gr.Row(equal_height=True):
                pager = {move: gr.Button(PAGER_LABELS[move], size="sm", scale=0, min_width=110,
                                         elem_id=f"documents-{move}") for move in PAGER_MOVES}
                refresh_button = gr.Button(label("refresh_list"), size="sm", scale=0, min_width=110,
                                           elem_id="documents-refresh")
                page_line = gr.Markdown(elem_id="documents-count")
            with gr.Row(equal_height=True):
                picked_line = gr.Markdown(label("none_ticked"), elem_id="documents-picked")
                bulk = {action: gr.Button(label(f"bulk_{action}"), size="sm",
                                          elem_id=f"bulk-{action}", visible=action != "delete",
                                          variant="stop" if action == "delete" else "secondary")
                        for action in ACTIONS}
                zip_button = gr.Button(label("bulk_zip"), size="sm", elem_id="bulk-zip")
            confirm = ConfirmDelete(appliance, "bulk")
            zip_file = gr.File(label=label("bulk_zip_file"), visible=False,
                               elem_id="bulk-zip-file")
            message = safe_markdown_view(elem_id="documents-message")
            results = gr.HTML("", js_on_load=LIST_JS, css_template=LIST_CSS,
                              elem_id="documents-list")
        with gr.Tab(label("tab_document"), id="document"):
            document = DocumentTab(appliance, download_dir)
        yield  # the tab bar's other tabs

    filters = [search, statuses, type_filter, tag, source, folder, since, until, engine_filter,
               fields, sort]
    list_key, listed, picked = gr.State(""), gr.State(Listed()), gr.State([])
    dropped = gr.State([])  # the files of the last drop (ui.upload.Upload)
    list_outputs = [results, page_line, list_key, listed]

    def pace():
        """Each document's time left at the pace of the pages read last."""
        recent = metrics_for(appliance).recent_completions()[-PACE_PAGES:]
        times = [c.service_s for c in recent]
        return lambda view: remaining_s(view, times, len(appliance.workers))

    def drawn(rows: Listed, views: dict, known: str, changed: bool, lang: str) -> list:
        """[the list, its count line, its key]: the list only when it differs from ``known``."""
        shown = results_html(rows, views, not appliance.review_unstaffed(), pace(), lang)
        key = hashlib.sha256(shown.encode()).hexdigest()
        line = pager_text(rows.query.offset if rows.query else 0, len(rows.ids), rows.total,
                          changed, lang)
        return [gr.skip() if key == known else shown, line, key]

    unchanged = [gr.skip()] * len(list_outputs)  # before the first query has run

    def run(query, lang: str) -> list:
        """A query runs: the rows it finds become the list."""
        if query is None:
            return unchanged
        found = appliance.library.find(query)
        if found.total and query.offset >= found.total:  # the last page emptied
            query = replace(query, offset=pager_offset("last", query.offset, found.total))
            found = appliance.library.find(query)
        rows = Listed.of(query, found)
        return [*drawn(rows, {view.doc.id: view for view in found.documents}, "", False, lang),
                rows]

    def redrawn(rows: Listed, known: str, lang: str) -> list:
        """The listed rows as they are now, where they were; and whether the query finds
        others by now."""
        if rows.query is None:
            return unchanged
        changed = rows.differs(appliance.library.find(rows.query))
        return [*drawn(rows, appliance.library.documents(list(rows.ids)), known, changed, lang),
                gr.skip()]

    def on_query(request: gr.Request, *values):
        """A new query: its rows, and the message about the rows before cleared."""
        return [*run(browse_query(*values), language_of(request)), ""]

    def on_search(request: gr.Request, *values):
        *controls, sort_value = values
        order = search_sort(controls[0], sort_value)
        return [gr.Dropdown(value=order), *on_query(request, *controls, order)]

    def pager_handler(move: str):
        def handler(rows: Listed, request: gr.Request):
            return run(rows.query and replace(
                rows.query, offset=pager_offset(move, rows.query.offset, rows.total)),
                language_of(request))
        return handler

    def on_refresh(rows: Listed, request: gr.Request):
        return run(rows.query, language_of(request))

    def on_tick(rows, known, latest, document_id, index, shown, uploads, request: gr.Request):
        lang = language_of(request)
        return [*redrawn(rows, known, lang),
                *document.refresh(latest, document_id, index, shown, lang),
                drop_summary_html(appliance, uploads, lang) if uploads else gr.skip()]

    def on_open(latest, evt: gr.EventData, request: gr.Request):
        """The document in its tab, without the message about the one open before."""
        return [gr.Tabs(selected="document"), "",
                *document.open(latest, str(evt.document), int(getattr(evt, "page", 0) or 0),
                               language_of(request))]

    def on_pick(evt: gr.EventData, request: gr.Request):
        chosen = [str(d) for d in getattr(evt, "documents", None) or []]
        return chosen, picked_text(appliance, chosen, language_of(request))

    def acted(action: str, chosen: list[str], username: str | None, lang: str) -> str:
        return safe_markdown(perform(appliance, action, chosen, username, lang))

    def bulk_handler(action: str):
        def handler(chosen, request: gr.Request):
            return acted(action, chosen, getattr(request, "username", None),
                         language_of(request))
        return handler

    def on_zip(chosen, request: gr.Request):
        path, said = download_zip(appliance, chosen, download_dir / "zips", language_of(request))
        # a str: Gradio 6.31's FileData refuses a Path
        return (gr.File(value=str(path) if path else None, visible=path is not None),
                safe_markdown(said))

    def on_upload(files, type_value, lane_value, tag_text, engine_name, secret, own_text,
                  request: gr.Request):
        lang = language_of(request)
        uploaded = handle_upload(appliance, files, UploadChoices(
            type_value, lane_value, tag_text or "", engine_name or "", secret or "",
            own_text or ""), lang)
        # the password is not kept
        return (upload_html(upload_rows(appliance, uploaded, lang), lang), None, "",
                gr.Accordion(open=False),
                gr.HTML(drop_summary_html(appliance, uploaded, lang), visible=bool(uploaded)),
                uploaded)

    cleared = {statuses: [], type_filter: ANY, tag: "", source: ANY, folder: ANY, since: None,
               until: None, engine_filter: ANY, fields: ANY}

    def on_filters(request: gr.Request, *values):
        """The folded filters' label: how many are set."""
        count = sum(1 for value in values if value not in (None, ANY, []))
        lang = language_of(request)
        return gr.Accordion(label=text("filters_set", lang, n=count) if count
                            else text("filters", lang))

    def on_load(request: gr.Request):
        username = getattr(request, "username", None)
        lang = language_of(request)
        allowed = gr.Button(visible=may_delete(appliance, username))
        reviews = gr.Button(visible=may_review(appliance, username))
        return (user_line(appliance, username, lang), gr.Button(visible=bool(username)), allowed,
                allowed, *(reviews for _ in document.turns), *document.headers(lang),
                *keys.shown(username, lang))

    private = dict(api_visibility="private")
    filter_controls = (statuses, type_filter, source, folder, since, until, engine_filter,
                       fields)
    querying = dict(inputs=filters, show_progress="hidden", concurrency_limit=8,
                    concurrency_id="documents-query", **private)
    refresh = dict(fn=on_query, outputs=[*list_outputs, message], **querying)
    gr.on([search.submit, search_button.click], fn=on_search,
          outputs=[sort, *list_outputs, message], **querying)
    # the sort on .input: the search's own change of it has run its query already
    gr.on([tag.submit, tag.blur, sort.input,
           *(control.change for control in filter_controls)], **refresh)
    gr.on([tag.submit, tag.blur, *(control.change for control in filter_controls)],
          fn=on_filters, inputs=[tag, *filter_controls], outputs=filters_box,
          show_progress="hidden", **private)
    # every filter to "any"; the tag has no change event of its own (it runs its query
    # once typed), so the cleared query runs and the fold is relabelled after
    clear_filters.click(lambda: list(cleared.values()), outputs=list(cleared), **private).then(
        **refresh).then(on_filters, inputs=[tag, *filter_controls], outputs=filters_box,
                        show_progress="hidden", **private)
    for move, button in pager.items():
        button.click(pager_handler(move), inputs=listed, outputs=list_outputs, **private)
    refresh_button.click(on_refresh, inputs=listed, outputs=list_outputs, **private)
    gr.Timer(REFRESH_S).tick(
        on_tick, inputs=[listed, list_key, document.latest, document.document_id,
                         document.page_index, document.shown_key, dropped],
        outputs=[*list_outputs, *document.outputs, drop_summary], show_progress="hidden",
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
    def after_action(rows: Listed, request: gr.Request):
        return redrawn(rows, "", language_of(request))

    after_action = dict(fn=after_action, inputs=listed, outputs=list_outputs,
                        show_progress="hidden", **private)
    for action, button in bulk.items():
        if action != "delete":  # Delete asks first
            button.click(bulk_handler(action), inputs=picked, outputs=message,
                         trigger_mode="once", concurrency_limit=4,
                         concurrency_id="document-actions", **private).then(**after_action)
    confirm.wire(bulk["delete"], [picked], list, message,
                 lambda asked, username, lang: [acted("delete", asked, username, lang)], [message]
                 ).then(**after_action)
    zip_button.click(on_zip, inputs=picked, outputs=[zip_file, message], trigger_mode="once",
                     concurrency_limit=2, concurrency_id="documents-zip", **private)
    upload.upload(on_upload, inputs=[upload, doc_type, lane, tags, engine, password, text_layer],
                  outputs=[upload_results, upload, password, upload_panel, drop_summary,
                           dropped], concurrency_limit=4,
                  **private).then(**refresh)
    gr.on(triggers=None, fn=on_load,
          outputs=[user, sign_out, bulk["delete"], document.actions["delete"],
                   *document.turns.values(),
                   *document.header_outputs, keys.box, keys.listed, keys.which],
          **private).then(**refresh)
