"""The continuously batched llama engine on the tiny random-weight Gemma-3 pair,
through the real llama.cpp: N pages decoded at once on one copy of the weights.

The tiny model loops under greedy decoding, so every page here runs to its token cap
(or to the repetition guard): caps of different lengths make sequences leave the batch
at different steps, and new ones join mid-flight.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from appliance.engines.base import PageRequest
from appliance.engines.llama.sequence import token_stats
from appliance.engines.llama.engine import LlamaEngine
from appliance.engines.prompts import PROMPTS, Prompt, prompt_for
from appliance.errors import PagePreempted
from appliance.raster.synthetic import render_text_page

# eight pages: distinct images, document types and answer lengths (13 to 62 tokens)
PAGES = [(render_text_page([f"Invoice {i}", f"Total {i}.50"], font_size=40 + 10 * i),
          Prompt(doc_type, f"{doc_type}/test", PROMPTS[doc_type].text, 13 + 7 * i))
         for i, doc_type in enumerate(PROMPTS)]


def _engine(tiny_model, parallel: int, **options) -> LlamaEngine:
    model, mmproj = tiny_model
    return LlamaEngine(str(model), str(mmproj), parallel=parallel, n_ctx=1024, threads=1,
                       auto_tiling=False, **options)


def _read_all(engine: LlamaEngine, pages, sampled: bool = False):
    """Every page queued at once: each joins the batch as soon as a slot frees."""
    decodings = [engine.decoding_for(image, prompt, PageRequest(), sampled)
                 for image, prompt in pages]
    futures = [engine.decoder.submit(decoding) for decoding in decodings]
    return [engine.decoder.wait(future) for future in futures]


@pytest.fixture(scope="module")
def alone(tiny_model):
    engine = _engine(tiny_model, 1)
    try:
        yield _read_all(engine, PAGES)
    finally:
        engine.close()


@pytest.mark.parametrize("parallel", [2, 4])
def test_greedy_answers_are_token_for_token_the_same_alone_and_in_a_batch(tiny_model, alone,
                                                                          parallel):
    engine = _engine(tiny_model, parallel)
    try:
        batched = _read_all(engine, PAGES)
        stats = engine.decode_stats()
    finally:
        engine.close()
    # The pages shared decode steps, and a page joined as soon as a slot freed: list
    # scheduling takes at most total/N + the longest page's steps (one at a time: 292).
    total = sum(len(g.tokens) for g in batched)
    assert stats["generated_tokens"] == total
    assert stats["steps"] <= total / parallel + max(len(g.tokens) for g in batched)
    drift = 0.0
    for single, together in zip(alone, batched):
        assert [t["t"] for t in together.tokens] == [t["t"] for t in single.tokens]
        assert (together.text, together.stop) == (single.text, single.stop)
        drift = max([drift, *(abs(a[k] - b[k]) for a, b in zip(single.tokens, together.tokens)
                              for k in ("lp", "h"))])
    # The scores are not bit-identical: llama.cpp's CPU kernels sum a batch of rows,
    # and attention over the slots' shared KV buffer, in another order than for one
    # sequence alone. Measured: at most 8e-4 nats (N = 4); the tokens never differ.
    print(f"largest score drift batched vs alone at N={parallel}: {drift:.5f}")
    assert drift <= 5e-3
    assert [len(g.tokens) for g in batched] == [p.max_tokens for _, p in PAGES]


def test_a_looping_page_does_not_hold_up_the_others(tiny_model):
    """The degenerate page runs until its guard trips (~300 tokens); the short pages
    beside it finish after their own tokens' worth of steps, not after it."""
    engine = _engine(tiny_model, 4)
    decoder = engine.decoder
    finished_at: dict[str, int] = {}

    def submit(name: str, prompt: Prompt):
        future = decoder.submit(engine.decoding_for(PAGES[0][0], prompt, PageRequest(),
                                                 sampled=False))
        # a done callback runs in the decode loop as the sequence ends
        future.add_done_callback(lambda _: finished_at.setdefault(name, decoder.stats.steps))
        return future

    try:
        looping = submit("looping", prompt_for("generic"))
        short = [submit(f"short{i}", PAGES[i][1]) for i in range(3)]
        results = [decoder.wait(future) for future in short]
        degenerate = decoder.wait(looping)
    finally:
        engine.close()
    assert degenerate.stop == "degenerate" and len(degenerate.tokens) > 150
    for i, result in enumerate(results):
        assert result.stop == "length" and len(result.tokens) == PAGES[i][1].max_tokens
        assert finished_at[f"short{i}"] < finished_at["looping"] - 100


def test_a_cancelled_page_ends_alone_and_is_handed_back(tiny_model):
    engine = _engine(tiny_model, 2)
    cancel = threading.Event()
    try:
        with ThreadPoolExecutor(2) as pool:
            taken_back = pool.submit(engine.recognize, PAGES[0][0],
                                     PageRequest(cancel=cancel))
            healthy = pool.submit(engine.generate, PAGES[1][0], PAGES[1][1], PageRequest(),
                                  sampled=False)
            time.sleep(0.1)
            cancel.set()
            with pytest.raises(PagePreempted, match="without counting an attempt"):
                taken_back.result()
            assert healthy.result().stop == "length"
        # a page cancelled before its turn is not read at all
        stopped = engine.generate(PAGES[2][0], PAGES[2][1], PageRequest(cancel=cancel),
                                  sampled=False)
        assert stopped.stop == "cancelled" and stopped.tokens == []
    finally:
        engine.close()


def test_each_page_keeps_its_own_deadline(tiny_model):
    engine = _engine(tiny_model, 2)
    try:
        with ThreadPoolExecutor(2) as pool:
            late = pool.submit(engine.generate, PAGES[0][0], prompt_for("generic"),
                               PageRequest(deadline=time.monotonic() + 0.05), sampled=True)
            on_time = pool.submit(engine.generate, PAGES[7][0], PAGES[7][1], PageRequest(),
                                  sampled=True)
            assert late.result().stop == "deadline"
            assert on_time.result().stop == "length"
    finally:
        engine.close()


def test_sampled_answers_do_not_depend_on_the_neighbours(tiny_model):
    """Each page draws from its own seeded stream."""
    answers = {}
    for parallel in (1, 3):
        engine = _engine(tiny_model, parallel)
        try:
            answers[parallel] = [g.text for g in _read_all(engine, PAGES[:3], sampled=True)]
        finally:
            engine.close()
    assert answers[1] == answers[3]


def test_token_scores_are_log_softmax_and_entropy():
    import numpy as np

    rows = np.log(np.array([[0.5, 0.25, 0.25], [1.0, 1e-30, 1e-30]], dtype=np.float32))
    peaks, log_totals, entropies = token_stats(rows)
    assert np.allclose(rows[:, 0] - peaks - log_totals, np.log([0.5, 1.0]), atol=1e-6)
    assert np.allclose(entropies, [1.5 * np.log(2), 0.0], atol=1e-5)
