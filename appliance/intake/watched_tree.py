"""A watched folder's files as its watcher sees them: which paths are candidates
(inside the folder, not ignored, at the top unless the folder is recursive), each
file's signature (size, mtime), how the journal names them, and the walk that lists
them. The watcher's loop (events, stability, offers) is ``watch.FolderWatcher``'s."""

from __future__ import annotations

import errno
import json
import logging
import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path

from appliance.config import WatchFolder
from appliance.errors import ConfigError
from appliance.intake.folder_rules import is_ignored
from appliance.intake.stability import Signature

log = logging.getLogger(__name__)


def kv(value: object) -> str:
    """A log field value: quoted only when it would break key=value parsing."""
    text = str(value)
    if not text or any(ch.isspace() or ch in '"=' for ch in text):
        return json.dumps(text, ensure_ascii=False)
    return text


def inside(path: str | Path, root: Path) -> bool:
    path = Path(path)
    return path == root or root in path.parents


class WatchedTree:
    """One watched folder's tree; its ignore patterns are checked when it is made."""

    def __init__(self, folder: WatchFolder, name: str):
        self.folder = folder
        self.name = name
        self._extra = tuple(folder.ignore)
        for pattern in self._extra:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ConfigError(f"watch folder '{self.name}': ignore pattern {pattern!r} is "
                                  f"not a valid regular expression ({exc}); fix or remove it"
                                  ) from None
        self._symlinks_warned: set[Path] = set()
        self._root: Path | None = None

    @property
    def root(self) -> Path:
        """The watched folder, symlinks resolved."""
        if self._root is None:
            self._root = Path(os.path.realpath(self.folder.path))
        return self._root

    def relative(self, path: Path) -> Path | None:
        """``path`` relative to the root when it is a candidate: inside, not ignored, and
        at the top unless recursive."""
        try:
            rel = path.relative_to(self.root)
        except ValueError:
            return None
        if not rel.parts or (not self.folder.recursive and len(rel.parts) > 1):
            return None
        return None if is_ignored(rel, self._extra) else rel

    def signature(self, path: Path) -> Signature | None:
        """(size, mtime_ns) of a regular file, following a symlink only when it stays
        in the tree; None when it is gone or not a candidate. Raises OSError when it
        cannot be read just now (a share briefly away): that is no reason to forget it."""
        try:
            st = os.lstat(path)
            if stat.S_ISLNK(st.st_mode):
                target = Path(os.path.realpath(path))
                if not inside(target, self.root) or self.relative(target) is None:
                    if path not in self._symlinks_warned:
                        self._symlinks_warned.add(path)
                        reason = ("symlink_outside" if not inside(target, self.root)
                                  else "symlink_target_not_watched")
                        log.warning("watch ignored folder=%s file=%s reason=%s target=%s",
                                    kv(self.name), kv(self.display(path)), reason,
                                    kv(target))
                    return None
                st = os.stat(path)
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                return None
            raise
        if not stat.S_ISREG(st.st_mode):
            return None
        return st.st_size, st.st_mtime_ns

    def display(self, path: Path) -> str:
        """A path as logs show it: relative to the root when it lies inside."""
        try:
            return str(path.relative_to(self.root))
        except ValueError:
            return str(path)

    def walk(self, top: Path) -> Iterator[Path]:
        """Candidate files under ``top`` (regular files and symlinks; symlinked folders
        are never entered; ignored folders are skipped whole)."""
        stack = [top]
        while stack:
            folder = stack.pop()
            try:
                with os.scandir(folder) as entries:
                    found = list(entries)
            except (FileNotFoundError, NotADirectoryError):
                if folder == self.root:
                    raise
                continue
            except PermissionError as exc:
                log.warning("watch cannot read folder=%s dir=%s reason=%s", kv(self.name),
                            kv(folder), kv(exc))
                continue
            for entry in found:
                path = Path(entry.path)
                try:
                    if entry.is_dir(follow_symlinks=False):
                        if self.folder.recursive and self.relative(path) is not None:
                            stack.append(path)
                    elif entry.is_file(follow_symlinks=False) or entry.is_symlink():
                        yield path
                except OSError:
                    continue
