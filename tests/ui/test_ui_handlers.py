"""The web UI's handlers, called directly against a real Appliance (real SQLite, real
RapidOCR worker), and the Markdown component's sanitising of untrusted OCR text."""

from __future__ import annotations

import copy
import json
import time
from html.parser import HTMLParser
from pathlib import Path

import gradio as gr
import pytest

from appliance.config import settings_from_dict
from appliance.daemon import Appliance
from appliance.export import FORMATS, SUFFIXES
from appliance.library import DocumentQuery
from tests.fixtures.documents import text_similarity, write_pdf, write_png
from ui.actions import perform, turn_page
from ui.document_tab import DocumentTab
from ui.document_view import WAITING_TEXT, show_document, show_page
from ui.downloads import prepare_downloads
from ui.listing import list_details
from ui.upload import UploadChoices, handle_upload, upload_rows
from ui.components import escape_markdown_text, safe_markdown, safe_markdown_view

PAGE_A = ["Invoice number 4711", "Delivery of office chairs", "Total amount 118.50 EUR"]
PAGE_B = ["Quarterly report", "Revenue grew by twelve percent", "Signed by the board"]
PAGE_C = ["Receipt from the bakery", "Two loaves of bread", "Paid in cash"]
READY_TIMEOUT_S = 120
FINAL_TIMEOUT_S = 180


def make_appliance(tmp: Path, **sections) -> Appliance:
    raw = {"paths": {"data_dir": str(tmp / "data"), "output_dir": str(tmp / "out")},
           "engine": {"name": "classic", "threads": 1},
           "workers": {"count": 1}}
    for section, values in sections.items():
        raw.setdefault(section, {}).update(values)
    return Appliance(settings_from_dict(raw, base_dir=tmp))


@pytest.fixture
def running_appliance(tmp_path):
    appliance = make_appliance(tmp_path)
    appliance.start()
    try:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not appliance.ready:
            assert time.monotonic() < deadline, f"not ready: {appliance.status()}"
            time.sleep(0.2)
        yield appliance
    finally:
        appliance.stop()


def wait_final(appliance: Appliance, doc_ids: list[str]) -> None:
    deadline = time.monotonic() + FINAL_TIMEOUT_S
    while True:
        views = [appliance.library.document(d) for d in doc_ids]
        if all(v.is_final for v in views):
            return
        assert time.monotonic() < deadline, [str(v.status) for v in views]
        time.sleep(0.3)


def uploads(tmp: Path) -> Path:
    """Gradio hands the handler server-side copies named like the originals."""
    folder = tmp / "gradio-cache" / "0123abcd"
    folder.mkdir(parents=True)
    return folder


def test_upload_with_options_then_show_results(running_appliance, tmp_path):
    folder = uploads(tmp_path)
    pdf = write_pdf(folder / "report.pdf", [PAGE_A, PAGE_B])
    png = write_png(folder / "receipt.png", PAGE_C)

    uploaded = handle_upload(running_appliance, [str(pdf), str(png)], UploadChoices(
        doc_type="report", lane="batch", tags="board, q3 ,", engine="classic"))
    assert upload_rows(running_appliance, uploaded) == [
        ["report.pdf", "accepted", "2 pages to read; the list shows how far it is"],
        ["receipt.png", "accepted", "1 page to read; the list shows how far it is"]]
    doc_ids = {u.name: u.document_id for u in uploaded}
    doc = running_appliance.library.document(doc_ids["report.pdf"]).doc
    assert (doc.doc_type, doc.lane, doc.tags, doc.engine, doc.source) == (
        "report", "batch", ["board", "q3"], "classic", "upload")

    # not final yet (or already final on a fast machine): never a half result
    early = show_document(running_appliance, doc_ids["report.pdf"])
    if not running_appliance.library.document(doc_ids["report.pdf"]).is_final:
        assert early.note == WAITING_TEXT and not early.downloadable

    wait_final(running_appliance, list(doc_ids.values()))
    found = running_appliance.library.find(DocumentQuery(tag="board", sort="name"))
    assert [v.doc.name for v in found.documents] == ["report.pdf", "receipt.png"]
    assert [list_details(v, True) for v in found.documents] == ["", ""]

    download_dir = tmp_path / "dl"
    for name, pages in (("report.pdf", [PAGE_A, PAGE_B]), ("receipt.png", [PAGE_C])):
        panel = show_document(running_appliance, doc_ids[name])
        assert panel.downloadable and not panel.note
        files, note = prepare_downloads(running_appliance, doc_ids[name], download_dir)
        # a report has no key fields: nothing to download of them
        assert set(files) == set(FORMATS) - {"fields.json"}, note
        stem = Path(name).stem
        assert sorted(p.name for p in files.values()) == sorted(
            f"{stem}{suffix}" for fmt, suffix in SUFFIXES.items() if fmt != "fields.json")
        assert all(p.is_file() for p in files.values())
        text = files["txt"].read_text()
        assert text_similarity(text, " ".join(line for page in pages for line in page)) > 0.7
        assert json.loads(files["json"].read_text())["document"]["name"] == name
        assert f"**done**, {len(pages)}/{len(pages)} pages done" in panel.title
        for index, lines in enumerate(pages):
            shown = show_page(running_appliance.library, doc_ids[name], index)
            assert f"**Page {index + 1} of {len(pages)}** · done" in shown.facts
            assert "read by classic" in shown.facts
            assert text_similarity(shown.text, " ".join(lines)) > 0.7
            assert rendered_text(safe_markdown(shown.markdown)).strip()
            # every line outlined on the page image
            assert shown.image is not None and not isinstance(shown.image, Path)


def test_upload_errors_are_per_file(tmp_path):
    """A refused file gets its reason in plain words; the other files still go through.
    Intake needs no worker, so this appliance is never started."""
    appliance = make_appliance(tmp_path, limits={"max_bytes": 200_000})
    try:
        folder = uploads(tmp_path)
        big = folder / "big.png"
        big.write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 300_000)
        notes = folder / "notes.txt"
        notes.write_text("just some text, not a scan\n")
        good = write_png(folder / "receipt.png", PAGE_C)
        missing = folder / "vanished.pdf"

        uploaded = handle_upload(appliance, [str(big), str(notes), str(good), str(missing)])
        rows = upload_rows(appliance, uploaded)

        assert [row[0] for row in rows] == ["big.png", "notes.txt", "receipt.png", "vanished.pdf"]
        assert rows[0][1] == "refused" and "larger than the limit" in rows[0][2]
        assert rows[0][2].endswith("[too_large]")
        assert rows[1][1] == "failed" and "[unsupported_type]" in rows[1][2]
        assert rows[2][1] == "accepted"
        assert rows[3][1] == "refused" and "internal error" in rows[3][2]

        listed = {v.doc.name: v for v in appliance.library.find().documents}
        assert list_details(listed["notes.txt"], True) == rows[1][2]  # whole in both
        assert str(listed["receipt.png"].status) == "queued"
        panel = show_document(appliance, uploaded[1].document_id)
        assert "could not be processed" in panel.note and not panel.downloadable
        assert prepare_downloads(appliance, uploaded[1].document_id, tmp_path / "dl")[0] == {}
        assert "unsupported" in panel.title
    finally:
        appliance.db.close()


# --- sanitising untrusted Markdown -----------------------------------------------


class _Elements(HTMLParser):
    """Every element and attribute in an HTML fragment, and its visible text."""

    def __init__(self):
        super().__init__()
        self.tags: list[tuple[str, dict]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text.append(data)


def to_html(markdown: str) -> str:
    """Markdown rendered as the browser's renderer does: raw HTML allowed, links on."""
    markdown_it = pytest.importorskip("markdown_it")
    return markdown_it.MarkdownIt("commonmark", {"html": True}).enable("table").render(markdown)


def rendered_text(markdown: str) -> str:
    parser = _Elements()
    parser.feed(to_html(markdown))
    return " ".join(parser.text)


HOSTILE = """<!-- page 1 -->

Total <script>alert('x')</script> due
<img src=x onerror="alert(1)"> and <IMG SRC=y OnError=alert(2)>
\\\\<svg onload=alert(3)>
[click me](javascript:alert(4)) ![pixel](http://tracker.example/p.gif)
[ref]: javascript:alert(5)

[ref] <javascript:alert(6)> <a href="javascript:alert(7)">a</a>

| a | b |
|---|---|
| <b onclick=alert(8)>x</b> | 1 < 2 |

<table><tr><th colspan="2" onmouseover="alert(9)">Group <img src=x onerror=alert(10)></th></tr>
<tr><td style="color:red">3</td><td><script>alert(11)</script>4</td></tr></table>

```mermaid
graph TD; A-->B
```

<!-- page 2: failed (page_timeout): the page took <longer> than 120 s -->
"""


def test_an_upload_may_pick_an_engine_the_workers_run_and_no_other(tmp_path):
    """The classic workers keep no other reader: a pick of the vision model is refused
    in plain words, the classic pick is recorded. Never started: intake needs no worker."""
    appliance = make_appliance(tmp_path)
    try:
        good = write_png(uploads(tmp_path) / "receipt.png", PAGE_C)
        refused, picked = (handle_upload(appliance, [str(good)], UploadChoices(engine=engine))[0]
                           for engine in ("llama", "classic"))
        assert refused.document_id is None and "engine_unavailable" in refused.refusal
        assert appliance.library.document(picked.document_id).doc.engine == "classic"
    finally:
        appliance.db.close()


def test_a_page_is_turned_only_by_those_who_may_use_the_review_console(tmp_path):
    """The review console wants a sign-in: where no login is configured, or for a name
    with no account (removed since), the document view's turn is refused and nothing is
    read again. Never started: the page waits queued, which an account is told."""
    appliance = make_appliance(tmp_path)
    try:
        appliance.users.add("rita", "reviewer", "correct horse battery")
        [upload] = handle_upload(appliance, [str(write_png(uploads(tmp_path) / "a.png",
                                                           PAGE_C))])
        for nobody in (None, "", "gone"):
            said = turn_page(appliance, upload.document_id, 0, 90, nobody)
            assert said.startswith("Turning a page is for those who may use the review")
        # an account gets as far as the page, which is not read yet
        said = turn_page(appliance, upload.document_id, 0, 90, "rita")
        assert said.startswith("**Page 1** was not turned: page 1 is queued"), said
        assert said.endswith(r"\[page\_busy\]"), said
        assert turn_page(appliance, None, 0, 90, "rita").startswith("Open a document")
        assert appliance.library.document(upload.document_id).pages[0].options is None
    finally:
        appliance.db.close()


def test_a_tick_begun_before_a_click_does_not_draw_over_the_document_it_opened(tmp_path):
    """Gradio runs a session's tick and its click side by side, each with the states it
    read as it began. A tick that read the receipt, whose view then changed, must not draw
    the receipt over the report the click opened meanwhile (it did, and left it open)."""
    appliance = make_appliance(tmp_path)
    folder = uploads(tmp_path)
    receipt, report = (upload.document_id for upload in handle_upload(appliance, [
        write_png(folder / "receipt.png", PAGE_C), write_pdf(folder / "report.pdf", [PAGE_B])]))
    with gr.Blocks():
        tab = DocumentTab(appliance, tmp_path / "downloads")
    title = tab.outputs.index(tab.title)
    latest = copy.deepcopy(tab.latest.value)  # as Gradio starts each session's state
    shown = tab.open(latest, receipt)
    tick_read = (latest, receipt, 0, shown[tab.outputs.index(tab.shown_key)])
    assert "cancelled" in perform(appliance, "cancel", [receipt], None)  # its view changes

    clicked = tab.open(latest, report)
    late_tick = tab.refresh(*tick_read)

    assert escape_markdown_text("report.pdf") in clicked[title]
    assert late_tick == [gr.skip()] * len(tab.outputs)
    # the receipt opened again, the same tick shows its change
    tab.open(latest, receipt)
    assert escape_markdown_text("receipt.png") in tab.refresh(*tick_read)[title]


def test_markdown_component_sanitises_untrusted_html():
    component = safe_markdown_view()
    assert component.sanitize_html is True  # the browser-side sanitiser stays on
    assert component.latex_delimiters == []

    sent = component.postprocess(safe_markdown(HOSTILE))
    assert "<script" not in sent.lower() and "<img" not in sent.lower()
    html = to_html(sent)
    parser = _Elements()
    parser.feed(html)
    tags = {tag for tag, _ in parser.tags}
    assert not tags & {"script", "img", "svg", "a", "b", "iframe"}, html
    for tag, attrs in parser.tags:
        assert not any(name.startswith("on") for name in attrs), (tag, attrs)
    assert "javascript:" not in " ".join(str(a) for _, a in parser.tags)
    assert "mermaid" not in html
    # ... while the page's words are all still there, as text
    text = " ".join(parser.text)
    for words in ("Total", "alert('x')", "onerror", "click me", "1 < 2", "Page 1",
                  "Page 2 failed (page_timeout): the page took <longer> than 120 s"):
        assert words in text, (words, text)
    assert {"table", "td"} <= tags  # ordinary Markdown still renders
    # and a table whose cells span, written again from its cells: its span and no more
    assert ("th", {"colspan": "2"}) in parser.tags and "Group" in text


def test_safe_markdown_is_idempotent_and_keeps_escapes():
    once = safe_markdown(HOSTILE)
    assert safe_markdown(once) == once
    # what the classic engine writes: already-escaped markup stays exactly as it was
    assert safe_markdown(r"a \<b\> c \[x\]") == r"a \<b\> c \[x\]"
    assert rendered_text(safe_markdown(r"a \<b\> c")).strip() == "a <b> c"
