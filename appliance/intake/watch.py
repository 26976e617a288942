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
ones that settled. Which files of the folder are candidates, and how they are found,
is ``WatchedTree``'s (``watched_tree.py``).
"""

from __future__ import annotations

import logging
import os
import threading
import time
import warnings
from collections.abc import Callable
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
from appliance.intake.folder_rules import NETWORK_FS, choose_mode, filesystem_type, read_mounts
from appliance.intake.stability import Signature, StabilityTracker
from appliance.intake.watched_tree import WatchedTree, inside, kv

log = logging.getLogger(__name__)

# watchdog 7.1's recursive inotify setup can register the same new subfolder twice
# (mkdir -p races its own walk); it then overwrites the identical callback and warns
# with the whole watch state in the message, once per folder. Harmless, and noise in
# the journal, so that one warning is silenced.
warnings.filterwarnings("ignore", message=r"Callback with id '\d+' already exists for watch",
                        category=RuntimeWarning, module=r"watchdog\.observers\.")

Offer = Callable[[Path, list[str]], bool]

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
        self.tree = WatchedTree(folder, self.name)
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
        self._missing_logged = False
        self.mode: str | None = None  # "events" or "poll" once the observer runs
        self.fs_type: str | None = None
        self.accepted_count = 0  # offers the owner accepted

    # ---- lifecycle

    @property
    def root(self) -> Path:
        """The watched folder, symlinks resolved (paths handed to ``offer`` lie under it)."""
        return self.tree.root

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
                                kv(self.name), thread.name)
        log.info("watch stopped folder=%s accepted=%d pending=%d", kv(self.name),
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
                log.exception("watch supervisor failed folder=%s", kv(self.name))
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
                            kv(self.name), kv(self.root),
                            "root_gone" if not self.root.is_dir() else "emitter_died")
                _shutdown(observer)
                self._observer = None
            if not self.root.is_dir():
                if not self._missing_logged:
                    log.error("watch folder missing folder=%s path=%s reason=not_a_directory "
                              "retry_s=%g fix=%s", kv(self.name), kv(self.root),
                              HEALTH_CHECK_S, kv("create the folder or mount the share"))
                    self._missing_logged = True
                return False
            self._missing_logged = False
            mounts = read_mounts()
            fs_type = filesystem_type(self.root, mounts)
            mode = choose_mode(self.folder.mode, self.root, mounts)
            try:
                observer = self._start_observer(mode)
            except OSError as exc:
                if mode != "events":
                    log.error("watch observer failed folder=%s path=%s mode=poll reason=%s",
                              kv(self.name), kv(self.root), kv(exc))
                    return False
                log.warning("watch events unavailable folder=%s path=%s reason=%s mode=poll "
                            "fix=%s", kv(self.name), kv(self.root), kv(exc),
                            kv("raise sysctl fs.inotify.max_user_watches and "
                                "fs.inotify.max_user_instances"))
                mode = "poll"
                observer = self._start_observer(mode)
            self._observer, self.mode, self.fs_type = observer, mode, fs_type
        log.info("watch started folder=%s path=%s mode=%s fs=%s recursive=%s stability_s=%g "
                 "poll_interval_s=%g rescan_interval_s=%g", kv(self.name), kv(self.root), mode,
                 kv(fs_type), self.folder.recursive, self.folder.stability_s,
                 self.folder.poll_interval_s, self.folder.rescan_interval_s)
        if mode == "events" and fs_type in NETWORK_FS:
            log.warning("watch events on a network filesystem folder=%s fs=%s "
                        "reason=remote_writes_raise_no_events rescan_interval_s=%g fix=%s",
                        kv(self.name), kv(fs_type), self.folder.rescan_interval_s,
                        kv("set mode = 'auto' or 'poll' for this folder"))
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
                        and self.folder.recursive and self.tree.relative(new_dir) is not None:
                    for path in self.tree.walk(new_dir):  # files copied in before the watch
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
            log.exception("watch event failed folder=%s event=%s", kv(self.name), event)

    def _consider(self, path: Path) -> None:
        """Track a path an event or a scan reported, when it is a candidate."""
        rel = self.tree.relative(path)
        if rel is None:
            return
        try:
            signature = self.tree.signature(path)
        except OSError:  # unreadable just now: the next event, tick or rescan will tell
            return
        with self._lock:
            if signature is None:
                self._drop(path)
                return
            started = self._tracker.track(path, *signature, time.monotonic())
        if started:
            log.debug("watch tracking folder=%s file=%s bytes=%d", kv(self.name), kv(rel),
                      signature[0])
            if self.folder.stability_s == 0:
                self._wake.set()

    def recheck(self, path: Path, after_s: float | None = None) -> None:
        """Offer ``path`` again once it has stayed unchanged for ``after_s`` (a stability
        window by default): its owner wants proof that the writer has finished. Nothing
        when it is gone, or already in a window."""
        try:
            signature = self.tree.signature(path)
        except OSError:  # unreadable just now: a rescan will bring it back
            return
        if signature is not None:
            with self._lock:
                self._tracker.rearm(path, *signature, time.monotonic(),
                                    self.folder.stability_s if after_s is None else after_s)

    def _drop(self, path: Path) -> None:
        """Forget everything about ``path`` (the caller holds the lock)."""
        self._tracker.forget(path)
        self._refusals.pop(path, None)

    def _forget(self, path: Path | None, reason: str) -> None:
        if path is None:
            return
        with self._lock:
            self._drop(path)
        log.debug("watch forgot folder=%s file=%s reason=%s", kv(self.name),
                  kv(self.tree.display(path)), reason)

    def _forget_under(self, folder: Path, reason: str) -> None:
        with self._lock:
            gone = [p for p in self._tracker.paths() if inside(p, folder)]
        for path in gone:
            self._forget(path, reason)

    # ---- scans

    def _scan(self, reason: str) -> bool:
        """Track every candidate file; forget remembered files that are gone. False
        when the folder could not be read (nothing is forgotten then)."""
        with self._scan_lock:
            started = time.monotonic()
            seen: set[Path] = set()
            try:
                for path in self.tree.walk(self.root):
                    if self._stopping.is_set():
                        return False
                    seen.add(path)
                    self._consider(path)
            except OSError as exc:
                log.warning("watch rescan failed folder=%s reason=%s", kv(self.name), kv(exc))
                return False
            with self._lock:
                unseen = [p for p in self._tracker.paths() if p not in seen]
            for path in unseen:
                if not os.path.lexists(path):
                    self._forget(path, "gone_at_rescan")
            log.info("watch rescan folder=%s reason=%s files=%d pending=%d ms=%d",
                     kv(self.name), reason, len(seen), self.pending_count,
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
                log.exception("watch tick failed folder=%s", kv(self.name))

    def _tick(self) -> None:
        with self._lock:
            watching = self._tracker.pending_paths(time.monotonic())
        fresh: dict[Path, Signature | None] = {}
        for path in watching:  # no lock held: a stat on a share may be slow
            try:
                fresh[path] = self.tree.signature(path)
            except OSError as exc:  # keep it; the next tick looks again
                log.debug("watch cannot stat folder=%s file=%s reason=%s", kv(self.name),
                          kv(self.tree.display(path)), kv(exc))
        vanished = []
        with self._lock:
            now = time.monotonic()
            for path, signature in fresh.items():
                if signature is None:
                    self._drop(path)
                    vanished.append(path)
                else:
                    self._tracker.track(path, *signature, now)
            ready = self._tracker.stable(now)
        for path in vanished:
            log.info("watch forgot folder=%s file=%s reason=vanished_before_stable",
                     kv(self.name), kv(self.tree.display(path)))
        for i, path in enumerate(ready):
            if self._stopping.is_set():
                with self._lock:
                    for rest in ready[i:]:
                        self._tracker.forget(rest)
                return
            self._hand_over(path)

    def _hand_over(self, path: Path) -> None:
        try:
            signature = self.tree.signature(path)
        except OSError as exc:
            with self._lock:
                self._tracker.retry(path, time.monotonic(), RETRY_MIN_S)
            log.warning("watch cannot stat folder=%s file=%s reason=%s retry_s=%g",
                        kv(self.name), kv(self.tree.display(path)), kv(exc), RETRY_MIN_S)
            return
        with self._lock:
            if signature is None:
                self._drop(path)
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
            # "handed_over": intake owns the file now; its own line says whether it was read
            log.info("watch offered folder=%s file=%s bytes=%d tags=%s result=handed_over",
                     kv(self.name), kv(rel), signature[0], kv(",".join(tags)))
        elif error is not None:
            log.error("watch offer failed folder=%s file=%s attempt=%d retry_s=%g reason=%s",
                      kv(self.name), kv(rel), attempt, delay_s, kv(repr(error)),
                      exc_info=error if attempt == 1 else None)
        else:
            log.log(logging.INFO if attempt == 1 else logging.DEBUG,
                    "watch offered folder=%s file=%s result=deferred reason=owner_busy "
                    "attempt=%d retry_s=%g", kv(self.name), kv(rel), attempt, delay_s)


def _shutdown(observer: BaseObserver) -> None:
    try:
        observer.stop()
        if observer.is_alive():
            observer.join(STOP_JOIN_S)
    except RuntimeError:  # never started
        pass
    except Exception:
        log.exception("watch observer shutdown failed")
