"""The tensors of the tiny family pairs (``family_models.py``): the shapes of their
text models and vision towers, and the tensor inventory each architecture and
projector loads, with the names llama.cpp's loaders look up (``src/llama-arch.cpp``
and ``src/models/*.cpp`` for the text models, ``tools/mtmd/clip.cpp``'s
``load_tensors`` for the towers and projectors, vendored in llama-cpp-python 0.3.36).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from appliance.gguf.testmodel import TensorSpec

_F32 = np.float32
_F16 = np.float16


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
    rope_freq_base: float = 1_000_000.0
    # mixture of experts (DeepSeek-V2): the layers from n_dense_lead on route each token
    # to n_expert_used of n_expert experts of width n_ff_exp, beside n_expert_shared
    # always-on ones; the first n_dense_lead layers keep the dense FFN of width n_ff
    n_expert: int = 0
    n_expert_used: int = 0
    n_ff_exp: int = 0
    n_expert_shared: int = 0
    n_dense_lead: int = 0
    # Gemma 3n: AltUp (the residual stream as 4 streams, 1 active), LAuReL (a low-rank
    # residual) and per-layer inputs, with llama.cpp's fixed sizes below
    altup: bool = False

    def layer_head_dim(self, layer: int) -> int:
        return self.swa_head_dim if layer in self.swa_layers else self.head_dim

    def is_moe_layer(self, layer: int) -> bool:
        return self.n_expert > 0 and layer >= self.n_dense_lead


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
    class_token: bool = False  # CLIP's [CLS]: v.class_embd, and one more position row (the last)
    pre_ln: bool = False
    post_ln: bool = False


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


def _conv(name: str, n_out: int, n_in: int, k: int, dtype: type = _F16) -> TensorSpec:
    return TensorSpec(name, (n_out, n_in, k, k), dtype, "linear", n_in * k * k)


def text_tensor_specs(t: TextShape, n_vocab: int) -> list[TensorSpec]:
    """The text model's tensors. The embedding is tied (no ``output.weight``), as every
    loader here allows. The layers never read the bias channel (blind pre-norms) and
    never write it: post-norms hide it where the architecture has them, otherwise the
    output projections leave its row zero."""
    e = t.n_embd
    writer = "linear" if t.post_norms else "residual_linear"
    specs = [TensorSpec("token_embd.weight", (n_vocab, e), _F16, "embedding")]
    if t.altup:
        specs += _altup_globals(t, n_vocab)
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
        if t.is_moe_layer(i):
            specs += _moe_ffn(t, blk, writer)
        elif t.fused_gate_up:
            specs += [*_linear(f"{blk}.ffn_up", 2 * t.n_ff, e), *_linear(f"{blk}.ffn_down", e, t.n_ff, kind=writer)]
        else:
            specs += [*_linear(f"{blk}.ffn_gate", t.n_ff, e), *_linear(f"{blk}.ffn_up", t.n_ff, e),
                      *_linear(f"{blk}.ffn_down", e, t.n_ff, kind=writer)]
        if t.post_norms:
            specs += _norm(f"{blk}.post_ffw_norm", e, kind="blind_norm")
        if t.altup:
            specs += _altup_layer(t, blk)
    specs += _norm("output_norm", e, kind="output_norm")
    return specs


def _moe_ffn(t: TextShape, blk: str, writer: str) -> list[TensorSpec]:
    """A mixture-of-experts FFN: the router (F32, as the converter keeps it), the routed
    experts' SwiGLU stacked per expert, and the shared experts' SwiGLU. ``writer`` is the
    kind of the dense output projections, which the experts' down projections follow."""
    e, f, shared = t.n_embd, t.n_ff_exp, t.n_ff_exp * t.n_expert_shared
    experts_writer = "residual_stack" if writer == "residual_linear" else "linear"
    return [TensorSpec(f"{blk}.ffn_gate_inp.weight", (t.n_expert, e), _F32, "linear", e),
            TensorSpec(f"{blk}.ffn_gate_exps.weight", (t.n_expert, f, e), _F16, "linear", e),
            TensorSpec(f"{blk}.ffn_up_exps.weight", (t.n_expert, f, e), _F16, "linear", e),
            TensorSpec(f"{blk}.ffn_down_exps.weight", (t.n_expert, e, f), _F16, experts_writer, f),
            *_linear(f"{blk}.ffn_gate_shexp", shared, e), *_linear(f"{blk}.ffn_up_shexp", shared, e),
            *_linear(f"{blk}.ffn_down_shexp", e, shared, kind=writer)]


# Gemma 3n's sizes that llama.cpp fixes (llama_hparams): streams, LAuReL rank, per-layer input width
ALTUP_STREAMS, _LAUREL_RANK, PER_LAYER_WIDTH = 4, 64, 256


def _altup_globals(t: TextShape, n_vocab: int) -> list[TensorSpec]:
    """Gemma 3n's tensors outside the layers: the per-layer input embeddings and their
    projection from the token embedding, and the projections into and out of the three
    inactive streams, which never write the bias channel (only the active stream holds it,
    so the final mean over the streams keeps it)."""
    e, n, pl = t.n_embd, ALTUP_STREAMS - 1, PER_LAYER_WIDTH * t.n_layer
    return [TensorSpec("per_layer_token_embd.weight", (n_vocab, pl), _F16, "bias"),
            *_linear("per_layer_model_proj", pl, e), *_norm("per_layer_proj_norm", PER_LAYER_WIDTH),
            TensorSpec("altup_proj.weight", (n, e, e), _F16, "residual_stack", e),
            TensorSpec("altup_unembd_proj.weight", (n, e, e), _F16, "residual_stack", e)]


def _altup_layer(t: TextShape, blk: str) -> list[TensorSpec]:
    """Gemma 3n's tensors in each layer: the per-layer input gate and projection (behind a
    blind post-norm), the AltUp router and its prediction and correction coefficients (F32,
    as the converter forces them), and LAuReL (behind a blind post-norm)."""
    e, n, pl = t.n_embd, ALTUP_STREAMS, PER_LAYER_WIDTH
    return [*_linear(f"{blk}.inp_gate", pl, e), *_linear(f"{blk}.proj", e, pl),
            *_norm(f"{blk}.post_norm", e, kind="blind_norm"),
            TensorSpec(f"{blk}.altup_correct_coef.weight", (n, n), _F32, "linear", n),
            *_norm(f"{blk}.altup_correct_scale", e),
            TensorSpec(f"{blk}.altup_predict_coef.weight", (n * n, n), _F32, "linear", n),
            *_linear(f"{blk}.altup_router", n, e), *_norm(f"{blk}.altup_router_norm", e),
            *_linear(f"{blk}.laurel_l", _LAUREL_RANK, e), *_linear(f"{blk}.laurel_r", e, _LAUREL_RANK),
            *_norm(f"{blk}.laurel_post_norm", e, kind="blind_norm")]


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
    if v.class_token:
        specs.append(TensorSpec("v.class_embd", (e,), _F32, "bias"))
    if v.pos_grid:
        specs.append(TensorSpec("v.position_embd.weight", (v.pos_grid ** 2 + v.class_token, e), _F32, "position"))
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


def paddleocr_projector(v: VisionShape, t: int) -> list[TensorSpec]:
    # mlp_AR: LayerNorm, 2x2 patch merge, Linear-GELU-Linear
    m = 4 * v.n_embd
    return [*_norm("mm.input_norm", v.n_embd, bias=True),
            *_linear("mm.1", m, m, bias=True), *_linear("mm.2", t, m, bias=True)]


def lightonocr_projector(v: VisionShape, t: int) -> list[TensorSpec]:
    # RMSNorm, 2x2 patch merger (unfold + Linear), Linear-GELU-Linear without biases
    return [*_norm("mm.input_norm", v.n_embd), *_linear("mm.patch_merger", v.n_embd, 4 * v.n_embd),
            *_linear("mm.1", t, v.n_embd), *_linear("mm.2", t, t)]


def dots_ocr_projector(v: VisionShape, t: int) -> list[TensorSpec]:
    # post_trunk_norm (RMS) after the blocks, then the merger: LayerNorm, 2x2 merge,
    # Linear-GELU-Linear
    m = 4 * v.n_embd
    return [*_norm("mm.post_norm", v.n_embd), *_norm("mm.input_norm", v.n_embd, bias=True),
            *_linear("mm.0", m, m, bias=True), *_linear("mm.2", t, m, bias=True)]


def glm4v_projector(v: VisionShape, t: int) -> list[TensorSpec]:
    # 2x2 conv downsample to the text width, Linear, LayerNorm, GELU, then a SwiGLU
    # as wide as GLM-OCR's context_dim is next to its text width (4608 / 1536)
    ctx = 3 * t
    return [_conv("mm.patch_merger.weight", t, v.n_embd, 2), TensorSpec("mm.patch_merger.bias", (t,), _F32, "bias"),
            *_linear("mm.model.fc", t, t), *_norm("mm.post_norm", t, bias=True),
            *_linear("mm.gate", ctx, t), *_linear("mm.up", ctx, t), *_linear("mm.down", t, ctx)]


def hunyuanvl_projector(v: VisionShape, t: int) -> list[TensorSpec]:
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


@dataclass(frozen=True)
class SamShape:
    """DeepSeek-OCR's SAM stage, which stands in for the CLIP body's patch embedding:
    16 px patches of the 1024 px view (64 x 64), windowed attention blocks, a neck of a
    1x1 and a 3x3 convolution, then two stride-2 3x3 convolutions down to 16 x 16 at the
    body's width. clip.cpp fixes the patch size and the view; the rest comes from the file."""

    n_embd: int = 16
    # llama.cpp makes blocks 2, 5, 8 and 11 attend over all 4096 patches and the others
    # within windows; it always feeds the global blocks' position input and aborts when
    # no block uses it, so three blocks is the fewest
    n_layer: int = 3
    n_head: int = 2
    n_ff: int = 32
    window: int = 14  # what the converter writes (SAM-B's); 64 is not a multiple: padded windows
    neck: int = 16  # the neck's channels (SAM-B: 256)
    net: int = 32  # net_2's (512); net_3 outputs the CLIP body's width


SAM = SamShape()
_SAM_PATCH, _SAM_GRID = 16, 1024 // 16  # fixed by clip.cpp for this projector
_SAM_GLOBAL_BLOCKS = (2, 5, 8, 11)  # clip_hparams::global_attn_indices


def deepseekocr_projector(v: VisionShape, t: int) -> list[TensorSpec]:
    # The SAM stage before the CLIP body, then the projector: the body's and SAM's
    # features side by side (2 x the body's width), one Linear, a newline embedding after
    # each row and a separator after the view. The neck's and net's convolutions, positions
    # and 1-D tensors in F32, as the converter forces them.
    s, c = SAM, SAM.n_embd
    d_head = c // s.n_head
    specs = [_conv("v.sam.patch_embd.weight", c, 3, _SAM_PATCH),
             TensorSpec("v.sam.patch_embd.bias", (c,), _F32, "bias"),
             TensorSpec("v.sam.pos_embd.weight", (1, _SAM_GRID, _SAM_GRID, c), _F32, "position")]
    for i in range(s.n_layer):
        blk = f"v.sam.blk.{i}"
        # relative positions per offset and head channel: within a window or the whole grid
        rel_pos = (2 * (_SAM_GRID if i in _SAM_GLOBAL_BLOCKS else s.window) - 1, d_head)
        specs += [*_norm(f"{blk}.pre_ln", c, bias=True), *_linear(f"{blk}.attn.qkv", 3 * c, c, bias=True),
                  TensorSpec(f"{blk}.attn.pos_h.weight", rel_pos, _F32, "position"),
                  TensorSpec(f"{blk}.attn.pos_w.weight", rel_pos, _F32, "position"),
                  *_linear(f"{blk}.attn.out", c, c, bias=True), *_norm(f"{blk}.post_ln", c, bias=True),
                  *_linear(f"{blk}.mlp.lin1", s.n_ff, c, bias=True), *_linear(f"{blk}.mlp.lin2", c, s.n_ff, bias=True)]
    specs += [_conv("v.sam.neck.0.weight", s.neck, c, 1, _F32), *_norm("v.sam.neck.1", s.neck, bias=True),
              _conv("v.sam.neck.2.weight", s.neck, s.neck, 3, _F32), *_norm("v.sam.neck.3", s.neck, bias=True),
              _conv("v.sam.net_2.weight", s.net, s.neck, 3, _F32),
              _conv("v.sam.net_3.weight", v.n_embd, s.net, 3, _F32)]
    return [*specs, *_linear("mm.model.fc", t, 2 * v.n_embd, bias=True),
            TensorSpec("v.image_newline", (t,), _F32, "bias"), TensorSpec("v.view_seperator", (1, t), _F32, "bias")]


def mobilenetv5_tower(v: VisionShape) -> list[TensorSpec]:
    """Gemma 3n's MobileNetV5, one block of each kind clip.cpp builds: the stem (a stride-2
    convolution), an edge-residual stage, then a stage of a universal inverted residual and
    a multi-query attention block; llama.cpp loads the blocks it finds and starts each stage
    with a stride of 2. With fewer than four stages the last block alone feeds the
    multi-scale fusion adapter (MSFA), which projects to ``v.n_embd`` and is average-pooled
    to 16 x 16. Normalisations are RMS over the channels, weights only; the stem in F32, as
    the converter forces it."""
    c0, c1, c2, d_head = 8, 16, 32, 16  # stem, stage 0 and stage 1 channels (real: 64, 128, 640 ...)

    def bn(name: str, c: int) -> list[TensorSpec]:
        return _norm(name, c)

    def dw(name: str, c: int) -> TensorSpec:  # depthwise 3x3: one input channel per output
        return TensorSpec(name, (c, 1, 3, 3), _F16, "linear", 9)

    def gamma(name: str, c: int) -> TensorSpec:  # layer scale, (1, C, 1, 1) as converted
        return TensorSpec(name, (1, c, 1, 1), _F32, "norm")

    s0, s1, a = "v.blk.0.0", "v.blk.1.0", "v.blk.1.1"
    return [_conv("v.conv_stem.conv.weight", c0, 3, 3, _F32),
            TensorSpec("v.conv_stem.conv.bias", (1, c0, 1, 1), _F32, "bias"), *bn("v.conv_stem.bn", c0),
            _conv(f"{s0}.conv_exp.weight", 2 * c0, c0, 3), *bn(f"{s0}.bn1", 2 * c0),
            _conv(f"{s0}.conv_pwl.weight", c1, 2 * c0, 1), *bn(f"{s0}.bn2", c1),
            dw(f"{s1}.dw_start.conv.weight", c1), *bn(f"{s1}.dw_start.bn", c1),
            _conv(f"{s1}.pw_exp.conv.weight", 2 * c1, c1, 1), *bn(f"{s1}.pw_exp.bn", 2 * c1),
            dw(f"{s1}.dw_mid.conv.weight", 2 * c1), *bn(f"{s1}.dw_mid.bn", 2 * c1),  # the stride-2 step
            _conv(f"{s1}.pw_proj.conv.weight", c2, 2 * c1, 1), *bn(f"{s1}.pw_proj.bn", c2),
            gamma(f"{s1}.layer_scale.gamma", c2),
            # one query head of d_head over keys and values a stride-2 depthwise step coarser
            *bn(f"{a}.norm", c2), _conv(f"{a}.attn.query.proj.weight", d_head, c2, 1),
            dw(f"{a}.attn.key.down_conv.weight", c2), *bn(f"{a}.attn.key.norm", c2),
            _conv(f"{a}.attn.key.proj.weight", d_head, c2, 1),
            dw(f"{a}.attn.value.down_conv.weight", c2), *bn(f"{a}.attn.value.norm", c2),
            _conv(f"{a}.attn.value.proj.weight", d_head, c2, 1),
            _conv(f"{a}.attn.output.proj.weight", c2, d_head, 1), gamma(f"{a}.layer_scale.gamma", c2),
            _conv("v.msfa.ffn.pw_exp.conv.weight", 2 * c2, c2, 1), *bn("v.msfa.ffn.pw_exp.bn", 2 * c2),
            _conv("v.msfa.ffn.pw_proj.conv.weight", v.n_embd, 2 * c2, 1), *bn("v.msfa.ffn.pw_proj.bn", v.n_embd),
            *_norm("v.msfa.norm", v.n_embd)]


def gemma3nv_projector(v: VisionShape, t: int) -> list[TensorSpec]:
    # RMSNorm, then the projection, applied as stored: clip.cpp reports its first ggml
    # dimension, the tower's width, as the output width, so the two widths must agree
    return [*_norm("mm.soft_emb_norm", v.n_embd), *_linear("mm.input_projection", t, v.n_embd)]


def gemma4v_projector(v: VisionShape, t: int) -> list[TensorSpec]:
    # after the 3x3 pooling: RMSNorm without weight, then this projection
    return _linear("mm.input_projection", t, v.n_embd)
