"""The tiny random-weight pairs of the OCR families: deterministic, small, and run by the
real llama.cpp through each family's own architecture, projector and chat template."""

from __future__ import annotations

import base64
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image, ImageDraw

from appliance.gguf.family_models import FAMILY_PAIRS, write_family_test_model
from appliance.gguf.header import read_header

pytest.importorskip("llama_cpp")

FAMILIES = list(FAMILY_PAIRS)
MAX_FILE_BYTES = 3 * 1024 * 1024

# What the 96 x 128 test page adds to the prompt: the image's begin and end tokens and
# its soft tokens. Under M-RoPE (PaddleOCR's and GLM's text models) llama-cpp-python
# counts positions, and an image of h x w tokens takes max(h, w) of them.
IMAGE_PROMPT_GROWTH = {
    "paddleocr_vl": 2 + 5,  # 84 x 140 px (28 px aligned, within max_pixels): 3 x 5 tokens
    "lightonocr": 2 + 12 + 1,  # longest edge to 112 px, 84 x 112: 3 x 4; the template adds a newline per part
    "dots_ocr": 2 + 15,  # 84 x 140 px: 3 x 5 tokens
    "glm_ocr": 2 + 5,  # 84 x 140 px: 3 x 5 tokens
    "gemma4": 2 + 80,  # raised to llama.cpp's 70-token minimum: 384 x 480 px, 48 px per token: 8 x 10
    # 96 x 128 px, 32 px per token: 3 x 4, each row followed by a newline embedding, and
    # the projector's own begin and end embeddings: (3 + 1) * 4 + 2
    "hunyuan_ocr": 2 + 18,
    # the 1024 px global view only (no tiles up to 640 px): 16 x 16 tokens, a newline
    # embedding after each row and the view separator, (16 + 1) * 16 + 1; no begin token,
    # and mtmd's end text is a newline
    "deepseek_ocr": 273 + 1,
    "gemma3n": 2 + 256,  # every image squashed to 768 px; MobileNetV5's fixed 16 x 16 grid
}

# dots.ocr's real template concatenates message content as a string, and the one the
# converter writes for DeepSeek-OCR prints it; these families are asked with their
# content parts joined into one string first.
STRING_CONTENT = {"dots_ocr", "deepseek_ocr"}

# Runs in a subprocess: a llama.cpp assert aborts the process, which must not take
# pytest with it.
_RUNNER = r'''
import json, sys
import llama_cpp
from llama_cpp.llama_chat_format import MTMDChatHandler

model, mmproj, image_url, mode = sys.argv[1:5]


class StringContentHandler(MTMDChatHandler):
    """Joins each message's parts (text and media markers) into one string."""

    def _get_template_messages(self, messages, media_marker):
        return [{**m, "content": "".join(part["text"] for part in m["content"])}
                if isinstance(m.get("content"), list) else m
                for m in super()._get_template_messages(messages, media_marker)]


handler = StringContentHandler if mode == "string" else MTMDChatHandler
llm = llama_cpp.Llama(model_path=model, chat_handler=handler(clip_model_path=mmproj, verbose=False),
                      n_ctx=1024, n_threads=1, n_threads_batch=1, verbose=False)


def ask(with_image):
    content = [{"type": "text", "text": "OCR:"}]
    if with_image:
        content.insert(0, {"type": "image_url", "image_url": {"url": image_url}})
    return llm.create_chat_completion(messages=[{"role": "user", "content": content}],
                                      max_tokens=16, temperature=0.0)


try:
    with_image, text_only = ask(True), ask(False)
except Exception as exc:
    print(json.dumps({"error": type(exc).__name__, "message": str(exc)}))
else:
    print(json.dumps({"with_image": with_image, "text_only": text_only}))
finally:
    llm.close()
'''


def _page_data_uri() -> str:
    image = Image.new("RGB", (96, 128), "white")
    draw = ImageDraw.Draw(image)
    for y in range(12, 120, 14):
        draw.line([(8, y), (88, y)], fill="black", width=2)
    buf = io.BytesIO()
    image.save(buf, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def _run(pair: tuple[Path, Path], mode: str) -> dict:
    proc = subprocess.run([sys.executable, "-c", _RUNNER, str(pair[0]), str(pair[1]), _page_data_uri(), mode],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def pairs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Path]]:
    root = tmp_path_factory.mktemp("family-pairs")
    return {family: write_family_test_model(root / family, family) for family in FAMILIES}


@pytest.mark.parametrize("family", FAMILIES)
def test_same_seed_writes_byte_identical_small_files(tmp_path: Path, pairs: dict, family: str) -> None:
    again = write_family_test_model(tmp_path / "again", family)
    assert [p.name for p in again] == [f"tiny-{family}.gguf", f"tiny-{family}-mmproj.gguf"]
    for fresh, first in zip(again, pairs[family]):
        assert fresh.read_bytes() == first.read_bytes()
        assert 0 < fresh.stat().st_size < MAX_FILE_BYTES, fresh
    other_seed = write_family_test_model(tmp_path / "other", family, seed=1)
    assert other_seed[0].read_bytes() != again[0].read_bytes()
    assert other_seed[1].read_bytes() != again[1].read_bytes()


@pytest.mark.parametrize("family", FAMILIES)
def test_headers_name_the_family_architecture_and_projector(pairs: dict, family: str) -> None:
    expected = FAMILY_PAIRS[family]
    text, mmproj = (read_header(path) for path in pairs[family])
    assert text.arch == expected.arch
    assert mmproj.arch == "clip"
    projector = mmproj.metadata.get("clip.projector_type") or mmproj.metadata.get("clip.vision.projector_type")
    assert projector == expected.projector
    assert text.metadata["tokenizer.chat_template"] == expected.chat_template


@pytest.mark.parametrize("family", FAMILIES)
def test_chat_completion_sees_the_image_and_emits_printable_text(pairs: dict, family: str) -> None:
    result = _run(pairs[family], "string" if family in STRING_CONTENT else "parts")
    assert "error" not in result, result
    answer = result["with_image"]
    text = answer["choices"][0]["message"]["content"]
    assert text.strip() and all(ch.isprintable() or ch == "\n" for ch in text), repr(text)
    assert answer["choices"][0]["finish_reason"] == "length"
    assert answer["usage"]["completion_tokens"] == 16
    growth = answer["usage"]["prompt_tokens"] - result["text_only"]["usage"]["prompt_tokens"]
    assert growth == IMAGE_PROMPT_GROWTH[family]


def test_dots_ocr_template_cannot_take_content_parts(pairs: dict) -> None:
    """The real dots.ocr template, given MTMDChatHandler's list of content parts."""
    result = _run(pairs["dots_ocr"], "parts")
    assert result["error"] == "TypeError" and "concatenate" in result["message"], result
