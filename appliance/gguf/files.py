"""Model files on disk: their sizes for people, their checksums."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

_HASH_CHUNK = 4 << 20


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
