"""Tiny random-weight GGUF pairs of the OCR model families, built from nothing, for tests.

``write_family_test_model(dest_dir, family)`` writes ``tiny-<family>.gguf`` and
``tiny-<family>-mmproj.gguf``, a few hundred kB each (Gemma 3n's text model, with its
per-layer embeddings, 0.9 MB), that llama.cpp loads and runs through the family's own
code paths: its text architecture, its projector's graph and image preprocessing, its
image begin/end tokens and its chat template. Only the weights are noise. This module
holds the families' table, their metadata and the writer; ``family_tensors.py`` their
shapes and tensor inventories. The pairs (text architecture / projector, image
geometry):

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
- ``deepseek_ocr``: ``deepseek2-ocr`` (DeepSeek-V2 layers without MLA: a dense layer,
  then a mixture of experts) / ``deepseekocr`` (a SAM stage of windowed and global
  attention and stride-2 convolutions feeding a CLIP body; the two towers' features side
  by side, one Linear). Every image is padded into a 1024 px global view: 16 x 16
  tokens, a newline embedding after each row and a view separator (273), and pages over
  640 px add 640 px tiles (the engine gives it the 1024 px view alone: ``pair.py``). No begin token; mtmd ends the image with a newline text. One
  view takes about half a second on one core (the global attention block over 64 x 64
  patches, which llama.cpp requires).
- ``gemma3n``: ``gemma3n`` (AltUp streams, LAuReL, per-layer inputs, activation
  sparsity) / ``gemma3nv`` (MobileNetV5: convolutional stages, multi-query attention,
  the multi-scale fusion adapter). Every image is squashed to the file's 768 px and
  pooled to 16 x 16 = 256 tokens, in ``<start_of_image>``/``<end_of_image>``.

Names come from the llama.cpp vendored in llama-cpp-python 0.3.36: architectures,
tensor names and hyperparameter keys from ``src/llama-arch.cpp`` and the per-model
loaders in ``src/models/*.cpp``; projector types, mmproj keys and tensors from
``tools/mtmd/clip-impl.h`` and ``clip.cpp`` (``load_hparams``, ``load_tensors``);
image begin/end tokens from ``tools/mtmd/mtmd.cpp``; which keys a real file carries
from ``conversion/*.py``. Shapes are tiny and chosen so that nothing aborts: even
head sizes, n_ff unlike n_embd, merge factors that divide the patch grid.

Every family keeps ``testmodel.py``'s bias channel, so decoding emits printable
pieces, never byte or control tokens. Gemma 4, Gemma 3n and GLM-4 hide the channel
from their layers behind their post-norms, as Gemma 3 does. The pre-norm-only architectures
(ERNIE, Qwen 2 and 3, HunYuan, DeepSeek-V2) do it with output projections whose
bias-channel row is zero (``residual_linear``; for DeepSeek's experts, each expert's
row); they do not scale their input embeddings as Gemma does, so their output-norm
gain on the channel is sqrt(n_embd) times Gemma's. Gemma 3n keeps the channel in its
active AltUp stream alone (the projections into and out of the other streams leave its
row zero), and as its output is the mean of the four streams, its gain is four times
Gemma's.
Measured while sampling the test page: the best normal piece leads the best byte or
control token by at least 9 logits, typically by 25 to 65 (Gemma 4: at least 5,
typically 16, Gemma 3n: at least 13, typically 16; their final logit soft-capping
compresses the lead).

The vocabulary is SentencePiece-style (``llama``) for every family, whatever
tokenizer the real model ships; the family's chat and image tokens are CONTROL tokens
in it. Same seed, same bytes, as for the Gemma 3 pair.

The chat templates are the real ones, with their sources, except GLM-OCR's and
HunyuanOCR's: their real ones were not found, these are faithful minimal ones.
DeepSeek-OCR's tokenizer ships none; its template is the one llama.cpp's converter
writes into DeepSeek-OCR GGUFs. dots.ocr's real template concatenates each message's
content as a string, so llama-cpp-python's ``MTMDChatHandler``, which passes the
content parts as a list, cannot render it (TypeError); DeepSeek-OCR's prints the list
as Python writes it. A caller must first join the parts (text and media markers) into
one string.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import gguf
import numpy as np

from appliance.gguf.family_tensors import (
    ALTUP_STREAMS,
    PER_LAYER_WIDTH,
    SAM,
    TextShape,
    VisionShape,
    deepseekocr_projector,
    dots_ocr_projector,
    gemma3nv_projector,
    gemma4v_projector,
    glm4v_projector,
    hunyuanvl_projector,
    lightonocr_projector,
    mobilenetv5_tower,
    paddleocr_projector,
    text_tensor_specs,
    vision_tensor_specs,
)
from appliance.gguf.testmodel import (
    GEMMA_SPECIALS,
    Noise,
    Specials,
    TensorSpec,
    tokenizer_metadata,
    vocabulary,
    write_gguf,
)

_F32 = np.float32
_CLIP_MEAN = [0.48145466, 0.4578275, 0.40821073]
_CLIP_STD = [0.26862954, 0.26130258, 0.27577711]


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
    # the tower's tensors when it is not the ViT of ``vision_tensor_specs``
    tower_specs: Callable[[VisionShape], list[TensorSpec]] | None = None
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
        if spec.kind == "residual_stack":  # (matrix, n_embd, n_in): no matrix of the stack writes the bias channel
            values = text_noise.draw(dataclasses.replace(spec, kind="linear"), specials=f.specials)
            values[:, 0] = 0
            return values
        values = text_noise.draw(spec, specials=f.specials)
        if spec.kind == "output_norm" and not f.text.scaled_embedding:
            # Gemma multiplies its input embeddings by sqrt(n_embd), which keeps the bias
            # channel large next to what the layers add; the others need the gain instead
            values[0] *= math.sqrt(f.text.n_embd)
        if spec.kind == "output_norm" and f.text.altup:
            # only the active stream holds the channel, and the output is the streams' mean
            values[0] *= ALTUP_STREAMS
        return values

    model_path = dest_dir / f"tiny-{family}.gguf"
    write_gguf(model_path, f.arch, _text_metadata(f, vocab), text_tensor_specs(f.text, len(vocab)), fill_text)
    mmproj_path = dest_dir / f"tiny-{family}-mmproj.gguf"
    tower = (f.tower_specs or vision_tensor_specs)(f.vision)
    write_gguf(mmproj_path, "clip", _mmproj_metadata(f),
               [*tower, *f.projector_specs(f.vision, f.text.n_embd)], vision_noise.draw)
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
        ("rope.freq_base", t.rope_freq_base),
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
# DeepSeek-V2 layers without MLA: plain multi-head attention (head size n_embd / n_head,
# RoPE base 10000, both asserted by the graph), a dense first layer, then MoE
_DEEPSEEK_TEXT = TextShape(n_head_kv=4, head_dim=16, rope_freq_base=10_000.0, n_expert=4, n_expert_used=2,
                           n_ff_exp=32, n_expert_shared=2, n_dense_lead=1)
_DEEPSEEK_SPECIALS = Specials(("<unk>", "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜▁pad▁｜>", "<image>",
                               "<|grounding|>", "<|ref|>", "<|/ref|>", "<|det|>", "<|/det|>", "<|User|>",
                               "<|Assistant|>"), "<｜end▁of▁sentence｜>")
_GEMMA3N_TEXT = TextShape(qk_norm=True, post_norms=True, scaled_embedding=True, altup=True)

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
        projector_specs=paddleocr_projector,
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
        projector_specs=lightonocr_projector,
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
        projector_specs=dots_ocr_projector,
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
        projector_specs=glm4v_projector,
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
        projector_specs=gemma4v_projector,
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
        projector_specs=hunyuanvl_projector,
    ),
    FamilyPair(
        name="deepseek_ocr", arch="deepseek2-ocr", projector="deepseekocr",
        specials=_DEEPSEEK_SPECIALS,
        bos="<｜begin▁of▁sentence｜>", eos="<｜end▁of▁sentence｜>", pad="<｜▁pad▁｜>",
        add_bos=True,  # the template writes none; the reference prompt starts with it
        chat_template=chat_template("deepseek_ocr"),
        text=_DEEPSEEK_TEXT,
        text_keys=[("vocab_size", len(vocabulary(_DEEPSEEK_SPECIALS))),
                   ("leading_dense_block_count", _DEEPSEEK_TEXT.n_dense_lead),
                   ("expert_feed_forward_length", _DEEPSEEK_TEXT.n_ff_exp),
                   ("expert_count", _DEEPSEEK_TEXT.n_expert),
                   ("expert_used_count", _DEEPSEEK_TEXT.n_expert_used),
                   ("expert_shared_count", _DEEPSEEK_TEXT.n_expert_shared),
                   ("expert_weights_scale", 1.0),
                   ("rope.dimension_count", 0)],  # qk_rope_head_dim 0 (no MLA); the graph ropes whole heads
        # the CLIP body, fed by SAM (no patch grid of its own, though real files carry its
        # patch convolution): 16 x 16 positions and [CLS]. The image and patch size keys
        # are CLIP-L's 224 and 14, as the converter writes them; clip.cpp uses 1024 and 16
        vision=VisionShape(patch_size=14, image_size=224, rms_norm=False, fused_qkv=True, attn_bias=True,
                           gated_ffn=False, ffn_bias=True, pos_grid=16, class_token=True, pre_ln=True, n_layer=1),
        vision_keys=[("clip.use_gelu", True),
                     # (224 / 14) / sqrt(256 image tokens): the converter writes it when not 4
                     ("clip.vision.projector.scale_factor", 1),
                     ("clip.vision.window_size", SAM.window),
                     ("clip.vision.preproc_min_tiles", 2), ("clip.vision.preproc_max_tiles", 9),
                     ("clip.vision.sam.block_count", SAM.n_layer),
                     ("clip.vision.sam.embedding_length", SAM.n_embd),
                     ("clip.vision.sam.head_count", SAM.n_head)],
        projector_specs=deepseekocr_projector,
        image_mean=[0.5, 0.5, 0.5], image_std=[0.5, 0.5, 0.5],
    ),
    FamilyPair(
        name="gemma3n", arch="gemma3n", projector="gemma3nv",
        specials=GEMMA_SPECIALS, bos="<bos>", eos="<eos>", pad="<pad>", add_bos=True,
        chat_template=chat_template("gemma3n"),
        text=_GEMMA3N_TEXT,
        text_keys=[("rope.freq_base_swa", 10_000.0),
                   ("attention.sliding_window", 512),
                   ("attention.sliding_window_pattern", [True, False]),  # local, then global
                   ("final_logit_softcapping", 30.0),
                   ("altup.active_idx", 0), ("altup.num_inputs", ALTUP_STREAMS),
                   ("embedding_length_per_layer_input", PER_LAYER_WIDTH),
                   ("attention.shared_kv_layers", 0),
                   # the converter's; llama.cpp fixes the first 10 layers' cut-off itself
                   ("activation_sparsity_scale", [1.6448533535003662] * _GEMMA3N_TEXT.n_layer)],
        # 768 px, as the converter takes it from the preprocessor; the patch size key is
        # image_size / 256 (3), from which clip.cpp counts the 256 tokens of the 16 x 16
        # grid. block_count is the converter's placeholder: there are no ViT blocks. The
        # tower's output width must be the text model's (see gemma3nv_projector)
        vision=VisionShape(patch_size=3, image_size=768, n_embd=_GEMMA3N_TEXT.n_embd, n_layer=128, n_head=8),
        vision_keys=[],
        tower_specs=mobilenetv5_tower,
        projector_specs=gemma3nv_projector,
        image_mean=[0.0, 0.0, 0.0], image_std=[1.0, 1.0, 1.0],  # MobileNetV5 takes raw [0, 1] pixels
        projector_key="clip.vision.projector_type",  # real files also hold an audio encoder
    ),
)}
