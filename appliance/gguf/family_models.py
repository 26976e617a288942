"""Tiny random-weight GGUF pairs of the OCR model families, built from nothing, for tests.

``write_family_test_model(dest_dir, family)`` writes ``tiny-<family>.gguf`` and
``tiny-<family>-mmproj.gguf``, a few hundred kB each, that llama.cpp loads and runs
through the family's own code paths: its text architecture, its projector's graph and
image preprocessing, its image begin/end tokens and its chat template. Only the
weights are noise. The pairs (text architecture / projector, image geometry):

- ``paddleocr_vl``: ``paddleocr`` (ERNIE-4.5 layers, M-RoPE) / ``paddleocr``
  (SigLIP-style NaViT tower, 2x2 merge, ``mlp_AR``). Any size within the file's
  ``image_min/max_pixels`` (here 4 to 16 tokens), in ``<|IMAGE_START|>``/``<|IMAGE_END|>``.
- ``lightonocr``: ``qwen3`` / ``lightonocr`` (Pixtral tower, 2x2 patch merger). The
  longest edge is scaled to ``image_size`` (112 px: up to 16 tokens), wrapped in
  ``<|im_start|>``/``<|im_end|>`` as mtmd does for this projector.
- ``dots_ocr``: ``qwen2`` / ``dots_ocr`` (dots ViT, 2x2 merger). The file's
  min/max pixels as for PaddleOCR, in ``<|img|>``/``<|endofimg|>``.
- ``glm_ocr``: ``glm4`` (post-norms, M-RoPE over half of each head) / ``glm4v``
  (two-frame patch conv, conv merger, SwiGLU connector). Its budget is llama.cpp's
  own, 8 to 4096 tokens (no file key bounds it), in
  ``<|begin_of_image|>``/``<|end_of_image|>``.
- ``gemma4``: ``gemma4`` (sliding-window and full layers with their own head
  sizes, proportional RoPE) / ``gemma4v`` (3x3 average pooling). llama.cpp's budget
  of 70 to 1120 tokens, in ``<|image>``/``<image|>``; image tokens attend both ways.
- ``hunyuan_ocr``: ``hunyuan_vl`` (XD-RoPE) / ``hunyuanvl`` (conv merger, a newline
  embedding after each row and begin/end embeddings of its own). The file's
  min/max pixels (4 to 16 tokens of 32 px), in
  ``<｜hy_place▁holder▁no▁100｜>``/``<｜hy_place▁holder▁no▁101｜>``.

DeepSeek-OCR is not here: its SAM tower takes a fixed 1024 px global view (and 640 px
tiles for large pages), which is more than a tiny pair was worth building yet.

Names come from the llama.cpp vendored in llama-cpp-python 0.3.36: architectures,
tensor names and hyperparameter keys from ``src/llama-arch.cpp`` and the per-model
loaders in ``src/models/*.cpp``; projector types, mmproj keys and tensors from
``tools/mtmd/clip-impl.h`` and ``clip.cpp`` (``load_hparams``, ``load_tensors``);
image begin/end tokens from ``tools/mtmd/mtmd.cpp``; which keys a real file carries
from ``conversion/*.py``. Shapes are tiny and chosen so that nothing aborts: even
head sizes, n_ff unlike n_embd, merge factors that divide the patch grid.

Every family keeps ``testmodel.py``'s bias channel, so decoding emits printable
pieces, never byte or control tokens. Gemma 4 and GLM-4 hide the channel from their
layers behind their post-norms, as Gemma 3 does. The pre-norm-only architectures
(ERNIE, Qwen 2 and 3, HunYuan) do it with output projections whose bias-channel row
is zero (``residual_linear``); they do not scale their input embeddings as Gemma
does, so their output-norm gain on the channel is sqrt(n_embd) times Gemma's.
Measured while sampling the test page: the best normal piece leads the best byte or
control token by at least 9 logits, typically by 25 to 65 (Gemma 4: at least 5,
typically 16; its final logit soft-capping compresses the lead).

The vocabulary is SentencePiece-style (``llama``) for every family, whatever
tokenizer the real model ships; the family's chat and image tokens are CONTROL tokens
in it. Same seed, same bytes, as for the Gemma 3 pair.

The chat templates are the real ones, with their sources, except GLM-OCR's and
HunyuanOCR's: their real ones were not found, these are faithful minimal ones.
dots.ocr's real template concatenates each message's content as a string, so
llama-cpp-python's ``MTMDChatHandler``, which passes the content parts as a list,
cannot render it (TypeError): a caller must first join the parts (text and media
markers) into one string.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import gguf
import numpy as np

from appliance.gguf.testmodel import (
    Noise,
    Specials,
    TensorSpec,
    tokenizer_metadata,
    vocabulary,
    write_gguf,
)

_F32 = np.float32
_F16 = np.float16
_CLIP_MEAN = [0.48145466, 0.4578275, 0.40821073]
_CLIP_STD = [0.26862954, 0.26130258, 0.27577711]


# --- shapes ------------------------------------------------------------------------


@dataclass(frozen=True)
class TextShape:
    """The text model. ``swa_layers`` (Gemma 4) use ``swa_head_dim``, the others
    ``head_dim``."""

    n_embd: int = 64
    n_layer: int = 2
    n_head: int = 4
    n_head_kv: int = 2
    head_dim: int = 32
    n_ff: int = 128
    qkv_bias: bool = False
    qk_norm: bool = False  # per-head RMSNorm on Q and K
    post_norms: bool = False  # post_attention_norm and post_ffw_norm after each sublayer
    fused_gate_up: bool = False  # one ffn_up of 2 * n_ff rows (GLM-4), no ffn_gate
    swa_layers: tuple[int, ...] = ()
    swa_head_dim: int = 0
    # Gemma 4: a rope_freqs tensor for the full-attention layers, which rotate only this
    # many pairs of each head ("proportional" RoPE); the others get the factor 1e30
    rope_freqs_pairs: int = 0
    scaled_embedding: bool = False  # the graph multiplies token embeddings by sqrt(n_embd) (Gemma)

    def layer_head_dim(self, layer: int) -> int:
        return self.swa_head_dim if layer in self.swa_layers else self.head_dim


@dataclass(frozen=True)
class VisionShape:
    """The vision tower: sizes, then how its blocks are built."""

    patch_size: int = 14
    image_size: int = 112  # the ``clip.vision.image_size`` key; what it means depends on the projector
    n_embd: int = 32
    n_ff: int = 48  # unlike n_embd: clip.cpp swaps ffn_up/ffn_down of some projectors when equal
    n_layer: int = 2
    n_head: int = 2
    eps: float = 1e-6
    rms_norm: bool = True  # else LayerNorm with weight and bias
    fused_qkv: bool = False
    attn_bias: bool = False
    qk_norm: bool = False
    post_norms: bool = False  # attn_post_norm and ffn_post_norm (Gemma 4)
    gated_ffn: bool = True  # SwiGLU gate/up/down, else up/down
    ffn_bias: bool = False
    patch_bias: bool = False
    second_patch_conv: bool = False  # v.patch_embd.weight.1 (GLM-4V's second temporal frame)
    embd_norm: bool = False  # v.norm_embd after the patch conv
    pos_grid: int = 0  # learned n x n position embeddings, interpolated to the image
    pos_table: int = 0  # Gemma 4: per-axis position tables of this many entries
    pre_ln: bool = False
    post_ln: bool = False


@dataclass(frozen=True)
class FamilyPair:
    """One family's tiny pair: names, tokens, template, shapes and the keys and
    tensors its projector adds."""

    name: str
    arch: str
    projector: str
    specials: Specials
    bos: str
    eos: str
    pad: str
    add_bos: bool
    chat_template: str
    text: TextShape
    text_keys: list[tuple[str, Any]]  # arch-specific, without the ``<arch>.`` prefix
    vision: VisionShape
    vision_keys: list[tuple[str, Any]]
    projector_specs: Callable[[VisionShape, int], list[TensorSpec]]  # (tower, text n_embd)
    image_mean: list[float] = field(default_factory=lambda: list(_CLIP_MEAN))
    image_std: list[float] = field(default_factory=lambda: list(_CLIP_STD))
    # Gemma 4's converter writes the vision projector under the key of files that
    # also hold an audio encoder
    projector_key: str = "clip.projector_type"


def write_family_test_model(dest_dir: Path, family: str, *, seed: int = 0) -> tuple[Path, Path]:
    """Write ``tiny-<family>.gguf`` and ``tiny-<family>-mmproj.gguf`` into ``dest_dir``.

    Returns ``(model_path, mmproj_path)``. Same arguments, same bytes; each file is
    written under a temporary name and renamed into place.
    """
    f = FAMILY_PAIRS[family]
    dest_dir = Path(dest_dir)
    dest_dir.mkdir(parents=True, exist_ok=True)
    vocab = vocabulary(f.specials)
    text_noise = Noise(np.random.PCG64(seed))
    vision_noise = Noise(np.random.PCG64(seed).jumped())  # an independent stream from the same seed

    def fill_text(spec: TensorSpec) -> np.ndarray:
        if spec.kind == "rope_freqs":  # fixed, as the converter writes them
            return np.where(np.arange(spec.shape[0]) < f.text.rope_freqs_pairs, 1.0, 1e30).astype(_F32)
        values = text_noise.draw(spec, specials=f.specials)
        if spec.kind == "output_norm" and not f.text.scaled_embedding:
            # Gemma multiplies its input embeddings by sqrt(n_embd), which keeps the bias
            # channel large next to what the layers add; the others need the gain instead
            values[0] *= math.sqrt(f.text.n_embd)
        return values

    model_path = dest_dir / f"tiny-{family}.gguf"
    write_gguf(model_path, f.arch, _text_metadata(f, vocab), text_tensor_specs(f.text, len(vocab)), fill_text)
    mmproj_path = dest_dir / f"tiny-{family}-mmproj.gguf"
    write_gguf(mmproj_path, "clip", _mmproj_metadata(f),
               [*vision_tensor_specs(f.vision), *f.projector_specs(f.vision, f.text.n_embd)], vision_noise.draw)
    return model_path, mmproj_path


def _text_metadata(f: FamilyPair, vocab: list[tuple[str, float, int]]) -> list[tuple[str, Any]]:
    t, ids = f.text, {tok: i for i, tok in enumerate(f.specials.tokens)}
    keys = [
        ("context_length", 8192),
        ("embedding_length", t.n_embd),
        ("block_count", t.n_layer),
        ("feed_forward_length", t.n_ff),
        ("attention.head_count", t.n_head),
        ("attention.head_count_kv", t.n_head_kv),
        ("attention.key_length", t.head_dim),
        ("attention.value_length", t.head_dim),
        ("attention.layer_norm_rms_epsilon", 1e-6),
        ("rope.freq_base", 1_000_000.0),
        *f.text_keys,
    ]
    return [
        ("general.name", f"tiny-{f.name} (random weights, tests only)"),
        ("general.file_type", int(gguf.LlamaFileType.MOSTLY_F16)),
        *((f"{f.arch}.{key}", value) for key, value in keys),
        *tokenizer_metadata(vocab, bos=ids[f.bos], eos=ids[f.eos], unk=ids["<unk>"], pad=ids[f.pad],
                            add_bos=f.add_bos, chat_template=f.chat_template),
    ]


def _mmproj_metadata(f: FamilyPair) -> list[tuple[str, Any]]:
    v = f.vision
    return [
        ("general.name", f"tiny-{f.name} mmproj (random weights, tests only)"),
        ("general.file_type", int(gguf.LlamaFileType.MOSTLY_F16)),
        ("clip.has_vision_encoder", True),
        (f.projector_key, f.projector),
        ("clip.vision.image_size", v.image_size),
        ("clip.vision.patch_size", v.patch_size),
        ("clip.vision.embedding_length", v.n_embd),
        ("clip.vision.feed_forward_length", v.n_ff),
        ("clip.vision.block_count", v.n_layer),
        ("clip.vision.projection_dim", f.text.n_embd),
        ("clip.vision.attention.head_count", v.n_head),
        ("clip.vision.attention.layer_norm_epsilon", v.eps),
        ("clip.vision.image_mean", f.image_mean),
        ("clip.vision.image_std", f.image_std),
        *f.vision_keys,
    ]


# --- tensors -----------------------------------------------------------------------


def _linear(name: str, n_out: int, n_in: int, *, bias: bool = False, kind: str = "linear") -> list[TensorSpec]:
    specs = [TensorSpec(f"{name}.weight", (n_out, n_in), _F16, kind, n_in)]
    if bias:
        specs.append(TensorSpec(f"{name}.bias", (n_out,), _F32, "bias"))
    return specs


def _norm(name: str, n: int, *, bias: bool = False, kind: str = "norm") -> list[TensorSpec]:
    specs = [TensorSpec(f"{name}.weight", (n,), _F32, kind)]
    if bias:
        specs.append(TensorSpec(f"{name}.bias", (n,), _F32, "bias"))
    return specs


def _conv(name: str, n_out: int, n_in: int, k: int) -> TensorSpec:
    return TensorSpec(name, (n_out, n_in, k, k), _F16, "linear", n_in * k * k)


def text_tensor_specs(t: TextShape, n_vocab: int) -> list[TensorSpec]:
    """The text model's tensors. The embedding is tied (no ``output.weight``), as every
    loader here allows. The layers never read the bias channel (blind pre-norms) and
    never write it: post-norms hide it where the architecture has them, otherwise the
    output projections leave its row zero."""
    e = t.n_embd
    writer = "linear" if t.post_norms else "residual_linear"
    specs = [TensorSpec("token_embd.weight", (n_vocab, e), _F16, "embedding")]
    if t.rope_freqs_pairs:
        specs.append(TensorSpec("rope_freqs.weight", (t.head_dim // 2,), _F32, "rope_freqs"))
    for i in range(t.n_layer):
        blk, hd = f"blk.{i}", t.layer_head_dim(i)
        specs += [
            *_norm(f"{blk}.attn_norm", e, kind="blind_norm"),
            *_linear(f"{blk}.attn_q", t.n_head * hd, e, bias=t.qkv_bias),
            *_linear(f"{blk}.attn_k", t.n_head_kv * hd, e, bias=t.qkv_bias),
            *_linear(f"{blk}.attn_v", t.n_head_kv * hd, e, bias=t.qkv_bias),
        ]
        if t.qk_norm:
            specs += [*_norm(f"{blk}.attn_q_norm", hd), *_norm(f"{blk}.attn_k_norm", hd)]
        specs += _linear(f"{blk}.attn_output", e, t.n_head * hd, kind=writer)
        if t.post_norms:
            specs += _norm(f"{blk}.post_attention_norm", e, kind="blind_norm")
        specs += _norm(f"{blk}.ffn_norm", e, kind="blind_norm")
        if t.fused_gate_up:
            specs += _linear(f"{blk}.ffn_up", 2 * t.n_ff, e)
        else:
            specs += [*_linear(f"{blk}.ffn_gate", t.n_ff, e), *_linear(f"{blk}.ffn_up", t.n_ff, e)]
        specs += _linear(f"{blk}.ffn_down", e, t.n_ff, kind=writer)
        if t.post_norms:
            specs += _norm(f"{blk}.post_ffw_norm", e, kind="blind_norm")
    specs += _norm("output_norm", e, kind="output_norm")
    return specs


def vision_tensor_specs(v: VisionShape) -> list[TensorSpec]:
    """The vision tower's tensors, before the projector's."""
    e, p = v.n_embd, v.patch_size
    specs = [_conv("v.patch_embd.weight", e, 3, p)]
    if v.second_patch_conv:
        specs.append(_conv("v.patch_embd.weight.1", e, 3, p))
    if v.patch_bias:
        specs.append(TensorSpec("v.patch_embd.bias", (e,), _F32, "bias"))
    if v.embd_norm:
        specs += _norm("v.norm_embd", e)
    if v.pos_grid:
        specs.append(TensorSpec("v.position_embd.weight", (v.pos_grid ** 2, e), _F32, "position"))
    if v.pos_table:  # ggml [n_embd, n_pos, 2]: the x table, then the y table
        specs.append(TensorSpec("v.position_embd.weight", (2, v.pos_table, e), _F32, "position"))
    if v.pre_ln:
        specs += _norm("v.pre_ln", e, bias=not v.rms_norm)
    for i in range(v.n_layer):
        blk = f"v.blk.{i}"
        specs += _norm(f"{blk}.ln1", e, bias=not v.rms_norm)
        if v.fused_qkv:
            specs += _linear(f"{blk}.attn_qkv", 3 * e, e, bias=v.attn_bias)
        else:
            for proj in ("attn_q", "attn_k", "attn_v"):
                specs += _linear(f"{blk}.{proj}", e, e, bias=v.attn_bias)
        if v.qk_norm:
            d_head = e // v.n_head
            specs += [*_norm(f"{blk}.attn_q_norm", d_head), *_norm(f"{blk}.attn_k_norm", d_head)]
        specs += _linear(f"{blk}.attn_out", e, e, bias=v.attn_bias)
        if v.post_norms:
            specs += _norm(f"{blk}.attn_post_norm", e)
        specs += _norm(f"{blk}.ln2", e, bias=not v.rms_norm)
        if v.gated_ffn:
            specs += _linear(f"{blk}.ffn_gate", v.n_ff, e, bias=v.ffn_bias)
        specs += [*_linear(f"{blk}.ffn_up", v.n_ff, e, bias=v.ffn_bias),
                  *_linear(f"{blk}.ffn_down", e, v.n_ff, bias=v.ffn_bias)]
        if v.post_norms:
            specs += _norm(f"{blk}.ffn_post_norm", e)
    if v.post_ln:
        specs += _norm("v.post_ln", e, bias=not v.rms_norm)
    return specs


# One function per projector: the tensors between the tower's output and the text
# model's embedding width (what clip_n_mmproj_embd reads must be ``t``).


def _paddleocr_projector(v: VisionShape, t: int) -> list[TensorSpec]:
    # mlp_AR: LayerNorm, 2x2 patch merge, Linear-GELU-Linear
    m = 4 * v.n_embd
    return [*_norm("mm.input_norm", v.n_embd, bias=True),
            *_linear("mm.1", m, m, bias=True), *_linear("mm.2", t, m, bias=True)]


def _lightonocr_projector(v: VisionShape, t: int) -> list[TensorSpec]:
    # RMSNorm, 2x2 patch merger (unfold + Linear), Linear-GELU-Linear without biases
    return [*_norm("mm.input_norm", v.n_embd), *_linear("mm.patch_merger", v.n_embd, 4 * v.n_embd),
            *_linear("mm.1", t, v.n_embd), *_linear("mm.2", t, t)]


def _dots_ocr_projector(v: VisionShape, t: int) -> list[TensorSpec]:
    # post_trunk_norm (RMS) after the blocks, then the merger: LayerNorm, 2x2 merge,
    # Linear-GELU-Linear
    m = 4 * v.n_embd
    return [*_norm("mm.post_norm", v.n_embd), *_norm("mm.input_norm", v.n_embd, bias=True),
            *_linear("mm.0", m, m, bias=True), *_linear("mm.2", t, m, bias=True)]


def _glm4v_projector(v: VisionShape, t: int) -> list[TensorSpec]:
    # 2x2 conv downsample to the text width, Linear, LayerNorm, GELU, then a SwiGLU
    # as wide as GLM-OCR's context_dim is next to its text width (4608 / 1536)
    ctx = 3 * t
    return [_conv("mm.patch_merger.weight", t, v.n_embd, 2), TensorSpec("mm.patch_merger.bias", (t,), _F32, "bias"),
            *_linear("mm.model.fc", t, t), *_norm("mm.post_norm", t, bias=True),
            *_linear("mm.gate", ctx, t), *_linear("mm.up", ctx, t), *_linear("mm.down", t, ctx)]


def _hunyuanvl_projector(v: VisionShape, t: int) -> list[TensorSpec]:
    # RMSNorm, 2x2 conv to 2 n_embd, GELU, 1x1 conv to 4 n_embd, a newline embedding
    # after each row, Linear, the begin/end embeddings around the image, RMSNorm
    e2, e4 = 2 * v.n_embd, 4 * v.n_embd
    return [*_norm("mm.pre_norm", v.n_embd),
            _conv("mm.0.weight", e2, v.n_embd, 2), TensorSpec("mm.0.bias", (e2,), _F32, "bias"),
            _conv("mm.2.weight", e4, e2, 1), TensorSpec("mm.2.bias", (e4,), _F32, "bias"),
            TensorSpec("v.image_newline", (e4,), _F32, "bias"),
            *_linear("mm.model.fc", t, e4, bias=True),
            TensorSpec("mm.image_begin", (t,), _F32, "bias"), TensorSpec("mm.image_end", (t,), _F32, "bias"),
            *_norm("mm.post_norm", t)]


def _gemma4v_projector(v: VisionShape, t: int) -> list[TensorSpec]:
    # after the 3x3 pooling: RMSNorm without weight, then this projection
    return _linear("mm.input_projection", t, v.n_embd)


# --- chat templates ----------------------------------------------------------------

TEMPLATES = Path(__file__).parent / "templates"  # their sources: templates/SOURCES.md


def chat_template(family: str) -> str:
    return (TEMPLATES / f"{family}.jinja").read_text(encoding="utf-8")


# --- the families --------------------------------------------------------------------


def _qwen_specials(*extra: str) -> Specials:
    return Specials(("<unk>", "<|endoftext|>", "<|im_start|>", "<|im_end|>", *extra), "<|im_end|>")


def _mrope_sections(n_rot: int) -> list[int]:
    """The (temporal, height, width, extra) split of the rotated pairs, Qwen2-VL's
    16/24/24 of 64 pairs scaled down."""
    pairs = n_rot // 2
    h = w = 3 * pairs // 8
    return [pairs - h - w, h, w, 0]


_PADDLE_TEXT = TextShape()
_GLM_TEXT = TextShape(qkv_bias=True, post_norms=True, fused_gate_up=True)
# full-attention heads of 32 rotate a quarter (partial_rotary_factor 0.25): 4 pairs
_GEMMA4_TEXT = TextShape(qk_norm=True, post_norms=True, swa_layers=(0,), swa_head_dim=16, rope_freqs_pairs=4,
                         scaled_embedding=True)

# image_min/max_pixels for the projectors that read them: 4 to 16 tokens of 28 px
_MIN_PIXELS, _MAX_PIXELS = 56 * 56, 112 * 112
_HUNYUAN_TEXT = TextShape(qk_norm=True)

FAMILY_PAIRS: dict[str, FamilyPair] = {f.name: f for f in (
    FamilyPair(
        name="paddleocr_vl", arch="paddleocr", projector="paddleocr",
        specials=Specials(("<unk>", "<s>", "</s>", "<|begin_of_sentence|>", "<|end_of_sentence|>",
                           "<|IMAGE_START|>", "<|IMAGE_PLACEHOLDER|>", "<|IMAGE_END|>"), "</s>"),
        bos="<s>", eos="</s>", pad="<unk>", add_bos=False,  # the template opens with <|begin_of_sentence|>
        chat_template=chat_template("paddleocr_vl"),
        text=_PADDLE_TEXT,
        text_keys=[("rope.dimension_sections", _mrope_sections(_PADDLE_TEXT.head_dim))],
        vision=VisionShape(image_size=math.isqrt(_MAX_PIXELS), rms_norm=False, attn_bias=True,
                           gated_ffn=False, ffn_bias=True, patch_bias=True, pos_grid=8, post_ln=True),
        vision_keys=[("clip.use_gelu", True), ("clip.vision.image_min_pixels", _MIN_PIXELS),
                     ("clip.vision.image_max_pixels", _MAX_PIXELS)],
        projector_specs=_paddleocr_projector,
        image_mean=[0.5, 0.5, 0.5], image_std=[0.5, 0.5, 0.5],
    ),
    FamilyPair(
        name="lightonocr", arch="qwen3", projector="lightonocr",
        specials=_qwen_specials("<|image_pad|>"),
        bos="<|endoftext|>", eos="<|im_end|>", pad="<|endoftext|>", add_bos=False,
        chat_template=chat_template("lightonocr"),
        text=TextShape(qk_norm=True), text_keys=[],
        vision=VisionShape(eps=1e-5, pre_ln=True),
        vision_keys=[("clip.use_silu", True), ("clip.vision.spatial_merge_size", 2)],
        projector_specs=_lightonocr_projector,
    ),
    FamilyPair(
        name="dots_ocr", arch="qwen2", projector="dots_ocr",
        specials=_qwen_specials("<|imgpad|>", "<|img|>", "<|endofimg|>", "<|user|>", "<|endofuser|>",
                                "<|assistant|>", "<|endofassistant|>"),
        bos="<|endoftext|>", eos="<|endofassistant|>", pad="<|endoftext|>", add_bos=False,
        chat_template=chat_template("dots_ocr"),
        # Qwen 2 has no head size key: n_embd / n_head
        text=TextShape(head_dim=16, qkv_bias=True), text_keys=[],
        # image_size 0: dynamic, as the converter writes it; v.norm_embd is in real files
        # though the dots_ocr graph does not use it
        vision=VisionShape(image_size=0, eps=1e-5, fused_qkv=True, patch_bias=True, embd_norm=True),
        vision_keys=[("clip.use_silu", True), ("clip.vision.projector.scale_factor", 2),
                     ("clip.vision.image_min_pixels", _MIN_PIXELS), ("clip.vision.image_max_pixels", _MAX_PIXELS)],
        projector_specs=_dots_ocr_projector,
    ),
    FamilyPair(
        name="glm_ocr", arch="glm4", projector="glm4v",
        specials=Specials(("<unk>", "<|endoftext|>", "[gMASK]", "<sop>", "<|system|>", "<|user|>", "<|assistant|>",
                           "<|observation|>", "<|begin_of_image|>", "<|image|>", "<|end_of_image|>"), "<|user|>"),
        bos="<|endoftext|>", eos="<|endoftext|>", pad="<|endoftext|>", add_bos=False,
        chat_template=chat_template("glm_ocr"),
        text=_GLM_TEXT,
        text_keys=[("rope.dimension_count", _GLM_TEXT.head_dim // 2),  # partial_rotary_factor 0.5
                   ("rope.dimension_sections", _mrope_sections(_GLM_TEXT.head_dim // 2))],
        # no position embeddings, as GLM-OCR's tower
        vision=VisionShape(eps=1e-5, fused_qkv=True, patch_bias=True, second_patch_conv=True, embd_norm=True,
                           post_ln=True),
        vision_keys=[("clip.use_silu", True)],
        projector_specs=_glm4v_projector,
    ),
    FamilyPair(
        name="gemma4", arch="gemma4", projector="gemma4v",
        specials=Specials(("<pad>", "<eos>", "<bos>", "<unk>", "<|turn>", "<turn|>", "<|image>", "<image|>",
                           "<|image|>", "<|channel>", "<channel|>", "<|think|>"), "<turn|>"),
        bos="<bos>", eos="<eos>", pad="<pad>", add_bos=True,
        chat_template=chat_template("gemma4"),
        text=_GEMMA4_TEXT,
        text_keys=[("attention.key_length_swa", _GEMMA4_TEXT.swa_head_dim),
                   ("attention.value_length_swa", _GEMMA4_TEXT.swa_head_dim),
                   ("rope.dimension_count", _GEMMA4_TEXT.head_dim),
                   ("rope.dimension_count_swa", _GEMMA4_TEXT.swa_head_dim),
                   ("rope.freq_base_swa", 10_000.0),
                   ("attention.sliding_window", 512),
                   ("attention.sliding_window_pattern",
                    [i in _GEMMA4_TEXT.swa_layers for i in range(_GEMMA4_TEXT.n_layer)]),
                   ("attention.shared_kv_layers", 0),
                   ("embedding_length_per_layer_input", 0),  # no per-layer embeddings, as the 31B
                   ("final_logit_softcapping", 30.0)],
        # patch 16 and 3x3 pooling: 48 px per token; the image_size key is unused
        vision=VisionShape(patch_size=16, image_size=224, qk_norm=True, post_norms=True, pos_table=256),
        vision_keys=[],
        projector_specs=_gemma4v_projector,
        image_mean=[0.0, 0.0, 0.0], image_std=[1.0, 1.0, 1.0],
        projector_key="clip.vision.projector_type",
    ),
    FamilyPair(
        name="hunyuan_ocr", arch="hunyuan_vl", projector="hunyuanvl",
        specials=Specials(("<unk>", "<｜hy_begin▁of▁sentence｜>", "<｜hy_end▁of▁sentence｜>", "<｜hy_▁pad▁｜>",
                           "<｜hy_User｜>", "<｜hy_Assistant｜>", "<｜hy_place▁holder▁no▁2｜>",
                           "<｜hy_place▁holder▁no▁3｜>", "<｜hy_place▁holder▁no▁100｜>", "<｜hy_place▁holder▁no▁101｜>",
                           "<｜hy_place▁holder▁no▁102｜>"), "<｜hy_end▁of▁sentence｜>"),
        bos="<｜hy_begin▁of▁sentence｜>", eos="<｜hy_end▁of▁sentence｜>", pad="<｜hy_▁pad▁｜>",
        add_bos=False,  # the template writes it
        chat_template=chat_template("hunyuan_ocr"),
        text=_HUNYUAN_TEXT,
        # XD-RoPE: four sections, the fourth the image index
        text_keys=[("rope.dimension_sections", [_HUNYUAN_TEXT.head_dim // 8] * 4)],
        # patch 16 and 2x2 merge: 32 px per token
        vision=VisionShape(patch_size=16, image_size=128, eps=1e-5, rms_norm=False, attn_bias=True,
                           gated_ffn=False, ffn_bias=True, patch_bias=True, pos_grid=8),
        vision_keys=[("clip.use_gelu", True), ("clip.vision.spatial_merge_size", 2),
                     ("clip.vision.image_min_pixels", 64 * 64), ("clip.vision.image_max_pixels", 128 * 128)],
        projector_specs=_hunyuanvl_projector,
    ),
)}
