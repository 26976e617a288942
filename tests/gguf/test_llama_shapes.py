"""Random-weight models at a real model's shape: built, quantized and run by the real llama.cpp.

The small ``gemma3-mini`` shape goes through exactly the path that builds ``gemma3-4b``
for `appliance bench --shape`: the streamed f16 write, llama.cpp's Q4_K_M quantizer,
the cache and its completion marker.
"""

from __future__ import annotations

from pathlib import Path

import gguf
import pytest

from appliance.engines.base import PageRequest
from appliance.gguf import shapes
from appliance.engines.chat import page_messages
from appliance.engines.llama.engine import LlamaEngine, load_llama
from appliance.engines.prompts import prompt_for
from appliance.gguf.shapes import SHAPES, ModelShape, build_shaped_model, estimate_bytes
from appliance.gguf.pair import inspect_model
from appliance.errors import InvalidRequest
from appliance.raster.synthetic import render_text_page

llama_cpp = pytest.importorskip("llama_cpp")

MINI = SHAPES["gemma3-mini"]
PAGE = render_text_page(["Invoice 4711", "Total 118.50 EUR"])
FIXED_TOKENS = 24


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("shape-cache")


@pytest.fixture(scope="module")
def mini(cache: Path) -> tuple[Path, Path]:
    return build_shaped_model(MINI, cache)


def _mtimes(*paths: Path) -> list[int]:
    return [path.stat().st_mtime_ns for path in paths]


def test_the_4b_shape_is_gemma_3_4b(tmp_path: Path) -> None:
    shape = SHAPES["gemma3-4b"]
    assert shape.n_params == pytest.approx(3.88e9, rel=0.002)  # llama.cpp: "model params = 3.88 B"
    assert shape.n_image_tokens == 256
    # the f16 model (7.8 GB) and its quantized copy side by side
    assert 11e9 < estimate_bytes(shape, "Q4_K_M") < 13e9


def test_the_1b_shape_is_gemma_3_1b_with_a_small_vision_tower() -> None:
    shape = SHAPES["gemma3-1b"]
    assert shape.n_params == pytest.approx(1.0e9, rel=0.01)  # llama.cpp: "model params = 999.89 M"
    assert (shape.n_embd, shape.n_layer, shape.n_head, shape.n_head_kv) == (1152, 26, 4, 1)
    assert shape.n_image_tokens == 256 and shape.quant == "Q8_0"


def test_a_page_generates_exactly_the_fixed_number_of_tokens(mini: tuple[Path, Path]) -> None:
    model, mmproj = mini
    engine = LlamaEngine(str(model), str(mmproj), n_ctx=2048, threads=1, fixed_tokens=FIXED_TOKENS)
    try:
        generation = engine.generate(PAGE, prompt_for("generic"), PageRequest(), sampled=False)
    finally:
        engine.close()
    assert len(generation.tokens) == FIXED_TOKENS
    assert generation.stop == "stop"
    assert all(token["t"].strip() for token in generation.tokens)  # no blank pieces: never an empty page

    # the bench's bare loop has no token watch: the model itself must neither end its
    # turn early nor emit byte tokens (which make llama-cpp-python ignore max_tokens)
    llm = load_llama(str(model), str(mmproj), n_ctx=2048, n_batch=512, n_gpu_layers=0,
                     flash_attn=False, threads=1)
    try:
        answer = llm.create_chat_completion(
            messages=page_messages(PAGE, prompt_for("generic").text, MINI.image_size),
            max_tokens=FIXED_TOKENS, temperature=0.0, repeat_penalty=1.0)
    finally:
        llm.close()
    assert answer["choices"][0]["finish_reason"] == "length"
    assert answer["usage"]["completion_tokens"] == FIXED_TOKENS
    assert answer["choices"][0]["message"]["content"].isprintable()


def test_the_prompts_words_are_single_tokens(mini: tuple[Path, Path]) -> None:
    # as with Gemma's real 262k vocabulary, not one token per character
    vocab = llama_cpp.Llama(str(mini[0]), vocab_only=True, verbose=False)
    try:
        text = prompt_for("invoice").text
        pieces = [vocab.detokenize([t]).decode() for t in vocab.tokenize(text.encode(), add_bos=False)]
    finally:
        vocab.close()
    assert " Markdown" in pieces and "illegible" in pieces  # "[illegible]"
    assert len(pieces) < len(text) / 3.5


def test_the_text_model_is_quantized_by_llama_cpp_and_the_mmproj_stays_f16(mini: tuple[Path, Path]) -> None:
    model, mmproj = mini
    info = inspect_model(model, mmproj)
    assert info.quant == "Q4_K_M"
    assert (info.n_embd, info.n_layer, info.n_head, info.n_head_kv, info.head_dim, info.n_vocab) == (
        MINI.n_embd, MINI.n_layer, MINI.n_head, MINI.n_head_kv, MINI.head_dim, MINI.n_vocab)
    assert info.image_tokens == MINI.n_image_tokens

    types = {t.name: t.tensor_type for t in gguf.GGUFReader(model).tensors}
    matrices = {name: kind for name, kind in types.items() if not name.endswith("norm.weight")}
    assert set(matrices.values()) == {gguf.GGMLQuantizationType.Q4_K, gguf.GGMLQuantizationType.Q6_K}
    assert types["token_embd.weight"] == gguf.GGMLQuantizationType.Q6_K  # tied output: Q6_K as in Q4_K_M
    assert {kind for name, kind in types.items() if name.endswith("norm.weight")} == {gguf.GGMLQuantizationType.F32}

    vision = {t.name: t.tensor_type for t in gguf.GGUFReader(mmproj).tensors}
    assert vision["v.blk.0.attn_q.weight"] == vision["mm.input_projection.weight"] == gguf.GGMLQuantizationType.F16

    # the f16 intermediate is gone; the marker came last
    assert sorted(p.name for p in model.parent.iterdir()) == sorted(
        [".lock", "build.json", model.name, mmproj.name])


def test_a_second_build_reuses_the_cache(cache: Path, mini: tuple[Path, Path]) -> None:
    before = _mtimes(*mini, mini[0].parent / "build.json")
    messages: list[str] = []
    again = build_shaped_model(MINI, cache, progress=messages.append)
    assert again == mini
    assert _mtimes(*mini, mini[0].parent / "build.json") == before
    assert messages == []


def test_an_interrupted_build_is_redone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def interrupted(*_args):
        raise KeyboardInterrupt

    with monkeypatch.context() as patch:
        patch.setattr(llama_cpp, "llama_model_quantize", interrupted)
        with pytest.raises(KeyboardInterrupt):
            build_shaped_model(MINI, tmp_path)
    directory = shapes.build_paths(MINI, tmp_path).directory
    assert not (directory / "build.json").exists()
    assert (directory / "gemma3-mini-F16-intermediate.gguf").exists()  # left behind, never used

    messages: list[str] = []
    model, mmproj = build_shaped_model(MINI, tmp_path, progress=messages.append)
    assert any("quantizing" in message for message in messages)
    assert not (directory / "gemma3-mini-F16-intermediate.gguf").exists()
    assert inspect_model(model, mmproj).quant == "Q4_K_M"

    # a damaged file after a complete build is noticed too
    with open(model, "r+b") as f:
        f.truncate(model.stat().st_size // 2)
    messages.clear()
    build_shaped_model(MINI, tmp_path, progress=messages.append)
    assert any("quantizing" in message for message in messages)
    assert inspect_model(model, mmproj).quant == "Q4_K_M"


def test_too_little_disk_is_refused_before_writing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = shapes.shutil.disk_usage

    def small_disk(path):
        usage = real(path)
        return usage._replace(free=estimate_bytes(MINI) // 2)

    monkeypatch.setattr(shapes.shutil, "disk_usage", small_disk)
    with pytest.raises(InvalidRequest, match="needs about .* free in"):
        build_shaped_model(MINI, tmp_path)
    assert not any(p.suffix in (".gguf", ".tmp") for p in shapes.build_paths(MINI, tmp_path).directory.iterdir())


def test_unknown_quantization_and_bad_shapes_are_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidRequest, match="unknown quantization 'Q4_K_Z'.*Q4_K_M"):
        build_shaped_model(MINI, tmp_path, quant="Q4_K_Z")
    fields = {**MINI.__dict__, "head_dim": 63}
    with pytest.raises(ValueError, match="bad model shape gemma3-mini: head_dim 63 is odd"):
        ModelShape(**fields)
