"""Keeping the disk in check: the purge of old spool files, and intake's disk floor.

Retention (seed 000 §4.2): the original and the page images of content whose every
document is finished with it (read to the end, exported, its watched file disposed
of: ``queries.purgeable``) and older than ``retention.hot_days`` are deleted, and so
are result-cache entries of that age. A document with failed pages keeps its original
until it is retried or deleted, and a document refused at intake until it is deleted. The results in the database, the content hashes,
the exports and the audit trail stay: a purged document can still be listed,
fetched and audited, only not read again. The purge runs every
``retention.interval_hours`` from the daemon's scheduler.

Its companion, the disk floor, is intake's: ``Intake.check_disk_floor`` refuses a
file while the spool's file system has less than ``retention.min_free_disk_mb`` free,
before any byte is stored, so nothing half-written remains.
"""

from __future__ import annotations

import logging
import time

from appliance.config import Settings
from appliance.intake.spool import Spool
from appliance.store import Database, contents, queries, transitions

log = logging.getLogger(__name__)

DAY_S = 86_400


def purge(settings: Settings, db: Database, spool: Spool, now: float | None = None) -> dict:
    """Delete what retention allows; returns what it deleted."""
    now = now or time.time()
    cutoff = now - settings.retention.hot_days * DAY_S
    purged = {"contents": 0, "files": 0, "cache_entries": 0,
              "idempotency_keys": transitions.expire_idempotency_keys(
                  db, now - settings.retention.idempotency_hours * 3600)}
    for sha in queries.purge_candidates(db, cutoff):
        files = contents.purge_content(db, sha, cutoff, lambda: spool.delete_content(sha))
        if files is not None:  # else a submission or a retry came in meanwhile
            purged["contents"] += 1
            purged["files"] += files
    cache = settings.paths.data_dir / "cache"
    for entry in cache.rglob("*.json") if cache.exists() else ():
        if entry.stat().st_mtime < cutoff:
            entry.unlink(missing_ok=True)
            purged["cache_entries"] += 1
    if any(purged.values()):
        log.info("retention purged contents=%d files=%d cache_entries=%d idempotency_keys=%d "
                 "hot_days=%s", purged["contents"], purged["files"], purged["cache_entries"],
                 purged["idempotency_keys"], settings.retention.hot_days)
    return purged
