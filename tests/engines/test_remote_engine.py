"""The remote engine against real servers on loopback: llama-cpp-python's own
OpenAI-compatible server with the tiny model, and a scripted server for the ways a
server fails."""

from __future__ import annotations

import logging
import time
from dataclasses import asdict

import pytest

from appliance.config import RemoteEndpoint
from appliance.engines.base import PageRequest, warmup_image
from appliance.engines.prompts import prompt_for
from appliance.engines.remote.engine import RemoteEngine
from appliance.errors import EndpointUnavailable, EngineError
from appliance.pipeline.stages import PagePipeline
from tests.openai_servers import ScriptedServer, self_signed_certificate, tiny_server

PAGE = warmup_image()
CAP = 1200  # a looping answer must end long before this (the generic prompt's own cap)


def make_engine(url: str, model: str = "tiny", **options) -> RemoteEngine:
    endpoint = asdict(RemoteEndpoint(url=url, model=model, name=options.pop("name", "test"),
                                     image_side=224, **options))
    return RemoteEngine(endpoint, max_tokens=CAP, auto_tiling=False)


def test_a_page_is_read_through_a_real_server_with_its_token_logprobs(llama_cpp_server):
    engine = make_engine(llama_cpp_server.url, max_concurrency=2)
    try:
        # with llama-cpp-python's default repeat penalty the tiny model neither loops nor
        # stops: its answer is cut off at the cap (finish_reason "length"), so the page
        # is read again in tiles, as the local engine does
        engine.max_tokens = 40
        result = engine.recognize(PAGE, PageRequest(doc_type="receipt"))
    finally:
        engine.close()
    assert result.text and {"tiled", "truncated_retry", "truncated"} <= set(result.flags)
    assert result.provenance["endpoint"] == "test"
    assert result.provenance["model"] == "tiny" and result.provenance["served_model"] == "tiny"
    assert result.provenance["logprobs"] is True
    assert result.provenance["prompt_version"] == prompt_for("receipt").version
    assert all(token["lp"] <= 0 and token["h"] >= 0 for token in result.tokens)
    assert engine.model_id == "tiny@test"


def test_a_looping_stream_is_cut_off_while_it_streams(llama_cpp_server):
    # without a repeat penalty the tiny model loops; the guard must stop it long before
    # the cap, and the ladder's last rung then falls back to the classic reader
    engine = make_engine(llama_cpp_server.url, extra={"repeat_penalty": 1.0})
    try:
        generation = engine.generate(PAGE, prompt_for("generic"), PageRequest(), sampled=False)
        # the last rung, read as a worker reads it
        fallback = PagePipeline(engine).recognise(PAGE,
                                                                        PageRequest(attempt=3))
    finally:
        engine.close()
    assert generation.stop == "degenerate"
    assert len(generation.tokens) < CAP / 2
    assert fallback.flags == ["fallback"] and "Invoice" in fallback.text


@pytest.mark.parametrize("mode", ["error500", "hang"])
def test_a_failing_endpoint_is_taken_out_and_probed_until_it_answers(mode):
    with ScriptedServer(mode) as server:
        engine = make_engine(server.url, model="scripted", timeout_s=1.0)
        heard = []
        engine.breaker.listen(lambda available, reason: heard.append(available))
        try:
            started = time.monotonic()
            with pytest.raises(EndpointUnavailable, match="endpoint test"):
                engine.recognize(PAGE, PageRequest())
            assert time.monotonic() - started < 5  # the silence is cut at timeout_s
            assert engine.breaker.reason and heard == [False]
            with pytest.raises(EndpointUnavailable, match="is out"):  # refused at once now
                engine.recognize(PAGE, PageRequest())
            server.mode = "ok"
            deadline = time.monotonic() + 10
            while engine.breaker.reason and time.monotonic() < deadline:
                time.sleep(0.1)
            assert engine.breaker.reason is None and heard == [False, True]
            assert engine.recognize(PAGE, PageRequest()).text == "Total 1.00"
        finally:
            engine.close()


@pytest.mark.parametrize("mode, message", [("nonsense", "not JSON"), ("no_choice", "no choice")])
def test_an_answer_that_is_not_a_completion_is_the_pages_engine_error(mode, message):
    with ScriptedServer(mode) as server:
        engine = make_engine(server.url, model="scripted")
        try:
            with pytest.raises(EngineError, match=message):
                engine.recognize(PAGE, PageRequest())
            assert engine.breaker.reason is None  # the endpoint itself answered
        finally:
            engine.close()


def test_past_the_deadline_a_silent_server_is_the_pages_timeout():
    with ScriptedServer("hang") as server:
        engine = make_engine(server.url, model="scripted", timeout_s=30)
        try:
            started = time.monotonic()
            generation = engine.generate(PAGE, prompt_for("generic"),
                                         PageRequest(deadline=time.monotonic() + 1),
                                         sampled=False)
        finally:
            engine.close()
    assert generation.stop == "deadline" and time.monotonic() - started < 5


def test_tls_and_the_api_key_are_checked_and_the_key_never_logged(tiny_model, tmp_path, caplog):
    cert, key = self_signed_certificate(tmp_path)
    key_file = tmp_path / "api-key"
    key_file.write_text("s3cret-key-for-tests\n")
    caplog.set_level(logging.DEBUG)
    with tiny_server(*tiny_model, tmp_path, api_key="s3cret-key-for-tests",
                        tls=(cert, key)) as server:
        for options, refused in (({"api_key_file": key_file}, "CERTIFICATE_VERIFY_FAILED"),
                                 ({"ca_file": cert, "api_key": "wrong"}, "check its api_key")):
            engine = make_engine(server.url, **options)
            try:
                with pytest.raises(EndpointUnavailable, match=refused):
                    engine.generate(PAGE, prompt_for("generic"), PageRequest(), sampled=False)
            finally:
                engine.close()
        engine = make_engine(server.url, ca_file=cert, api_key_file=key_file)
        engine.max_tokens = 8
        try:
            assert engine.recognize(PAGE, PageRequest()).provenance["logprobs"] is True
        finally:
            engine.close()
    assert "s3cret" not in caplog.text
