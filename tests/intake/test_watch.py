"""Watched folders: the pure stability tracker stepped by hand, then real watchdog
observers on temp folders with real files. The only stand-in is the ``offer``
callback, a plain function that records its calls."""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from watchdog.observers.polling import PollingObserverVFS

from appliance.config import WatchFolder
from appliance.errors import ConfigError
from appliance.measure.bench import measure_detection_latency
from appliance.intake.folder_rules import (
    DEFAULT_IGNORE,
    NETWORK_FS,
    choose_mode,
    filesystem_type,
    is_ignored,
)
from appliance.intake.stability import StabilityTracker
from appliance.intake.watch import FolderWatcher

# watch.py silences this harmless watchdog 7.1 warning at import, but pytest drops
# filters set while it collects; the same filter again for the tests.
pytestmark = pytest.mark.filterwarnings(
    r"ignore:Callback with id '\d+' already exists for watch:RuntimeWarning")

P = Path("/in/scan.pdf")
Q = Path("/in/other.pdf")


# --------------------------------------------------------------------------- tracker


def test_tracker_chunked_growth_waits_for_the_last_chunk():
    tracker = StabilityTracker(stability_s=1.0)
    assert tracker.track(P, 100, 1, now=0.0)
    assert tracker.stable(0.75) == []
    assert tracker.track(P, 200, 2, now=1.0)  # another chunk: the window restarts
    assert tracker.stable(1.5) == []
    assert not tracker.track(P, 200, 2, now=1.75)  # same signature: the window runs on
    assert tracker.stable(1.99) == []
    assert tracker.stable(2.0) == [P]
    assert tracker.stable(5.0) == []  # returned once
    assert tracker.pending_count == 0


def test_tracker_scanner_reopening_a_file_only_counts_real_changes():
    tracker = StabilityTracker(stability_s=2.0)
    tracker.track(P, 0, 10, now=0.0)  # opened, empty
    tracker.track(P, 5000, 11, now=0.5)  # page 1
    tracker.track(P, 5000, 11, now=1.0)  # closed, nothing new
    tracker.track(P, 9000, 12, now=2.0)  # reopened for page 2
    assert tracker.stable(3.9) == []
    assert tracker.stable(4.0) == [P]


def test_tracker_rename_into_place_tracks_the_new_name_only():
    tracker = StabilityTracker(stability_s=1.0)
    tmp = Path("/in/scan.pdf.part")
    tracker.track(tmp, 100, 1, now=0.0)
    tracker.forget(tmp)  # moved away
    tracker.track(P, 100, 1, now=0.25)  # same inode and signature, new name
    assert tracker.stable(1.125) == []
    assert tracker.stable(1.25) == [P]


def test_tracker_file_deleted_before_settling_is_never_returned():
    tracker = StabilityTracker(stability_s=1.0)
    tracker.track(P, 100, 1, now=0.0)
    tracker.track(Q, 100, 1, now=0.0)
    tracker.forget(P)
    assert tracker.pending_count == 1
    assert tracker.stable(10.0) == [Q]


def test_tracker_retouch_after_stable_is_returned_again_but_a_rescan_is_not():
    tracker = StabilityTracker(stability_s=1.0)
    tracker.track(P, 100, 1, now=0.0)
    assert tracker.stable(1.0) == [P]
    assert not tracker.track(P, 100, 1, now=2.0)  # a rescan sees it unchanged
    assert tracker.stable(10.0) == []
    assert tracker.track(P, 100, 2, now=11.0)  # touched: new mtime
    assert tracker.stable(11.5) == []
    assert tracker.stable(12.0) == [P]
    tracker.forget(P)
    assert tracker.track(P, 100, 2, now=13.0)  # deleted and dropped in again
    assert tracker.paths() == [P]


def test_tracker_retry_holds_a_refused_file_back_then_returns_it():
    tracker = StabilityTracker(stability_s=1.0)
    tracker.track(P, 100, 1, now=0.0)
    assert tracker.stable(1.0) == [P]
    tracker.retry(P, now=1.0, after_s=4.0)
    assert tracker.pending_count == 1
    assert tracker.pending_paths(2.0) == []  # on hold: not even worth a stat
    assert tracker.pending_paths(4.0) == [P]  # the last stability window of the hold
    assert tracker.stable(4.9) == []
    assert tracker.stable(5.0) == [P]
    tracker.retry(Q, now=5.0, after_s=1.0)  # never returned: nothing to retry
    assert tracker.paths() == [P]


def test_tracker_rearm_returns_a_settled_file_after_a_hold_unless_it_changes():
    tracker = StabilityTracker(stability_s=1.0)
    tracker.track(P, 100, 1, now=0.0)
    assert tracker.stable(1.0) == [P]
    tracker.rearm(P, 100, 1, now=2.0, after_s=5.0)  # the owner wants 5 s of quiet
    assert tracker.stable(6.9) == []
    assert tracker.stable(7.0) == [P]
    tracker.rearm(P, 100, 1, now=8.0, after_s=5.0)
    assert tracker.track(P, 180, 2, now=9.0)  # the writer came back: an ordinary window
    assert tracker.stable(10.0) == [P]
    tracker.track(Q, 1, 1, now=10.0)
    tracker.rearm(Q, 1, 1, now=10.5, after_s=5.0)  # already in a window: left in it
    assert tracker.stable(11.0) == [Q]


def test_tracker_confirm_catches_a_change_between_stable_and_hand_over():
    tracker = StabilityTracker(stability_s=1.0)
    tracker.track(P, 100, 1, now=0.0)
    tracker.track(Q, 100, 1, now=0.0)
    assert set(tracker.stable(1.0)) == {P, Q}
    assert tracker.confirm(P, 100, 1, now=1.25)
    assert not tracker.confirm(Q, 150, 2, now=1.25)  # grew again: back to waiting
    assert tracker.stable(2.0) == []
    assert tracker.stable(2.25) == [Q]


def test_tracker_zero_stability_and_oldest_first():
    tracker = StabilityTracker(stability_s=0.0)
    tracker.track(Q, 1, 1, now=0.5)
    tracker.track(P, 1, 1, now=0.2)
    assert tracker.stable(0.5) == [P, Q]
    with pytest.raises(ValueError):
        StabilityTracker(-1)


# --------------------------------------------------------------------------- ignore rules

JUNK = [".DS_Store", "._scan.pdf", "Thumbs.db", "THUMBS.DB", "desktop.ini", "@eaDir/scan.pdf",
        ".stfolder/a.pdf", ".stversions/a.pdf", ".Trashes/501/a.pdf", "__MACOSX/a.pdf",
        "scan.pdf.part", "scan.tmp", "scan.pdf.crdownload", "scan.pdf.filepart",
        "~$report.docx", ".hidden.pdf", "sub/.git/x.pdf", "#recycle/old.pdf"]


@pytest.mark.parametrize("name", JUNK)
def test_is_ignored_junk_names_in_any_component(name):
    assert is_ignored(name)


def test_is_ignored_keeps_documents_and_applies_extra_patterns():
    for name in ["scan.pdf", "2024/invoices/inv-001.PDF", "part.pdf", "tmp/scan.pdf",
                 "report~draft.pdf"]:
        assert not is_ignored(name), name
    assert is_ignored("drafts/a.pdf", [r"^drafts$"])
    assert is_ignored("scan.bak", [r"\.bak$"])
    assert not is_ignored("scan.bak.pdf", [r"\.bak$"])
    assert len(DEFAULT_IGNORE) > 10


def test_a_bad_extra_pattern_is_a_config_error(tmp_path):
    folder = WatchFolder(path=tmp_path, name="bad", ignore=["(unclosed"])
    with pytest.raises(ConfigError, match="ignore pattern"):
        FolderWatcher(folder, lambda path, tags: True)


# --------------------------------------------------------------------------- filesystems

MOUNTS = """\
sysfs /sys sysfs rw,nosuid,nodev,noexec,relatime 0 0
/dev/nvme0n1p2 / ext4 rw,relatime 0 0
nas:/export/scans /mnt/scans nfs4 rw,relatime,vers=4.2,hard,proto=tcp 0 0
/dev/sdb1 /mnt/scans/local-cache ext4 rw,relatime 0 0
//fileserver/Scan\\040Inbox /srv/Scan\\040Inbox cifs rw,vers=3.1.1,cache=strict 0 0
systemd-1 /mnt/auto autofs rw,relatime,fd=55 0 0
server:/auto /mnt/auto nfs rw,relatime,vers=3 0 0
tmpfs /mnt/scansX tmpfs rw 0 0
"""


def test_filesystem_type_longest_prefix_and_escapes():
    assert filesystem_type("/mnt/scans", MOUNTS) == "nfs4"
    assert filesystem_type("/mnt/scans/inbox/2024", MOUNTS) == "nfs4"
    assert filesystem_type("/mnt/scans/local-cache/in", MOUNTS) == "ext4"  # longer prefix
    assert filesystem_type("/mnt/scansX/in", MOUNTS) == "tmpfs"  # not a prefix of /mnt/scans
    assert filesystem_type("/srv/Scan Inbox/dept", MOUNTS) == "cifs"  # \040 is a space
    assert filesystem_type("/srv/Scan", MOUNTS) == "ext4"
    assert filesystem_type("/mnt/auto/x", MOUNTS) == "nfs"  # the later mount on top wins
    assert filesystem_type("/home/ops/in", MOUNTS) == "ext4"
    assert filesystem_type("/anything", "") == "unknown"


def test_choose_mode_polls_network_shares_only_in_auto():
    assert choose_mode("auto", "/mnt/scans/in", MOUNTS) == "poll"
    assert choose_mode("auto", "/srv/Scan Inbox", MOUNTS) == "poll"
    assert choose_mode("auto", "/home/ops/in", MOUNTS) == "events"
    assert choose_mode("auto", "/mnt/scans/local-cache", MOUNTS) == "events"
    assert choose_mode("events", "/mnt/scans/in", MOUNTS) == "events"
    assert choose_mode("poll", "/home/ops/in", MOUNTS) == "poll"
    assert choose_mode("auto", "/", "") == "events"
    assert {"nfs", "nfs4", "cifs", "smb3", "smbfs", "fuse.sshfs", "9p", "fuse.glusterfs",
            "ceph", "afs", "davfs", "fuse.davfs2"} <= NETWORK_FS
    with pytest.raises(ValueError):
        choose_mode("inotify", "/", MOUNTS)
    assert choose_mode("auto", "/") in ("events", "poll")  # reads the real /proc/mounts


# --------------------------------------------------------------------------- real watchers


def wait_for(predicate, timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def recorder(answers=()):
    """An offer callback: records (path, tags, size at offer time, time); answers from
    ``answers`` first (True, False, or an exception to raise), then True."""
    calls: list[tuple[Path, list[str], int, float]] = []
    script = list(answers)
    lock = threading.Lock()

    def offer(path: Path, tags: list[str]) -> bool:
        with lock:
            calls.append((path, tags, path.stat().st_size, time.monotonic()))
            answer = script.pop(0) if script else True
        if isinstance(answer, Exception):
            raise answer
        return answer

    return offer, calls


def names(calls) -> list[str]:
    return [call[0].name for call in calls]


@pytest.fixture
def inbox(tmp_path) -> Path:
    folder = tmp_path / "inbox"
    folder.mkdir()
    return folder


@pytest.fixture
def watch():
    started: list[FolderWatcher] = []

    def make(path: Path, offer, ready: bool = True, **options) -> FolderWatcher:
        settings = dict(name="inbox", mode="events", stability_s=0.5, poll_interval_s=0.25,
                        rescan_interval_s=300.0, disposition="keep")
        settings.update(options)
        watcher = FolderWatcher(WatchFolder(path=path, **settings), offer)
        watcher.start()
        started.append(watcher)
        if ready:
            assert watcher.wait_ready(15), "the watcher did not get ready"
        return watcher

    yield make
    for watcher in started:
        watcher.stop()


@pytest.mark.parametrize("mode", ["events", "poll"])
def test_slow_chunked_copy_is_offered_once_after_the_last_chunk(watch, inbox, mode):
    sizes_at_offer = []

    def offer(path: Path, tags: list[str]) -> bool:
        sizes_at_offer.append((path.stat().st_size, time.monotonic()))
        return True

    watch(inbox, offer, mode=mode, stability_s=1.0, poll_interval_s=0.5)
    chunk = b"x" * 8192
    with open(inbox / "big-scan.pdf", "wb") as fh:
        for _ in range(10):
            fh.write(chunk)
            fh.flush()
            time.sleep(0.3)
    last_chunk_at = time.monotonic()
    assert wait_for(lambda: sizes_at_offer, 10)
    time.sleep(1.5)  # nothing more comes
    assert len(sizes_at_offer) == 1
    size, offered_at = sizes_at_offer[0]
    assert size == 10 * len(chunk)
    assert offered_at - last_chunk_at >= 0.6  # a full quiet window after the last chunk


@pytest.mark.parametrize("mode", ["events", "poll"])
def test_events_and_poll_modes_pick_up_a_new_file(watch, inbox, mode, caplog):
    caplog.set_level(logging.INFO, logger="appliance.intake.watch")
    offer, calls = recorder()
    watcher = watch(inbox, offer, mode=mode)
    assert watcher.mode == mode
    assert isinstance(watcher.observer, PollingObserverVFS) == (mode == "poll")
    started = [r.getMessage() for r in caplog.records if "watch started" in r.getMessage()]
    assert started and f"mode={mode} " in started[0] and " fs=" in started[0]
    assert f"path={inbox.resolve()}" in started[0]
    (inbox / "new.pdf").write_bytes(b"%PDF-1.4 hello")
    assert wait_for(lambda: calls, 10)  # the startup scan was empty: the observer saw it
    assert calls[0][0] == inbox.resolve() / "new.pdf" and calls[0][1] == []


@pytest.mark.parametrize("mode", ["events", "poll"])
def test_500_files_dropped_at_once_are_each_offered_once(watch, inbox, mode):
    offer, calls = recorder()
    watch(inbox, offer, mode=mode)
    for i in range(500):
        (inbox / f"page-{i:03d}.png").write_bytes(b"\x89PNG" + i.to_bytes(2, "big") * 50)
    assert wait_for(lambda: len(calls) >= 500, 30)
    time.sleep(1.0)
    counts = Counter(names(calls))
    assert len(counts) == 500 and set(counts.values()) == {1}


def test_junk_is_never_offered_and_a_renamed_part_file_is_offered_once(watch, inbox):
    offer, calls = recorder()
    watch(inbox, offer, recursive=True)
    for name in JUNK:
        path = inbox / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"junk")
    (inbox / "good.pdf").write_bytes(b"%PDF")
    with open(inbox / "upload.pdf.part", "wb") as fh:
        fh.write(b"%PDF" + b"y" * 5000)
    assert wait_for(lambda: "good.pdf" in names(calls), 10)
    time.sleep(1.0)
    assert names(calls) == ["good.pdf"]
    os.rename(inbox / "upload.pdf.part", inbox / "upload.pdf")
    assert wait_for(lambda: "upload.pdf" in names(calls), 10)
    time.sleep(1.0)
    assert sorted(names(calls)) == ["good.pdf", "upload.pdf"]
    assert calls[-1][2] == 5004


def test_recursive_subfolders_become_tags(watch, inbox, tmp_path):
    offer, calls = recorder()
    watch(inbox, offer, recursive=True)
    (inbox / "top.pdf").write_bytes(b"top")
    deep = inbox / "acme" / "invoices" / "2024"
    deep.mkdir(parents=True)
    (deep / "inv-1.pdf").write_bytes(b"inv")
    # a whole tree copied elsewhere, then moved in at once
    staged = tmp_path / "staged" / "contracts"
    (staged / "signed").mkdir(parents=True)
    (staged / "signed" / "c-1.pdf").write_bytes(b"contract")
    os.rename(staged, inbox / "contracts")
    assert wait_for(lambda: len(calls) >= 3, 10)
    time.sleep(1.0)
    tags = {call[0].name: call[1] for call in calls}
    assert tags == {"top.pdf": [], "inv-1.pdf": ["acme", "invoices", "2024"],
                    "c-1.pdf": ["contracts", "signed"]}
    assert len(calls) == 3


def test_non_recursive_ignores_subfolders(watch, inbox):
    (inbox / "old").mkdir()
    (inbox / "old" / "before.pdf").write_bytes(b"x")
    offer, calls = recorder()
    watch(inbox, offer, recursive=False)
    (inbox / "sub").mkdir()
    (inbox / "sub" / "nested.pdf").write_bytes(b"x")
    (inbox / "top.pdf").write_bytes(b"x")
    assert wait_for(lambda: calls, 10)
    time.sleep(1.0)
    assert names(calls) == ["top.pdf"] and calls[0][1] == []


def test_symlinks_are_followed_only_inside_the_folder(watch, inbox, tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="appliance.intake.watch")
    outside = tmp_path / "outside"
    (outside / "private").mkdir(parents=True)
    (outside / "secret.pdf").write_bytes(b"secret")
    (outside / "private" / "hr.pdf").write_bytes(b"hr")
    (inbox / "real.pdf").write_bytes(b"real")
    offer, calls = recorder()
    watch(inbox, offer, recursive=True)
    (inbox / "escape.pdf").symlink_to(outside / "secret.pdf")
    (inbox / "relative-escape.pdf").symlink_to(Path("..") / "outside" / "secret.pdf")
    (inbox / "shared").symlink_to(outside / "private", target_is_directory=True)
    (inbox / "loop").symlink_to(inbox, target_is_directory=True)
    (inbox / "dangling.pdf").symlink_to(tmp_path / "nowhere.pdf")
    (inbox / "alias.pdf").symlink_to(inbox / "real.pdf")
    assert wait_for(lambda: {"real.pdf", "alias.pdf"} <= set(names(calls)), 10)
    time.sleep(1.0)
    assert sorted(names(calls)) == ["alias.pdf", "real.pdf"]
    warned = [r.getMessage() for r in caplog.records if "reason=symlink_outside" in r.getMessage()]
    assert len([m for m in warned if "file=escape.pdf " in m]) == 1  # once, not per event


def test_backpressure_refusals_are_offered_again_until_accepted(watch, inbox):
    offer, calls = recorder([False, False, False])
    watch(inbox, offer, stability_s=0.3)
    (inbox / "busy.pdf").write_bytes(b"%PDF busy")
    assert wait_for(lambda: len(calls) >= 4, 15)
    time.sleep(1.0)
    assert names(calls) == ["busy.pdf"] * 4
    gaps = [b[3] - a[3] for a, b in zip(calls, calls[1:])]
    assert gaps == sorted(gaps)  # backing off, not hammering


def test_backpressure_and_offer_errors_lose_nothing(watch, inbox):
    accepted: list[str] = []
    answers = [False, RuntimeError("database is locked"), False, False, RuntimeError("boom")]
    lock = threading.Lock()

    def offer(path: Path, tags: list[str]) -> bool:
        with lock:
            answer = answers.pop(0) if answers else True
            if answer is True:
                accepted.append(path.name)
        if isinstance(answer, Exception):
            raise answer
        return answer

    watch(inbox, offer, stability_s=0.3)
    for i in range(6):
        (inbox / f"doc-{i}.pdf").write_bytes(b"%PDF" + bytes([i]))
    assert wait_for(lambda: len(accepted) >= 6, 20)
    time.sleep(1.0)
    assert sorted(accepted) == [f"doc-{i}.pdf" for i in range(6)]


def test_a_file_deleted_before_it_settles_is_never_offered(watch, inbox):
    offer, calls = recorder()
    watch(inbox, offer, stability_s=1.0)
    (inbox / "oops.pdf").write_bytes(b"wrong folder")
    time.sleep(0.3)
    (inbox / "oops.pdf").unlink()
    (inbox / "keep.pdf").write_bytes(b"right")
    assert wait_for(lambda: calls, 10)
    time.sleep(1.5)
    assert names(calls) == ["keep.pdf"]


def test_accepted_files_are_not_offered_again_until_they_change(watch, inbox):
    offer, calls = recorder()
    watcher = watch(inbox, offer)
    path = inbox / "kept.pdf"
    path.write_bytes(b"v1")
    assert wait_for(lambda: calls, 10)
    watcher.rescan()
    watcher.rescan()
    time.sleep(1.0)
    assert len(calls) == 1
    with open(path, "ab") as fh:
        fh.write(b" v2")
    assert wait_for(lambda: len(calls) == 2, 10)
    time.sleep(1.0)
    assert len(calls) == 2 and calls[1][2] == 5


def test_startup_scan_offers_files_already_there(watch, inbox):
    (inbox / "early.pdf").write_bytes(b"%PDF early")
    (inbox / "dept").mkdir()
    (inbox / "dept" / "earlier.pdf").write_bytes(b"%PDF earlier")
    offer, calls = recorder()
    watch(inbox, offer, recursive=True, ready=False)
    assert wait_for(lambda: len(calls) >= 2, 10)
    time.sleep(1.0)
    assert sorted((c[0].name, c[1]) for c in calls) == [("earlier.pdf", ["dept"]),
                                                        ("early.pdf", [])]


def test_rescan_catches_a_file_whose_events_were_missed(watch, inbox):
    offer, calls = recorder()
    watcher = watch(inbox, offer)
    dead = watcher.observer
    dead.stop()
    dead.join()
    (inbox / "missed.pdf").write_bytes(b"%PDF missed")
    watcher.rescan()
    assert wait_for(lambda: calls, 5)
    assert names(calls) == ["missed.pdf"]
    assert watcher.observer is not dead and watcher.observer.is_alive()
    (inbox / "after.pdf").write_bytes(b"%PDF after")  # the restarted observer hears this
    assert wait_for(lambda: len(calls) == 2, 10)


def test_a_dead_observer_is_restarted_and_the_gap_caught_up(watch, inbox):
    offer, calls = recorder()
    watcher = watch(inbox, offer)
    dead = watcher.observer
    dead.stop()
    dead.join()
    (inbox / "during-outage.pdf").write_bytes(b"%PDF")
    assert wait_for(lambda: calls, 15)  # no rescan() call: the supervisor noticed
    assert watcher.observer is not dead


def test_a_folder_that_appears_later_is_watched_once_it_exists(watch, tmp_path):
    share = tmp_path / "not-mounted-yet"
    offer, calls = recorder()
    watcher = watch(share, offer, ready=False)
    assert not watcher.wait_ready(0.5)
    share.mkdir()
    (share / "first.pdf").write_bytes(b"%PDF")
    assert watcher.wait_ready(15)
    assert wait_for(lambda: calls, 10)
    assert names(calls) == ["first.pdf"]


def test_restart_in_the_middle_offers_every_file_once_overall(watch, inbox):
    for i in range(40):
        (inbox / f"batch-{i:02d}.pdf").write_bytes(b"%PDF" + bytes([i]))
    database: set[str] = set()  # what the store would know
    accepted: list[str] = []
    lock = threading.Lock()

    def offer(path: Path, tags: list[str]) -> bool:
        time.sleep(0.02)  # copying into the spool takes a moment
        with lock:
            if path.name not in database:  # dedupe by database state
                database.add(path.name)
                accepted.append(path.name)
        return True

    first = watch(inbox, offer, stability_s=0.3, ready=False)
    assert wait_for(lambda: len(accepted) >= 10, 15)
    first.stop()
    assert len(accepted) < 40, "the first watcher finished before it could be stopped"
    watch(inbox, offer, stability_s=0.3, ready=False)
    assert wait_for(lambda: len(accepted) >= 40, 15)
    time.sleep(1.0)
    counts = Counter(accepted)
    assert len(counts) == 40 and set(counts.values()) == {1}


@pytest.mark.parametrize("mode", ["events", "poll"])
def test_stop_leaves_no_thread_behind(inbox, mode):
    before = set(threading.enumerate())
    offer, calls = recorder()
    watcher = FolderWatcher(WatchFolder(path=inbox, mode=mode, stability_s=0.2,
                                        poll_interval_s=0.2, disposition="keep"), offer)
    watcher.start()
    assert watcher.wait_ready(15)
    (inbox / "a.pdf").write_bytes(b"%PDF")
    assert wait_for(lambda: calls, 10)
    watcher.stop()
    assert wait_for(lambda: set(threading.enumerate()) <= before, 5), \
        [t.name for t in set(threading.enumerate()) - before]
    with pytest.raises(RuntimeError):
        watcher.start()


def test_measure_detection_latency_events_is_sane():
    result = measure_detection_latency("events", files=8, stability_s=0.0)
    assert result["mode"] == "events"
    assert result["offered"] == 8 and result["missed"] == 0
    assert 0 <= result["p50_ms"] <= result["p95_ms"] <= result["max_ms"] < 1000
