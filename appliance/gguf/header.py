"""The header of a GGUF file, read without its weights: metadata and tensor table.

It is read here, with the ``gguf`` package's type tables, rather than with
``gguf.GGUFReader``: the reader turns every element of every array into its own
numpy view, and Gemma's 262,144-entry vocabulary (tokens, scores, token types) then
takes about 15 s and 700 MB. This reader skips long arrays (it keeps their length)
and touches only the first few megabytes of the file.
"""

from __future__ import annotations

import math
import mmap
import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gguf

from appliance.errors import ModelNotGguf

_MAX_KEPT_ARRAY = 1024  # longer arrays (vocabularies) are skipped, their length kept
_MAX_DIMS = 4  # GGML_MAX_DIMS


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


