"""Who may talk to the daemon: API keys, the address allow-list, rate limits.

- **API keys** live in a TOML file (``auth.api_keys_file``) as SHA-256 digests; the
  key itself is shown once, by ``appliance keys add NAME``. Keys are 256-bit random
  tokens, so a fast hash is enough: there is nothing to brute-force. A request names
  its key in ``X-API-Key``, ``Ocp-Apim-Subscription-Key`` (what Document Intelligence
  clients send) or ``Authorization: Bearer``.
- **Auth is on** as soon as the keys file holds a key or the users file an account,
  and always on a ``server.host`` that is not a loopback address (unless
  ``auth.open``): a missing or emptied file never opens the daemon to the network.
  Then every route but ``/healthz`` needs it: the REST API, ``/readyz``, ``/metrics``,
  the API docs and the Document Intelligence API need a key (the docs, or a web UI
  sign-in); the web UI and the review console need a reviewer's login (``ui.auth``'s
  sign-in page, checked against the users file).
- **Allow-list** (``auth.allow_from``, CIDRs): other addresses get 403 on every route
  but ``/healthz``, before any key is looked at. The address is the peer's, or the
  client a proxy of ``server.trusted_proxies`` names (``appliance.server``).
- **Rate limit** per key: a token bucket of ``rate_per_minute`` requests (the key's
  own, else ``auth.rate_per_minute``); over it, 429 with Retry-After.

The guard that enforces them is ``api_guards.AccessGuard``, plain ASGI middleware in front
of every route; this module has no part of the web stack, so the daemon's core runs
without it.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import re
import secrets
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from appliance.errors import ConfigError, InvalidRequest
from appliance.private_file import PrivateTomlFile

KEY_PREFIX = "ocr_"
NAME_PATTERN = re.compile(r"^[a-z][a-z0-9._-]{1,31}$")


def loopback(host: str) -> bool:
    """Whether a server bound to ``host`` can be reached from this host only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # another host name, or "" (every address)
        return False


def _digest(key: str) -> str:
    return "sha256:" + hashlib.sha256(key.encode()).hexdigest()


@dataclass(frozen=True)
class ApiKey:
    name: str
    digest: str
    rate_per_minute: int | None


class ApiKeys:
    """The keys in one file; read again when the file changes."""

    def __init__(self, path: Path):
        self.path = path
        self._file = PrivateTomlFile(path)

    def _load(self) -> dict[str, ApiKey]:
        keys = {}
        for name, entry in self._file.read().get("keys", {}).items():
            digest = entry.get("digest", "")
            if not digest.startswith("sha256:"):
                raise ConfigError(f"{self.path}: key '{name}' has no sha256 digest; "
                                  f"create keys with `appliance keys add {name}`")
            keys[name] = ApiKey(name, digest, entry.get("rate_per_minute"))
        return keys

    def __bool__(self) -> bool:
        return bool(self._load())

    def names(self) -> list[str]:
        return sorted(self._load())

    def find(self, presented: str) -> ApiKey | None:
        digest = _digest(presented)
        match = None
        for key in self._load().values():  # compare every entry: no early exit on a hit
            if hmac.compare_digest(key.digest, digest):
                match = key
        return match

    def add(self, name: str, rate_per_minute: int | None = None) -> str:
        """Create (or replace) a key; returns the key itself, which is stored nowhere."""
        if not NAME_PATTERN.match(name):
            raise InvalidRequest(f"key name '{name}' must be 2-32 characters: lower-case "
                                 f"letters, digits, '.', '_' or '-', starting with a letter")
        key = KEY_PREFIX + secrets.token_urlsafe(32)
        keys = dict(self._load())
        keys[name] = ApiKey(name, _digest(key), rate_per_minute)
        self._write(keys)
        return key

    def remove(self, name: str) -> None:
        keys = dict(self._load())
        if keys.pop(name, None) is None:
            raise InvalidRequest(f"there is no key named '{name}'")
        self._write(keys)

    def _write(self, keys: dict[str, ApiKey]) -> None:
        lines = ["# API keys of the OCR appliance (digests only); edit with `appliance keys`.\n"]
        for key in sorted(keys.values(), key=lambda k: k.name):
            lines.append(f'\n[keys.{key.name}]\ndigest = "{key.digest}"\n')
            if key.rate_per_minute:
                lines.append(f"rate_per_minute = {key.rate_per_minute}\n")
        self._file.write("".join(lines))


class RateLimiter:
    """A token bucket per key: ``rate`` requests a minute, bursts up to ``rate``."""

    def __init__(self):
        self._buckets: dict[str, tuple[float, float]] = {}  # key -> (tokens, at)
        self._lock = threading.Lock()

    def take(self, key: str, rate: int) -> float:
        """0 when the request may go ahead, else the seconds until it may."""
        now = time.monotonic()
        with self._lock:
            tokens, at = self._buckets.get(key, (float(rate), now))
            tokens = min(float(rate), tokens + (now - at) * rate / 60)
            if tokens >= 1:
                self._buckets[key] = (tokens - 1, now)
                return 0.0
            self._buckets[key] = (tokens, now)
            return (1 - tokens) * 60 / rate
