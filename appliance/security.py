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

The guard is plain ASGI middleware, so it sees every request, including the mounted
UI's, before any route does. Its refusals are written as the route would write them
(``api_guards.error_response``): the Document Intelligence API's in that service's shape.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import math
import re
import secrets
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from starlette.requests import HTTPConnection

from appliance.api_guards import error_response
from appliance.config import AuthSettings
from appliance.errors import (
    ConfigError, ForbiddenAddress, InvalidRequest, RateLimited, Unauthorized,
)
from appliance.private_file import PrivateTomlFile

KEY_PREFIX = "ocr_"
NAME_PATTERN = re.compile(r"^[a-z][a-z0-9._-]{1,31}$")
OPEN_PATHS = ("/healthz",)
# Routes that answer machines: they need an API key. Everything else is the web UI.
KEY_PATHS = ("/api/", "/readyz", "/metrics", "/docs", "/redoc", "/openapi.json",
             "/documentintelligence")
# the headers a key may come in, besides Authorization: Bearer
KEY_HEADERS = (b"x-api-key", b"ocp-apim-subscription-key")
# ... of which these are for people too: a signed-in user of the web UI reads them
# without a key (the UI's mount sets ``app.state.signed_in``, its session check; the
# library never imports its UI)
DOCS_PATHS = ("/docs", "/redoc", "/openapi.json")


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


class AccessGuard:
    """ASGI middleware: allow-list, API keys and rate limits (see the module docstring)."""

    def __init__(self, app, settings: AuthSettings, keys: ApiKeys, auth_on):
        self.app = app
        self.settings = settings
        self.keys = keys
        self.auth_on = auth_on  # callable: is auth configured right now
        self.networks = [ipaddress.ip_network(n, strict=False) for n in settings.allow_from]
        self.limiter = RateLimiter()

    async def __call__(self, scope, receive, send):
        if scope["type"] not in ("http", "websocket") or scope["path"] in OPEN_PATHS:
            return await self.app(scope, receive, send)
        refusal = self._refusal(scope)
        if refusal is None:
            return await self.app(scope, receive, send)
        if scope["type"] == "websocket":
            return await send({"type": "websocket.close", "code": 1008})
        await refusal(scope, receive, send)

    def _refusal(self, scope):
        client = (scope.get("client") or ("", 0))[0]
        path = scope["path"]

        def _error(status: int, code: str, message: str, headers: dict | None = None):
            return error_response(status, code, message, headers, path)

        if self.networks and not self._allowed(client):
            return _error(ForbiddenAddress.http_status, ForbiddenAddress.code,
                          f"requests from {client} are not allowed; add the address to "
                          f"auth.allow_from")
        if not path.startswith(KEY_PATHS) or not self.auth_on():
            return None  # the web UI: Gradio's login guards it
        if scope.get("method") == "OPTIONS":
            return None  # a CORS preflight carries no key and changes nothing
        headers = dict(scope.get("headers") or [])
        # header bytes are Latin-1 by HTTP's rules: any bytes decode (and a key with odd
        # ones simply matches none)
        presented = next((value for name in KEY_HEADERS if (value := headers.get(name, b""))),
                         b"").decode("latin-1")
        bearer = headers.get(b"authorization", b"").decode("latin-1")
        if not presented and bearer.lower().startswith("bearer "):
            presented = bearer[7:].strip()
        if not presented and self._signed_in_to_docs(scope):
            return None
        if not presented:
            return _error(Unauthorized.http_status, Unauthorized.code,
                          "this route needs an API key: send it in the X-API-Key (or "
                          "Ocp-Apim-Subscription-Key) header (`appliance keys add NAME`)",
                          {"www-authenticate": "Bearer"})
        key = self.keys.find(presented)
        if key is None:
            return _error(Unauthorized.http_status, Unauthorized.code, "the API key is not valid",
                          {"www-authenticate": "Bearer"})
        rate = key.rate_per_minute or self.settings.rate_per_minute
        wait_s = self.limiter.take(key.name, rate)
        if wait_s:
            return _error(RateLimited.http_status, RateLimited.code,
                          f"key '{key.name}' is over its limit of {rate} requests a minute; "
                          f"retry later",
                          {"retry-after": str(math.ceil(wait_s))})
        scope.setdefault("state", {})["api_key"] = key.name
        return None

    @staticmethod
    def _signed_in_to_docs(scope) -> bool:
        signed_in = getattr(getattr(scope.get("app"), "state", None), "signed_in", None)
        return (scope["path"].startswith(DOCS_PATHS) and signed_in is not None
                and signed_in(HTTPConnection(scope)) is not None)

    def _allowed(self, client: str) -> bool:
        try:
            address = ipaddress.ip_address(client)
        except ValueError:
            return False
        return any(address in network for network in self.networks)
