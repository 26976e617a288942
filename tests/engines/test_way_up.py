"""A page turned upside down on a guess is read both ways (issue 53): the real
orientation classifier, the real classic engine, the worker's own pipeline."""

from __future__ import annotations

import random
from concurrent.futures import ThreadPoolExecutor

import pytest
from PIL import Image, ImageFilter

from appliance.engines import create_engine
from appliance.engines.messages import Job, PageDone
from appliance.measure.synthetic_sets import receipt_page
from appliance.pipeline.stages import PagePipeline, PageSettings, run_job
from appliance.raster.synthetic import render_text_page, sample_lines
from tests.fixtures.documents import text_similarity

LINES = sample_lines(seed=0, count=14)


@pytest.fixture(scope="module")
def pipeline():
    pipeline = PagePipeline.load(create_engine("classic", {"threads": 1}), PageSettings())
    yield pipeline
    pipeline.engine.close()


def read(pipeline, tmp_path, blur: float, turned: int, page: Image.Image | None = None
         ) -> PageDone:
    page = page or render_text_page(LINES, width=900, height=1300, font_size=26)
    path = tmp_path / f"page-{blur}-{turned}.png"
    page.filter(ImageFilter.GaussianBlur(blur)).rotate(turned).save(path)
    job = Job(job_id=1, original=path, kind="png", page_index=0, dpi=150,
              max_pixels=40_000_000, page_image=tmp_path / "seen.png", doc_type="generic",
              engine=None, attempt=1, pdf_password=None, deadline_s=120)
    with ThreadPoolExecutor(1) as background:
        done = run_job(pipeline, job, background)
    assert isinstance(done, PageDone), done
    return done


def orientation(done: PageDone) -> dict:
    return next((step["detail"] for step in done.recognition.provenance["preprocess"]
                 if step["step"] == "orientation"), {})


def test_a_blurred_upright_page_voted_upside_down_is_kept_as_it_came(pipeline, tmp_path):
    # the classifier turns this page on 10 weak votes against 2: read turned, it is
    # garbage; read as it came, it is the page
    done = read(pipeline, tmp_path, blur=3.5, turned=0)
    way_up = done.recognition.provenance["way_up"]
    assert way_up["as_it_came"] > way_up["turned"]
    assert orientation(done) == {}  # the kept reading was not turned
    assert text_similarity(done.recognition.text, "\n".join(LINES)) > 0.85
    assert done.confidence == pytest.approx(way_up["as_it_came"], abs=1e-4)
    assert "as_it_came_ms" in done.timings_ms


def test_a_page_read_as_nothing_both_ways_is_kept_as_it_came(pipeline, tmp_path):
    # make-eval-set's receipt, blurred past reading: the classifier turns it on 10 weak
    # votes against 2, and turned or not it reads as nothing; only the guess says turn
    receipt, _truth = receipt_page(random.Random("13-receipts-4"))
    done = read(pipeline, tmp_path, blur=3.5, turned=0, page=receipt)
    way_up = done.recognition.provenance["way_up"]
    assert way_up["as_it_came"] == way_up["turned"]
    assert orientation(done) == {}


def test_an_upside_down_page_is_turned_on_a_guess_or_a_sure_vote(pipeline, tmp_path):
    blurred = read(pipeline, tmp_path, blur=2.5, turned=180)  # a guess: read both ways
    assert blurred.recognition.provenance["way_up"]["turned"] > 0.5
    assert orientation(blurred)["rotated_deg"] == 180
    sharp = read(pipeline, tmp_path, blur=0, turned=180)  # a sure vote: read once
    assert "way_up" not in sharp.recognition.provenance
    assert orientation(sharp)["rotated_deg"] == 180
    for done in (blurred, sharp):
        assert text_similarity(done.recognition.text, "\n".join(LINES)) > 0.95
