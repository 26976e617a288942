"""The vision path's fields: the question, its schema-constrained answer from the real
llama.cpp (tiny random-weight model) and a real OpenAI-compatible server, and the
answer turned into fields with evidence, ahead of the rules extractor."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

import jsonschema
import pytest

from appliance.engines.base import PageRequest
from appliance.engines.llama.engine import LlamaEngine
from appliance.engines.messages import PageDone
from appliance.engines.prompts import Prompt
from appliance.fields.document import read_fields
from appliance.fields.model import (
    QUESTION_VERSION, answer_bound, answer_schema, max_chars, parse_answer, question,
)
from appliance.fields.schema import DEFAULTS, FieldSpec, schemas
from appliance.page import Line
from appliance.pipeline.stages import PagePipeline, PageSettings, run_job
from appliance.raster.synthetic import render_text_page
from tests.engines.test_parallel_reading import job
from tests.engines.test_remote_engine import make_engine
from tests.fields.test_fields import RECEIPT, TODAY, by_name, no_history
from tests.fixtures.documents import write_png

LINES = [Line("KEDAI MAJU JAYA SDN BHD", [200, 80, 520, 108], 0.9),
         Line("TOTAL RM 15.70", [60, 415, 540, 443], 0.9)]
PAGES = [render_text_page([f"KEDAI {i} SDN BHD", f"Date 0{i}/12/2018", f"TOTAL RM {i}5.70"],
                          font_size=30 + 8 * i) for i in range(1, 5)]


def _engine(tiny_model, parallel: int = 2) -> LlamaEngine:
    model, mmproj = tiny_model
    return LlamaEngine(str(model), str(mmproj), parallel=parallel, n_ctx=4096, threads=1,
                       auto_tiling=False)


@pytest.fixture(scope="module")
def engine(tiny_model):
    engine = _engine(tiny_model)
    try:
        yield engine
    finally:
        engine.close()


def test_the_question_gives_the_fields_and_the_lines_on_a_page_of_unit_size():
    asked = question("receipt", DEFAULTS["receipt"], LINES, 1240, 1754)
    assert asked.version == QUESTION_VERSION
    assert '- "total": an amount, with its currency where printed (labels such as' in asked.text
    assert '- "company": the issuer\'s name at the head of the page' in asked.text
    assert "[0.161, 0.046, 0.419, 0.062] KEDAI MAJU JAYA SDN BHD" in asked.text
    assert asked.schema["required"] == ["company", "date", "address", "total", "paid", "change"]


@pytest.mark.parametrize("doc_type", sorted(DEFAULTS))
def test_the_token_bound_holds_the_longest_answer_the_schema_allows(doc_type):
    specs = DEFAULTS[doc_type]
    # every value at its longest in four-byte characters, every optional space taken
    longest = "{ " + ", ".join(f'"{spec.name}" : "{"😀" * max_chars(spec)}" '
                               for spec in specs) + "} "
    jsonschema.validate(json.loads(longest), answer_schema(specs))
    assert len(longest.encode()) + 1 == answer_bound(specs)  # and the end of turn


def test_an_answer_that_is_not_of_the_schema_is_refused():
    specs = DEFAULTS["receipt"]
    assert parse_answer('{"company": " Kedai ", "date": null, "address": "", "total": "9.90", '
                        '"paid": "10.00", "change": null}',
                        specs) == {"company": "Kedai", "date": None, "address": None,
                                   "total": "9.90", "paid": "10.00", "change": None}
    for bad in ('{"company": null}', '{"company": 1, "date": null, "address": null, '
                '"total": null, "paid": null, "change": null}', "[]",
                '{"company": null, "date": null, "address": null, "total": null, "paid": null, '
                '"change": null, "extra": null}'):
        with pytest.raises(ValueError):
            parse_answer(bad, specs)
    with pytest.raises(json.JSONDecodeError):
        parse_answer('{"company": "a\nb"}', specs)  # a raw control character: not JSON


@pytest.mark.parametrize("doc_type", ["receipt", "invoice", "fapiao"])
def test_random_weights_answer_every_field_question_in_valid_json(engine, doc_type):
    specs = DEFAULTS[doc_type]
    for image in PAGES[:2]:
        answer = engine.ask(image, question(doc_type, specs, LINES, image.width, image.height),
                            PageRequest(doc_type=doc_type))
        jsonschema.validate(json.loads(answer), answer_schema(specs))
        assert set(parse_answer(answer, specs)) == {spec.name for spec in specs}


def test_a_grammar_that_wants_text_gets_valid_bounded_json_beside_free_pages(engine):
    # no null allowed: the random model must write strings, sampled so that they
    # differ; two pages without a grammar decode in the same batch meanwhile
    specs = tuple(FieldSpec(f"f{i}", kind) for i, kind in enumerate(("text", "date", "iban")))
    schema = answer_schema(specs)
    for spec in specs:
        schema["properties"][spec.name] = schema["properties"][spec.name]["anyOf"][0]
    wanted = Prompt("receipt", "test", "Write the fields.", answer_bound(specs), schema)
    free = Prompt("receipt", "test", "Transcribe.", 40)
    decodings = [engine.decoding_for(image, prompt, PageRequest(), sampled=True)
                 for image in PAGES for prompt in (wanted, free)]
    futures = [engine.decoder.submit(decoding) for decoding in decodings]
    answers = [engine.decoder.wait(future) for future in futures]
    constrained = [a for a, d in zip(answers, decodings) if d.grammar]
    assert len(constrained) == len(PAGES)
    for answer in constrained:
        assert answer.stop == "stop"
        value = json.loads(answer.text)
        jsonschema.validate(value, schema)
        assert any(value.values()), "the sampled model wrote only empty strings"
    texts = [answer.text for answer in constrained]
    assert len(set(texts)) > 1
    unconstrained = [a for a, d in zip(answers, decodings) if not d.grammar]
    assert all(a.stop in ("length", "degenerate") for a in unconstrained)  # not held to JSON


def test_a_worker_asks_a_vision_engine_for_a_typed_pages_fields(tmp_path, engine):
    page = write_png(tmp_path / "receipt.png", ["KEDAI MAJU SDN BHD", "TOTAL RM 15.70"])
    pipeline = PagePipeline(engine, PageSettings(field_specs=schemas()))
    # the last rung: the random model's transcription degenerates, the classic reader's
    # stands, and the vision model is still asked for the fields
    last = replace(job(1, page, tmp_path), attempt=3)
    with ThreadPoolExecutor(1) as background:
        typed = run_job(pipeline, replace(last, doc_type="receipt"), background)
        generic = run_job(pipeline, replace(last, job_id=2), background)
    assert isinstance(typed, PageDone) and isinstance(generic, PageDone)
    assert typed.recognition.flags == ["fallback"]
    assert set(typed.recognition.field_answer) == {"company", "date", "address", "total", "paid",
                                                   "change"}
    assert typed.recognition.provenance["fields_question"] == QUESTION_VERSION
    assert "fields_ms" in typed.timings_ms
    assert generic.recognition.field_answer is None and "fields_ms" not in generic.timings_ms


def test_a_question_too_long_for_the_context_leaves_the_fields_to_the_rules(tmp_path,
                                                                            tiny_model, caplog):
    small = LlamaEngine(str(tiny_model[0]), str(tiny_model[1]), n_ctx=1024, threads=1,
                        auto_tiling=False)
    page = write_png(tmp_path / "long.png", [f"Item {i} .... {i}.50" for i in range(24)])
    try:
        with ThreadPoolExecutor(1) as background:
            done = run_job(PagePipeline(small, PageSettings(field_specs=schemas())),
                           replace(job(1, page, tmp_path), doc_type="invoice", attempt=3),
                           background)
    finally:
        small.close()
    assert isinstance(done, PageDone), done  # the page is read; only its question failed
    assert done.recognition.field_answer is None and "Item 7" in done.recognition.text
    assert "could not answer fields/v1 (the prompt" in caplog.text
    assert "does not fit the slot's context of 1024" in caplog.text


def test_a_remote_server_answers_the_question_in_the_schema(llama_cpp_server):
    remote = make_engine(llama_cpp_server.url)
    specs = DEFAULTS["invoice"]
    try:
        answer = remote.ask(PAGES[0], question("invoice", specs, LINES, 400, 400),
                            PageRequest(doc_type="invoice"))
    finally:
        remote.close()
    jsonschema.validate(json.loads(answer), answer_schema(specs))


def test_what_the_model_read_stands_before_the_rules_with_its_evidence():
    page = replace(RECEIPT, field_answer={
        "company": "KEDAI MAJU JAYA SDN. BHD.",  # as the model wrote it: dots the OCR lacks
        "date": None,  # not read: the rules' date stands
        "address": "NO 12 JALAN BESAR 43000 KAJANG SELANGOR",  # over two lines
        "total": "RM 99.00"})  # not on the page
    reading = by_name(read_fields([page], DEFAULTS["receipt"], no_history, today=TODAY))
    company, date, address, total = (reading[name] for name in
                                     ("company", "date", "address", "total"))
    assert (company["read_by"], company["value"]) == ("model", "KEDAI MAJU JAYA SDN. BHD.")
    assert company["evidence"][0]["text"] == "KEDAI MAJU JAYA SDN BHD"
    assert company["confidence"] == pytest.approx(0.95 * 0.95)
    assert (date["read_by"], date["value"]) == ("rules", "2018-12-25")
    assert [e["text"] for e in address["evidence"]] == ["NO 12 JALAN BESAR",
                                                        "43000 KAJANG SELANGOR"]
    assert (total["read_by"], total["value"], total["evidence"]) == ("model", "99.00", [])
    assert total["valid"] is False and total["confidence"] == 0.3
    assert ("business", False, "not in the page's text") in [
        (c["layer"], c["ok"], c["message"]) for c in total["checks"]]


def test_a_corrected_pages_text_stands_over_the_models_reading(tmp_path):
    from appliance.outputs.tree import page_tree
    from appliance.store.models import PageResult

    machine = PageResult(text="TOTAL 15.70", lines=[], field_answer={"total": "15.70"},
                         provenance={"image_size": [100, 100]})
    person = PageResult(text="TOTAL 17.50", provenance={"corrected_by": "clerk"})
    assert page_tree(1, machine).field_answer == {"total": "15.70"}
    assert page_tree(1, person, machine).field_answer is None
