"""Model validation: real GGUF files, written here, checked before llama.cpp sees them."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import gguf
import numpy as np
import pytest

from appliance.gguf.testmodel import TestModelShape, write_test_model
from tests.fixtures.gguf_files import write_values_gguf as write_gguf
from appliance.gguf.files import file_sha256
from appliance.gguf.header import read_header, SkippedArray
from appliance.gguf.pair import inspect_model
from appliance.errors import (
    ModelError,
    ModelMmprojMismatch,
    ModelNoMmproj,
    ModelNotGguf,
    ModelUnsupportedArch,
    error_class_for,
)


@pytest.fixture(scope="module")
def pair(tmp_path_factory) -> tuple[Path, Path]:
    return write_test_model(tmp_path_factory.mktemp("tiny"))


@pytest.fixture(scope="module")
def wide_pair(tmp_path_factory) -> tuple[Path, Path]:
    """A second tiny pair whose text model (and so projector output) is 96 wide."""
    return write_test_model(tmp_path_factory.mktemp("wide"), shape=TestModelShape(n_embd=96))


def test_the_tiny_pair_passes_and_reports_its_shape(pair):
    model, mmproj = pair
    info = inspect_model(model, mmproj)
    shape = TestModelShape()
    assert info.arch == "gemma3"
    assert info.n_embd == shape.n_embd == info.projection_dim
    assert (info.n_layer, info.n_head, info.n_head_kv) == (shape.n_layer, shape.n_head,
                                                           shape.n_head_kv)
    assert info.head_dim == shape.head_dim != shape.n_embd // shape.n_head  # key_length wins
    assert info.context_length == shape.context_length
    assert info.n_vocab == shape.n_vocab
    assert info.projector_type == "gemma3"
    assert (info.image_size, info.patch_size, info.n_merge) == (224, 14, 4)
    assert info.image_tokens == info.image_tokens_min == shape.n_image_tokens == 16
    assert not info.dynamic_resolution
    assert info.model_size == model.stat().st_size and info.mmproj_size == mmproj.stat().st_size
    assert info.name.startswith("tiny-gemma3") and info.quant == "F16"
    assert "n_embd 64" in info.summary() and "16 tokens per image" in info.summary()


def test_the_header_reader_agrees_with_gguf_reader(pair):
    for path in pair:
        ours = read_header(path)
        reference = gguf.GGUFReader(path)
        assert ours.data_offset == reference.data_offset
        keys = [k for k in reference.fields if not k.startswith("GGUF.")]
        assert list(ours.metadata) == keys
        for key in keys:
            field = reference.fields[key]
            expected = field.contents()
            value = ours.metadata[key]
            if isinstance(expected, float):
                assert value == pytest.approx(expected)
            elif isinstance(expected, list) and expected and isinstance(expected[0], float):
                assert value == pytest.approx(expected)
            else:
                assert value == expected, key
        assert [t.name for t in reference.tensors] == list(ours.tensors)
        for tensor in reference.tensors:
            mine = ours.tensors[tensor.name]
            assert mine.shape == tuple(int(d) for d in tensor.shape)
            assert mine.type == int(tensor.tensor_type)
            assert ours.data_offset + mine.offset == tensor.data_offset
            assert mine.n_bytes == tensor.n_bytes
        assert ours.data_end <= path.stat().st_size


def test_long_arrays_are_skipped_but_counted(tmp_path):
    path = write_gguf(tmp_path / "vocab.gguf", "gemma3",
                      {"tokenizer.ggml.tokens": [f"t{i}" for i in range(5000)],
                       "tokenizer.ggml.scores": [0.5] * 5000,
                       "clip.vision.image_mean": [0.5, 0.5, 0.5]},
                      {"a": np.zeros((2, 3), np.float32)})
    header = read_header(path)
    tokens = header.metadata["tokenizer.ggml.tokens"]
    assert isinstance(tokens, SkippedArray) and len(tokens) == 5000
    assert len(header.metadata["tokenizer.ggml.scores"]) == 5000
    assert header.metadata["clip.vision.image_mean"] == pytest.approx([0.5] * 3)
    assert header.tensors["a"].shape == (3, 2)  # ggml order


def test_random_bytes_are_not_a_gguf(tmp_path, pair):
    junk = tmp_path / "model.gguf"
    junk.write_bytes(np.random.default_rng(1).integers(0, 256, 4096, dtype=np.uint8).tobytes())
    with pytest.raises(ModelNotGguf) as caught:
        inspect_model(junk, pair[1])
    assert caught.value.code == "model_not_gguf"
    assert "not a GGUF file" in caught.value.message and str(junk) in caught.value.message


def test_empty_and_missing_files_are_not_a_gguf(tmp_path, pair):
    empty = tmp_path / "empty.gguf"
    empty.touch()
    with pytest.raises(ModelNotGguf, match="empty"):
        inspect_model(empty, pair[1])
    with pytest.raises(ModelNotGguf, match="does not exist"):
        inspect_model(tmp_path / "absent.gguf", pair[1])
    with pytest.raises(ModelNotGguf, match="does not exist"):
        inspect_model(pair[0], tmp_path / "absent-mmproj.gguf")


@pytest.mark.parametrize("keep", ["half", "all but the last tensor byte"])
def test_a_truncated_copy_is_not_a_gguf(tmp_path, pair, keep):
    model, mmproj = pair
    data = model.read_bytes()
    end = len(data) // 2 if keep == "half" else read_header(model).data_end - 1
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(data[:end])
    with pytest.raises(ModelNotGguf, match="truncated") as caught:
        inspect_model(cut, mmproj)
    assert "pull" in caught.value.message  # says how to get it whole


def test_a_file_cut_inside_its_header_is_refused(tmp_path, pair):
    cut = tmp_path / "head.gguf"
    cut.write_bytes(pair[1].read_bytes()[:200])
    with pytest.raises(ModelNotGguf, match="header is damaged"):
        inspect_model(pair[0], cut)


def test_a_text_model_without_mmproj_is_refused(pair):
    for missing in (None, ""):
        with pytest.raises(ModelNoMmproj) as caught:
            inspect_model(pair[0], missing)
        assert caught.value.code == "model_no_mmproj"
        assert "engine.mmproj" in caught.value.message
        assert "same repository" in caught.value.message


def test_swapped_files_are_refused(pair):
    model, mmproj = pair
    with pytest.raises(ModelNoMmproj, match="is an mmproj"):
        inspect_model(mmproj, model)
    with pytest.raises(ModelNoMmproj, match="not a vision projector"):
        inspect_model(model, model)


def test_an_mmproj_of_another_size_is_a_mismatch(pair, wide_pair):
    assert inspect_model(*wide_pair).n_embd == 96
    with pytest.raises(ModelMmprojMismatch) as caught:
        inspect_model(pair[0], wide_pair[1])
    assert caught.value.code == "model_mmproj_mismatch"
    assert "96" in caught.value.message and "64" in caught.value.message
    with pytest.raises(ModelMmprojMismatch):
        inspect_model(wide_pair[0], pair[1])


def test_a_llama_model_is_an_unsupported_arch(tmp_path, pair):
    llama = write_gguf(tmp_path / "llama.gguf", "llama",
                       {"general.name": "some llama", "llama.embedding_length": 64},
                       {"token_embd.weight": np.zeros((8, 64), np.float16)})
    with pytest.raises(ModelUnsupportedArch) as caught:
        inspect_model(llama, pair[1])
    assert caught.value.code == "model_unsupported_arch"
    assert "'llama'" in caught.value.message and "gemma3" in caught.value.message


def test_a_projector_of_another_kind_is_an_unsupported_arch(tmp_path, pair):
    mlp = write_gguf(tmp_path / "mmproj-llava.gguf", "clip",
                     {"clip.has_vision_encoder": True, "clip.projector_type": "mlp"},
                     {"mm.0.weight": np.zeros((4, 4), np.float16)})
    with pytest.raises(ModelUnsupportedArch, match="'mlp'"):
        inspect_model(pair[0], mlp)


def test_a_projector_without_vision_is_refused(tmp_path, pair):
    audio = write_gguf(tmp_path / "mmproj-audio.gguf", "clip",
                       {"clip.has_vision_encoder": False, "clip.has_audio_encoder": True,
                        "clip.audio.projector_type": "gemma4a"},
                       {"mm.a.weight": np.zeros((4, 4), np.float16)})
    with pytest.raises(ModelNoMmproj, match="no vision encoder"):
        inspect_model(pair[0], audio)


def test_the_error_classes_carry_their_codes():
    for cls, code in ((ModelNotGguf, "model_not_gguf"), (ModelNoMmproj, "model_no_mmproj"),
                      (ModelMmprojMismatch, "model_mmproj_mismatch"),
                      (ModelUnsupportedArch, "model_unsupported_arch")):
        assert issubclass(cls, ModelError) and cls.code == code
        assert error_class_for(code) is cls


def test_file_sha256_streams(tmp_path, pair):
    import hashlib

    seen = []
    digest = file_sha256(pair[0], progress=seen.append)
    assert digest == hashlib.sha256(pair[0].read_bytes()).hexdigest()
    assert seen[-1] == pair[0].stat().st_size


def test_a_read_only_copy_is_enough(tmp_path, pair):
    """Inspection only reads: a pair on a read-only mount passes."""
    copies = []
    for path in pair:
        copy = tmp_path / path.name
        shutil.copy(path, copy)
        os.chmod(copy, 0o444)
        copies.append(copy)
    assert inspect_model(*copies).n_embd == 64
