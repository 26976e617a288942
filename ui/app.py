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
from ui.auth import Sessions, mount_sign_in, mount_signed_in
from ui.components import MARKDOWN_VIEW_CSS, escape_markdown_text
from ui.dashboard import dashboard_tab
from ui.document_status import NO_REVIEWER_TEXT
from ui.page_image import ZOOM_CSS
from ui.review import mount_review
from ui.workspace import workspace_tabs

STATUS_REFRESH_S = 2.0


def status_line(appliance: Appliance) -> str:
    """One line on the appliance's state, e.g. "paused: GPU memory 87 %" while memory
    is above its high watermark and no new pages start; a warning above it while pages
    routed to review can never finish."""
    status = appliance.status()
    ready = "ready" if status["ready"] else "starting: the engine is warming up"
    line = (f"Engine **{status['engine']}**, {ready} · {status['queue_depth']} pages waiting"
            f" · {status['memory']['message']}")  # our own words: no escaping needed
    if appliance.review_unstaffed():
        line = (f"**⚠ Review is on, but {NO_REVIEWER_TEXT}. Pages sent to review cannot "
                f"finish until then.**\n\n{line}")
    return line


def build_ui(appliance: Appliance, download_dir: Path) -> gr.Blocks:
    # analytics off: an on-premise appliance must not call out
    with gr.Blocks(title="OCR Appliance", analytics_enabled=False,
                   delete_cache=(3600, 3600)) as blocks:
        gr.Markdown("## OCR Appliance")
        if appliance.engine_notice:  # e.g. running on the classic engine: say how to add a model
            gr.Markdown(f"**Note:** {escape_markdown_text(appliance.engine_notice)}",
                        elem_id="engine-notice", container=True, padding=True)
        health = gr.Markdown(status_line(appliance), elem_id="status-line")
        gr.Timer(STATUS_REFRESH_S).tick(lambda: status_line(appliance), outputs=health,
                                        show_progress="hidden", api_visibility="private")
        with workspace_tabs(appliance, download_dir):
            with gr.Tab("Dashboard", id="dashboard"):
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
                    # Gradio's "Use via API" would show an empty page: the
                    # workspace links the REST API's docs instead
                    footer_links=["settings"], run_history=False,
                    ssr_mode=False, mcp_server=False, css=ZOOM_CSS + MARKDOWN_VIEW_CSS)
