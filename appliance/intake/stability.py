"""When has a watched file stopped changing? A pure tracker: no filesystem, no clock."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

Signature = tuple[int, int]  # (size in bytes, mtime in ns)


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

    def rearm(self, path: Path, size: int, mtime_ns: int, now: float, after_s: float) -> None:
        """Return ``path`` from ``stable`` again once it has kept this signature for
        ``after_s`` from ``now`` (a change meanwhile starts an ordinary window); a file
        already in a window is left in it."""
        if path not in self._pending:
            self._settled.pop(path, None)
            self._pending[path] = _Window((size, mtime_ns), now + after_s - self.stability_s)

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
