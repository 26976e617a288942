"""The spool: originals stored by content (sha256), and the page images rendered from them.

    <data_dir>/spool/originals/ab/abcdef...   the bytes as received, never modified
    <data_dir>/spool/pages/<sha256>/<dpi>/page-0001.png
    <data_dir>/spool/incoming/                 partial writes; same filesystem, so the
                                               final rename is atomic
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Iterator

from appliance.errors import TooLarge

CHUNK_BYTES = 1 << 20


@dataclass(frozen=True)
class Staged:
    """A stream copied into the spool's ``incoming`` folder, not yet in its place."""

    sha256: str
    size: int
    tmp: Path


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class Spool:
    def __init__(self, root: Path):
        self.root = root
        self.incoming = root / "incoming"
        for sub in (self.incoming, root / "originals", root / "pages"):
            sub.mkdir(parents=True, exist_ok=True)

    def original_path(self, sha256: str) -> Path:
        return self.root / "originals" / sha256[:2] / sha256

    def page_image_path(self, sha256: str, index: int, dpi: int) -> Path:
        return self.root / "pages" / sha256 / str(dpi) / f"page-{index + 1:04d}.png"

    def delete_content(self, sha256: str) -> int:
        """Remove the original and every page image of this content; the files removed.
        The original goes first, before the page images are listed: an image rendered on
        demand meanwhile is either listed here or discarded by its writer
        (``raster.write_page_image``)."""
        removed = 0
        try:
            self.original_path(sha256).unlink()
            removed += 1
        except FileNotFoundError:
            pass
        pages = self.root / "pages" / sha256
        for path in [p for p in pages.rglob("*") if p.is_file()] if pages.exists() else []:
            try:
                path.unlink()
                removed += 1
            except FileNotFoundError:
                pass
        shutil.rmtree(pages, ignore_errors=True)
        return removed

    @contextmanager
    def staging(self, stream: BinaryIO, max_bytes: int) -> Iterator[Staged]:
        """Copy a stream into ``incoming``, hashing as it goes; fsynced before it counts.
        Refuses (TooLarge), and keeps nothing, past ``max_bytes``. ``place`` it inside
        the block, once the content is held (``contents.hold_content``): unplaced, it
        is gone when the block ends."""
        digest, size = hashlib.sha256(), 0
        fd, tmp_name = tempfile.mkstemp(dir=self.incoming)
        tmp = Path(tmp_name)
        try:
            with os.fdopen(fd, "wb") as out:
                while chunk := stream.read(CHUNK_BYTES):
                    size += len(chunk)
                    if size > max_bytes:
                        raise TooLarge.said("over_bytes", limit=f"{max_bytes:,}")
                    digest.update(chunk)
                    out.write(chunk)
                out.flush()
                os.fsync(out.fileno())
            yield Staged(digest.hexdigest(), size, tmp)
        finally:
            tmp.unlink(missing_ok=True)

    def place(self, staged: Staged) -> Path:
        """The staged copy under its content's name, durably."""
        final = self.original_path(staged.sha256)
        final.parent.mkdir(parents=True, exist_ok=True)
        os.replace(staged.tmp, final)  # identical content: replacing an existing copy is harmless
        fsync_dir(final.parent)
        return final
