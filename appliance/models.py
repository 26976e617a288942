"""Model files: the catalog of known-good pairs, their download and their verification.

``models/catalog.toml`` lists Gemma vision GGUFs with their mmproj, where they come
from and, where the publisher's checksum has been checked, its sha256. ``pull``
downloads a pair into ``models/`` (resuming a partial ``<file>.part``), ``verify``
hashes and inspects what is there. No test downloads anything: the tests point a
catalog at a local HTTP server.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, TextIO
from urllib.parse import urlsplit

from appliance.doctor import Check
from appliance.gguf.families import FAMILIES
from appliance.gguf.files import file_sha256, human_size
from appliance.gguf.header import read_header
from appliance.gguf.pair import inspect_model
from appliance.errors import ConfigError, ModelError, NetworkUnavailable, NotFound

MODELS_DIR = Path(__file__).resolve().parent.parent / "models"
CATALOG_PATH = MODELS_DIR / "catalog.toml"
PART_SUFFIX = ".part"
HF_TOKEN_ENV = "HF_TOKEN"  # sent to huggingface.co only, for gated repositories

_SHA256 = re.compile(r"[0-9a-f]{64}")
_NAME = re.compile(r"[a-z0-9][a-z0-9._-]*")

# (file name, bytes done, bytes in all or None)
Progress = Callable[[str, int, "int | None"], None]


@dataclass(frozen=True)
class ModelFile:
    file: str  # the name in models/
    url: str
    size_gb: float  # approximate
    size_bytes: int  # exact; 0 = not recorded
    sha256: str  # "" = no published checksum recorded


@dataclass(frozen=True)
class CatalogEntry:
    name: str
    description: str
    family: str
    verified: bool
    repository: str
    licence: str
    vram_gb: float
    vram_n_ctx: int
    text: ModelFile
    mmproj: ModelFile

    @property
    def files(self) -> tuple[ModelFile, ModelFile]:
        return self.text, self.mmproj


# --- the catalog -------------------------------------------------------------------


def load_catalog(path: str | Path | None = None) -> list[CatalogEntry]:
    path = Path(path) if path else CATALOG_PATH
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"model catalog {path} does not exist") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc}); fix the syntax at that line") from None
    entries, seen = [], set()
    for index, item in enumerate(raw.get("model", [])):
        where = f"{path}: model #{index + 1} ({item.get('name', '?')})"
        entry = _entry(item, where)
        if entry.name in seen:
            raise ConfigError(f"{where}: the name '{entry.name}' is used twice")
        seen.add(entry.name)
        entries.append(entry)
    return entries


def _entry(item: dict, where: str) -> CatalogEntry:
    def field(table: dict, key: str, kind: type, label: str = ""):
        value = table.get(key)
        ok = isinstance(value, kind) and not (kind in (int, float) and isinstance(value, bool))
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            value, ok = float(value), True
        if not ok:
            raise ConfigError(f"{where}: '{label}{key}' must be a {kind.__name__}")
        return value

    def model_file(key: str) -> ModelFile:
        table = item.get(key)
        if not isinstance(table, dict):
            raise ConfigError(f"{where}: missing the [model.{key}] table")
        sha = field(table, "sha256", str, f"{key}.").lower()
        if sha and not _SHA256.fullmatch(sha):
            raise ConfigError(f"{where}: '{key}.sha256' must be 64 hex digits or \"\"")
        file = field(table, "file", str, f"{key}.")
        if not file.endswith(".gguf") or "/" in file:
            raise ConfigError(f"{where}: '{key}.file' must be a plain *.gguf file name")
        url = field(table, "url", str, f"{key}.")
        if urlsplit(url).scheme not in ("http", "https"):
            raise ConfigError(f"{where}: '{key}.url' must be an http(s) URL")
        return ModelFile(file=file, url=url, size_gb=field(table, "size_gb", float, f"{key}."),
                         size_bytes=field(table, "size_bytes", int, f"{key}."), sha256=sha)

    name = field(item, "name", str)
    if not _NAME.fullmatch(name):
        raise ConfigError(f"{where}: 'name' must be lower-case letters, digits, '.', '-', '_'")
    if (family := field(item, "family", str)) not in FAMILIES:
        raise ConfigError(f"{where}: 'family' must be one of {', '.join(FAMILIES)}, "
                          f"not '{family}'")
    return CatalogEntry(
        name=name, description=field(item, "description", str),
        family=family, verified=field(item, "verified", bool),
        repository=field(item, "repository", str), licence=field(item, "licence", str),
        vram_gb=field(item, "vram_gb", float), vram_n_ctx=field(item, "vram_n_ctx", int),
        text=model_file("text"), mmproj=model_file("mmproj"))


def find_entry(catalog: list[CatalogEntry], name: str) -> CatalogEntry:
    for entry in catalog:
        if entry.name == name:
            return entry
    raise NotFound(f"no model '{name}' in the catalog; known: "
                   f"{', '.join(e.name for e in catalog)} (`appliance models list`)")


def pair_for(name: str | None, models_dir: Path | None = None) -> tuple[Path, Path] | None:
    """The model pair that ``name`` means: a catalog name (its files in
    ``models_dir``) or "MODEL.gguf,MMPROJ.gguf"; None for None (the configured pair)."""
    if name is None:
        return None
    if "," in name:
        model, mmproj = (Path(part.strip()) for part in name.split(",", 1))
        return model, mmproj
    entry = find_entry(load_catalog(), name)
    directory = models_dir or MODELS_DIR
    paths = tuple(directory / f.file for f in entry.files)
    if missing := [p.name for p in paths if not p.is_file()]:
        raise NotFound(f"{', '.join(missing)} of '{name}' not in {directory}: "
                       f"`appliance models pull {name}` downloads them")
    return paths


def format_list(catalog: list[CatalogEntry], models_dir: Path) -> str:
    lines = [f"{'NAME':<24} {'FAMILY':<13} {'VRAM':>8} {'DOWNLOAD':>9}  PRESENT  DESCRIPTION"]
    for entry in catalog:
        present = sum((models_dir / f.file).is_file() for f in entry.files)
        size = entry.text.size_gb + entry.mmproj.size_gb
        family = FAMILIES[entry.family]
        lines.append(f"{entry.name:<24} {family.title:<13} {entry.vram_gb:>5.1f} GB "
                     f"{size:>6.1f} GB  {present}/2      {entry.description}")
        lines.append(f"{'':<24} good at: {family.good_at}")
    lines.append(f"(VRAM: approximate, every layer on the GPU, n_ctx as in models/README.md; "
                 f"files go to {models_dir})")
    return "\n".join(lines) + "\n"


# --- verify ----------------------------------------------------------------------------


def verify(models_dir: Path, catalog: list[CatalogEntry], model: Path | None = None,
           mmproj: Path | None = None, progress: Progress | None = None) -> list[Check]:
    """Hash and inspect the catalogued files present in ``models_dir`` and the configured pair.

    A catalogued file is checked against its recorded size and sha256; without a
    recorded checksum the line says so and gives the file's sha256 for comparison by
    hand. Each complete pair (and the configured one) goes through ``inspect_model``.
    """
    checks: list[Check] = []
    known = {f.file: f for entry in catalog for f in entry.files}
    hashed: set[Path] = set()
    configured = {p.resolve() for p in (model, mmproj) if p is not None}
    covered: set[Path] = set()

    for entry in catalog:
        paths = [models_dir / f.file for f in entry.files]
        present = [p for p in paths if p.is_file()]
        partial = [p for p in paths if _part(p).is_file()]
        if not present and not partial:
            continue
        for file, path in zip(entry.files, paths):
            if path.is_file():
                checks.append(_file_check(file, path, progress))
                hashed.add(path.resolve())
            elif _part(path).is_file():
                checks.append(Check("warn", file.file, f"partial download "
                                    f"({human_size(_part(path).stat().st_size)}): "
                                    f"`appliance models pull {entry.name}` resumes it"))
            else:
                checks.append(Check("warn", file.file, f"missing: `appliance models pull "
                                                       f"{entry.name}`, or copy it into "
                                                       f"{models_dir}"))
        if len(present) == 2:
            in_use = paths[0].resolve() in configured
            checks.append(_pair_check(f"{entry.name} (configured)" if in_use else entry.name,
                                      *paths))
            covered.add(paths[0].resolve())

    if model is not None and model.resolve() not in covered:
        for path in (model, mmproj):
            if path is not None and path.is_file() and path.resolve() not in hashed:
                listed = known.get(path.name)
                checks.append(_file_check(listed, path, progress) if listed
                              else _unlisted(path, progress))
                hashed.add(path.resolve())
        checks.append(_pair_check("configured", model, mmproj))

    if models_dir.is_dir():
        for path in sorted(models_dir.glob("*.gguf")):
            if path.name not in known and path.resolve() not in configured:
                checks.append(_stranger(path))
    if not checks:
        checks.append(Check("warn", "models", f"no model files in {models_dir} and none "
                                              f"configured: see models/README.md"))
    return checks


def _file_check(file: ModelFile, path: Path, progress: Progress | None) -> Check:
    size = path.stat().st_size
    if file.size_bytes and size != file.size_bytes:
        return Check("FAIL", path.name, f"{size:,} bytes, the catalog says "
                                        f"{file.size_bytes:,}: delete it and pull it again")
    digest = file_sha256(path, _bound(progress, path.name, size))
    if not file.sha256:
        return Check("warn", path.name, f"no published checksum recorded; its sha256 is "
                                        f"{digest} (compare with the repository's file page)")
    if digest != file.sha256:
        return Check("FAIL", path.name, f"sha256 {digest} differs from the catalog's "
                                        f"{file.sha256}: the file is corrupt or was replaced "
                                        f"upstream; delete it and pull it again")
    return Check("ok", path.name, "sha256 matches the catalog")


def _unlisted(path: Path, progress: Progress | None) -> Check:
    digest = file_sha256(path, _bound(progress, path.name, path.stat().st_size))
    return Check("warn", path.name, f"not in the catalog, no checksum to compare; its "
                                    f"sha256 is {digest}")


def _pair_check(label: str, model: Path, mmproj: Path | None) -> Check:
    try:
        info = inspect_model(model, mmproj)
    except ModelError as exc:
        return Check("FAIL", label, f"({exc.code}) {exc.message}")
    return Check("ok", label, info.summary())


def _stranger(path: Path) -> Check:
    try:
        header = read_header(path)
    except ModelError as exc:
        return Check("FAIL", path.name, f"({exc.code}) {exc.message}")
    return Check("warn", path.name, f"a '{header.arch}' GGUF not in the catalog; set "
                                    f"engine.model / engine.mmproj to use it")


def _bound(progress: Progress | None, name: str, total: int):
    return None if progress is None else (lambda done: progress(name, done, total))


def _part(path: Path) -> Path:
    return path.with_name(path.name + PART_SUFFIX)


# --- pull --------------------------------------------------------------------------------


def pull(entry: CatalogEntry, models_dir: Path, *, progress: Progress | None = None,
         client=None) -> list[Check]:
    """Download both files of ``entry`` into ``models_dir``, then check the pair.

    Each file streams into ``<file>.part``; a later pull asks for the rest with a
    Range header. The finished file is checked (recorded size and sha256, GGUF
    header) and only then renamed into place, so a file under its final name is
    always complete. Files already in place are left alone.
    """
    import httpx

    models_dir.mkdir(parents=True, exist_ok=True)
    own_client = client is None
    if own_client:
        client = httpx.Client(follow_redirects=True,
                              timeout=httpx.Timeout(30.0, read=120.0))
    checks = []
    try:
        for file in entry.files:
            checks.append(_fetch(client, file, models_dir / file.file, progress))
    finally:
        if own_client:
            client.close()
    checks.append(_pair_check(entry.name, models_dir / entry.text.file,
                              models_dir / entry.mmproj.file))
    return checks


def _fetch(client, file: ModelFile, dest: Path, progress: Progress | None) -> Check:
    import httpx

    if dest.is_file():
        return Check("ok", file.file, "already present (`appliance models verify` checks it)")
    part = _part(dest)
    have = part.stat().st_size if part.is_file() else 0
    headers = {"Range": f"bytes={have}-"} if have else {}
    host = urlsplit(file.url).hostname or ""
    token = os.environ.get(HF_TOKEN_ENV)
    if token and (host == "huggingface.co" or host.endswith(".huggingface.co")):
        headers["Authorization"] = f"Bearer {token}"
    done, restart = have, False
    try:
        with client.stream("GET", file.url, headers=headers) as response:
            status = response.status_code
            if status == 416 and have:  # nothing left to send: the part may be whole
                restart = _range_total(response) != have
            elif status == 206 and _range_start(response) != have:
                restart = True  # not the range asked for
            elif status in (200, 206):
                if status == 200:
                    have = done = 0  # the server ignores ranges: start over
                total = _total(response, have)
                _check_room(dest.parent, file, total, have)
                with open(part, "ab" if have else "wb") as out:
                    for chunk in response.iter_bytes():  # as it arrives: a cut keeps all
                        out.write(chunk)
                        done += len(chunk)
                        if progress is not None:
                            progress(file.file, done, total)
                if total is not None and done < total:
                    raise NetworkUnavailable(_cut_message(file, done, total))
            else:
                _raise_for_status(response, file)
    except (httpx.ConnectError, httpx.ConnectTimeout, httpx.ProxyError) as exc:
        kept = f"; the {human_size(have)} already downloaded are kept" if have else ""
        raise NetworkUnavailable(
            f"cannot reach {host} to download {file.file} ({type(exc).__name__}: {exc}): "
            f"this host has no network access, or a proxy or firewall blocks it{kept}. "
            f"Download {file.url} on a machine with internet and copy it into "
            f"{dest.parent} (see models/README.md)") from None
    except httpx.TransportError as exc:  # cut off while streaming
        raise NetworkUnavailable(_cut_message(file, done, None, exc)) from None
    if restart:
        part.unlink()
        return _fetch(client, file, dest, progress)
    return _finish(file, part, dest)


def _finish(file: ModelFile, part: Path, dest: Path) -> Check:
    size = part.stat().st_size
    if file.size_bytes and size != file.size_bytes:
        part.unlink()
        raise ModelError(f"{file.file}: downloaded {size:,} bytes, the catalog says "
                         f"{file.size_bytes:,}; the partial file was removed, pull again")
    digest = file_sha256(part)
    if file.sha256 and digest != file.sha256:
        part.unlink()
        raise ModelError(f"{file.file}: sha256 {digest} differs from the catalog's "
                         f"{file.sha256}; the download was removed. Pull again; if it "
                         f"persists the file was replaced upstream: report it")
    try:
        read_header(part)
    except ModelError:
        part.unlink()
        raise ModelError(f"{file.file}: {file.url} did not send a complete GGUF file (an "
                         f"error or login page?); the download was removed. Open the URL "
                         f"in a browser to see why") from None
    os.replace(part, dest)
    checksum = ("sha256 matches the catalog" if file.sha256 else
                f"no published checksum recorded; its sha256 is {digest}")
    return Check("ok", file.file, f"downloaded ({human_size(size)}), {checksum}")


def _range_start(response) -> int | None:
    match = re.match(r"bytes (\d+)-\d+/", response.headers.get("content-range", ""))
    return int(match.group(1)) if match else None


def _range_total(response) -> int | None:
    match = re.search(r"/(\d+)$", response.headers.get("content-range", ""))
    return int(match.group(1)) if match else None


def _total(response, have: int) -> int | None:
    if response.status_code == 206:
        total = _range_total(response)
        if total is not None:
            return total
    length = response.headers.get("content-length")
    return have + int(length) if length and length.isdigit() else None


def _check_room(directory: Path, file: ModelFile, total: int | None, have: int) -> None:
    needed = (total if total is not None else int(file.size_gb * 1e9)) - have
    free = shutil.disk_usage(directory).free
    if needed > free:
        raise ModelError(f"{file.file} needs {human_size(needed)} more but {directory} has "
                         f"{human_size(free)} free: free some space, or pull with --dir "
                         f"elsewhere and point engine.model / engine.mmproj there")


def _cut_message(file: ModelFile, done: int, total: int | None, exc=None) -> str:
    of = f" of {total:,}" if total else ""
    why = f" ({type(exc).__name__}: {exc})" if exc else ""
    return (f"the download of {file.file} stopped at {done:,}{of} bytes{why}; the part "
            f"is kept: run the same pull again to resume it")


def _raise_for_status(response, file: ModelFile) -> None:
    status = response.status_code
    if status in (401, 403):
        raise ModelError(f"{file.url} answered HTTP {status}: the repository is gated or "
                         f"private. Accept its licence on huggingface.co and set "
                         f"{HF_TOKEN_ENV} to an access token, or download it in a browser "
                         f"and copy it into models/")
    if status == 404:
        raise ModelError(f"{file.url} answered HTTP 404: the file was renamed or removed "
                         f"upstream; the catalog entry is out of date. Download the pair "
                         f"by hand (models/README.md) and set engine.model / engine.mmproj")
    if status >= 500 or status == 429:
        raise NetworkUnavailable(f"{file.url} answered HTTP {status} (server busy or "
                                 f"down): try again later; a partial download resumes")
    raise ModelError(f"{file.url} answered HTTP {status}; download it by hand "
                     f"(models/README.md)")


class ProgressBar:
    """A one-line progress bar for downloads and hashing, redrawn at most 5 times a second."""

    def __init__(self, stream: TextIO | None = None, width: int = 30):
        self.stream = stream or sys.stderr
        self.width = width
        self._name: str | None = None
        self._start = self._drawn = 0.0
        self._first = 0

    def __call__(self, name: str, done: int, total: int | None) -> None:
        now = time.monotonic()
        if name != self._name:
            self.close()
            self._name, self._start, self._first = name, now, done
        finished = total is not None and done >= total
        if now - self._drawn < 0.2 and not finished:
            return
        self._drawn = now
        elapsed = now - self._start
        rate = f" {human_size(int((done - self._first) / elapsed))}/s" if elapsed >= 0.5 else ""
        if total:
            filled = self.width * min(done, total) // total
            bar = f"[{'#' * filled}{'.' * (self.width - filled)}] "
            amount = f"{human_size(done)} / {human_size(total)}"
        else:
            bar, amount = "", human_size(done)
        self.stream.write(f"\r{name} {bar}{amount}{rate}  ")
        self.stream.flush()

    def close(self) -> None:
        if self._name is not None:
            self.stream.write("\n")
            self.stream.flush()
            self._name = None
