"""The web UI: Gradio Blocks mounted on the daemon's FastAPI app at "/".

Tabs:
- Documents and Document (``ui/workspace.py``): upload with options, the documents
  browser (search, filters, sorting, paging, actions on ticked documents), and the
  document view it opens.
- Dashboard (``ui/dashboard.py``): queue, throughput, latency, memory, review
  backlog and the latest failures.

The UI reads through ``appliance.library`` (and ``appliance.review``,
``appliance.exporter``) and never touches the store.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
from pathlib import Path

import gradio as gr
from fastapi import FastAPI

from appliance.daemon import Appliance
from appliance.engine_choice import EngineNotice
from ui.auth import Sessions, mount_sign_in, mount_signed_in
from ui.components import MARKDOWN_VIEW_CSS, escape_markdown_text
from ui.dashboard import dashboard_tab
from ui.document_status import error_words
from ui.i18n import EN, label, language_of, memory_text, text
from ui.page_image import ZOOM_CSS
from ui.review import mount_review
from ui.workspace import workspace_tabs

STATUS_REFRESH_S = 2.0


def status_line(appliance: Appliance, lang: str = EN) -> str:
    """One line on the appliance's state, e.g. "paused: GPU memory 87 %" while memory
    is above its high watermark and no new pages start; a warning above it while pages
    routed to review can never finish."""
    status = appliance.status()
    ready = text("engine_ready" if status["ready"] else "engine_starting", lang)
    # our own words: no escaping needed (the memory's state too, by its words)
    line = text("status_line", lang, engine=status["engine"], ready=ready,
                queued=status["queue_depth"], memory=memory_text(status["memory"], lang))
    if appliance.review_unstaffed():
        line = f"{text('review_unstaffed', lang, why=text('no_reviewer', lang))}\n\n{line}"
    return line


def engine_notice_text(notice: EngineNotice, lang: str = EN) -> str:
    """Why the configured vision model does not read pages, in ``lang``, as Markdown: its
    values (an engine, a library, a model's failure in ``lang``: ``error_words``) shown
    as they are."""
    values = dict(notice.values)
    if "code" in values:
        values["reason"] = error_words(values.pop("code"), values.pop("message"), lang)
    return text(f"engine_notice_{notice.case}", lang,
                **{name: escape_markdown_text(value) for name, value in values.items()})


def build_ui(appliance: Appliance, download_dir: Path) -> gr.Blocks:
    # analytics off: an on-premise appliance must not call out; the title is set in
    # the page's language by ui.i18n.language_script (Gradio shows a title as it is)
    with gr.Blocks(title=text("app_title"), analytics_enabled=False,
                   delete_cache=(3600, 3600)) as blocks:
        gr.Markdown(label("app_heading"))
        if appliance.engine_notice:  # e.g. running on the classic engine: say how to add a model
            notice = gr.Markdown(elem_id="engine-notice", container=True, padding=True)

            def notice_line(request: gr.Request) -> str:
                lang = language_of(request)
                return text("note", lang, note=engine_notice_text(appliance.engine_notice, lang))

            blocks.load(notice_line, outputs=notice, api_visibility="private")
        health = gr.Markdown(elem_id="status-line")

        def health_line(request: gr.Request) -> str:
            return status_line(appliance, language_of(request))

        blocks.load(health_line, outputs=health, show_progress="hidden",
                    api_visibility="private")
        gr.Timer(STATUS_REFRESH_S).tick(health_line, outputs=health,
                                        show_progress="hidden", api_visibility="private")
        with workspace_tabs(appliance, download_dir):
            with gr.Tab(label("tab_dashboard"), id="dashboard"):
                dashboard_tab(appliance)
    return blocks


def mount_ui(app: FastAPI, appliance: Appliance) -> None:
    """Mount the UI at "/" of ``app`` (and the review console at "/review" before it).
    Call it after every other route is added: the mount catches every path that no
    earlier route matched."""
    sessions = Sessions(appliance.users)
    mount_sign_in(app, sessions)  # one sign-in for both UIs, before their mounts
    mount_review(app, appliance, sessions)  # before "/", which would catch "/review" too
    download_dir = Path(tempfile.mkdtemp(prefix="appliance-ui-"))
    atexit.register(shutil.rmtree, download_dir, ignore_errors=True)
    blocks = build_ui(appliance, download_dir)
    # with API keys or accounts configured (or on a network address), the UI needs a
    # reviewer's (or admin's) login; decided on every request, so the first key or
    # account protects it at once
    mount_signed_in(app, blocks, "/", sessions, required=appliance.auth_on,
                    max_file_size=appliance.settings.limits.max_bytes,
                    # no footer: Gradio's "Use via API" would show an empty page (the
                    # workspace links the REST API's docs instead), and its settings are
                    # a developer's (PWA, screen recording); the language is ours
                    footer_links=[], run_history=False,
                    ssr_mode=False, mcp_server=False, css=ZOOM_CSS + MARKDOWN_VIEW_CSS)
