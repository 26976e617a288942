"""The llama engine on the tiny random-weight Gemma-3 pair, through the real llama.cpp.

The tiny model writes garbage that loops under greedy decoding: a real
degenerate-output generator for the guard and the retry ladder.
"""

from __future__ import annotations

import random
import time

import pytest

from appliance.engines.base import PageRequest
from appliance.engines.llama.engine import LlamaEngine
from appliance.engines.prompts import PROMPTS, prompt_for
from appliance.engines.tiling import plan_region_tiles
from appliance.errors import DegenerateOutput, InvalidRequest, PageTimeout
from appliance.measure.synthetic_sets import columns_page
from appliance.pipeline.stages import PagePipeline
from appliance.raster.layout import analyze
from appliance.raster.synthetic import render_text_page
from appliance.reading.regions import column_regions

PAGE = render_text_page(["Invoice 4711", "Total 118.50 EUR"])


@pytest.fixture(scope="module")
def engine(tiny_model):
    model, mmproj = tiny_model
    llama = LlamaEngine(str(model), str(mmproj), n_ctx=4096, threads=1)
    yield llama
    llama.close()


def test_guard_stops_the_looping_output_long_before_the_token_cap(engine):
    prompt = prompt_for("generic")
    generation = engine.generate(PAGE, prompt, PageRequest(), sampled=False)
    assert generation.stop == "degenerate"
    assert generation.reason.startswith(("repeat", "stalled"))
    assert len(generation.tokens) < prompt.max_tokens / 2
    with pytest.raises(DegenerateOutput, match="degenerated"):
        engine.recognize(PAGE, PageRequest(attempt=1))


def test_tokens_carry_logprobs_and_entropy(engine):
    generation = engine.generate(PAGE, prompt_for("receipt"), PageRequest(), sampled=False)
    assert generation.tokens
    for token in generation.tokens:
        assert token["lp"] <= 0 and token["h"] >= 0 and isinstance(token["t"], str)
    # greedy decoding picks the most likely token, so the pieces rebuild the answer
    assert "".join(t["t"] for t in generation.tokens).strip() == generation.text


def test_deadline_stops_generation(engine):
    request = PageRequest(attempt=2, deadline=time.monotonic() + 0.05)
    generation = engine.generate(PAGE, prompt_for("generic"), request, sampled=True)
    assert generation.stop == "deadline"
    with pytest.raises(PageTimeout, match="page_timeout_s"):
        engine.recognize(PAGE, PageRequest(attempt=1, deadline=time.monotonic() + 0.02))


def test_last_rung_falls_back_to_the_classic_engine(engine):
    # read as a worker reads it: a classic fallback's lines go through the read stage
    result = PagePipeline(engine).recognise(PAGE, PageRequest(attempt=3))
    assert result.flags == ["fallback"]
    assert result.provenance["rung"] == "tiled"
    assert "degenerated" in result.provenance["fallback_reason"]
    assert "4711" in result.text


def test_answer_at_the_token_cap_is_read_again_in_tiles(tiny_model):
    model, mmproj = tiny_model
    capped = LlamaEngine(str(model), str(mmproj), n_ctx=4096, threads=1, max_tokens=12,
                         auto_tiling=False)  # the tiny model's 224 px input would tile at once
    try:
        result = capped.recognize(PAGE, PageRequest(attempt=1))
    finally:
        capped.close()
    # 1240x1754 page, square strips of 1240 with >= 15 % overlap: two strips
    assert result.provenance["tiles"] == 2
    assert result.flags[:2] == ["tiled", "truncated_retry"]
    assert len(result.tokens) == 2 * 12


def test_every_document_type_has_a_versioned_prompt():
    for doc_type, prompt in PROMPTS.items():
        assert prompt.version.startswith(f"{doc_type}/v")
        assert "Markdown table" in prompt.text and "[illegible]" in prompt.text
    assert PROMPTS["invoice"].max_tokens == 800 and PROMPTS["contract"].max_tokens == 1500
    with pytest.raises(InvalidRequest, match="unknown doc_type"):
        prompt_for("poem")


@pytest.fixture(scope="module")
def ending_engine(tmp_path_factory):
    """The tiny model's variant that ends its turn: answers, not loops."""
    from appliance.gguf.testmodel import write_test_model

    model, mmproj = write_test_model(tmp_path_factory.mktemp("ending"), eos_bias=2.0)
    llama = LlamaEngine(str(model), str(mmproj), n_ctx=4096, threads=1)
    yield llama
    llama.close()


def test_small_dense_print_is_read_in_strips_from_the_first_attempt(ending_engine):
    dense = render_text_page([f"Line {i} of a dense ledger page" for i in range(60)],
                             font_size=18)
    result = ending_engine.recognize(dense, PageRequest(doc_type="report"))
    assert result.flags == ["tiled"] and result.provenance["tiles"] > 1
    assert "print under" in result.provenance["tiling"]

    # the tiny model's input is 224 px: print must be about 90 px high to stay readable
    sparse = render_text_page(["Memo", "Lunch"], font_size=130)
    result = ending_engine.recognize(sparse, PageRequest(doc_type="generic"))
    assert "tiled" not in result.flags and "tiles" not in result.provenance
    assert "print" in result.provenance["tiling"]


def test_a_page_in_columns_is_read_in_strips_column_after_column(ending_engine):
    page, _truth = columns_page(random.Random(11))
    regions = column_regions(analyze(page), page.width, page.height)
    groups = plan_region_tiles(regions, tile_height=page.width, overlap=0.15)
    result = ending_engine.recognize(page, PageRequest(attempt=3, doc_type="report",
                                                       columns=column_regions))
    assert result.provenance["rung"] == "tiled" and "tiled" in result.flags
    assert result.provenance["column_regions"] == len(regions) >= 3  # title and columns
    assert result.provenance["tiles"] == sum(map(len, groups))
    # a page of one column is read in full-width strips, as before
    single = ending_engine.recognize(PAGE, PageRequest(attempt=3, columns=column_regions))
    assert "column_regions" not in single.provenance and single.provenance["tiles"] == 2
