"""The worker's page pipeline through a real daemon: preprocessing, the result cache,
repair, the multi-page context and the JSON output's blocks and provenance."""

from __future__ import annotations

import json
import random
import time

import pytest
from PIL import Image

from appliance import reading
from appliance.config import load_settings
from appliance.engines.base import PageRequest
from appliance.engines.barcodes import read_barcodes
from appliance.engines.cache import ResultCache, image_digest
from appliance.engines.prompts import prompt_for, user_turn
from appliance.measure import synthetic_chinese
from appliance.measure.synthetic_fapiao import fapiao_page
from appliance.page import Line, Recognition
from appliance.quality.blocks import format_problems, page_tail
from appliance.quality.postprocess import postprocess
from appliance.raster.synthetic import render_text_page
from appliance.store import Database, queries
from tests.daemon import Daemon
from tests.fixtures.documents import text_similarity, write_multipage_tiff, write_png
from tests.fixtures.waiting import wait_for


@pytest.fixture
def daemon(tmp_path):
    started = []

    def start(**sections) -> Daemon:
        home = tmp_path / f"daemon{len(started)}"
        home.mkdir()
        d = Daemon(home, **sections).start()
        started.append(d)
        d.wait_ready()
        return d

    yield start
    for d in started:
        d.stop()


def result_pages(d: Daemon, doc_id: str) -> list[dict]:
    return d.client.get(f"/api/v1/documents/{doc_id}/result",
                        params={"format": "json"}).json()["pages"]


class CountingEngine:
    name = "counting"
    model_id = "counting-1"

    def __init__(self, recipe: str = "v1"):
        self._recipe = recipe

    def recipe(self, request: PageRequest) -> str:
        return f"{self._recipe}/{request.doc_type}"


def test_cache_keys_and_entries(tmp_path):
    cache = ResultCache(tmp_path / "cache")
    page = Image.new("RGB", (40, 30), "white")
    digest = image_digest(page)
    assert digest != image_digest(Image.new("RGB", (30, 40), "white"))
    key = cache.key(digest, CountingEngine(), PageRequest(doc_type="invoice"))
    # another prompt version, document type or model is another key
    assert key != cache.key(digest, CountingEngine("v2"), PageRequest(doc_type="invoice"))
    assert key != cache.key(digest, CountingEngine(), PageRequest(doc_type="receipt"))
    assert cache.get(key) is None
    reading = Recognition(text="Total 5", markdown="Total 5",
                          lines=[Line("Total 5", [1.0, 2.0, 30.0, 9.0], 0.9)], flags=["tiled"])
    cache.put(key, reading)
    assert cache.get(key) == reading
    next(cache.root.rglob("*.json")).write_text("{damaged")
    assert cache.get(key) is None  # a damaged entry is a miss, not an error


def test_a_page_sent_again_is_served_from_the_cache(tmp_path, daemon):
    d = daemon()
    page = write_png(tmp_path / "invoice.png", ["Invoice 4711", "Total 118.50 EUR"])
    first = d.upload(page)["id"]
    d.wait_final([first])
    second = d.upload(page)["id"]
    d.wait_final([second])
    read, served = result_pages(d, first)[0], result_pages(d, second)[0]
    assert "cached" not in read["flags"] and "inference_ms" in read["provenance"]["timings_ms"]
    assert "cached" in served["flags"]
    assert "inference_ms" not in served["provenance"]["timings_ms"]
    assert served["text"] == read["text"] and "Invoice 4711" in served["text"]
    # another document type is another reading for a vision model; classic reads the same
    assert served["provenance"]["timings_ms"]["cache_ms"] < read["provenance"]["timings_ms"][
        "inference_ms"]


def test_another_page_furniture_setting_reads_cached_pages_again_without_recognising_them(
        tmp_path):
    """The cache holds what the engine found, not its reading: a daemon started again
    with the page furniture left out reads the same page from the cache, and its text
    is the body alone."""
    page, _truth = synthetic_chinese.book_spread(random.Random(3), (1240, 1754))
    page.save(tmp_path / "spread.png")
    home = tmp_path / "home"
    home.mkdir()
    with Daemon(home).running() as d:
        doc = d.upload(tmp_path / "spread.png")["id"]
        d.wait_final([doc])
        separate = result_pages(d, doc)[0]
    with Daemon(home, output={"page_furniture": "drop"}).running() as d:
        doc = d.upload(tmp_path / "spread.png")["id"]
        d.wait_final([doc])
        dropped = result_pages(d, doc)[0]
    assert "cached" not in separate["flags"] and "inference_ms" in separate["provenance"][
        "timings_ms"]
    assert "cached" in dropped["flags"]
    assert "inference_ms" not in dropped["provenance"]["timings_ms"]
    assert "read_ms" in dropped["provenance"]["timings_ms"]
    # the running headers and page numbers (read after the body) are left out
    assert dropped["text"].splitlines() == separate["text"].splitlines()[:-4]


def test_a_fapiao_whose_print_disagrees_with_its_qr_code_goes_to_review(tmp_path, daemon):
    """The worker reads the page's QR code (a real one, made by segno); the fields read
    from the print are checked against it, and the amount printed otherwise than the
    code holds sends the document to review with both values."""
    image, truths = fapiao_page(random.Random(11))  # clean, its amount printed otherwise
    (code,) = json.loads(truths[".barcodes.json"])["codes"]
    printed = json.loads(truths[".fields.json"])["amount"]
    image.save(tmp_path / "fapiao.png")
    d = daemon(review={"enabled": True})
    doc = d.upload(tmp_path / "fapiao.png", doc_type="fapiao")["id"]
    wait_for(lambda: d.document(doc)["status"] not in ("queued", "processing"),
             what="the fapiao read")
    assert d.document(doc)["status"] == "review"
    db = Database(load_settings(d.config_path).paths.database)
    try:
        ((_page, result),) = queries.accepted_results(db, doc)  # the reading under review
    finally:
        db.close()
    assert [(c["format"], c["value"]) for c in result.barcodes] == [
        (code["format"], code["value"])]
    coded = code["value"].split(",")[4]
    assert f"field_invalid: amount: {printed} != {coded} in its QR code" in result.reasons


def test_a_photocopied_fapiaos_qr_code_is_read_where_the_plain_reading_finds_none(tmp_path,
                                                                                 daemon):
    """A fapiao's page is read for its QR code again on a cleaned copy where zxing-cpp
    found none on the page: make-eval-set's photocopy (dev seed 7, page 27), blurred and
    speckled at half the resolution."""
    image, truths = fapiao_page(random.Random("7-fapiao-fields-27"))
    (code,) = json.loads(truths[".barcodes.json"])["codes"]
    assert read_barcodes(image) == []
    image.save(tmp_path / "photocopy.png")
    d = daemon()
    doc = d.upload(tmp_path / "photocopy.png", doc_type="fapiao")["id"]
    wait_for(lambda: d.document(doc)["status"] not in ("queued", "processing"),
             what="the fapiao read")
    db = Database(load_settings(d.config_path).paths.database)
    try:
        ((_page, result),) = queries.accepted_results(db, doc)
    finally:
        db.close()
    assert [(c["format"], c["value"]) for c in result.barcodes] == [
        (code["format"], code["value"])]
    width, height = Image.open(tmp_path / "photocopy.png").size
    assert all(0 <= x <= width and 0 <= y <= height  # its corners in the page's pixels
               for x, y in result.barcodes[0]["polygon"])


def test_an_upside_down_scan_is_read_upright(tmp_path, daemon):
    d = daemon()
    lines = ["Purchase order 5521", "Deliver to Hamburg", "Payment in 30 days"]
    page = render_text_page(lines, width=1000, height=700, font_size=40).rotate(180)
    page.save(tmp_path / "upside-down.png")
    doc = d.upload(tmp_path / "upside-down.png")["id"]
    d.wait_final([doc])
    result = result_pages(d, doc)[0]
    steps = {step["step"]: step["detail"] for step in result["provenance"]["preprocess"]}
    assert steps["orientation"]["rotated_deg"] == 180
    assert text_similarity(result["text"], "\n".join(lines)) > 0.9
    # the page finds its image by the DPI it was kept at, whatever the settings say later
    assert result["provenance"]["page_image_dpi"] == 200  # raster.pdf_dpi's default


def test_the_cache_can_be_switched_off(tmp_path, daemon):
    d = daemon(engine={"result_cache": False})
    page = write_png(tmp_path / "memo.png", ["Memo to all staff"])
    ids = [d.upload(page)["id"] for _ in range(2)]
    d.wait_final(ids)
    assert all("cached" not in result_pages(d, i)[0]["flags"] for i in ids)
    assert not (d.data_dir / "cache").exists()


def test_json_output_has_blocks_and_provenance(tmp_path, daemon):
    d = daemon()
    doc = d.upload(write_png(tmp_path / "p.png", ["Quarterly report", "Revenue grew"]))["id"]
    d.wait_final([doc])
    page = result_pages(d, doc)[0]
    assert page["blocks"] and {b["kind"] for b in page["blocks"]} == {"paragraph"}
    assert "Quarterly report" in " ".join(b["text"] for b in page["blocks"])
    provenance = page["provenance"]
    assert provenance["engine"] == "classic" and provenance["model_id"].startswith("rapidocr")
    assert provenance["repair"]["level"] == 0
    assert provenance["reading"] == reading.RECIPE  # the layout rules that read it
    assert [step["step"] for step in provenance["preprocess"]]  # what preprocessing did
    assert list(provenance["timings_ms"]) == ["raster_ms", "preprocess_ms", "cache_ms",
                                              "inference_ms", "selection_marks_ms", "read_ms",
                                              "postprocess_ms", "barcodes_ms"]


def test_postprocess_repairs_or_degrades_and_flags_the_page():
    clean = Recognition(text="", markdown="# Title\n\nBody text.")
    clean = postprocess(clean)
    assert clean.markdown == "# Title\n\nBody text." and clean.flags == []
    assert clean.provenance["repair"] == {"level": 0, "fixes": [], "problems": []}

    wrapped = Recognition(text="", markdown="```markdown\n| a | b |\n|---|---|\n| 1 | 2 | 3 |\n```")
    wrapped = postprocess(wrapped)
    assert wrapped.flags == ["repaired"] and format_problems(wrapped.markdown) == []
    assert "3" in wrapped.text and "```" not in wrapped.markdown

    hopeless = Recognition(text="", markdown="<table><tr><td>*a*</td></tr></table>\n# 1. x",
                           lines=[Line("*a*", [0, 0, 9, 9], 0.9), Line("1. x", [0, 20, 9, 29], 0.8)])
    hopeless = postprocess(hopeless)
    assert hopeless.flags == ["degraded"] and hopeless.provenance["repair"]["problems"]
    assert hopeless.text.splitlines() == ["*a*", "1. x"]
    assert format_problems(hopeless.markdown) == []
    assert "<table>" not in hopeless.markdown and "\\*a\\*" in hopeless.markdown


def test_pages_are_scored_and_routed_by_confidence(tmp_path, daemon):
    strict = daemon(review={"enabled": True, "review_below": 1.0, "accept_from": 1.0})
    doc = strict.upload(write_png(tmp_path / "memo.png", ["Memo to all staff"]))["id"]
    deadline = time.monotonic() + 120
    while strict.document(doc)["status"] != "review":
        assert time.monotonic() < deadline, strict.document(doc)
        time.sleep(0.3)
    assert strict.document(doc)["pages"][0]["status"] == "review"
    waiting = strict.client.get(f"/api/v1/documents/{doc}/result")
    assert waiting.status_code == 409  # exported once a reviewer has seen it

    lenient = daemon(review={"enabled": True, "review_below": 0.0, "accept_from": 0.0})
    doc = lenient.upload(write_png(tmp_path / "memo.png", ["Memo to all staff"]))["id"]
    lenient.wait_final([doc])
    page = result_pages(lenient, doc)[0]
    assert 0.5 < page["confidence"] <= 1
    assert [reason.split(":")[0] for reason in page["routing"]] == ["confident"]
    assert page["signals"]["line_score_mean"] > 0.5 and "penalties" in page["signals"]


# --- multi-page context -----------------------------------------------------------------

TABLE_PAGE = ("# Orders\n\nSome intro.\n\n| item | qty | price |\n|---|---|---|\n"
              "| pens | 2 | 3.00 |\n| ink | 1 | 9.50 |\n| paper | 5 | 4.25 |\n")


def test_the_tail_of_a_page_ending_in_a_table_is_its_header_and_last_rows():
    tail = page_tail(TABLE_PAGE)
    assert tail.splitlines() == ["| item | qty | price |", "|---|---|---|",
                                 "| ink | 1 | 9.50 |", "| paper | 5 | 4.25 |"]
    prose = "\n".join(f"Line {i} of the letter." for i in range(200))
    tail = page_tail(prose, max_chars=100)
    assert len(tail) <= 100 and tail.endswith("Line 199 of the letter.")


def test_the_context_goes_before_the_page_image_in_the_prompt():
    plain = user_turn(prompt_for("invoice"), "<__media__>")
    assert plain.startswith("<__media__>") and plain.endswith(prompt_for("invoice").text)
    with_context = user_turn(prompt_for("invoice"), "<__media__>", "| item | qty |")
    context, image_and_prompt = with_context.split("<__media__>")
    assert "| item | qty |" in context and "previous page" in context
    assert image_and_prompt.strip() == prompt_for("invoice").text


def test_vision_pages_are_read_in_order_with_the_previous_page_s_end(tmp_path, daemon,
                                                                       tiny_model):
    model, mmproj = tiny_model
    d = daemon(engine={"name": "llama", "model": str(model), "mmproj": str(mmproj),
                       "retry_ladder": ["greedy"], "max_tokens": 24},
               workers={"count": 2})
    doc = d.upload(write_multipage_tiff(tmp_path / "three.tif",
                                        [["Page one"], ["Page two"], ["Page three"]]))["id"]
    d.wait_final([doc])
    pages = result_pages(d, doc)
    assert [p["status"] for p in pages] == ["done"] * 3
    assert pages[0]["provenance"]["context_chars"] == 0
    for before, page in zip(pages, pages[1:]):
        assert page["started_at"] >= before["finished_at"]  # two workers, still in order
        if before["markdown"]:
            assert page["provenance"]["context_chars"] > 0
    assert any(p["provenance"]["context_chars"] for p in pages[1:])
    assert pages[0]["provenance"]["model_sha256"] and pages[0]["provenance"]["mmproj_sha256"]


def test_an_unexpected_failure_reaches_the_sender_without_a_server_path(tmp_path):
    """A PDF whose spool copy is gone: pdfium's error names the file; the page's
    message must not carry the server's layout (the log has it)."""
    from concurrent.futures import ThreadPoolExecutor

    from appliance.engines import create_engine
    from appliance.pipeline.stages import PagePipeline, run_job
    from appliance.engines.messages import Job, PageFailed

    missing = tmp_path / "spool" / "originals" / "ab" / "abcdef.pdf"
    pipeline = PagePipeline(create_engine("classic", {"threads": 1}))
    job = Job(job_id=1, original=missing, kind="pdf", page_index=0, dpi=100,
              max_pixels=10**8, page_image=tmp_path / "page.png", doc_type="generic",
              engine=None, attempt=1, pdf_password=None, deadline_s=60)
    with ThreadPoolExecutor(1) as background:
        answer = run_job(pipeline, job, background)
    assert isinstance(answer, PageFailed) and answer.code == "engine_error"
    assert answer.message == ("the engine failed on this page (FileNotFoundError: a file "
                              "on the server)")
