"""Random-weight Gemma-3 vision models at a real model's size, for throughput benchmarks.

``appliance bench --shape gemma3-4b`` measures a GPU host without downloading real
weights: ``build_shaped_model`` writes a text model with Gemma-3-4B-it's tensor
shapes, vocabulary size and metadata, and its SigLIP mmproj, then quantizes the text
model with llama.cpp's own quantizer (through llama-cpp-python), as a real
``gemma-3-4b-it-Q4_K_M.gguf`` was made. Only the values are noise, so every matrix
multiply, the KV cache and the image encoder cost what they cost on the real model.
The model never writes sensible text; the bench asks for a fixed number of tokens per
page (the engine's ``fixed_tokens``). Its output is steered onto printable pieces by
the tiny test model's bias channel (``testmodel.py``), so it never ends its turn
early and never emits byte tokens or blank pieces, with or without the engine's token
watch.

The mmproj stays f16: llama.cpp's quantizer takes only text models, and the real
mmproj files ship f16 too.

The build is cached under ``cache_dir/<shape>-<quant>/``. Each file is written under a
temporary name and renamed into place, and ``build.json`` is written last: a build that
was interrupted has no marker and is redone from scratch, never half-used. The f16
intermediate (about 7.8 GB for gemma3-4b) is deleted once the quantized file exists.

Values: every f16 matrix is tiled from a few million normal values at random offsets
(so some rows repeat, which costs nothing in speed). Drawing 4 billion normals one by
one takes minutes on a small CPU; tiling runs at disk speed. The files are not
byte-identical across builds (the tests' tiny model is).
"""

from __future__ import annotations

import ctypes
import fcntl
import json
import logging
import math
import os
import re
import shutil
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Iterator

import gguf
import numpy as np

from appliance.engines.prompts import CONTEXT_TEMPLATE, PROMPTS
from appliance.gguf.testmodel import (
    MIN_N_VOCAB,
    NORM_KINDS,
    GemmaShape,
    TensorSpec,
    gemma_vocabulary,
    mmproj_metadata,
    mmproj_tensor_specs,
    steer,
    text_metadata,
    text_tensor_specs,
    write_gguf,
)
from appliance.gguf.files import human_size
from appliance.errors import InvalidRequest, ModelError

log = logging.getLogger(__name__)

MARKER = "build.json"
BUILD_FORMAT = 1  # bump when the files a build writes change
EMBED_STD = 0.02  # token embedding noise (the bias channel is set apart)
NORM_STD = 0.02  # norm weights are 1 + this much noise
_POOL_VALUES = 1 << 22  # normal values per scale to tile the f16 matrices from
_CHUNK_VALUES = 1 << 20
# Whitespace-only pieces ("▁", "\n", "\n\n") are kept off the output like control
# tokens. Otherwise a random model this wide tends to repeat its last token, the prompt
# ends in "\n", and every answer would be blank.
BLANK_PIECE_IDS = [i for i, (piece, _, kind) in enumerate(gemma_vocabulary())
                   if kind == gguf.TokenType.NORMAL and not piece.replace("▁", " ").strip()]
_QUANT_BITS_BOUND = 8.5  # Q8_0, the largest quant offered: bounds the quantized file's size
_DISK_MARGIN = 1.02
# llama.cpp's Q4_K_M quantizer, measured on a busy 2-core VM (gemma3-4b: 180 to 380 s on 2
# threads); only for the time announced before a build
_QUANT_PARAMS_PER_S = 6e6


@dataclass(frozen=True)
class ModelShape(GemmaShape):
    """Hyper-parameters of a Gemma-3 text model and its vision tower (SigLIP + projector).

    The field names are the tiny test model's (``TestModelShape``), so both go through
    the same tensor inventory and metadata. For the K-quants, ``n_embd``, ``n_ff`` and
    ``n_head * head_dim`` must be multiples of 256 (llama.cpp falls back to other
    types otherwise).
    """

    name: str
    n_vocab: int
    n_embd: int
    n_layer: int
    n_head: int
    n_head_kv: int
    head_dim: int
    n_ff: int
    context_length: int
    sliding_window: int
    sliding_window_pattern: int
    image_size: int
    patch_size: int
    n_merge: int
    vision_n_embd: int
    vision_n_ff: int
    vision_n_layer: int
    vision_n_head: int
    rms_norm_eps: float = 1e-6
    rope_freq_base: float = 1_000_000.0  # global layers
    rope_freq_base_swa: float = 10_000.0  # sliding-window layers
    rope_scaling_factor: float = 8.0  # linear, global layers only
    vision_layer_norm_eps: float = 1e-6
    quant: str = "Q4_K_M"  # what `appliance bench --shape` builds it in

    def __post_init__(self) -> None:
        problems = self.problems()
        if self.n_vocab < MIN_N_VOCAB:
            problems.append(f"n_vocab {self.n_vocab} is below the {MIN_N_VOCAB} tokens every vocabulary holds")
        if problems:
            raise ValueError(f"bad model shape {self.name}: " + "; ".join(problems))

    @property
    def n_params(self) -> int:
        """Parameters of the text model (the vision tower not counted)."""
        return sum(math.prod(spec.shape) for spec in text_tensor_specs(self))


SHAPES: dict[str, ModelShape] = {
    shape.name: shape
    for shape in (
        # google/gemma-3-4b-it. Sources (stored public copies, checked 2025): its
        # config.json as mirrored by unsloth/gemma-3-4b-pt and mlx-community/
        # gemma-3-4b-it-bf16 (text: hidden 2560, intermediate 10240, 34 layers, 8 heads,
        # 4 KV heads, head_dim 256, max_position 131072, sliding_window 1024 with
        # pattern 6, rope_theta 1e6, rope_local_base_freq 1e4, rope_scaling linear 8,
        # rms_norm_eps 1e-6; vision: SigLIP hidden 1152, intermediate 4304, 27 layers,
        # 16 heads, image 896, patch 14; mm_tokens_per_image 256, so 64 patches per side
        # merge 4x4). Vocabulary: llama.cpp's convert_hf_to_gguf.py (Gemma3Model) pads
        # the tokens to text_config.vocab_size, 262208 (262144 SentencePiece pieces,
        # <image_soft_token>, [PAD] fillers); llama.cpp's load log of
        # Gemma-3-4B-It GGUFs (unslothai/unsloth issue 2744) reads n_vocab 262208,
        # n_embd_head_k 256, n_gqa 2, n_ff 10240, n_swa 1024, 3.88 B params, which
        # ``n_params`` reproduces.
        ModelShape(
            name="gemma3-4b",
            n_vocab=262_208,
            n_embd=2560,
            n_layer=34,
            n_head=8,
            n_head_kv=4,
            head_dim=256,
            n_ff=10_240,
            context_length=131_072,
            sliding_window=1024,
            sliding_window_pattern=6,
            image_size=896,
            patch_size=14,
            n_merge=4,
            vision_n_embd=1152,
            vision_n_ff=4304,
            vision_n_layer=27,
            vision_n_head=16,
        ),
        # google/gemma-3-1b-it's text model (its config.json: hidden 1152, intermediate
        # 6912, 26 layers, 4 heads, 1 KV head, head_dim 256, vocab 262144, max_position
        # 32768, sliding_window 512 with pattern 6, rope_theta 1e6 and 1e4 locally, no
        # rope scaling; llama.cpp reads about 1.0 B params) with a small vision tower
        # (the real 1B has none) that still gives a page 256 image tokens. Its weights
        # (1 GB at Q8_0) exceed a CPU's caches, so decoding is memory-bound as on a GPU:
        # the shape for measuring batched decoding on a CPU host (issue 15). 1152 is no
        # multiple of 256, so the K-quants would fall back; Q8_0 is what the raw loop in
        # that issue was measured with.
        ModelShape(
            name="gemma3-1b",
            n_vocab=262_144,
            n_embd=1152,
            n_layer=26,
            n_head=4,
            n_head_kv=1,
            head_dim=256,
            n_ff=6912,
            context_length=32_768,
            sliding_window=512,
            sliding_window_pattern=6,
            rope_scaling_factor=1.0,
            image_size=896,
            patch_size=14,
            n_merge=4,
            vision_n_embd=128,
            vision_n_ff=256,
            vision_n_layer=2,
            vision_n_head=2,
            quant="Q8_0",
        ),
        # The same structure, small enough for the test suite: six layers (five local,
        # one global), GQA 2:1, head_dim != n_embd / n_head, K-quant-sized matrices.
        ModelShape(
            name="gemma3-mini",
            n_vocab=4096,  # room for the prompts' words (``prompt_pieces``)
            n_embd=256,
            n_layer=6,
            n_head=4,
            n_head_kv=2,
            head_dim=64,
            n_ff=512,
            context_length=8192,
            sliding_window=512,
            sliding_window_pattern=6,
            image_size=224,
            patch_size=14,
            n_merge=4,
            vision_n_embd=64,
            vision_n_ff=96,
            vision_n_layer=2,
            vision_n_head=2,
        ),
    )
}


@dataclass(frozen=True)
class BuildPaths:
    """Where one build of a shape and quant lives: ``<cache_dir>/<shape>-<quant>/``."""

    directory: Path
    shape_name: str
    quant: str

    @property
    def text(self) -> Path:
        return self.directory / f"{self.shape_name}-{self.quant}.gguf"

    @property
    def text_f16(self) -> Path:
        return self.directory / f"{self.shape_name}-F16-intermediate.gguf"

    @property
    def mmproj(self) -> Path:
        return self.directory / f"mmproj-{self.shape_name}-f16.gguf"

    @property
    def marker(self) -> Path:
        return self.directory / MARKER

    def outputs(self) -> list[Path]:
        files = [self.text, self.text_f16, self.mmproj, self.marker]
        return files + [path.with_name(path.name + ".tmp") for path in files]


def build_paths(shape: ModelShape, cache_dir: Path, quant: str = "Q4_K_M") -> BuildPaths:
    return BuildPaths(Path(cache_dir) / f"{shape.name}-{quant}", shape.name, quant)


def build_shaped_model(
    shape: ModelShape,
    cache_dir: Path,
    *,
    quant: str = "Q4_K_M",
    progress: Callable[[str], None] | None = None,
    threads: int | None = None,
) -> tuple[Path, Path]:
    """The (text GGUF, mmproj GGUF) of ``shape``, built under ``cache_dir`` unless a
    complete build is there already.

    ``quant`` is a llama.cpp file type (``Q4_K_M``, ``Q8_0``, ``Q6_K``, ...; ``F16``
    keeps the text model unquantized). ``progress(message)`` gets one-line progress
    messages; ``threads`` is the quantizer's (default: every core). Raises
    ``InvalidRequest`` when the cache's filesystem lacks the space for the build.
    """
    ftype = _ftype(quant)
    paths = build_paths(shape, cache_dir, quant)
    paths.directory.mkdir(parents=True, exist_ok=True)
    with _locked(paths.directory):
        if _complete(paths, shape, quant):
            log.info("shaped model reused shape=%s quant=%s dir=%s", shape.name, quant, paths.directory)
            return paths.text, paths.mmproj
        for stale in paths.outputs():
            stale.unlink(missing_ok=True)
        need = _check_disk(paths.directory, shape, quant)
        threads = threads or os.cpu_count() or 1
        report = _Reporter(shape.name, progress)
        quantize_s = shape.n_params / (_QUANT_PARAMS_PER_S * threads)
        duration = "" if ftype is None else (
            f", {'under a minute' if quantize_s < 60 else f'roughly {round(quantize_s / 60)} min'} "
            f"to quantize on {threads} threads")
        report(f"building once into {paths.directory}: up to {human_size(need)} of disk{duration}")
        _build(paths, shape, ftype, threads, report)
    return paths.text, paths.mmproj


def _build(paths: BuildPaths, shape: ModelShape, ftype: int | None, threads: int, report: _Reporter) -> None:
    """Write the f16 text model, quantize it, write the mmproj, then the marker."""
    started = time.monotonic()
    seconds = {}
    noise = _FastNoise(seed=0)

    specs = text_tensor_specs(shape)
    total = sum(spec.nbytes for spec in specs)
    report(f"writing the f16 text model ({human_size(total)}, {shape.n_params / 1e6:,.0f} M parameters)")
    metadata = text_metadata(shape, f"{shape.name} (random weights, benchmark only)", prompt_pieces()) + [
        ("gemma3.rope.scaling.type", "linear"),
        ("gemma3.rope.scaling.factor", shape.rope_scaling_factor),
    ]
    step = time.monotonic()
    write_gguf(paths.text if ftype is None else paths.text_f16, "gemma3", metadata, specs, noise.draw,
               progress=report.percent("f16 text model", total))
    seconds["write_f16"] = time.monotonic() - step

    if ftype is not None:
        report(f"quantizing to {paths.quant} with llama.cpp")
        step = time.monotonic()
        _quantize(paths.text_f16, paths.text, ftype, threads, report)
        paths.text_f16.unlink()
        seconds["quantize"] = time.monotonic() - step

    specs = mmproj_tensor_specs(shape)
    report(f"writing the f16 mmproj ({human_size(sum(spec.nbytes for spec in specs))})")
    step = time.monotonic()
    write_gguf(paths.mmproj, "clip", mmproj_metadata(shape, f"{shape.name} mmproj (random weights, benchmark only)"),
               specs, noise.draw)
    seconds["write_mmproj"] = time.monotonic() - step

    _write_marker(paths, shape, paths.quant, seconds)
    report(f"ready in {time.monotonic() - started:.0f} s: {paths.text.name} "
           f"{human_size(paths.text.stat().st_size)}, {paths.mmproj.name} "
           f"{human_size(paths.mmproj.stat().st_size)}")


def estimate_bytes(shape: ModelShape, quant: str = "Q4_K_M") -> int:
    """The most disk a build occupies at once: the f16 text model and its quantized copy
    side by side, or afterwards the quantized copy and the mmproj."""
    text_f16 = sum(spec.nbytes for spec in text_tensor_specs(shape))
    mmproj = sum(spec.nbytes for spec in mmproj_tensor_specs(shape))
    if _ftype(quant) is None:
        return int((text_f16 + mmproj) * _DISK_MARGIN)
    quantized = text_f16 * _QUANT_BITS_BOUND / 16
    return int((quantized + max(text_f16, mmproj)) * _DISK_MARGIN)


def prompt_pieces() -> list[str]:
    """Every prefix of every word in the appliance's prompts, as a word and as a word
    start (``▁word``).

    llama.cpp's SentencePiece tokenizer only merges two adjacent pieces into one that
    is in the vocabulary; with all the prefixes there, each of these words becomes one
    token, as most do with Gemma's real 262k vocabulary. Without them a prompt costs a
    token per character, four times the real count, and prompt processing would weigh
    too much in the benchmark.
    """
    texts = [prompt.text for prompt in PROMPTS.values()] + [CONTEXT_TEMPLATE]
    pieces = []
    for word in dict.fromkeys(re.findall(r"[^\W_]+", " ".join(texts))):
        for form in (word, "▁" + word):
            pieces += [form[:n] for n in range(2, len(form) + 1)]
    return pieces


# --- random values ----------------------------------------------------------------


class _FastNoise:
    """Normal noise for the shaped models, at disk speed.

    f16 matrices are copied, a chunk at a time, from a pool of normal values at their
    scale, each chunk from a random offset; small f32 tensors are drawn directly.
    """

    def __init__(self, seed: int):
        self._rng = np.random.default_rng(seed)
        self._pools: dict[float, np.ndarray] = {}

    def normal(self, shape: tuple[int, ...], std: float, dtype: type) -> np.ndarray:
        n = math.prod(shape)
        if dtype is not np.float16:
            return (self._rng.standard_normal(n, dtype=np.float32) * std).astype(dtype).reshape(shape)
        pool = self._pools.get(std)
        if pool is None:
            pool = self._pools[std] = (
                self._rng.standard_normal(_POOL_VALUES, dtype=np.float32) * std).astype(np.float16)
        out = np.empty(n, np.float16)
        for start in range(0, n, _CHUNK_VALUES):
            count = min(_CHUNK_VALUES, n - start)
            offset = int(self._rng.integers(0, _POOL_VALUES - count + 1))
            out[start:start + count] = pool[offset:offset + count]
        return out.reshape(shape)

    def draw(self, spec: TensorSpec) -> np.ndarray:
        if spec.kind == "embedding":
            values = self.normal(spec.shape, EMBED_STD, spec.dtype)
        elif spec.kind in NORM_KINDS:
            values = 1.0 + self.normal(spec.shape, NORM_STD, spec.dtype)
        elif spec.kind == "linear":  # unit-variance outputs for unit-variance inputs
            values = self.normal(spec.shape, 1.0 / math.sqrt(spec.fan_in), spec.dtype)
        else:  # bias, position
            values = self.normal(spec.shape, 0.02, spec.dtype)
        steer(spec, values, quiet=BLANK_PIECE_IDS)
        return values


# --- quantization -------------------------------------------------------------------

_QUANT_LINE = re.compile(r"\[\s*(\d+)/\s*(\d+)\]")
_NATIVE_WARN, _NATIVE_ERROR = 3, 4  # enum ggml_log_level in ggml.h


def _ftype(quant: str) -> int | None:
    """llama.cpp's file type for a quant name; None for F16 (no quantization)."""
    if quant == "F16":
        return None
    import llama_cpp

    ftype = getattr(llama_cpp, f"LLAMA_FTYPE_MOSTLY_{quant}", None) if re.fullmatch(r"[A-Z0-9_]+", quant) else None
    if ftype is None:
        known = sorted(name.removeprefix("LLAMA_FTYPE_MOSTLY_") for name in dir(llama_cpp)
                       if name.startswith("LLAMA_FTYPE_MOSTLY_"))
        raise InvalidRequest(f"unknown quantization '{quant}'; llama.cpp offers F16, {', '.join(known)}")
    return ftype


def _quantize(src: Path, dest: Path, ftype: int, threads: int, report: _Reporter) -> None:
    import llama_cpp

    llama_cpp.llama_backend_init()
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = ftype
    params.nthread = threads
    tmp = dest.with_name(dest.name + ".tmp")
    errors: list[str] = []
    tensors = report.every_tenth("tensors quantized")
    quantizing = [True]

    @llama_cpp.llama_log_callback
    def forward(level: int, text: bytes, _user_data) -> None:
        line = text.decode("utf-8", errors="replace").rstrip()
        if level in (_NATIVE_WARN, _NATIVE_ERROR):
            log.log(logging.WARNING if level == _NATIVE_WARN else logging.ERROR, "llama.cpp: %s", line)
            if level == _NATIVE_ERROR and quantizing[0]:
                errors.append(line)
        elif quantizing[0] and (match := _QUANT_LINE.match(line)):
            tensors(int(match[1]), int(match[2]))

    # llama.cpp's per-tensor lines become progress; afterwards the callback stays (it
    # must outlive its use) and forwards only warnings and errors, as the engine's does
    _quantize.callback = forward
    llama_cpp.llama_log_set(forward, None)
    try:
        failed = llama_cpp.llama_model_quantize(str(src).encode(), str(tmp).encode(), ctypes.byref(params))
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    finally:
        quantizing[0] = False
    if failed:
        tmp.unlink(missing_ok=True)
        raise ModelError(f"llama.cpp could not quantize {src.name}: "
                         f"{'; '.join(errors) or 'see the log'}")
    os.replace(tmp, dest)


# --- the cache ---------------------------------------------------------------------


@contextmanager
def _locked(directory: Path) -> Iterator[None]:
    """An exclusive lock on a build directory: a second build of the same shape waits,
    then finds the first one's files."""
    with open(directory / ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _marker_identity(shape: ModelShape, quant: str) -> dict:
    return {"format": BUILD_FORMAT, "shape": asdict(shape), "quant": quant}


def _complete(paths: BuildPaths, shape: ModelShape, quant: str) -> bool:
    """Whether the directory holds a finished build of this shape and quant, intact."""
    try:
        marker = json.loads(paths.marker.read_text())
    except (OSError, ValueError):
        return False
    if {key: marker.get(key) for key in ("format", "shape", "quant")} != _marker_identity(shape, quant):
        return False
    for path in (paths.text, paths.mmproj):
        if not path.is_file() or path.stat().st_size != marker.get("bytes", {}).get(path.name):
            return False
    return True


def _write_marker(paths: BuildPaths, shape: ModelShape, quant: str, seconds: dict) -> None:
    import llama_cpp

    marker = {
        **_marker_identity(shape, quant),
        "bytes": {path.name: path.stat().st_size for path in (paths.text, paths.mmproj)},
        "seconds": {step: round(s, 1) for step, s in seconds.items()},
        "llama_cpp_python": llama_cpp.__version__,
        "built_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    tmp = paths.marker.with_name(paths.marker.name + ".tmp")
    tmp.write_text(json.dumps(marker, indent=2) + "\n")
    os.replace(tmp, paths.marker)


def _check_disk(directory: Path, shape: ModelShape, quant: str) -> int:
    """The bytes the build needs; ``InvalidRequest`` when the filesystem lacks them."""
    need = estimate_bytes(shape, quant)
    free = shutil.disk_usage(directory).free
    if free < need:
        raise InvalidRequest(
            f"building the random-weight {shape.name} model ({quant}) needs about "
            f"{human_size(need)} free in {directory} (the f16 text model and its quantized "
            f"copy side by side); only {human_size(free)} is free there. Free some space "
            f"or choose a cache directory on a larger filesystem")
    return need


class _Reporter:
    """One-line progress messages: to the log, and to the caller's ``progress``."""

    def __init__(self, shape_name: str, progress: Callable[[str], None] | None):
        self._prefix = shape_name
        self._progress = progress

    def __call__(self, message: str) -> None:
        log.info("shaped model shape=%s %s", self._prefix, message)
        if self._progress is not None:
            self._progress(f"{self._prefix}: {message}")

    def every_tenth(self, what: str, amount: Callable[[int], str] = str) -> Callable[[int, int], None]:
        """A ``(done, total)`` callback that reports at each further tenth."""
        reported = [0]

        def step(done: int, total: int) -> None:
            tenth = done * 10 // max(total, 1)
            if tenth > reported[0]:
                reported[0] = tenth
                self(f"{what}: {tenth * 10}% ({amount(done)} of {amount(total)})")

        return step

    def percent(self, what: str, total_bytes: int) -> Callable[[int], None]:
        """A ``progress(done_bytes)`` callback for ``write_gguf``."""
        tenths = self.every_tenth(what, human_size)
        return lambda done: tenths(done, total_bytes)
