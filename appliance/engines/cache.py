"""Result cache: the same page image, read the same way, is not read again (seed 002 §10).

The key is the SHA-256 of the page image as the engine receives it (after
preprocessing: pixels, size and mode) together with the engine, its model and the
engine's recipe for the request (for the VLM: the prompt version, the document type
and the previous page's context). Any of these changing is a miss, so a new prompt
version or model never serves old answers, and a rerun at another resolution or with
the other engine reads the page afresh.

What is cached is the engine's recognition, before postprocessing: an improved
repair step applies to cached pages too. Entries are JSON files under one directory,
written atomically, shared by every worker; a damaged entry is a miss.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from pathlib import Path

from PIL import Image

from appliance.engines.base import PageRequest
from appliance.page import Recognition

log = logging.getLogger(__name__)

CACHE_PROVENANCE = "result_cache"  # the provenance entry that names a reading's cache entry


def image_digest(image: Image.Image) -> str:
    digest = hashlib.sha256(f"{image.mode}:{image.width}x{image.height}:".encode())
    digest.update(image.tobytes())
    return digest.hexdigest()


class ResultCache:
    def __init__(self, root: Path):
        self.root = root

    def key(self, image_sha256: str, engine, request: PageRequest) -> str:
        parts = [image_sha256, engine.name, engine.model_id, engine.recipe(request)]
        return hashlib.sha256("\n".join(parts).encode()).hexdigest()

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> Recognition | None:
        try:
            return Recognition.from_dict(json.loads(self._path(key).read_text()))
        except FileNotFoundError:
            return None
        except (OSError, ValueError, TypeError) as exc:
            log.warning("result cache entry unreadable key=%s error=%s", key, exc)
            return None

    def put(self, key: str, recognition: Recognition) -> None:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                json.dump(recognition.to_dict(), out, ensure_ascii=False)
            os.replace(tmp, path)  # readers see the whole entry or none
        finally:
            Path(tmp).unlink(missing_ok=True)

    def remove(self, keys: list[str]) -> int:
        """Delete these entries (a deleted document's readings); how many there were."""
        removed = 0
        for key in keys:
            try:
                self._path(key).unlink()
                removed += 1
            except FileNotFoundError:
                pass
        return removed
