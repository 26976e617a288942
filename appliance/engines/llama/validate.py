"""Check a text GGUF and its mmproj GGUF before llama.cpp loads them.

llama.cpp reports a wrong file late and badly: a truncated download fails deep in
loading, a text model without a projector loads and then cannot see, an mmproj of
another model size fails only when the chat handler starts, and some broken files
abort the process. ``inspect_model`` reads the two headers (metadata and tensor
table, never the weights) and refuses each of those cases up front with its own
reason code and a message that says what to do.

The header is read here, with the ``gguf`` package's type tables, rather than with
``gguf.GGUFReader``: the reader turns every element of every array into its own
numpy view, and Gemma's 262,144-entry vocabulary (tokens, scores, token types) then
takes about 15 s and 700 MB. This reader skips long arrays (it keeps their length)
and touches only the first few megabytes of the file.

What llama.cpp (the copy vendored in llama-cpp-python 0.3.36) knows, and so what
is accepted:

- text architectures (``src/llama-arch.cpp``): ``gemma3``, ``gemma3n``, ``gemma4``.
  ``gemma``/``gemma2`` have no vision, ``gemma4-assistant`` is a draft head and
  ``gemma-embedding`` an embedding model;
- projectors (``tools/mtmd/clip-impl.h``): ``gemma3`` (Gemma 3, SigLIP, fixed 896 px
  and 256 tokens), ``gemma3nv`` (Gemma 3n, MobileNetV5), ``gemma4v`` and
  ``gemma4uv`` (Gemma 4, dynamic resolution, 70..1120 tokens by default). The
  projector type is ``clip.projector_type`` or, in files that also hold an audio
  encoder, ``clip.vision.projector_type``;
- the projector's output size (``clip_n_mmproj_embd``) is ``ne[0]`` of
  ``mm.input_projection.weight`` for gemma3/gemma3nv and ``ne[1]`` for
  gemma4v/gemma4uv; mtmd refuses a pair whose size differs from the text model's
  embedding length.
"""

from __future__ import annotations

import hashlib
import json
import math
import mmap
import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gguf

from appliance.errors import (
    ModelMmprojMismatch,
    ModelNoMmproj,
    ModelNotGguf,
    ModelUnsupportedArch,
)

SUPPORTED_ARCHS = ("gemma3", "gemma3n", "gemma4")
# text architecture -> the projector types made for it
PROJECTORS_FOR_ARCH = {
    "gemma3": ("gemma3",),
    "gemma3n": ("gemma3nv",),
    "gemma4": ("gemma4v", "gemma4uv"),
}
SUPPORTED_PROJECTORS = tuple(p for types in PROJECTORS_FOR_ARCH.values() for p in types)
CLIP_ARCH = "clip"

# Projectors whose projection matrix is stored (in ggml order) as (n_embd_text, ...)
# rather than (..., n_embd_text); see clip_n_mmproj_embd in tools/mtmd/clip.cpp.
_PROJECTION_OUT_DIM0 = ("gemma3", "gemma3nv")
_PROJECTION_TENSOR = "mm.input_projection.weight"
# Gemma 4's projectors take any resolution within a token budget (clip.cpp defaults).
_DYNAMIC_TOKENS = {"gemma4v": (70, 1120), "gemma4uv": (70, 1120)}
_DEFAULT_N_MERGE = {"gemma3": 4, "gemma3nv": 1, "gemma4v": 3, "gemma4uv": 3}

_MAX_KEPT_ARRAY = 1024  # longer arrays (vocabularies) are skipped, their length kept
_MAX_DIMS = 4  # GGML_MAX_DIMS
_HASH_CHUNK = 4 << 20


# --- the header ------------------------------------------------------------------


@dataclass(frozen=True)
class SkippedArray:
    """A metadata array too long to keep (a vocabulary): its element type and length."""

    type: gguf.GGUFValueType
    length: int

    def __len__(self) -> int:
        return self.length


@dataclass(frozen=True)
class TensorInfo:
    name: str
    shape: tuple[int, ...]  # ggml order (ne[0] first): the reverse of numpy's shape
    type: int  # ggml type id
    offset: int  # from the start of the data section
    n_bytes: int | None  # None for a type the installed gguf package does not know


@dataclass(frozen=True)
class GGUFHeader:
    path: Path
    file_size: int
    version: int
    metadata: dict[str, Any]
    tensors: dict[str, TensorInfo]
    data_offset: int

    @property
    def arch(self) -> str:
        return str(self.metadata.get("general.architecture", ""))

    @property
    def name(self) -> str:
        return str(self.metadata.get("general.name") or self.path.stem)

    @property
    def data_end(self) -> int:
        """The least file size that holds every tensor whose size is known."""
        ends = [t.offset + t.n_bytes for t in self.tensors.values() if t.n_bytes is not None]
        return self.data_offset + max(ends, default=0)


_SCALARS = {
    gguf.GGUFValueType.UINT8: "B",
    gguf.GGUFValueType.INT8: "b",
    gguf.GGUFValueType.UINT16: "H",
    gguf.GGUFValueType.INT16: "h",
    gguf.GGUFValueType.UINT32: "I",
    gguf.GGUFValueType.INT32: "i",
    gguf.GGUFValueType.FLOAT32: "f",
    gguf.GGUFValueType.BOOL: "?",
    gguf.GGUFValueType.UINT64: "Q",
    gguf.GGUFValueType.INT64: "q",
    gguf.GGUFValueType.FLOAT64: "d",
}


class _Corrupt(Exception):
    """The header does not parse: garbage or cut short."""


class _Cursor:
    def __init__(self, buf, order: str):
        self.buf, self.order, self.pos = buf, order, 0

    def unpack(self, fmt: str):
        fmt = self.order + fmt
        size = struct.calcsize(fmt)
        if self.pos + size > len(self.buf):
            raise _Corrupt("the header runs past the end of the file")
        values = struct.unpack_from(fmt, self.buf, self.pos)
        self.pos += size
        return values[0] if len(values) == 1 else values

    def skip(self, n: int) -> None:
        if n < 0 or self.pos + n > len(self.buf):
            raise _Corrupt("the header runs past the end of the file")
        self.pos += n

    def string(self) -> str:
        n = self.unpack("Q")
        start = self.pos
        self.skip(n)
        try:
            return bytes(self.buf[start:self.pos]).decode("utf-8")
        except UnicodeDecodeError:
            raise _Corrupt("a metadata string is not UTF-8") from None

    def value(self, raw_type: int) -> Any:
        try:
            kind = gguf.GGUFValueType(raw_type)
        except ValueError:
            raise _Corrupt(f"unknown metadata value type {raw_type}") from None
        if kind == gguf.GGUFValueType.STRING:
            return self.string()
        if kind != gguf.GGUFValueType.ARRAY:
            return self.unpack(_SCALARS[kind])
        item_raw, length = self.unpack("IQ")
        try:
            item = gguf.GGUFValueType(item_raw)
        except ValueError:
            raise _Corrupt(f"unknown metadata array type {item_raw}") from None
        if length <= _MAX_KEPT_ARRAY:
            return [self.value(item) for _ in range(length)]
        if item in _SCALARS:
            self.skip(length * struct.calcsize(_SCALARS[item]))
        elif item == gguf.GGUFValueType.STRING:
            for _ in range(length):
                self.skip(self.unpack("Q"))
        else:  # arrays of arrays: walk them
            for _ in range(length):
                self.value(item)
        return SkippedArray(item, length)


def read_header(path: str | Path) -> GGUFHeader:
    """The metadata and tensor table of a GGUF file; raises ``ModelNotGguf``.

    A file that does not start with the GGUF magic, whose header does not parse, or
    that is shorter than its last tensor's offset + size (a cut-off download) is
    refused. The weights are never read.
    """
    path = Path(path)
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size < 4 or f.read(4) != b"GGUF":
                raise ModelNotGguf(
                    f"{path} is not a GGUF file (it does not start with the GGUF magic"
                    f"{'; it is empty' if size == 0 else ''}): download the model again "
                    f"(models/README.md), and check that engine.model and engine.mmproj "
                    f"point at .gguf files")
            with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
                header = _parse(path, buf, size)
    except FileNotFoundError:
        raise ModelNotGguf(f"{path} does not exist: put the GGUF file there (see "
                           f"models/README.md: `appliance models pull NAME` or copy it), "
                           f"or fix the path in engine.model / engine.mmproj") from None
    except IsADirectoryError:
        raise ModelNotGguf(f"{path} is a directory, not a GGUF file: set engine.model / "
                           f"engine.mmproj to the .gguf files inside it") from None
    except PermissionError:
        raise ModelNotGguf(f"{path} cannot be read (permission denied): let the "
                           f"appliance's user read it (chmod/chown)") from None
    except _Corrupt as exc:
        raise ModelNotGguf(f"{path} starts like a GGUF file but its header is damaged "
                           f"({exc}); the file is truncated or corrupt: download it "
                           f"again") from None
    if size < header.data_end:
        raise ModelNotGguf(
            f"{path} is truncated: it has {size:,} bytes but its tensors need "
            f"{header.data_end:,}. The download or copy stopped early; fetch it again "
            f"(`appliance models pull NAME` resumes a partial download)")
    return header


def _parse(path: Path, buf, size: int) -> GGUFHeader:
    cursor = _Cursor(buf, "<")
    cursor.skip(4)
    version = cursor.unpack("I")
    if version & 0xFFFF == 0:  # written on a big-endian machine
        cursor.order = ">"
        version = struct.unpack(">I", struct.pack("<I", version))[0]
    if version not in (2, 3):
        raise _Corrupt(f"GGUF version {version} (this reader knows 2 and 3)")
    n_tensors, n_kv = cursor.unpack("QQ")
    # Every entry takes at least 8 bytes: counts larger than the file are garbage.
    if n_tensors > size // 8 or n_kv > size // 8:
        raise _Corrupt(f"implausible counts ({n_tensors} tensors, {n_kv} keys)")
    metadata: dict[str, Any] = {}
    for _ in range(n_kv):
        key = cursor.string()
        metadata[key] = cursor.value(cursor.unpack("I"))
    tensors: dict[str, TensorInfo] = {}
    for _ in range(n_tensors):
        name = cursor.string()
        n_dims = cursor.unpack("I")
        if n_dims > _MAX_DIMS:
            raise _Corrupt(f"tensor {name!r} has {n_dims} dimensions")
        shape = tuple(cursor.unpack("Q") for _ in range(n_dims))
        ggml_type, offset = cursor.unpack("IQ")
        tensors[name] = TensorInfo(name, shape, ggml_type, offset, _tensor_bytes(shape, ggml_type))
    alignment = metadata.get("general.alignment", gguf.GGUF_DEFAULT_ALIGNMENT)
    if not isinstance(alignment, int) or alignment <= 0 or alignment & (alignment - 1):
        raise _Corrupt(f"general.alignment {alignment!r} is not a power of two")
    data_offset = -(-cursor.pos // alignment) * alignment
    return GGUFHeader(path, size, version, metadata, tensors, data_offset)


def _tensor_bytes(shape: tuple[int, ...], ggml_type: int) -> int | None:
    try:
        block, type_size = gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType(ggml_type)]
    except (ValueError, KeyError):
        return None
    return math.prod(shape) // block * type_size


# --- the pair ------------------------------------------------------------------------


@dataclass(frozen=True)
class ModelInfo:
    """What the appliance needs to know about a checked model pair.

    ``image_size`` is the side of the square image the projector takes: fixed for
    Gemma 3 (896 px), and for Gemma 4 (dynamic resolution) the largest square within
    its default token budget. ``image_tokens`` is the number of soft tokens one
    image costs (for Gemma 4 the upper bound; ``image_tokens_min`` the lower).
    """

    name: str
    arch: str
    quant: str
    n_embd: int
    n_layer: int
    n_head: int
    n_head_kv: int
    head_dim: int
    context_length: int
    n_vocab: int
    model_path: Path
    model_size: int
    mmproj_path: Path
    mmproj_name: str
    mmproj_size: int
    projector_type: str
    projection_dim: int
    image_size: int
    patch_size: int
    n_merge: int
    image_tokens: int
    image_tokens_min: int

    @property
    def dynamic_resolution(self) -> bool:
        return self.image_tokens != self.image_tokens_min

    def summary(self) -> str:
        tokens = (f"{self.image_tokens_min}-{self.image_tokens}" if self.dynamic_resolution
                  else str(self.image_tokens))
        return (f"{self.name} ({self.arch}, {self.quant}, n_embd {self.n_embd}, "
                f"{self.n_layer} layers, context {self.context_length}) + "
                f"{self.projector_type} projector ({self.image_size} px, "
                f"{tokens} tokens per image); {human_size(self.model_size + self.mmproj_size)}")


def inspect_model(model_path: str | Path, mmproj_path: str | Path | None) -> ModelInfo:
    """Check a text model and its mmproj; the facts about the pair, or a ``ModelError``.

    Refuses, in this order: a file that is not a (complete) GGUF; a model that is an
    mmproj; an architecture llama.cpp cannot run as a Gemma vision model; a missing
    mmproj, or one that is a text model or has no vision encoder; an unknown
    projector, or one made for another architecture; a projector whose output size
    differs from the model's embedding length.
    """
    model = read_header(model_path)
    arch = model.arch
    if arch == CLIP_ARCH or model.metadata.get("general.type") == "mmproj":
        raise ModelNoMmproj(
            f"{model.path} is an mmproj (vision projector), not the language model: set "
            f"engine.model to the model GGUF (e.g. gemma-3-4b-it-Q4_K_M.gguf) and "
            f"engine.mmproj to this file")
    if arch not in SUPPORTED_ARCHS:
        raise ModelUnsupportedArch(
            f"{model.path} is a '{arch or 'unknown'}' model; this appliance runs Gemma "
            f"vision models ({', '.join(SUPPORTED_ARCHS)}). Choose one from "
            f"models/catalog.toml (`appliance models list`)")
    if not model.tensors:
        raise ModelNotGguf(f"{model.path} holds no tensors (a vocabulary-only file?): "
                           f"download the full model")
    if mmproj_path is None or str(mmproj_path) == "":
        raise ModelNoMmproj(
            f"{model.path} is a text model ({arch}) and no mmproj is configured; reading "
            f"page images needs its vision projector. Download the matching "
            f"mmproj-*.gguf from the same repository as the model into models/ and set "
            f"engine.mmproj (see models/README.md)")
    mmproj = read_header(mmproj_path)
    if mmproj.arch != CLIP_ARCH:
        raise ModelNoMmproj(
            f"{mmproj.path} is given as the mmproj but is a '{mmproj.arch or 'unknown'}' "
            f"text model, not a vision projector: download the matching mmproj-*.gguf "
            f"from the same repository as the model and set engine.mmproj to it")
    if not mmproj.metadata.get("clip.has_vision_encoder", False):
        raise ModelNoMmproj(
            f"{mmproj.path} has no vision encoder (an audio-only projector?): download the "
            f"vision mmproj-*.gguf from the same repository as the model and set "
            f"engine.mmproj to it")
    projector = str(mmproj.metadata.get("clip.projector_type")
                    or mmproj.metadata.get("clip.vision.projector_type") or "")
    if projector not in SUPPORTED_PROJECTORS:
        raise ModelUnsupportedArch(
            f"{mmproj.path} has projector type '{projector or 'unknown'}'; this appliance "
            f"runs Gemma vision projectors ({', '.join(SUPPORTED_PROJECTORS)}). Use the "
            f"mmproj from the same repository as the model")
    if projector not in PROJECTORS_FOR_ARCH[arch]:
        raise ModelMmprojMismatch(
            f"{mmproj.path} is a '{projector}' projector, made for another model family "
            f"than {model.path} ({arch} takes {', '.join(PROJECTORS_FOR_ARCH[arch])}): "
            f"download the mmproj from the same repository as the model and set "
            f"engine.mmproj to it")

    n_embd = _int(model, f"{arch}.embedding_length")
    projection_dim = _projection_dim(mmproj, projector)
    if projection_dim != n_embd:
        raise ModelMmprojMismatch(
            f"{mmproj.path} projects images to {projection_dim} dimensions but "
            f"{model.path} ({arch}) has embedding length {n_embd}: the mmproj belongs to "
            f"another model size. Download the mmproj from the same repository as the "
            f"model and set engine.mmproj to it")

    n_head = _int(model, f"{arch}.attention.head_count")
    head_dim = _int(model, f"{arch}.attention.key_length", default=0) or n_embd // n_head
    image_size, patch_size, n_merge, tokens_min, tokens_max = _image_geometry(mmproj, projector)
    return ModelInfo(
        name=model.name,
        arch=arch,
        quant=_file_type(model),
        n_embd=n_embd,
        n_layer=_int(model, f"{arch}.block_count"),
        n_head=n_head,
        n_head_kv=_int(model, f"{arch}.attention.head_count_kv", default=n_head),
        head_dim=head_dim,
        context_length=_int(model, f"{arch}.context_length"),
        n_vocab=len(model.metadata.get("tokenizer.ggml.tokens", ())),
        model_path=model.path,
        model_size=model.file_size,
        mmproj_path=mmproj.path,
        mmproj_name=mmproj.name,
        mmproj_size=mmproj.file_size,
        projector_type=projector,
        projection_dim=projection_dim,
        image_size=image_size,
        patch_size=patch_size,
        n_merge=n_merge,
        image_tokens=tokens_max,
        image_tokens_min=tokens_min,
    )


def _int(header: GGUFHeader, key: str, default: int | None = None) -> int:
    """An integer key; a per-layer array gives its largest value."""
    value = header.metadata.get(key)
    if isinstance(value, list) and value and all(isinstance(v, int) for v in value):
        value = max(value)
    if isinstance(value, bool) or not isinstance(value, int):
        if default is not None:
            return default
        raise ModelNotGguf(f"{header.path} lacks the metadata key {key} (or it is not an "
                           f"integer): the file is damaged or was converted by an "
                           f"unsupported tool; download it again")
    return value


def _projection_dim(mmproj: GGUFHeader, projector: str) -> int:
    tensor = mmproj.tensors.get(_PROJECTION_TENSOR)
    if tensor is not None and len(tensor.shape) >= 2:
        return tensor.shape[0] if projector in _PROJECTION_OUT_DIM0 else tensor.shape[1]
    return _int(mmproj, "clip.vision.projection_dim")  # last resort: not what mtmd checks


def _image_geometry(mmproj: GGUFHeader, projector: str) -> tuple[int, int, int, int, int]:
    """(image_size, patch_size, n_merge, min tokens, max tokens), as clip.cpp derives them."""
    image_size = _int(mmproj, "clip.vision.image_size")
    patch_size = _int(mmproj, "clip.vision.patch_size")
    n_merge = _int(mmproj, "clip.vision.projector.scale_factor",
                   default=_DEFAULT_N_MERGE[projector])
    if patch_size <= 0 or n_merge <= 0:
        raise ModelNotGguf(f"{mmproj.path} has patch size {patch_size} and merge factor "
                           f"{n_merge}: the file is damaged; download it again")
    if projector == "gemma4uv":  # the merge happens in the patch convolution
        patch_size, n_merge = patch_size * n_merge, 1
    if projector in _DYNAMIC_TOKENS:
        tokens_min, tokens_max = _DYNAMIC_TOKENS[projector]
        image_size = math.isqrt(tokens_max) * patch_size * n_merge
        return image_size, patch_size, n_merge, tokens_min, tokens_max
    if projector == "gemma3nv":  # MobileNetV5 emits a fixed grid (clip_n_output_tokens)
        tokens = image_size // patch_size
    else:
        tokens = (image_size // patch_size // n_merge) ** 2
    return image_size, patch_size, n_merge, tokens, tokens


def _file_type(header: GGUFHeader) -> str:
    raw = header.metadata.get("general.file_type")
    try:
        return gguf.LlamaFileType(raw).name.removeprefix("MOSTLY_")
    except (ValueError, TypeError):
        return "unknown"


def human_size(n: int) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def file_sha256(path: str | Path, progress=None) -> str:
    """The hex sha256 of a file, read in chunks; ``progress(done_bytes)`` after each."""
    digest, done = hashlib.sha256(), 0
    with open(path, "rb") as f:
        while chunk := f.read(_HASH_CHUNK):
            digest.update(chunk)
            done += len(chunk)
            if progress is not None:
                progress(done)
    return digest.hexdigest()


def cached_sha256(path: str | Path, cache_file: Path) -> str:
    """``file_sha256`` remembered in ``cache_file`` by path, size and mtime: a
    multi-gigabyte model is hashed once, not at every start."""
    stat = Path(path).stat()
    key = f"{Path(path).resolve()}:{stat.st_size}:{stat.st_mtime_ns}"
    try:
        known = json.loads(cache_file.read_text())
    except (OSError, ValueError):
        known = {}
    if key not in known:
        known[key] = file_sha256(path)
        cache_file.write_text(json.dumps(known, indent=1))
    return known[key]
