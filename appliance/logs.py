"""The log of the daemon, its workers and the command line: one line per event, and no
URL beyond its scheme and host.

A URL may carry credentials or a token (``http://user:pw@host/doc.pdf?token=...``, a
webhook's secret path), and libraries log whole URLs: httpx writes every request at
INFO, and its errors quote the URL they failed on. ``HostOnly`` rewrites every URL in
every line that reaches the log's handler, whoever wrote it.
"""

from __future__ import annotations

import logging
import re

# scheme://[userinfo@]host[:port] and whatever follows, up to a space or a quote
_URL = re.compile(r"\b([A-Za-z][A-Za-z0-9+.-]*)://(?:[^\s/?#@'\"]*@)?([^\s/?#'\"]+)"
                  r"[^\s'\"]*")


def host_only(text: str) -> str:
    """``text`` with each URL cut to its scheme and host (and port)."""
    return _URL.sub(r"\1://\2", text)


class HostOnly(logging.Filter):
    """A handler's filter: the line's URLs cut to their hosts."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cut = host_only(message)
        if cut != message:
            record.msg, record.args = cut, None
        return True


def configure(level: str, who: str = "") -> None:
    """Log at ``level`` to stderr (the journal under systemd), every line through
    ``HostOnly``; ``who`` names the process in each line ("worker")."""
    name = f"%(name)s {who}" if who else "%(name)s"
    logging.basicConfig(level=level, format=f"%(asctime)s %(levelname)s {name}: %(message)s")
    for handler in logging.getLogger().handlers:
        if not any(isinstance(f, HostOnly) for f in handler.filters):
            handler.addFilter(HostOnly())
    # APScheduler says INFO for every run of every job (every few seconds): only its
    # warnings reach the journal, unless the operator asks for DEBUG
    logging.getLogger("apscheduler").setLevel(max(logging.getLevelName(level), logging.WARNING))
