"""Each model family's tiny random pair read end to end by the appliance's own llama
engine: detected from its headers, asked with its own prompt through its own chat
template, decoded in the batched decoder, watched by the repetition guard, and taken
up the retry ladder to the classic fallback.
"""

from __future__ import annotations

import pytest

from appliance.engines.base import PageRequest
from appliance.engines.llama.engine import LlamaEngine
from appliance.gguf.family_models import FAMILY_PAIRS, write_family_test_model
from appliance.pipeline.stages import PagePipeline
from appliance.raster.synthetic import render_text_page

pytest.importorskip("llama_cpp")

PAGE = render_text_page(["Invoice 4711", "Total 118.50 EUR"])
# Gemma 4's and Gemma 3n's random pairs write varied pieces until the slot is full; the
# others loop
LOOPING = [family for family in FAMILY_PAIRS if family not in ("gemma4", "gemma3n")]


@pytest.fixture(scope="module", params=list(FAMILY_PAIRS))
def engine(request, tmp_path_factory):
    family = request.param
    model, mmproj = write_family_test_model(tmp_path_factory.mktemp(family), family)
    llama = LlamaEngine(str(model), str(mmproj), n_ctx=2048, threads=1)
    yield llama
    llama.close()


def test_the_family_is_detected_and_asked_its_own_way(engine):
    family = engine.family
    assert engine.info.family == family.name
    prompt = engine.prompt("invoice")
    assert prompt.version.startswith(f"{family.name}/")
    if family.prompts is not None:  # a specialist: its trained task prompt, image first
        assert prompt.text == family.prompt("text") and not prompt.takes_context
    # the model's own chat template around the turn, the image as mtmd's marker
    turn = engine.decoder.chat_prompt(engine.decoder.image_marker + prompt.text)
    assert engine.decoder.image_marker + prompt.text in turn


def test_the_last_rung_reads_the_page_and_names_the_family(engine):
    # read as a worker reads it: a classic fallback's lines go through the read stage
    result = PagePipeline(engine).recognise(PAGE, PageRequest(attempt=3))
    assert result.provenance["rung"] == "tiled"
    assert result.provenance["family"] == engine.family.name
    assert result.provenance["prompt_version"].startswith(f"{engine.family.name}/")
    if result.flags == ["fallback"]:  # the random model degenerated: the classic reader
        assert "degenerated" in result.provenance["fallback_reason"]
        assert "4711" in result.text
    else:
        assert result.flags[0] == "tiled" and result.tokens


def test_the_guard_stops_a_looping_answer_and_a_full_slot_ends_one_that_does_not(engine):
    prompt = engine.prompt("generic")
    generation = engine.generate(PAGE, prompt, PageRequest(), sampled=False)
    assert all(token["lp"] <= 0 for token in generation.tokens)
    if engine.family.name in LOOPING:
        assert generation.stop == "degenerate"
        assert len(generation.tokens) < prompt.max_tokens / 2
    else:
        assert (generation.stop, generation.reason) == (
            "length", f"the slot's context of {engine.decoder.n_ctx} is full")
