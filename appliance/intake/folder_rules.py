"""Which names a watched folder ignores, and whether it lies on a network filesystem
(where inotify sees no remote writes, so it must be polled)."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path

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
    r".*\.error\.txt",          # the appliance's own report beside a file it refused
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


def read_mounts() -> str:
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
    text = read_mounts() if mounts_text is None else mounts_text
    return "poll" if filesystem_type(path, text) in NETWORK_FS else "events"
