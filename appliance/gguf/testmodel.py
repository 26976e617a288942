"""A tiny random-weight Gemma-3 vision GGUF pair, built from nothing, for tests.

The pair has the real architecture (a ``gemma3`` text model and a ``clip`` mmproj
with the ``gemma3`` projector), the real gemma-3-it chat template and a
SentencePiece-style vocabulary holding Gemma's special tokens. llama.cpp therefore
runs it through the same code paths as a real Gemma 3: mtmd resizes every image
to 224 px and encodes it into 16 soft tokens, the chat template is rendered from
the GGUF, tokens are generated. Only the weights are noise. Each file is a few
hundred kB and loads in milliseconds.

What the model says: greedy decoding without repeat penalty emits printable
garbage pieces (letters, digits, ``|``, ``#``, ``▁invoice``, newlines, ...) that
soon fall into a loop, e.g. ``"i6ap666666... |666 |6 |6 |6"`` for seed 0 and the
tests' image. (With llama-cpp-python's chat default ``repeat_penalty=1.1`` it
wanders instead: ``"6ap toi2s|$93y name invoiceuxn | page?j..."``.) It never
emits byte tokens (so no partial UTF-8, which makes llama-cpp-python ignore
``max_tokens``) and never ``<end_of_turn>``: it is the degenerate-output
generator for the repetition detector, the token cap and the confidence scorer.
``eos_bias`` gives a variant that ends its turn instead.

How the output is steered: embedding channel 0 is a bias channel. Every token
embedding holds a positive value there, high for normal pieces and low for byte
and control tokens. All four per-layer norms (attention and FFN, before and after)
have weight 0 in that channel, so the layers neither read nor write it, and the
final hidden state carries the current token's positive channel-0 value. The
output matrix is the tied embedding and the output norm amplifies channel 0, so
every normal piece gets the same lift of about 20 logits over byte and control
tokens, enough that even sampling at temperature 1 practically never picks one.
The other channels are seeded noise: they decide which normal piece wins, and,
being small next to what the layers add, they keep the model from simply copying
its last token.

Determinism: every random value comes from the raw 64-bit output of a seeded PCG64
(``bit_generator.random_raw``, not a distribution method whose algorithm numpy may
change), mapped to floats with exact arithmetic. The files are byte-identical
across runs, machines and numpy versions, for a given version of the ``gguf``
package, which lays out the file.

This module is also the one home of the layout the random-weight models share:
the vocabulary, the tensor inventory (``text_tensor_specs``, ``mmproj_tensor_specs``),
the metadata keys, the bias channel, the noise and the streaming GGUF writer.
``shapes.py`` builds the full-size benchmark models from them, ``family_models.py``
the tiny pairs of the other model families (their own special tokens, through
``Specials``; pre-norm architectures keep the bias channel with ``residual_linear``
output projections, which never write it).
"""

from __future__ import annotations

import itertools
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import gguf
import numpy as np

TEXT_FILENAME = "tiny-gemma3.gguf"
MMPROJ_FILENAME = "tiny-gemma3-mmproj.gguf"

# google/gemma-3-4b-it, tokenizer_config.json. MTMDChatHandler renders it with the
# image parts turned into text parts that hold mtmd's media marker.
GEMMA3_CHAT_TEMPLATE = (
    "{{ bos_token }}\n"
    "{%- if messages[0]['role'] == 'system' -%}\n"
    "    {%- if messages[0]['content'] is string -%}\n"
    "        {%- set first_user_prefix = messages[0]['content'] + '\n\n' -%}\n"
    "    {%- else -%}\n"
    "        {%- set first_user_prefix = messages[0]['content'][0]['text'] + '\n\n' -%}\n"
    "    {%- endif -%}\n"
    "    {%- set loop_messages = messages[1:] -%}\n"
    "{%- else -%}\n"
    '    {%- set first_user_prefix = "" -%}\n'
    "    {%- set loop_messages = messages -%}\n"
    "{%- endif -%}\n"
    "{%- for message in loop_messages -%}\n"
    "    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}\n"
    '        {{ raise_exception("Conversation roles must alternate user/assistant/user/assistant/...") }}\n'
    "    {%- endif -%}\n"
    "    {%- if (message['role'] == 'assistant') -%}\n"
    '        {%- set role = "model" -%}\n'
    "    {%- else -%}\n"
    "        {%- set role = message['role'] -%}\n"
    "    {%- endif -%}\n"
    "    {{ '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else \"\") }}\n"
    "    {%- if message['content'] is string -%}\n"
    "        {{ message['content'] | trim }}\n"
    "    {%- elif message['content'] is iterable -%}\n"
    "        {%- for item in message['content'] -%}\n"
    "            {%- if item['type'] == 'image' -%}\n"
    "                {{ '<start_of_image>' }}\n"
    "            {%- elif item['type'] == 'text' -%}\n"
    "                {{ item['text'] | trim }}\n"
    "            {%- endif -%}\n"
    "        {%- endfor -%}\n"
    "    {%- else -%}\n"
    '        {{ raise_exception("Invalid content type") }}\n'
    "    {%- endif -%}\n"
    "    {{ '<end_of_turn>\n' }}\n"
    "{%- endfor -%}\n"
    "{%- if add_generation_prompt -%}\n"
    "    {{'<start_of_turn>model\n'}}\n"
    "{%- endif -%}\n"
)

# Gemma's special tokens. Real Gemma 3 has them at scattered ids of a 262k
# vocabulary; llama.cpp finds them by text, and the ids are written explicitly.
SPECIAL_TOKENS = (
    "<pad>",
    "<eos>",
    "<bos>",
    "<unk>",
    "<start_of_turn>",
    "<end_of_turn>",
    "<start_of_image>",
    "<end_of_image>",
    "<image_soft_token>",
)
PAD_ID, EOS_ID, BOS_ID, UNK_ID = 0, 1, 2, 3
END_OF_TURN_ID = SPECIAL_TOKENS.index("<end_of_turn>")


@dataclass(frozen=True)
class Specials:
    """A vocabulary's special tokens, ids 0.. in this order; the 256 byte tokens and
    the normal pieces follow them. ``<unk>`` is UNKNOWN, the others CONTROL.
    ``end_of_turn`` is the token ``eos_bias`` moves."""

    tokens: tuple[str, ...]
    end_of_turn: str

    @property
    def end_of_turn_id(self) -> int:
        return self.tokens.index(self.end_of_turn)

    @property
    def first_piece_id(self) -> int:
        return len(self.tokens) + 256


GEMMA_SPECIALS = Specials(SPECIAL_TOKENS, "<end_of_turn>")

_NORMAL_PIECES = (
    "▁",
    "\n",
    "\n\n",
    *"abcdefghijklmnopqrstuvwxyz",
    *"0123456789",
    *".,:;-|#*()/$%'!?",
    "##",
    "**",
    "---",
    "▁|",
    "▁the",
    "▁of",
    "▁and",
    "▁to",
    "▁in",
    "▁is",
    "▁for",
    "▁total",
    "▁date",
    "▁invoice",
    "▁page",
    "▁amount",
    "▁name",
    "▁no",
)

# Values on the bias channel (embedding channel 0), and the output norm's weight on
# it. The gap between normal pieces and byte/control tokens, times the gain, is
# the logit margin that keeps decoding on printable text.
_BIAS_NORMAL = 1.0
_BIAS_LOW = 0.2
_OUTPUT_BIAS_GAIN = 8.0
_EMBED_NOISE = 0.03  # bound of the uniform noise in the other embedding channels
_NORM_NOISE = 0.05  # norm weights are 1 +- this

_F32 = np.float32
_F16 = np.float16


class GemmaShape:
    """What the tiny pair's shape and the benchmark shapes (``shapes.ModelShape``) share.

    Both are frozen dataclasses with these attributes: ``n_vocab``, ``n_embd``,
    ``n_layer``, ``n_head``, ``n_head_kv``, ``head_dim``, ``n_ff``,
    ``context_length``, ``sliding_window``, ``sliding_window_pattern``,
    ``rms_norm_eps``, ``rope_freq_base``, ``rope_freq_base_swa``, ``image_size``,
    ``patch_size``, ``n_merge``, ``vision_n_embd``, ``vision_n_ff``,
    ``vision_n_layer``, ``vision_n_head``, ``vision_layer_norm_eps``. The tensor
    inventory and the metadata below read them.
    """

    def problems(self) -> list[str]:
        """The values that make llama.cpp abort the process instead of raising."""
        problems = []
        if self.head_dim % 2:
            problems.append(f"head_dim {self.head_dim} is odd (RoPE aborts at the first decode)")
        if self.n_head % self.n_head_kv:
            problems.append(f"n_head {self.n_head} is not a multiple of n_head_kv {self.n_head_kv}")
        if self.image_size % self.patch_size:
            problems.append(f"image_size {self.image_size} is not a multiple of patch_size {self.patch_size}")
        elif (self.image_size // self.patch_size) % self.n_merge:
            problems.append(f"{self.image_size // self.patch_size} patches per side is not a multiple of n_merge {self.n_merge}")
        if self.vision_n_ff == self.vision_n_embd:
            problems.append("vision_n_ff equals vision_n_embd (clip.cpp then swaps ffn_up and ffn_down)")
        if self.vision_n_embd % self.vision_n_head:
            problems.append(f"vision_n_embd {self.vision_n_embd} is not a multiple of vision_n_head {self.vision_n_head}")
        return problems

    @property
    def n_image_tokens(self) -> int:
        """Soft tokens per image, between ``<start_of_image>`` and ``<end_of_image>``."""
        return (self.image_size // self.patch_size // self.n_merge) ** 2


@dataclass(frozen=True)
class TestModelShape(GemmaShape):
    """Hyperparameters of the tiny pair. The defaults are checked to load and run.

    ``head_dim`` differs from ``n_embd // n_head`` as in real Gemma, so code that
    derives it wrongly fails here too. ``__post_init__`` refuses the values that
    make llama.cpp abort the process instead of raising.
    """

    __test__ = False  # a pytest-collectable name, not a test class

    n_embd: int = 64
    n_layer: int = 2
    n_head: int = 4
    n_head_kv: int = 2
    head_dim: int = 32
    n_ff: int = 128
    context_length: int = 8192
    sliding_window: int = 512
    sliding_window_pattern: int = 2  # layer 0 local, layer 1 global (Gemma 3: 6, five local then one global)
    rms_norm_eps: float = 1e-6
    rope_freq_base: float = 1_000_000.0
    rope_freq_base_swa: float = 10_000.0
    # vision tower (SigLIP) and Gemma 3 projector
    image_size: int = 224
    patch_size: int = 14
    n_merge: int = 4
    vision_n_embd: int = 32
    vision_n_ff: int = 48
    vision_n_layer: int = 2
    vision_n_head: int = 2
    vision_layer_norm_eps: float = 1e-6

    def __post_init__(self) -> None:
        if problems := self.problems():
            raise ValueError("bad test model shape: " + "; ".join(problems))

    @property
    def n_vocab(self) -> int:
        return MIN_N_VOCAB


def write_test_model(
    dest_dir: Path,
    *,
    seed: int = 0,
    shape: TestModelShape | None = None,
    eos_bias: float = 0.0,
) -> tuple[Path, Path]:
    """Write ``tiny-gemma3.gguf`` and ``tiny-gemma3-mmproj.gguf`` into ``dest_dir``.

    Returns ``(model_path, mmproj_path)``. Same arguments, same bytes. Each file is
    written to a temporary name and renamed into place.

    ``eos_bias`` moves ``<end_of_turn>`` on the bias channel, in units of the gap
    between control tokens and normal pieces. 0 (default) keeps it as unlikely as
    the other control tokens: the model never stops on its own. Near 1 it competes
    with the normal pieces, and the threshold is sharp (0.01 is about 0.25 logits).
    Seed 0, the tests' image prompt, greedy, ``repeat_penalty=1.0``: 1.0 does not
    stop within 64 tokens, 1.01 stops after 45, 1.02 and more stop at once (an
    empty answer with ``finish_reason == "stop"``).
    """
    shape = shape or TestModelShape()
    dest_dir = Path(dest_dir)
    dest_dir.mkdir(parents=True, exist_ok=True)
    text_noise = Noise(np.random.PCG64(seed))
    vision_noise = Noise(np.random.PCG64(seed).jumped())  # an independent stream from the same seed

    model_path = dest_dir / TEXT_FILENAME
    write_gguf(model_path, "gemma3", text_metadata(shape, "tiny-gemma3 (random weights, tests only)"),
               text_tensor_specs(shape), lambda spec: text_noise.draw(spec, eos_bias))
    mmproj_path = dest_dir / MMPROJ_FILENAME
    write_gguf(mmproj_path, "clip", mmproj_metadata(shape, "tiny-gemma3 mmproj (random weights, tests only)"),
               mmproj_tensor_specs(shape), lambda spec: vision_noise.draw(spec))
    return model_path, mmproj_path


# --- vocabulary ---------------------------------------------------------------


def gemma_vocabulary(n_vocab: int | None = None, pieces: Iterable[str] = ()) -> list[tuple[str, float, int]]:
    """Gemma's vocabulary (see ``vocabulary``)."""
    return vocabulary(GEMMA_SPECIALS, n_vocab, pieces)


def vocabulary(specials: Specials, n_vocab: int | None = None,
               pieces: Iterable[str] = ()) -> list[tuple[str, float, int]]:
    """(piece, score, token type) for every id, in id order.

    The special tokens, the 256 byte tokens, then the printable pieces above.
    With ``n_vocab`` (a real vocabulary's size) more normal pieces follow, up to that
    many tokens: first ``pieces`` (those not already there), then unique fillers
    ``▁tok<id>``.
    """
    tt = gguf.TokenType
    vocab = [(tok, 0.0, tt.UNKNOWN if tok == "<unk>" else tt.CONTROL) for tok in specials.tokens]
    vocab += [(f"<0x{b:02X}>", 0.0, tt.BYTE) for b in range(256)]
    # SentencePiece scores are log-probabilities: the earlier a piece, the likelier.
    vocab += [(piece, -1.0 - i, tt.NORMAL) for i, piece in enumerate(_NORMAL_PIECES)]
    if n_vocab is None:
        return vocab
    if n_vocab < len(vocab):
        raise ValueError(f"n_vocab {n_vocab} is below the {len(vocab)} tokens every vocabulary holds")
    seen = {piece for piece, _, _ in vocab}
    fillers = (f"▁tok{i}" for i in itertools.count(len(vocab)))
    for piece in itertools.chain(pieces, fillers):
        if len(vocab) == n_vocab:
            break
        if piece not in seen:
            seen.add(piece)
            vocab.append((piece, -1.0 - (len(vocab) - specials.first_piece_id), tt.NORMAL))
    return vocab


MIN_N_VOCAB = len(gemma_vocabulary())


def bias_channel(n_vocab: int, eos_bias: float = 0.0, quiet: Sequence[int] = (),
                 specials: Specials = GEMMA_SPECIALS) -> np.ndarray:
    """Embedding channel 0 for every token: high for normal pieces, low for the rest
    and for the ``quiet`` pieces."""
    values = np.full(n_vocab, _BIAS_LOW)
    values[specials.first_piece_id:] = _BIAS_NORMAL
    values[list(quiet)] = _BIAS_LOW
    values[specials.end_of_turn_id] = _BIAS_LOW + eos_bias * (_BIAS_NORMAL - _BIAS_LOW)
    return values


# --- tensor inventory -----------------------------------------------------------------


@dataclass(frozen=True)
class TensorSpec:
    """One tensor of a pair: its name, numpy shape (ggml's ``ne`` is the reverse), type,
    and what it holds, which decides its random values.

    ``kind`` is ``embedding`` (the tied token embedding), ``linear`` (a weight matrix;
    ``fan_in`` inputs per output set its scale), ``residual_linear`` (one whose output
    is added to the residual stream unnormalised, so it must not write the bias
    channel), ``norm`` (weights near 1), ``blind_norm`` and ``output_norm`` (norms
    that hide or amplify the bias channel), ``bias`` or ``position`` (position
    embeddings).
    """

    name: str
    shape: tuple[int, ...]
    dtype: type
    kind: str
    fan_in: int = 0

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * np.dtype(self.dtype).itemsize


NORM_KINDS = ("norm", "blind_norm", "output_norm")


def text_tensor_specs(s: GemmaShape) -> list[TensorSpec]:
    """The tensors of a ``gemma3`` text model, in file order."""
    q_dim, kv_dim, e = s.n_head * s.head_dim, s.n_head_kv * s.head_dim, s.n_embd

    def linear(name: str, n_out: int, n_in: int) -> TensorSpec:
        return TensorSpec(name, (n_out, n_in), _F16, "linear", n_in)

    def norm(name: str, n: int, kind: str = "norm") -> TensorSpec:
        return TensorSpec(name, (n,), _F32, kind)

    specs = [TensorSpec("token_embd.weight", (s.n_vocab, e), _F16, "embedding")]  # tied: no output.weight
    for i in range(s.n_layer):
        blk = f"blk.{i}"
        specs += [
            norm(f"{blk}.attn_norm.weight", e, "blind_norm"),
            linear(f"{blk}.attn_q.weight", q_dim, e),
            linear(f"{blk}.attn_k.weight", kv_dim, e),
            linear(f"{blk}.attn_v.weight", kv_dim, e),
            norm(f"{blk}.attn_q_norm.weight", s.head_dim),
            norm(f"{blk}.attn_k_norm.weight", s.head_dim),
            linear(f"{blk}.attn_output.weight", e, q_dim),
            norm(f"{blk}.post_attention_norm.weight", e, "blind_norm"),
            norm(f"{blk}.ffn_norm.weight", e, "blind_norm"),
            linear(f"{blk}.ffn_gate.weight", s.n_ff, e),
            linear(f"{blk}.ffn_up.weight", s.n_ff, e),
            linear(f"{blk}.ffn_down.weight", e, s.n_ff),
            norm(f"{blk}.post_ffw_norm.weight", e, "blind_norm"),
        ]
    specs.append(norm("output_norm.weight", e, "output_norm"))
    return specs


def mmproj_tensor_specs(s: GemmaShape) -> list[TensorSpec]:
    """The tensors of a ``clip`` mmproj with the ``gemma3`` projector, in file order."""
    e, f, p = s.vision_n_embd, s.vision_n_ff, s.patch_size
    n_patches = (s.image_size // p) ** 2

    def linear(name: str, n_out: int, n_in: int) -> list[TensorSpec]:
        return [TensorSpec(f"{name}.weight", (n_out, n_in), _F16, "linear", n_in),
                TensorSpec(f"{name}.bias", (n_out,), _F32, "bias")]

    def layer_norm(name: str) -> list[TensorSpec]:
        return [TensorSpec(f"{name}.weight", (e,), _F32, "norm"), TensorSpec(f"{name}.bias", (e,), _F32, "bias")]

    specs = [
        TensorSpec("v.patch_embd.weight", (e, 3, p, p), _F32, "linear", 3 * p * p),
        TensorSpec("v.patch_embd.bias", (e,), _F32, "bias"),
        TensorSpec("v.position_embd.weight", (n_patches, e), _F32, "position"),
    ]
    for i in range(s.vision_n_layer):
        blk = f"v.blk.{i}"
        specs += [
            *layer_norm(f"{blk}.ln1"),
            *linear(f"{blk}.attn_q", e, e),
            *linear(f"{blk}.attn_k", e, e),
            *linear(f"{blk}.attn_v", e, e),
            *linear(f"{blk}.attn_out", e, e),
            *layer_norm(f"{blk}.ln2"),
            *linear(f"{blk}.ffn_up", f, e),
            *linear(f"{blk}.ffn_down", e, f),
        ]
    specs += [
        *layer_norm("v.post_ln"),
        TensorSpec("mm.soft_emb_norm.weight", (e,), _F32, "norm"),
        # (vision n_embd, text n_embd), applied transposed: its output must match the
        # text model's n_embd
        TensorSpec("mm.input_projection.weight", (e, s.n_embd), _F16, "linear", e),
    ]
    return specs


def steer(spec: TensorSpec, values: np.ndarray, eos_bias: float = 0.0, quiet: Sequence[int] = (),
          specials: Specials = GEMMA_SPECIALS) -> None:
    """Write the bias channel (see the module docstring) into freshly drawn values, in
    place; the ``quiet`` pieces are kept as unlikely as control tokens."""
    if spec.kind == "embedding":
        values[:, 0] = bias_channel(spec.shape[0], eos_bias, quiet, specials)
    elif spec.kind == "residual_linear":
        values[0] = 0.0  # output row 0 is the residual stream's bias channel
    elif spec.kind == "blind_norm":
        values[0] = 0.0  # the layers neither read nor write the bias channel
    elif spec.kind == "output_norm":
        values[0] = _OUTPUT_BIAS_GAIN


# --- random values --------------------------------------------------------------


class Noise:
    """Uniform noise from the raw output of a PCG64 bit generator.

    The top 24 bits of each 64-bit word become an integer k in [-2**23, 2**23);
    the value is k * bound / 2**23. Every step is exact or a single IEEE rounding,
    so the floats do not depend on the numpy version.
    """

    def __init__(self, bits: np.random.PCG64):
        self._bits = bits

    def uniform(self, shape: tuple[int, ...], bound: float) -> np.ndarray:
        raw = self._bits.random_raw(math.prod(shape))
        k = (raw >> np.uint64(40)).astype(np.int64) - (1 << 23)
        return (k.astype(np.float64) * (bound / (1 << 23))).reshape(shape)

    def draw(self, spec: TensorSpec, eos_bias: float = 0.0, specials: Specials = GEMMA_SPECIALS) -> np.ndarray:
        """The values of one tensor. Linear weights give unit-variance outputs for
        unit-variance inputs."""
        if spec.kind == "embedding":
            values = self.uniform(spec.shape, _EMBED_NOISE)
        elif spec.kind in NORM_KINDS:
            values = (1.0 + self.uniform(spec.shape, _NORM_NOISE)).astype(_F32)
        elif spec.kind in ("linear", "residual_linear"):
            values = self.uniform(spec.shape, math.sqrt(3.0 / spec.fan_in))
        elif spec.kind == "bias":
            values = self.uniform(spec.shape, 0.02)
        else:  # position
            values = self.uniform(spec.shape, 0.1)
        steer(spec, values, eos_bias, specials=specials)
        return values.astype(spec.dtype)


# --- metadata ---------------------------------------------------------------------


def text_metadata(s: GemmaShape, name: str, pieces: Iterable[str] = ()) -> list[tuple[str, Any]]:
    """The keys of an f16 ``gemma3`` text model, its vocabulary (see ``gemma_vocabulary``)
    and chat template."""
    return [
        ("general.name", name),
        ("general.file_type", int(gguf.LlamaFileType.MOSTLY_F16)),
        ("gemma3.context_length", s.context_length),
        ("gemma3.embedding_length", s.n_embd),
        ("gemma3.block_count", s.n_layer),
        ("gemma3.feed_forward_length", s.n_ff),
        ("gemma3.attention.head_count", s.n_head),
        ("gemma3.attention.head_count_kv", s.n_head_kv),
        ("gemma3.attention.key_length", s.head_dim),
        ("gemma3.attention.value_length", s.head_dim),
        ("gemma3.attention.layer_norm_rms_epsilon", s.rms_norm_eps),
        ("gemma3.rope.freq_base", s.rope_freq_base),
        ("gemma3.rope.freq_base_swa", s.rope_freq_base_swa),
        ("gemma3.attention.sliding_window", s.sliding_window),
        ("gemma3.attention.sliding_window_pattern", s.sliding_window_pattern),
        *tokenizer_metadata(gemma_vocabulary(s.n_vocab, pieces), bos=BOS_ID, eos=EOS_ID, unk=UNK_ID,
                            pad=PAD_ID, add_bos=True, chat_template=GEMMA3_CHAT_TEMPLATE),
    ]


def tokenizer_metadata(vocab: list[tuple[str, float, int]], *, bos: int, eos: int, unk: int, pad: int,
                       add_bos: bool, chat_template: str) -> list[tuple[str, Any]]:
    """The keys of a SentencePiece-style (``llama``) tokenizer holding ``vocab``. The
    special ids are written explicitly: the SPM defaults assume another order."""
    return [
        ("tokenizer.ggml.model", "llama"),
        ("tokenizer.ggml.tokens", [piece for piece, _, _ in vocab]),
        ("tokenizer.ggml.scores", [score for _, score, _ in vocab]),
        ("tokenizer.ggml.token_type", [int(kind) for _, _, kind in vocab]),
        ("tokenizer.ggml.bos_token_id", bos),
        ("tokenizer.ggml.eos_token_id", eos),
        ("tokenizer.ggml.unknown_token_id", unk),
        ("tokenizer.ggml.padding_token_id", pad),
        ("tokenizer.ggml.add_bos_token", add_bos),
        ("tokenizer.ggml.add_eos_token", False),
        ("tokenizer.ggml.add_space_prefix", False),
        ("tokenizer.chat_template", chat_template),
    ]


def mmproj_metadata(s: GemmaShape, name: str) -> list[tuple[str, Any]]:
    """The keys of an f16 ``clip`` mmproj with the ``gemma3`` projector."""
    return [
        ("general.name", name),
        ("general.file_type", int(gguf.LlamaFileType.MOSTLY_F16)),
        ("clip.has_vision_encoder", True),
        ("clip.projector_type", "gemma3"),
        ("clip.use_gelu", True),  # SigLIP's GELU; without the key clip.cpp uses quick-GELU
        ("clip.vision.image_size", s.image_size),
        ("clip.vision.patch_size", s.patch_size),
        ("clip.vision.embedding_length", s.vision_n_embd),
        ("clip.vision.feed_forward_length", s.vision_n_ff),
        ("clip.vision.block_count", s.vision_n_layer),
        ("clip.vision.projection_dim", s.n_embd),  # required, value unchecked
        ("clip.vision.attention.head_count", s.vision_n_head),
        ("clip.vision.attention.layer_norm_epsilon", s.vision_layer_norm_eps),
        ("clip.vision.image_mean", [0.5, 0.5, 0.5]),
        ("clip.vision.image_std", [0.5, 0.5, 0.5]),
        ("clip.vision.projector.scale_factor", s.n_merge),
    ]


# --- file writing ---------------------------------------------------------------------


def write_gguf(
    path: Path,
    arch: str,
    metadata: list[tuple[str, Any]],
    specs: list[TensorSpec],
    fill: Callable[[TensorSpec], np.ndarray],
    progress: Callable[[int], None] | None = None,
) -> None:
    """Write a GGUF file tensor by tensor: only one tensor's values are in memory at a time.

    ``fill(spec)`` gives each tensor's values, in ``specs`` order; ``progress(done_bytes)``
    runs after each tensor. The file is written to a temporary name and renamed into
    place, so a file under ``path`` is always complete.
    """
    tmp = path.with_name(path.name + ".tmp")
    writer = gguf.GGUFWriter(tmp, arch)
    try:
        for key, value in metadata:
            if isinstance(value, bool):
                writer.add_bool(key, value)
            elif isinstance(value, int):
                writer.add_uint32(key, value)
            elif isinstance(value, float):
                writer.add_float32(key, value)
            elif isinstance(value, str):
                writer.add_string(key, value)
            else:
                writer.add_array(key, value)
        for spec in specs:
            writer.add_tensor_info(spec.name, spec.shape, np.dtype(spec.dtype), spec.nbytes)
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_ti_data_to_file()
        done = 0
        for spec in specs:
            values = np.ascontiguousarray(fill(spec))
            if values.shape != spec.shape or values.dtype != spec.dtype:
                raise ValueError(f"{spec.name}: got {values.dtype}{values.shape}, "
                                 f"expected {np.dtype(spec.dtype)}{spec.shape}")
            writer.write_tensor_data(values)
            done += values.nbytes
            if progress is not None:
                progress(done)
    except BaseException:
        writer.close()
        tmp.unlink(missing_ok=True)
        raise
    writer.close()
    os.replace(tmp, path)
