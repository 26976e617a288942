"""Completion webhooks: POST the finished document's JSON to the URL its submitter gave.

Only to the hosts the operator allows (``WebhookPolicy``, ``[webhooks] allow_hosts``):
an API client must not be able to make the appliance call into the internal network.
The URL is checked when the document is submitted and again before each delivery,
and redirects are never followed.

Deliveries run on a thread of their own, so a slow receiver never holds up pages.
A failed delivery is retried with exponential backoff; the outcome is recorded on
the document, and deliveries still owed after a restart are sent again.
"""

from __future__ import annotations

import fnmatch
import ipaddress
import logging
import queue
import threading
import time
from typing import Callable
from urllib.parse import urlsplit

import httpx

from appliance.errors import ConfigError, WebhookNotAllowed
from appliance.store import Database, queries, transitions

log = logging.getLogger(__name__)

ATTEMPTS = 5
FIRST_BACKOFF_S = 1.0
TIMEOUT_S = 10.0


class WebhookPolicy:
    """Which hosts a webhook may go to: names, ``*.`` wildcards, addresses and CIDRs."""

    def __init__(self, allow_hosts: list[str]):
        self.names: list[str] = []
        self.networks = []
        for pattern in allow_hosts:
            try:
                self.networks.append(ipaddress.ip_network(pattern, strict=False))
            except ValueError:
                if not pattern or "/" in pattern or ":" in pattern:
                    raise ConfigError(f"webhooks.allow_hosts: {pattern!r} is neither a host "
                                      f"name, a '*.' wildcard, nor an address or CIDR") from None
                self.names.append(pattern.lower().rstrip("."))

    def check(self, url: str) -> None:
        """Raise WebhookNotAllowed unless ``url`` is http(s) to an allowed host."""
        try:
            parts = urlsplit(url)
            scheme, host = parts.scheme, (parts.hostname or "").rstrip(".")
        except ValueError:  # e.g. an unbalanced "[" (an IPv6 address cut short)
            scheme, host = "", ""
        if scheme not in ("http", "https") or not host:
            raise WebhookNotAllowed(f"webhook_url must be an http or https URL with a host, "
                                    f"got {url[:200]!r}")
        if not self.allows(host):
            raise WebhookNotAllowed(
                f"webhooks may only go to the hosts in webhooks.allow_hosts"
                f"{'' if self.names or self.networks else ' (none: webhooks are off)'}, "
                f"and {host} is not one; ask the operator to add it")

    def allows(self, host: str) -> bool:
        try:
            address = ipaddress.ip_address(host)
        except ValueError:
            return any(fnmatch.fnmatchcase(host.lower(), name) for name in self.names)
        return any(address in network for network in self.networks)


class WebhookNotifier:
    def __init__(self, db: Database, payload: Callable[[str], dict], policy: WebhookPolicy,
                 *, first_backoff_s: float = FIRST_BACKOFF_S):
        self.db = db
        self.payload = payload  # document id -> the JSON body
        self.policy = policy
        self.first_backoff_s = first_backoff_s
        self._queue: queue.Queue[tuple[str, str] | None] = queue.Queue()
        self._queued: set[str] = set()
        self._errors: dict[str, int] = {}  # document id -> unexpected errors so far
        self._thread = threading.Thread(target=self._run, name="webhooks", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._queue.put(None)
        self._thread.join(timeout=TIMEOUT_S + 1)

    def notify(self, document_id: str, url: str) -> None:
        if document_id not in self._queued:  # the periodic finish may offer it again
            self._queued.add(document_id)
            self._queue.put((document_id, url))

    def _run(self) -> None:
        with httpx.Client(timeout=TIMEOUT_S, follow_redirects=False) as client:
            while (item := self._queue.get()) is not None:
                document_id, url = item
                try:
                    self._deliver(client, document_id, url)
                except Exception:  # a locked database, ...: the thread must live on
                    self._failed_unexpectedly(document_id)
                finally:
                    self._queued.discard(document_id)

    def _failed_unexpectedly(self, document_id: str) -> None:
        """The periodic finish offers the delivery again, up to ATTEMPTS times."""
        failures = self._errors[document_id] = self._errors.get(document_id, 0) + 1
        log.exception("webhook delivery failed unexpectedly doc=%s failures=%d", document_id,
                      failures)
        if failures >= ATTEMPTS:
            del self._errors[document_id]
            try:
                transitions.mark_webhook_done(self.db, document_id, False,
                                              f"gave up after {failures} unexpected errors")
            except Exception:
                log.exception("webhook not marked failed doc=%s", document_id)

    def _deliver(self, client: httpx.Client, document_id: str, url: str) -> None:
        view = queries.get_document(self.db, document_id)
        if view is None or view.doc.webhook_done_at is not None:
            return  # deleted while it waited, or delivered since it was queued
        try:  # allowed when it was submitted; the operator may have changed the list since
            self.policy.check(url)
        except WebhookNotAllowed as exc:
            log.warning("webhook refused doc=%s reason=%s", document_id, exc.message)
            transitions.mark_webhook_done(self.db, document_id, False, exc.message)
            return
        body = {"event": "document.finished", "document": self.payload(document_id)}
        error = ""
        for attempt in range(1, ATTEMPTS + 1):
            try:
                response = client.post(url, json=body)
                if response.status_code < 300:
                    transitions.mark_webhook_done(self.db, document_id, True,
                                                  f"HTTP {response.status_code}")
                    self._errors.pop(document_id, None)
                    log.info("webhook delivered doc=%s attempt=%d", document_id, attempt)
                    return
                error = f"HTTP {response.status_code}"
            except httpx.HTTPError as exc:
                error = f"{type(exc).__name__}: {exc}"
            log.warning("webhook failed doc=%s attempt=%d error=%s", document_id, attempt, error)
            if attempt < ATTEMPTS:
                time.sleep(self.first_backoff_s * 2 ** (attempt - 1))
        transitions.mark_webhook_done(self.db, document_id, False,
                                      f"gave up after {ATTEMPTS} attempts: {error}")
