"""Watched folders: every file dropped into a (network) folder is offered once, whole.

The complaints this module exists to prevent, each with its answer:

* A file on an SMB/NFS share is never picked up, because inotify only sees writes
  made by this kernel. ``auto`` mode polls on network filesystems (``NETWORK_FS``,
  read from /proc/mounts for the resolved folder), and a full rescan every
  ``rescan_interval_s`` catches whatever any observer missed.
* A file is ingested while it is still being copied. ``StabilityTracker`` hands a
  file on only after its (size, mtime) has not changed for ``stability_s``, and the
  signature is checked once more right before ``offer``.
* The same file is queued twice. A file offered and accepted is remembered with its
  signature until it disappears or changes; the owner also dedupes by content.
* A failed or refused file has nowhere to go. ``offer`` answering False (queue full)
  or raising leaves the file in place and re-arms it with a backoff, so it is offered
  again later, never dropped. Where processed and failed files go is the owner's
  business (``disposition``), not this module's.

The pieces: ``StabilityTracker`` is pure (no filesystem, time passed in) and is
tested by stepping time by hand. ``FolderWatcher`` is the thin loop around it: a
watchdog observer feeds it events, a supervisor thread (re)starts the observer and
rescans, a ticker thread stats the files in their stability window and offers the
ones that settled.
"""

from __future__ import annotations

import errno
import json
import logging
import math
import os
import random
import re
import stat
import tempfile
import threading
import time
import warnings
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from watchdog.events import (
    EVENT_TYPE_CREATED,
    EVENT_TYPE_DELETED,
    EVENT_TYPE_MOVED,
    DirCreatedEvent,
    DirDeletedEvent,
    DirMovedEvent,
    FileAttribEvent,
    FileClosedEvent,
    FileCreatedEvent,
    FileDeletedEvent,
    FileModifiedEvent,
    FileMovedEvent,
    FileSystemEvent,
    FileSystemEventHandler,
)
from watchdog.observers import Observer
from watchdog.observers.api import BaseObserver
from watchdog.observers.polling import PollingObserverVFS

from appliance.config import WatchFolder
from appliance.errors import ConfigError

log = logging.getLogger(__name__)

# watchdog 7.1's recursive inotify setup can register the same new subfolder twice
# (mkdir -p races its own walk); it then overwrites the identical callback and warns
# with the whole watch state in the message, once per folder. Harmless, and noise in
# the journal, so that one warning is silenced.
warnings.filterwarnings("ignore", message=r"Callback with id '\d+' already exists for watch",
                        category=RuntimeWarning, module=r"watchdog\.observers\.")

Signature = tuple[int, int]  # (size in bytes, mtime in ns)
Offer = Callable[[Path, list[str]], bool]

# --------------------------------------------------------------------------- stability


@dataclass(slots=True)
class _Window:
    signature: Signature
    since: float  # monotonic time the signature was first seen (or a retry's start)


class StabilityTracker:
    """Decides when a file has stopped changing. Pure: no filesystem, no clock.

    A caller feeds it observations, ``track(path, size, mtime_ns, now)``, from events,
    scans and stats, and asks ``stable(now)`` for the files whose (size, mtime) has
    not changed for ``stability_s``. Time is monotonic seconds, passed in, so tests
    step it by hand. A file is returned once; it then stays remembered as settled
    and tracking it again with the same signature does nothing, until a different
    signature (the file changed) or ``forget`` (it was deleted) re-arms it.

    The real cases it exists for:

    * Network copies written in chunks (SMB, NFS, rsync): the file grows over many
      seconds with pauses between chunks; every new size or mtime restarts its window.
    * Scanners and MFPs that open and close the same file several times (one page at
      a time, then a header rewrite): a close is not the end; only quiet time is.
    * Temp files renamed into place (``scan.pdf.part`` -> ``scan.pdf``, rsync's
      ``.scan.pdf.XXXXXX``): the temp name is ignored by the caller's rules; the final
      name starts its own window when it appears.
    * Files deleted or moved away before they settle: the caller ``forget``s them
      (and a stat that finds nothing does the same), so nothing ghostly is offered.
    * Copies that keep an old mtime (``cp -p``, rsync ``-t``): the window runs on the
      time a signature was *observed*, never on the file's own mtime, so clock skew
      between a NAS and this host cannot shorten it.
    """

    def __init__(self, stability_s: float):
        if stability_s < 0:
            raise ValueError(f"stability_s must be >= 0, got {stability_s}")
        self.stability_s = stability_s
        self._pending: dict[Path, _Window] = {}
        self._settled: dict[Path, Signature] = {}

    def track(self, path: Path, size: int, mtime_ns: int, now: float) -> bool:
        """Record what ``path`` looks like at ``now``; True when its window (re)starts."""
        signature = (size, mtime_ns)
        if self._settled.get(path) == signature:
            return False
        window = self._pending.get(path)
        if window is not None and window.signature == signature:
            return False
        self._settled.pop(path, None)
        self._pending[path] = _Window(signature, now)
        return True

    def stable(self, now: float) -> list[Path]:
        """Files unchanged for ``stability_s``, oldest first; each is returned once."""
        ready = sorted((window.since, path) for path, window in self._pending.items()
                       if now - window.since >= self.stability_s)
        for _, path in ready:
            self._settled[path] = self._pending.pop(path).signature
        return [path for _, path in ready]

    def confirm(self, path: Path, size: int, mtime_ns: int, now: float) -> bool:
        """Check a file ``stable`` returned against a stat taken just before handing it
        on: True when it is still settled with exactly this signature; otherwise the
        new signature is tracked (its window restarts) and the answer is False."""
        if self._settled.get(path) == (size, mtime_ns):
            return True
        self.track(path, size, mtime_ns, now)
        return False

    def retry(self, path: Path, now: float, after_s: float) -> None:
        """Return a settled file from ``stable`` again ``after_s`` from ``now``: the
        owner could not take it yet. A file changed or forgotten meanwhile is left alone."""
        signature = self._settled.pop(path, None)
        if signature is not None:
            self._pending[path] = _Window(signature, now + after_s - self.stability_s)

    def forget(self, path: Path) -> None:
        """Drop every memory of ``path`` (deleted, moved away, no longer a candidate)."""
        self._pending.pop(path, None)
        self._settled.pop(path, None)

    def pending_paths(self, now: float) -> list[Path]:
        """Files in a running window, the ones worth a stat (a retry's hold excluded)."""
        return [path for path, window in self._pending.items() if window.since <= now]

    def paths(self) -> list[Path]:
        """Every file remembered, pending or settled."""
        return [*self._pending, *self._settled]

    @property
    def pending_count(self) -> int:
        return len(self._pending)


# --------------------------------------------------------------------------- ignore rules

# Matched against the whole NAME of every path component (files and folders), case-
# insensitively. Hidden names are ignored in general; the dotted entries below are
# listed anyway so the reason for each one is written down.
DEFAULT_IGNORE: tuple[str, ...] = (
    r"\..*",                    # hidden files and folders in general
    r"\.DS_Store",              # macOS Finder metadata
    r"\._.*",                   # macOS AppleDouble resource forks on SMB/NFS shares
    r"\.Trashes",               # macOS trash on removable and network volumes
    r"\.stfolder", r"\.stversions",  # Syncthing marker and version folders
    r"Icon\r",                  # macOS custom folder icon
    r"__MACOSX",                # macOS zip leftovers
    r"Thumbs\.db", r"desktop\.ini",  # Windows Explorer
    r"\$RECYCLE\.BIN", r"System Volume Information",  # Windows volume folders
    r"@eaDir", r"#recycle", r"#snapshot",  # Synology thumbnails, recycle bin, snapshots
    r"@Recycle", r"@Recently-Snapshot",    # QNAP recycle bin, snapshots
    r"lost\+found",             # fsck leftovers at a volume root
    r"~\$.*",                   # Microsoft Office owner/lock files
    r".*\.part", r".*\.partial", r".*\.filepart",  # partial transfers (curl, Firefox, WinSCP)
    r".*\.crdownload", r".*\.download",           # browser downloads in progress
    r".*\.tmp", r".*\.temp",    # temp files about to be renamed into place
)

_DEFAULT_RE = tuple(re.compile(pattern, re.IGNORECASE) for pattern in DEFAULT_IGNORE)


@lru_cache(maxsize=64)
def _compile_extra(patterns: tuple[str, ...]) -> tuple[re.Pattern[str], ...]:
    return tuple(re.compile(pattern) for pattern in patterns)


def is_ignored(relative_path: str | Path, extra_patterns: Iterable[str] = ()) -> bool:
    """True when any component of ``relative_path`` (relative to the watched root) is
    junk: a ``DEFAULT_IGNORE`` name (whole-name, case-insensitive match) or a name in
    which one of ``extra_patterns`` is found (``re.search``; anchor with ^...$ to
    match the whole name)."""
    extra = _compile_extra(tuple(extra_patterns))
    for name in Path(relative_path).parts:
        if any(rx.fullmatch(name) for rx in _DEFAULT_RE) or any(rx.search(name) for rx in extra):
            return True
    return False


# --------------------------------------------------------------------------- filesystems

# Filesystems whose files may be written by another kernel (a NAS, a file server, a VM
# host), which inotify never hears about. ``auto`` mode polls on these.
NETWORK_FS: frozenset[str] = frozenset({
    "nfs", "nfs4", "cifs", "smb3", "smbfs", "smb2", "ncpfs", "ncp",
    "fuse.sshfs", "sshfs", "9p", "virtiofs", "vboxsf", "vmhgfs", "fuse.vmhgfs-fuse",
    "prl_fs", "drvfs",
    "glusterfs", "fuse.glusterfs", "ceph", "fuse.ceph", "cephfs", "lustre", "gpfs",
    "beegfs", "ocfs2", "gfs2",
    "afs", "openafs", "davfs", "fuse.davfs2", "fuse.rclone", "fuse.s3fs", "fuse.gcsfuse",
    "fuse.smbnetfs", "fuse.juicefs", "fuse.seaweedfs",
    "autofs",  # an automount point not mounted yet; the real mount listed later wins
})

_OCTAL_ESCAPE = re.compile(r"\\([0-7]{3})")


def _unescape_mount_field(field: str) -> str:
    return _OCTAL_ESCAPE.sub(lambda m: chr(int(m.group(1), 8)), field)


def filesystem_type(path: str | Path, mounts_text: str) -> str:
    """The type of the filesystem ``path`` lies on, from /proc/mounts text.

    The longest mount point that is ``path`` or one of its parents wins; of equal
    mount points (a mount on top of another) the later line wins, as the kernel
    lists them. Octal escapes (``\\040`` for a space) are decoded. The match is
    lexical: pass a resolved path. "unknown" when nothing matches.
    """
    target = os.path.normpath(os.path.abspath(path))
    best, best_len = "unknown", -1
    for line in mounts_text.splitlines():
        fields = line.split()
        if len(fields) < 3:
            continue
        mount_point, fs_type = _unescape_mount_field(fields[1]), _unescape_mount_field(fields[2])
        mount_point = os.path.normpath(mount_point)
        prefix = mount_point if mount_point.endswith("/") else mount_point + "/"
        if (target == mount_point or target.startswith(prefix)) and len(mount_point) >= best_len:
            best, best_len = fs_type, len(mount_point)
    return best


def _read_mounts() -> str:
    try:
        return os.fsdecode(Path("/proc/mounts").read_bytes())
    except OSError:  # not Linux, or /proc not mounted: nothing known, so events
        return ""


def choose_mode(folder_mode: str, path: str | Path, mounts_text: str | None = None) -> str:
    """"events" or "poll" for a folder: explicit modes stand; ``auto`` polls on a
    network filesystem and uses events elsewhere. Reads /proc/mounts when
    ``mounts_text`` is None."""
    if folder_mode in ("events", "poll"):
        return folder_mode
    if folder_mode != "auto":
        raise ValueError(f"watch mode must be auto, events or poll, not {folder_mode!r}")
    text = _read_mounts() if mounts_text is None else mounts_text
    return "poll" if filesystem_type(path, text) in NETWORK_FS else "events"


# --------------------------------------------------------------------------- the watcher

TICK_MAX_S = 0.25
TICK_MIN_S = 0.02
HEALTH_CHECK_S = 2.0  # how often the supervisor checks that the observer still runs
RETRY_MIN_S = 0.5  # first backoff after a refusal, when stability_s is shorter
RETRY_MAX_S = 60.0  # a file refused many times is offered again at least this often
STOP_JOIN_S = 10.0

# Events worth hearing about. The filter also narrows the inotify mask, so the reads
# the owner makes while copying a file (open, close-no-write) never reach us.
EVENT_FILTER = [FileCreatedEvent, FileModifiedEvent, FileAttribEvent, FileClosedEvent,
                FileMovedEvent, FileDeletedEvent, DirCreatedEvent, DirMovedEvent,
                DirDeletedEvent]


def _kv(value: object) -> str:
    """A log field value: quoted only when it would break key=value parsing."""
    text = str(value)
    if not text or any(ch.isspace() or ch in '"=' for ch in text):
        return json.dumps(text, ensure_ascii=False)
    return text


def _inside(path: str | Path, root: Path) -> bool:
    path = Path(path)
    return path == root or root in path.parents


class _Handler(FileSystemEventHandler):
    def __init__(self, watcher: FolderWatcher):
        self._watcher = watcher

    def on_any_event(self, event: FileSystemEvent) -> None:
        self._watcher._on_event(event)


class FolderWatcher:
    """Watches one folder and calls ``offer(path, tags)`` once per settled file.

    ``offer`` answers True when the file was taken care of (submitted, or knowingly
    skipped) and False when it must be offered again later (queue full); an
    exception counts as False. ``tags`` are the subfolder names between the root and
    the file (recursive folders only).

    Threads: the watchdog observer (its own threads), ``watch-supervise-<name>``
    (starts and restarts the observer, the startup scan, the periodic rescans) and
    ``watch-tick-<name>`` (stats files in their window, calls ``offer``; offers are
    therefore never concurrent within one watcher). ``start`` returns at once: a share
    that is slow or not mounted yet never holds up the daemon; ``wait_ready`` waits
    for the observer and the startup scan.
    """

    def __init__(self, folder: WatchFolder, offer: Offer):
        self.folder = folder
        self.name = folder.name or Path(folder.path).name
        self._offer = offer
        self._extra = tuple(folder.ignore)
        for pattern in self._extra:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ConfigError(f"watch folder '{self.name}': ignore pattern {pattern!r} is "
                                  f"not a valid regular expression ({exc}); fix or remove it"
                                  ) from None
        self._tick_s = max(TICK_MIN_S, min(TICK_MAX_S, folder.stability_s / 4))
        self._tracker = StabilityTracker(folder.stability_s)
        self._lock = threading.Lock()  # guards the tracker and the counters
        self._observer_lock = threading.Lock()
        self._scan_lock = threading.Lock()
        self._stopping = threading.Event()
        self._wake = threading.Event()  # wakes the ticker early (stability_s == 0)
        self._poke = threading.Event()  # wakes the supervisor early (root deleted)
        self._ready = threading.Event()
        self._handler = _Handler(self)
        self._observer: BaseObserver | None = None
        self._threads: list[threading.Thread] = []
        self._refusals: dict[Path, int] = {}
        self._symlinks_warned: set[Path] = set()
        self._root: Path | None = None
        self._missing_logged = False
        self.mode: str | None = None  # "events" or "poll" once the observer runs
        self.fs_type: str | None = None
        self.accepted_count = 0  # offers the owner accepted

    # ---- lifecycle

    @property
    def root(self) -> Path:
        """The watched folder, symlinks resolved (paths handed to ``offer`` lie under it)."""
        if self._root is None:
            self._root = Path(os.path.realpath(self.folder.path))
        return self._root

    @property
    def observer(self) -> BaseObserver | None:
        """The running watchdog observer, None while there is none."""
        return self._observer

    @property
    def pending_count(self) -> int:
        with self._lock:
            return self._tracker.pending_count

    def start(self) -> None:
        if self._threads:
            raise RuntimeError("a FolderWatcher starts once; create a new one to watch again")
        self._threads = [
            threading.Thread(target=self._supervise, name=f"watch-supervise-{self.name}",
                             daemon=True),
            threading.Thread(target=self._tick_loop, name=f"watch-tick-{self.name}", daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    def wait_ready(self, timeout_s: float | None = None) -> bool:
        """True once the observer runs and the startup scan has tracked what was there."""
        return self._ready.wait(timeout_s)

    def stop(self) -> None:
        self._stopping.set()
        self._wake.set()
        self._poke.set()
        with self._observer_lock:
            observer, self._observer = self._observer, None
        if observer is not None:
            _shutdown(observer)
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join(STOP_JOIN_S)
                if thread.is_alive():
                    log.warning("watch thread still busy at stop folder=%s thread=%s",
                                _kv(self.name), thread.name)
        log.info("watch stopped folder=%s accepted=%d pending=%d", _kv(self.name),
                 self.accepted_count, self.pending_count)

    def rescan(self) -> None:
        """Scan the whole folder now, as the periodic rescan does (restarting a stopped
        observer first): catches files whose events were missed."""
        if not self._threads or self._stopping.is_set():
            raise RuntimeError("rescan() needs a started, not stopped, FolderWatcher")
        self._ensure_observer()
        self._scan("requested")

    # ---- supervisor: observer health, startup scan, periodic rescans

    def _supervise(self) -> None:
        next_scan, first = 0.0, True
        while not self._stopping.is_set():
            try:
                restarted = self._ensure_observer()
                if self._observer is not None and (restarted or time.monotonic() >= next_scan):
                    reason = "startup" if first else "observer_restarted" if restarted \
                        else "periodic"
                    if self._scan(reason):
                        first = False
                        next_scan = time.monotonic() + self.folder.rescan_interval_s
                        self._ready.set()
            except Exception:
                log.exception("watch supervisor failed folder=%s", _kv(self.name))
            wait_s = min(HEALTH_CHECK_S, max(0.0, next_scan - time.monotonic()))
            self._poke.wait(wait_s)
            self._poke.clear()

    def _ensure_observer(self) -> bool:
        """Start the observer when none runs; True when one was (re)started."""
        with self._observer_lock:
            if self._stopping.is_set():
                return False
            observer = self._observer
            if observer is not None:
                if observer.is_alive() and observer.emitters and all(
                        emitter.is_alive() for emitter in observer.emitters):
                    return False
                log.warning("watch observer stopped folder=%s path=%s reason=%s; restarting",
                            _kv(self.name), _kv(self.root),
                            "root_gone" if not self.root.is_dir() else "emitter_died")
                _shutdown(observer)
                self._observer = None
            if not self.root.is_dir():
                if not self._missing_logged:
                    log.error("watch folder missing folder=%s path=%s reason=not_a_directory "
                              "retry_s=%g fix=%s", _kv(self.name), _kv(self.root),
                              HEALTH_CHECK_S, _kv("create the folder or mount the share"))
                    self._missing_logged = True
                return False
            self._missing_logged = False
            mounts = _read_mounts()
            fs_type = filesystem_type(self.root, mounts)
            mode = choose_mode(self.folder.mode, self.root, mounts)
            try:
                observer = self._start_observer(mode)
            except OSError as exc:
                if mode != "events":
                    log.error("watch observer failed folder=%s path=%s mode=poll reason=%s",
                              _kv(self.name), _kv(self.root), _kv(exc))
                    return False
                log.warning("watch events unavailable folder=%s path=%s reason=%s mode=poll "
                            "fix=%s", _kv(self.name), _kv(self.root), _kv(exc),
                            _kv("raise sysctl fs.inotify.max_user_watches and "
                                "fs.inotify.max_user_instances"))
                mode = "poll"
                observer = self._start_observer(mode)
            self._observer, self.mode, self.fs_type = observer, mode, fs_type
        log.info("watch started folder=%s path=%s mode=%s fs=%s recursive=%s stability_s=%g "
                 "poll_interval_s=%g rescan_interval_s=%g", _kv(self.name), _kv(self.root), mode,
                 _kv(fs_type), self.folder.recursive, self.folder.stability_s,
                 self.folder.poll_interval_s, self.folder.rescan_interval_s)
        if mode == "events" and fs_type in NETWORK_FS:
            log.warning("watch events on a network filesystem folder=%s fs=%s "
                        "reason=remote_writes_raise_no_events rescan_interval_s=%g fix=%s",
                        _kv(self.name), _kv(fs_type), self.folder.rescan_interval_s,
                        _kv("set mode = 'auto' or 'poll' for this folder"))
        return True

    def _start_observer(self, mode: str) -> BaseObserver:
        if mode == "events":
            observer = Observer()
        else:
            # Not PollingObserver: its snapshots os.stat() every entry, so in recursive
            # mode they descend into symlinked folders, out of the tree and round loops.
            observer = PollingObserverVFS(os.lstat, os.scandir,
                                          polling_interval=self.folder.poll_interval_s)
        try:
            observer.schedule(self._handler, str(self.root), recursive=self.folder.recursive,
                              event_filter=EVENT_FILTER)
            observer.start()  # runs the emitters' setup (watches, first snapshot) here
        except BaseException:
            _shutdown(observer)
            raise
        return observer

    # ---- events

    def _on_event(self, event: FileSystemEvent) -> None:
        # An exception escaping a handler would end watchdog's dispatch thread.
        try:
            src = Path(os.fsdecode(event.src_path)) if event.src_path else None
            dest = Path(os.fsdecode(event.dest_path)) if event.dest_path else None
            kind = event.event_type
            if event.is_directory:
                if src is not None and kind in (EVENT_TYPE_DELETED, EVENT_TYPE_MOVED):
                    self._forget_under(src, "folder_" + kind)
                    if src == self.root:
                        self._poke.set()  # the supervisor restarts the observer
                new_dir = dest if kind == EVENT_TYPE_MOVED else src
                if new_dir is not None and kind in (EVENT_TYPE_CREATED, EVENT_TYPE_MOVED) \
                        and self.folder.recursive and self._relative(new_dir) is not None:
                    for path in self._walk(new_dir):  # files copied in before the watch
                        self._consider(path)
                return
            if kind == EVENT_TYPE_DELETED:
                self._forget(src, "deleted")
            elif kind == EVENT_TYPE_MOVED:
                self._forget(src, "moved")
                if dest is not None:
                    self._consider(dest)
            elif src is not None:
                self._consider(src)
        except Exception:
            log.exception("watch event failed folder=%s event=%s", _kv(self.name), event)

    def _relative(self, path: Path) -> Path | None:
        """``path`` relative to the root when it is a candidate: inside, not ignored, and
        at the top unless recursive."""
        try:
            rel = path.relative_to(self.root)
        except ValueError:
            return None
        if not rel.parts or (not self.folder.recursive and len(rel.parts) > 1):
            return None
        return None if is_ignored(rel, self._extra) else rel

    def _signature(self, path: Path) -> Signature | None:
        """(size, mtime_ns) of a regular file, following a symlink only when it stays
        in the tree; None when it is gone or not a candidate. Raises OSError when it
        cannot be read just now (a share briefly away): that is no reason to forget it."""
        try:
            st = os.lstat(path)
            if stat.S_ISLNK(st.st_mode):
                target = Path(os.path.realpath(path))
                if not _inside(target, self.root) or self._relative(target) is None:
                    if path not in self._symlinks_warned:
                        self._symlinks_warned.add(path)
                        reason = ("symlink_outside" if not _inside(target, self.root)
                                  else "symlink_target_not_watched")
                        log.warning("watch ignored folder=%s file=%s reason=%s target=%s",
                                    _kv(self.name), _kv(self._display(path)), reason,
                                    _kv(target))
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

    def _display(self, path: Path) -> str:
        """A path as logs show it: relative to the root when it lies inside."""
        try:
            return str(path.relative_to(self.root))
        except ValueError:
            return str(path)

    def _consider(self, path: Path) -> None:
        """Track a path an event or a scan reported, when it is a candidate."""
        rel = self._relative(path)
        if rel is None:
            return
        try:
            signature = self._signature(path)
        except OSError:  # unreadable just now: the next event, tick or rescan will tell
            return
        with self._lock:
            if signature is None:
                self._tracker.forget(path)
                self._refusals.pop(path, None)
                return
            started = self._tracker.track(path, *signature, time.monotonic())
        if started:
            log.debug("watch tracking folder=%s file=%s bytes=%d", _kv(self.name), _kv(rel),
                      signature[0])
            if self.folder.stability_s == 0:
                self._wake.set()

    def _forget(self, path: Path | None, reason: str) -> None:
        if path is None:
            return
        with self._lock:
            self._tracker.forget(path)
            self._refusals.pop(path, None)
        log.debug("watch forgot folder=%s file=%s reason=%s", _kv(self.name),
                  _kv(self._display(path)), reason)

    def _forget_under(self, folder: Path, reason: str) -> None:
        with self._lock:
            gone = [p for p in self._tracker.paths() if _inside(p, folder)]
        for path in gone:
            self._forget(path, reason)

    # ---- scans

    def _walk(self, top: Path) -> Iterator[Path]:
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
                log.warning("watch cannot read folder=%s dir=%s reason=%s", _kv(self.name),
                            _kv(folder), _kv(exc))
                continue
            for entry in found:
                path = Path(entry.path)
                try:
                    if entry.is_dir(follow_symlinks=False):
                        if self.folder.recursive and self._relative(path) is not None:
                            stack.append(path)
                    elif entry.is_file(follow_symlinks=False) or entry.is_symlink():
                        yield path
                except OSError:
                    continue

    def _scan(self, reason: str) -> bool:
        """Track every candidate file; forget remembered files that are gone. False
        when the folder could not be read (nothing is forgotten then)."""
        with self._scan_lock:
            started = time.monotonic()
            seen: set[Path] = set()
            try:
                for path in self._walk(self.root):
                    if self._stopping.is_set():
                        return False
                    seen.add(path)
                    self._consider(path)
            except OSError as exc:
                log.warning("watch rescan failed folder=%s reason=%s", _kv(self.name), _kv(exc))
                return False
            with self._lock:
                unseen = [p for p in self._tracker.paths() if p not in seen]
            for path in unseen:
                if not os.path.lexists(path):
                    self._forget(path, "gone_at_rescan")
            log.info("watch rescan folder=%s reason=%s files=%d pending=%d ms=%d",
                     _kv(self.name), reason, len(seen), self.pending_count,
                     (time.monotonic() - started) * 1000)
            return True

    # ---- ticker: stat files in their window, offer the settled ones

    def _tick_loop(self) -> None:
        while True:
            self._wake.wait(self._tick_s)
            self._wake.clear()
            if self._stopping.is_set():
                return
            try:
                self._tick()
            except Exception:
                log.exception("watch tick failed folder=%s", _kv(self.name))

    def _tick(self) -> None:
        with self._lock:
            watching = self._tracker.pending_paths(time.monotonic())
        fresh: dict[Path, Signature | None] = {}
        for path in watching:  # no lock held: a stat on a share may be slow
            try:
                fresh[path] = self._signature(path)
            except OSError as exc:  # keep it; the next tick looks again
                log.debug("watch cannot stat folder=%s file=%s reason=%s", _kv(self.name),
                          _kv(self._display(path)), _kv(exc))
        vanished = []
        with self._lock:
            now = time.monotonic()
            for path, signature in fresh.items():
                if signature is None:
                    self._tracker.forget(path)
                    self._refusals.pop(path, None)
                    vanished.append(path)
                else:
                    self._tracker.track(path, *signature, now)
            ready = self._tracker.stable(now)
        for path in vanished:
            log.info("watch forgot folder=%s file=%s reason=vanished_before_stable",
                     _kv(self.name), _kv(self._display(path)))
        for i, path in enumerate(ready):
            if self._stopping.is_set():
                with self._lock:
                    for rest in ready[i:]:
                        self._tracker.forget(rest)
                return
            self._hand_over(path)

    def _hand_over(self, path: Path) -> None:
        try:
            signature = self._signature(path)
        except OSError as exc:
            with self._lock:
                self._tracker.retry(path, time.monotonic(), RETRY_MIN_S)
            log.warning("watch cannot stat folder=%s file=%s reason=%s retry_s=%g",
                        _kv(self.name), _kv(self._display(path)), _kv(exc), RETRY_MIN_S)
            return
        with self._lock:
            if signature is None:
                self._tracker.forget(path)
                self._refusals.pop(path, None)
                return
            if not self._tracker.confirm(path, *signature, time.monotonic()):
                return  # it changed since the last stat; its window starts again
        rel = path.relative_to(self.root)
        tags = list(rel.parts[:-1])
        try:
            accepted = bool(self._offer(path, tags))
            error = None
        except Exception as exc:  # the owner's bug must not stop the folder
            accepted, error = False, exc
        with self._lock:
            if accepted:
                self._refusals.pop(path, None)
                self.accepted_count += 1
                attempt = 0
            else:
                attempt = self._refusals[path] = self._refusals.get(path, 0) + 1
                delay_s = min(RETRY_MAX_S,
                              max(self.folder.stability_s, RETRY_MIN_S) * 2 ** (attempt - 1))
                self._tracker.retry(path, time.monotonic(), delay_s)
        if accepted:
            log.info("watch offered folder=%s file=%s bytes=%d tags=%s result=accepted",
                     _kv(self.name), _kv(rel), signature[0], _kv(",".join(tags)))
        elif error is not None:
            log.error("watch offer failed folder=%s file=%s attempt=%d retry_s=%g reason=%s",
                      _kv(self.name), _kv(rel), attempt, delay_s, _kv(repr(error)),
                      exc_info=error if attempt == 1 else None)
        else:
            log.log(logging.INFO if attempt == 1 else logging.DEBUG,
                    "watch offered folder=%s file=%s result=deferred reason=owner_busy "
                    "attempt=%d retry_s=%g", _kv(self.name), _kv(rel), attempt, delay_s)


def _shutdown(observer: BaseObserver) -> None:
    try:
        observer.stop()
        if observer.is_alive():
            observer.join(STOP_JOIN_S)
    except RuntimeError:  # never started
        pass
    except Exception:
        log.exception("watch observer shutdown failed")


# --------------------------------------------------------------------------- measurement


def _percentile(values: list[float], fraction: float) -> float:
    """Nearest-rank percentile of a non-empty list."""
    ordered = sorted(values)
    rank = min(len(ordered), max(1, math.ceil(fraction * len(ordered))))
    return ordered[rank - 1]


def measure_detection_latency(mode: str, files: int = 20, stability_s: float = 0.0,
                              poll_interval_s: float = 1.0, *,
                              parent: str | Path | None = None) -> dict:
    """Time from a file's close to its ``offer``, through a real FolderWatcher.

    Creates a temp folder (under ``parent``, e.g. a mounted share, or the system temp
    dir), writes ``files`` small files one by one at random intervals and returns
    p50/p95/max in milliseconds. An ``early_offers`` count above zero means a file was
    offered before it was complete (only possible with ``stability_s`` 0).
    """
    payload = bytes(range(256)) * 16  # 4 KiB
    closed: dict[Path, float] = {}
    offered: dict[Path, float] = {}
    early = 0
    lock = threading.Lock()
    all_offered = threading.Event()

    def offer(path: Path, tags: list[str]) -> bool:
        nonlocal early
        at = time.monotonic()
        try:
            complete = path.stat().st_size == len(payload)
        except OSError:
            complete = False
        with lock:
            if not complete:
                early += 1
            elif path not in offered:
                offered[path] = at
                if len(offered) == files:
                    all_offered.set()
        return True

    rng = random.Random()
    with tempfile.TemporaryDirectory(prefix="appliance-watch-latency-", dir=parent) as tmp:
        folder = WatchFolder(path=Path(tmp), name="latency", mode=mode, stability_s=stability_s,
                             poll_interval_s=poll_interval_s, rescan_interval_s=3600.0,
                             disposition="keep")
        watcher = FolderWatcher(folder, offer)
        watcher.start()
        try:
            if not watcher.wait_ready(30):
                raise RuntimeError(f"the watcher on {tmp} did not start within 30 s")
            for i in range(files):
                time.sleep(rng.uniform(0.05, 0.25))
                path = watcher.root / f"doc-{i:04d}.pdf"
                with open(path, "wb") as fh:
                    fh.write(payload)
                closed[path] = time.monotonic()
            all_offered.wait(stability_s + 2 * poll_interval_s + 10)
        finally:
            watcher.stop()
        fs_type, used_mode = watcher.fs_type, watcher.mode
    with lock:
        latencies = [max(0.0, offered[p] - closed[p]) * 1000 for p in offered if p in closed]
        early_offers = early
    result = {"mode": used_mode, "fs": fs_type, "files": files, "offered": len(latencies),
              "missed": files - len(latencies), "early_offers": early_offers,
              "stability_s": stability_s, "poll_interval_s": poll_interval_s,
              "p50_ms": None, "p95_ms": None, "max_ms": None}
    if latencies:
        result.update(p50_ms=round(_percentile(latencies, 0.50), 1),
                      p95_ms=round(_percentile(latencies, 0.95), 1),
                      max_ms=round(max(latencies), 1))
    return result
