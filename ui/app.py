"""The web UI: Gradio Blocks mounted on the daemon's FastAPI app at "/".

Tabs:
- Documents: drag-and-drop upload, a live status table of recent documents, and
  the result of a selected document (rendered Markdown, raw text, downloads).
- Dashboard (``ui/dashboard.py``): queue, throughput, latency, memory, review
  backlog and the latest failures.

The handlers are plain functions of the ``Appliance`` (``handle_upload``,
``show_document``, ``load_recent``); the Gradio wiring in ``build_ui`` only adapts
their results to component updates. The UI reads through ``appliance.store.queries``
and ``appliance.export`` and never touches SQL.
"""

from __future__ import annotations

import atexit
import logging
import os
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import gradio as gr
from fastapi import FastAPI

from appliance.daemon import Appliance
from appliance.errors import ApplianceError, NotFound, NotReady
from appliance.export import FORMATS, SUFFIXES, document_error, safe_stem, write_atomic
from appliance.intake import SubmitOptions
from appliance.store import queries
from appliance.store.models import PageStatus
from appliance.store.queries import DocumentView
from ui.components import escape_markdown_text, safe_markdown, safe_markdown_view
from ui.dashboard import dashboard_tab
from ui.auth import Sessions, mount_sign_in, mount_signed_in, signed_in_text
from ui.review import mount_review

log = logging.getLogger(__name__)

RECENT_LIMIT = 50
REFRESH_S = 1.0
STATUS_REFRESH_S = 2.0
UPLOAD_HEADERS = ["File", "Status", "Details"]
STATUS_HEADERS = ["Name", "Status", "Pages done", "Error", "Document id"]
DOWNLOAD_LABELS = {"md": "Download Markdown (.md)", "json": "Download JSON (.json)",
                   "txt": "Download text (.txt)", "hocr": "Download hOCR (.hocr)",
                   "alto": "Download ALTO XML (.alto.xml)",
                   "pdf": "Download searchable PDF (.pdf)",
                   "fields.json": "Download key fields (.fields.json)"}
INTERNAL_ERROR_TEXT = ("the file could not be accepted because of an internal error; "
                       "the server log has the details")
NO_REVIEWER_TEXT = ("no reviewer account exists, so nobody can check it: an administrator must "
                    "add one with `appliance users add NAME`")
TABLE_TEXT_CHARS = 90  # longer details are cut in the tables, whole in the document view
_REASON_CODE_SUFFIX = re.compile(r" \[[a-z_]+\]$")


# --- Gradio-independent logic -------------------------------------------------


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
    """Why a document (or some of its pages) failed, in plain words; empty if nothing did."""
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


def cut(text: str, limit: int = TABLE_TEXT_CHARS) -> str:
    """Long text cut for a table cell, keeping a final "[reason_code]" (the document view
    shows it whole)."""
    if len(text) <= limit:
        return text
    code = _REASON_CODE_SUFFIX.search(text)
    suffix = code.group(0) if code else ""
    return text[:limit - len(suffix) - 1].rstrip() + "…" + suffix


def document_row(view: DocumentView, reviewers_exist: bool = True) -> list[str]:
    done, total = page_progress(view)
    return [view.doc.name, str(view.status), f"{done}/{total}",
            cut(status_details(view, reviewers_exist)), view.doc.id]


def document_rows(views: list[DocumentView], reviewers_exist: bool = True) -> list[list[str]]:
    return [document_row(v, reviewers_exist) for v in views]


def document_choices(views: list[DocumentView]) -> list[tuple[str, str]]:
    """Dropdown entries (label, document id); labels do not change while a document runs."""
    return [(f"{v.doc.name} · {datetime.fromtimestamp(v.doc.created_at):%Y-%m-%d %H:%M:%S}"
             f" · {v.doc.id[:8]}", v.doc.id) for v in views]


def load_recent(appliance: Appliance, limit: int = RECENT_LIMIT) -> list[DocumentView]:
    """The newest documents; those with failed pages carry their pages for the errors."""
    return [queries.get_document(appliance.db, v.doc.id) or v
            if v.page_counts[PageStatus.FAILED] else v
            for v in queries.list_documents(appliance.db, limit)]


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


@dataclass(frozen=True)
class Upload:
    """One file of the last upload: the document it became, or why it was refused."""

    name: str
    document_id: str | None = None
    refusal: str = ""


def upload_row(upload: Upload, view: DocumentView | None,
               reviewers_exist: bool = True) -> list[str]:
    """(file, status, details) as the document stands now, not as it was submitted."""
    if upload.document_id is None:  # whole: there is no document view to read it in
        return [upload.name, "refused", upload.refusal]
    if view is None:  # deleted since
        return [upload.name, "unknown", "the document is no longer stored"]
    details = status_details(view, reviewers_exist)
    if not details:
        done, total = page_progress(view)
        details = (f"{total} page{'s' if total != 1 else ''} read" if view.is_final else
                   f"{done} of {total} page{'s' if total != 1 else ''} done")
    return [upload.name, str(view.status), cut(details)]


def upload_rows(appliance: Appliance, uploads: list[Upload]) -> list[list[str]]:
    reviewers_exist = not appliance.review_unstaffed()
    return [upload_row(u, queries.get_document(appliance.db, u.document_id)
                       if u.document_id else None, reviewers_exist) for u in uploads]


def upload_name(item) -> str:
    """The original base name of an uploaded file.

    Gradio stores each upload as ``<cache>/<hash>/<original base name>`` (minus
    characters that are unsafe in file names) and hands the handler that server-side
    path; a client-side path never reaches us. Only the last component is used.
    """
    return Path(os.fspath(item)).name


def handle_upload(appliance: Appliance, files, engine: str = "") -> list[Upload]:
    """Submit every uploaded file: the document each became, or why it was refused.

    A file that is refused (too large, unreadable, an engine that does not run here,
    ...) gets its reason in plain words and the others still go through. ``engine``:
    the engine to read them with ("": the configured one).
    """
    results = []
    for item in files or []:
        path = Path(os.fspath(item))  # the copy in Gradio's upload cache, on this host
        name = upload_name(item)
        try:
            appliance.check_engine(engine or None)
            doc = appliance.submit_path(path, SubmitOptions(source="upload",
                                                            engine=engine or None))
        except ApplianceError as exc:
            log.warning("upload refused name=%r code=%s", name, exc.code)
            results.append(Upload(name, refusal=error_text(exc.code, exc.message)))
            continue
        except Exception:
            log.exception("upload failed name=%r", name)
            results.append(Upload(name, refusal=INTERNAL_ERROR_TEXT))
            continue
        results.append(Upload(name, doc.id))
    return results


@dataclass
class DocumentPanel:
    """What the result area shows for one document."""

    title: str = ""
    markdown: str = ""
    text: str = ""
    files: dict[str, Path] = field(default_factory=dict)  # format -> file to download
    key: str = ""  # changes whenever what is shown would change
    in_review: bool = False  # a person has to check pages of it: show the way there


def view_key(view: DocumentView | None) -> str:
    if view is None:
        return ""
    return f"{view.doc.id}:{view.status}:{sorted(view.page_counts.items())}:{view.doc.exported_at}"


def _title(view: DocumentView, reviewers_exist: bool) -> str:
    done, total = page_progress(view)
    title = f"### {escape_markdown_text(view.doc.name)}\n\n**{view.status}**, {done}/{total} pages done"
    details = status_details(view, reviewers_exist)
    return title + (f" — {escape_markdown_text(details)}" if details else "")


def write_downloads(rendered: dict[str, str | bytes], download_dir: Path, document_id: str,
                    name: str) -> dict[str, Path]:
    """The renderings as files named after the document, in a folder of their own."""
    folder = download_dir / document_id
    folder.mkdir(parents=True, exist_ok=True)
    stem = safe_stem(name)
    files = {}
    for fmt in FORMATS:
        path = folder / f"{stem}{SUFFIXES[fmt]}"
        write_atomic(path, rendered[fmt])
        files[fmt] = path
    return files


def show_document(appliance: Appliance, document_id: str | None,
                  download_dir: Path) -> DocumentPanel:
    """The result of one document, or why it is not there yet."""
    if not document_id:
        return DocumentPanel(markdown="Select a document to see its result.")
    view = queries.get_document(appliance.db, document_id)
    if view is None:
        return DocumentPanel(markdown="There is no document with this id.")
    key = view_key(view)
    title = _title(view, not appliance.review_unstaffed())
    if not view.is_final:
        return DocumentPanel(title=title, key=key,
                             in_review=bool(view.page_counts[PageStatus.REVIEW]),
                             markdown="The result appears here when every page is finished.")
    if view.doc.error_code:  # refused at intake: nothing was recognised
        return DocumentPanel(title=title, key=key,
                             markdown="This document could not be processed; "
                                      "the reason is shown above.")
    try:
        rendered = appliance.exporter.rendered(document_id, FORMATS)
    except (NotReady, NotFound) as exc:  # changed between the two reads
        return DocumentPanel(title=title, key=key, markdown=exc.message)
    files = write_downloads(rendered, download_dir, document_id, view.doc.name)
    return DocumentPanel(title=title, markdown=rendered["md"], text=rendered["txt"],
                         files=files, key=key)


# --- Gradio wiring ---------------------------------------------------------------


def _panel_updates(panel: DocumentPanel) -> list:
    buttons = [gr.DownloadButton(DOWNLOAD_LABELS[fmt], value=panel.files.get(fmt),
                                 interactive=fmt in panel.files) for fmt in FORMATS]
    return [safe_markdown(panel.title), gr.Button(visible=panel.in_review),
            safe_markdown(panel.markdown), panel.text, *buttons, panel.key]


def _documents_tab(appliance: Appliance, download_dir: Path) -> None:
    with gr.Row():
        with gr.Column(scale=2):
            upload = gr.File(label="Drop documents here (PDF, TIFF, PNG, JPEG, ...)",
                             file_count="multiple", type="filepath")
            # shown where there is a choice: a vision engine, local or remote, and the
            # classic reader it keeps
            readings = appliance.readings()
            engine = gr.Dropdown(label="Read with", value="", interactive=True,
                                 choices=[("the configured engine", ""), *readings],
                                 visible=len(readings) > 1, elem_id="upload-engine")
        with gr.Column(scale=3):
            upload_results = gr.Dataframe(headers=UPLOAD_HEADERS, datatype="str",
                                          label="Last upload", interactive=False,
                                          column_count=len(UPLOAD_HEADERS), wrap=True)
    status_table = gr.Dataframe(headers=STATUS_HEADERS, datatype="str", interactive=False,
                                label="Recent documents (select a row to see its result)",
                                column_count=len(STATUS_HEADERS), wrap=True, max_height=400)
    # custom values allowed: the choices are refreshed per browser session, and an id from
    # the table may be selected before its refresh arrives; unknown ids are answered below
    selector = gr.Dropdown(label="Document", choices=[], value=None, interactive=True,
                           allow_custom_value=True)
    title = safe_markdown_view(elem_id="document-title")
    review_link = gr.Button("Open the review console", link="/review/", visible=False,
                            variant="primary", size="sm", elem_id="open-review")
    with gr.Row():
        buttons = [gr.DownloadButton(DOWNLOAD_LABELS[fmt], interactive=False, size="sm")
                   for fmt in FORMATS]
    with gr.Tabs():
        with gr.Tab("Rendered"):
            # a line break in the Markdown is one on screen: receipts and forms keep their lines
            body = safe_markdown_view(value="Select a document to see its result.",
                                      container=True, padding=True, max_height=800,
                                      line_breaks=True, elem_id="document-body")
        with gr.Tab("Text"):
            text = gr.Textbox(label="Recognised text", interactive=False, lines=12,
                              max_lines=40, buttons=["copy"])
    shown_key = gr.State("")
    choices_state = gr.State([])
    uploads = gr.State([])  # this browser's last upload, followed until it is final
    shown_uploads = gr.State([])
    timer = gr.Timer(REFRESH_S)
    panel_outputs = [title, review_link, body, text, *buttons, shown_key]

    def on_upload(files, engine_name):
        results = handle_upload(appliance, files, engine_name or "")
        rows = upload_rows(appliance, results)
        return rows, results, rows, None

    def on_select_document(document_id):
        return _panel_updates(show_document(appliance, document_id, download_dir))

    def on_select_row(evt: gr.SelectData):
        row = evt.row_value or []
        return row[-1] if row else gr.skip()

    def on_tick(document_id, shown, known_choices, last_upload, shown_rows):
        views = load_recent(appliance)
        choices = document_choices(views)
        choices_update = (gr.skip(), gr.skip()) if choices == known_choices else \
            (gr.Dropdown(choices=choices), choices)
        current = queries.get_document(appliance.db, document_id) if document_id else None
        if current is not None and view_key(current) != shown:
            panel = _panel_updates(show_document(appliance, document_id, download_dir))
        else:
            panel = [gr.skip()] * len(panel_outputs)
        rows = upload_rows(appliance, last_upload)
        upload_update = (gr.skip(), gr.skip()) if rows == shown_rows else (rows, rows)
        return [document_rows(views, not appliance.review_unstaffed()), *choices_update,
                *upload_update, *panel]

    upload.upload(on_upload, inputs=[upload, engine],
                  outputs=[upload_results, uploads, shown_uploads, upload],
                  concurrency_limit=4, api_visibility="private")
    selector.change(on_select_document, inputs=selector, outputs=panel_outputs,
                    api_visibility="private")
    status_table.select(on_select_row, inputs=None, outputs=selector, api_visibility="private")
    timer.tick(on_tick, inputs=[selector, shown_key, choices_state, uploads, shown_uploads],
               outputs=[status_table, selector, choices_state, upload_results, shown_uploads,
                        *panel_outputs],
               show_progress="hidden", trigger_mode="once", concurrency_limit=8,
               concurrency_id="documents-refresh", api_visibility="private")


def build_ui(appliance: Appliance, download_dir: Path) -> gr.Blocks:
    # analytics off: an on-premise appliance must not call out
    with gr.Blocks(title="OCR Appliance", analytics_enabled=False,
                   delete_cache=(3600, 3600)) as blocks:
        gr.Markdown("## OCR Appliance")
        if appliance.engine_notice:  # e.g. running on the classic engine: say how to add a model
            gr.Markdown(f"**Note:** {escape_markdown_text(appliance.engine_notice)}",
                        elem_id="engine-notice", container=True, padding=True)
        signed_in = gr.Markdown("", elem_id="signed-in")
        blocks.load(signed_in_text, inputs=None, outputs=signed_in, api_visibility="private")
        health = gr.Markdown(status_line(appliance), elem_id="status-line")
        gr.Timer(STATUS_REFRESH_S).tick(lambda: status_line(appliance), outputs=health,
                                        show_progress="hidden", api_visibility="private")
        with gr.Tabs():
            with gr.Tab("Documents", id="documents"):
                _documents_tab(appliance, download_dir)
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
    # with API keys or accounts configured, the UI needs a reviewer's (or admin's) login;
    # decided on every request, so the first key or account protects it at once
    mount_signed_in(app, blocks, "/", sessions, required=appliance.auth_on,
                    max_file_size=appliance.settings.limits.max_bytes,
                    footer_links=["api", "settings"], run_history=False,
                    ssr_mode=False, mcp_server=False)
