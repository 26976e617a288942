"""Every model family is recognised from its GGUF headers, and a pair that does not
belong together is refused, with the reason codes operators already know.

The pairs here are real GGUF files whose headers are written as each family's
converter writes them (architecture, projector type, the projector's output tensor)
with placeholder weights: the pair check reads headers only. The families whose
tiny pairs llama.cpp also runs are read end to end in test_family_models.py.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from appliance.errors import ModelMmprojMismatch, ModelUnsupportedArch
from appliance.gguf.families import FAMILIES, PROJECTORS
from appliance.gguf.pair import inspect_model
from tests.fixtures.gguf_files import write_values_gguf

N_EMBD = 64


def write_text_model(path: Path, arch: str, n_embd: int = N_EMBD) -> Path:
    return write_values_gguf(path, arch, {
        "general.name": f"header-only {arch}", f"{arch}.embedding_length": n_embd,
        f"{arch}.block_count": 2, f"{arch}.attention.head_count": 4,
        f"{arch}.context_length": 4096, "tokenizer.ggml.tokens": ["a", "b", "c"]},
        {"token_embd.weight": np.zeros((3, n_embd), np.float16)})


def write_mmproj(path: Path, projector: str, n_embd: int = N_EMBD, *,
                 max_pixels: int | None = None) -> Path:
    facts = PROJECTORS[projector]
    metadata = {"clip.has_vision_encoder": True, "clip.projector_type": projector,
                "clip.vision.image_size": 896, "clip.vision.patch_size": 14}
    if max_pixels:
        metadata |= {"clip.vision.image_min_pixels": 28 * 28 * 4,
                     "clip.vision.image_max_pixels": max_pixels}
    # numpy shapes are ggml's reversed: ne[output_dim] is the text model's width
    shape = (8, n_embd) if facts.output_dim == 0 else (n_embd, 8)
    return write_values_gguf(path, "clip", metadata,
                             {facts.output_tensor: np.zeros(shape, np.float16)})


@pytest.mark.parametrize("family", FAMILIES.values(), ids=lambda f: f.name)
def test_each_family_is_detected_from_its_headers(tmp_path, family):
    for arch in family.archs:
        for projector in family.projectors:
            info = inspect_model(write_text_model(tmp_path / f"text-{arch}.gguf", arch),
                                 write_mmproj(tmp_path / f"mmproj-{projector}.gguf", projector))
            assert (info.family, info.arch, info.projector_type) == (family.name, arch,
                                                                     projector)
            assert info.profile is family and family.title in info.summary()
            assert info.projection_dim == N_EMBD


def test_a_projector_names_the_family_even_when_text_models_share_an_architecture(tmp_path):
    """A Qwen-2 text model is dots.ocr only with the dots.ocr projector."""
    qwen3 = write_text_model(tmp_path / "qwen3.gguf", "qwen3")
    assert inspect_model(qwen3, write_mmproj(tmp_path / "l.gguf", "lightonocr")).family \
        == "lightonocr"
    with pytest.raises(ModelMmprojMismatch) as caught:
        inspect_model(qwen3, write_mmproj(tmp_path / "d.gguf", "dots_ocr"))
    assert caught.value.code == "model_mmproj_mismatch"
    assert "dots.ocr" in caught.value.message and "'qwen3'" in caught.value.message


def test_a_paddleocr_projector_with_a_gemma_model_is_a_mismatch(tmp_path):
    with pytest.raises(ModelMmprojMismatch, match="PaddleOCR-VL"):
        inspect_model(write_text_model(tmp_path / "g.gguf", "gemma3"),
                      write_mmproj(tmp_path / "p.gguf", "paddleocr"))


def test_a_projector_of_another_width_is_a_mismatch_in_every_family(tmp_path):
    for family in FAMILIES.values():
        text = write_text_model(tmp_path / "t.gguf", family.archs[0])
        mmproj = write_mmproj(tmp_path / "m.gguf", family.projectors[0], n_embd=96)
        with pytest.raises(ModelMmprojMismatch, match="96"):
            inspect_model(text, mmproj)


def test_a_family_llama_cpp_cannot_run_is_refused(tmp_path):
    """Qwen2-VL is a vision model llama.cpp runs, but no family here is made of it."""
    with pytest.raises(ModelUnsupportedArch) as caught:
        inspect_model(write_text_model(tmp_path / "q.gguf", "qwen2vl"),
                      write_mmproj(tmp_path / "m.gguf", "gemma3"))
    assert "'qwen2vl'" in caught.value.message and "paddleocr" in caught.value.message
    merger = write_values_gguf(tmp_path / "mlp.gguf", "clip", {
        "clip.has_vision_encoder": True, "clip.projector_type": "qwen2vl_merger"},
        {"mm.0.weight": np.zeros((4, 4), np.float16)})
    with pytest.raises(ModelUnsupportedArch, match="'qwen2vl_merger'"):
        inspect_model(write_text_model(tmp_path / "d.gguf", "qwen2"), merger)


def test_dynamic_resolution_takes_its_pixel_budget_from_the_file(tmp_path):
    text = write_text_model(tmp_path / "p.gguf", "paddleocr")
    budget = 28 * 28 * 1000  # 1000 tokens of 28 x 28 pixels (patch 14, merge 2)
    info = inspect_model(text, write_mmproj(tmp_path / "m.gguf", "paddleocr",
                                            max_pixels=budget))
    assert info.dynamic_resolution and info.max_pixels == budget
    assert (info.image_tokens_min, info.image_tokens) == (4, 1000)
    assert info.image_size % 28 == 0 and info.image_size ** 2 <= budget
    fixed = inspect_model(write_text_model(tmp_path / "g.gguf", "gemma3"),
                          write_mmproj(tmp_path / "g-m.gguf", "gemma3"))
    assert not fixed.dynamic_resolution and fixed.image_tokens == 256


def test_every_family_is_read_through_a_converter_and_asked_with_a_prompt():
    from appliance.engines.converters import to_markdown
    from appliance.engines.prompts import prompt_for

    for family in FAMILIES.values():
        assert to_markdown(family.output, "Invoice 4711") == "Invoice 4711"
        assert prompt_for("receipt", family).version.startswith(f"{family.name}/")
        assert 0 < family.temperature <= 1 and family.repeat_penalty >= 1
        assert family.good_at and family.title
        if family.prompts is not None:
            assert family.source, f"{family.name}: where do its prompts come from?"


def test_every_family_has_a_tiny_pair_to_test_it_with():
    from appliance.gguf.family_models import FAMILY_PAIRS

    assert {"gemma3", *FAMILY_PAIRS} == set(FAMILIES)  # gemma3's: testmodel.py
    for name, pair in FAMILY_PAIRS.items():
        assert pair.arch in FAMILIES[name].archs
        assert pair.projector in FAMILIES[name].projectors


def test_deepseek_ocr_is_read_as_the_view_llama_cpp_fixes_not_the_files_224_px(tmp_path):
    info = inspect_model(write_text_model(tmp_path / "t.gguf", "deepseek2-ocr"),
                         write_mmproj(tmp_path / "m.gguf", "deepseekocr"))  # says 896/14
    assert (info.image_size, info.patch_size, info.image_tokens) == (1024, 16, 256)
    assert not info.dynamic_resolution
