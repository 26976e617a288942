"""The tiny random-weight Gemma-3 pair: deterministic, small, and run by the real llama.cpp."""

from __future__ import annotations

import base64
import io
from pathlib import Path

import pytest
from PIL import Image, ImageDraw

from appliance.gguf.testmodel import TestModelShape, write_test_model

llama_cpp = pytest.importorskip("llama_cpp")
from llama_cpp.llama_chat_format import MTMDChatHandler  # noqa: E402

MAX_FILE_BYTES = 3 * 1024 * 1024


@pytest.fixture(scope="module")
def model_pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return write_test_model(tmp_path_factory.mktemp("tiny-gemma3"))


def _png_data_uri() -> str:
    image = Image.new("RGB", (64, 48), "white")
    ImageDraw.Draw(image).line([(8, 20), (56, 20)], fill="black", width=2)
    buf = io.BytesIO()
    image.save(buf, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def _load(model_path: Path, mmproj_path: Path) -> llama_cpp.Llama:
    # n_threads_batch too: its default (all cores) busy-waits in OpenMP and makes
    # single calls take 0.5 s instead of 20 ms on a small, shared machine.
    return llama_cpp.Llama(
        model_path=str(model_path),
        chat_handler=MTMDChatHandler(clip_model_path=str(mmproj_path), verbose=False),
        n_ctx=1024,
        n_threads=1,
        n_threads_batch=1,
        verbose=False,
    )


def _ask(llm: llama_cpp.Llama, *, with_image: bool) -> dict:
    content: list[dict] = [{"type": "text", "text": "Transcribe this page."}]
    if with_image:
        content.insert(0, {"type": "image_url", "image_url": {"url": _png_data_uri()}})
    return llm.create_chat_completion(
        messages=[{"role": "user", "content": content}],
        max_tokens=32,
        temperature=0.0,
        repeat_penalty=1.0,  # the chat default 1.1 turns the loops into wandering garbage
    )


def test_regenerating_gives_byte_identical_files(tmp_path: Path, model_pair: tuple[Path, Path]) -> None:
    first = write_test_model(tmp_path / "a")
    second = write_test_model(tmp_path / "b")
    assert [p.name for p in first] == ["tiny-gemma3.gguf", "tiny-gemma3-mmproj.gguf"]
    for a, b, fixture in zip(first, second, model_pair):
        assert a.read_bytes() == b.read_bytes() == fixture.read_bytes()
    other_seed = write_test_model(tmp_path / "c", seed=1)
    assert other_seed[0].read_bytes() != first[0].read_bytes()


def test_files_are_small(model_pair: tuple[Path, Path]) -> None:
    for path in model_pair:
        assert 0 < path.stat().st_size < MAX_FILE_BYTES, path


@pytest.mark.parametrize(
    "bad",
    [
        {"head_dim": 31},  # odd: RoPE aborts the process at the first decode
        {"image_size": 220},  # not a multiple of patch_size
        {"n_merge": 3},  # 16 patches per side not a multiple of n_merge
        {"vision_n_ff": 32},  # equal to vision_n_embd: clip.cpp swaps ffn_up/ffn_down
    ],
)
def test_shape_refuses_values_that_would_abort_llama_cpp(bad: dict) -> None:
    with pytest.raises(ValueError, match="bad test model shape"):
        TestModelShape(**bad)


def test_chat_completion_sees_the_image_and_emits_looping_printable_text(model_pair: tuple[Path, Path]) -> None:
    shape = TestModelShape()
    llm = _load(*model_pair)
    try:
        with_image = _ask(llm, with_image=True)
        text_only = _ask(llm, with_image=False)
    finally:
        llm.close()

    text = with_image["choices"][0]["message"]["content"]
    assert isinstance(text, str) and text.strip()
    assert with_image["choices"][0]["finish_reason"] == "length"  # never ends its turn
    assert with_image["usage"]["completion_tokens"] == 32
    # no byte tokens: only the vocabulary's printable pieces
    assert all(ch.isprintable() or ch == "\n" for ch in text), repr(text)
    # degenerate: it ends in a short cycle
    tail = text[-16:]
    assert any(all(tail[i] == tail[i + p] for i in range(len(tail) - p)) for p in range(1, 9)), repr(text)

    # <start_of_image> + 16 soft tokens + <end_of_image>
    extra = with_image["usage"]["prompt_tokens"] - text_only["usage"]["prompt_tokens"]
    assert extra == shape.n_image_tokens + 2 >= 18


def test_eos_bias_makes_a_model_that_ends_its_turn(tmp_path: Path) -> None:
    llm = _load(*write_test_model(tmp_path, eos_bias=2.0))
    try:
        answer = _ask(llm, with_image=True)
    finally:
        llm.close()
    assert answer["choices"][0]["finish_reason"] == "stop"
    assert answer["choices"][0]["message"]["content"] == ""
