"""Reviewer accounts: a TOML file of users with scrypt-hashed passwords and a role.

    [users.anna]
    role = "reviewer"
    password = "scrypt$16384$8$1$<salt b64>$<hash b64>"

``appliance users add NAME`` writes entries; the file is created 0600 and never holds
a password in clear. Roles: ``reviewer`` (the review console) and ``admin`` (also the
operator's pages). The file is read again when it changes, so accounts added while
the daemon runs can log in at once. Password guessing is throttled by ``LoginThrottle``:
per name and address, and per address, each lock a fixed window.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from appliance.errors import ConfigError, InvalidRequest
from appliance.private_file import PrivateTomlFile

ROLES = ("reviewer", "admin")
# scrypt cost: about 50 ms and 16 MiB per check on a small server; slow to brute-force,
# fast enough for a login.
SCRYPT_N, SCRYPT_R, SCRYPT_P = 2**14, 8, 1
SALT_BYTES = 16
HASH_BYTES = 32
MIN_PASSWORD_CHARS = 10
NAME_PATTERN = re.compile(r"^[a-z][a-z0-9._-]{1,31}$")
# Password guessing: this many failed logins for one name from one address lock that
# pair, and ADDRESS_FAILED_LOGINS from one address (any names) lock the address, each for
# LOCKOUT_S from the moment the lock starts.
MAX_FAILED_LOGINS = 5
ADDRESS_FAILED_LOGINS = 20
LOCKOUT_S = 300.0
# Failure counts, and locks, the throttle keeps at most (each): guesses from ever new
# names or addresses cannot grow its memory without end. Past it the oldest go first.
MAX_TRACKED = 10_000


def hash_password(password: str) -> str:
    salt = secrets.token_bytes(SALT_BYTES)
    digest = hashlib.scrypt(password.encode(), salt=salt, n=SCRYPT_N, r=SCRYPT_R, p=SCRYPT_P,
                            dklen=HASH_BYTES)
    return "$".join(["scrypt", str(SCRYPT_N), str(SCRYPT_R), str(SCRYPT_P),
                     base64.b64encode(salt).decode(), base64.b64encode(digest).decode()])


def verify_password(password: str, encoded: str) -> bool:
    try:
        scheme, n, r, p, salt, expected = encoded.split("$")
        if scheme != "scrypt":
            return False
        digest = hashlib.scrypt(password.encode(), salt=base64.b64decode(salt), n=int(n),
                                r=int(r), p=int(p), dklen=len(base64.b64decode(expected)),
                                maxmem=128 * int(n) * int(r) * 2)
    except (ValueError, TypeError):
        return False
    return hmac.compare_digest(digest, base64.b64decode(expected))


class LoginThrottle:
    """Slows password guessing without handing an outsider the power to lock a user out.

    Pure: no clock of its own (``now`` is passed in, monotonic seconds), no I/O.

    * Failures are counted per (name, address) and per address, each within
      ``window_s``. At ``per_pair`` failures the pair is locked, at ``per_address`` the
      address is (every name from it, so spraying many names is slowed too).
    * A lock runs a fixed ``window_s`` from its start. Attempts during a lock are
      refused unchecked and neither extend it nor count: an attacker who keeps trying
      cannot keep anybody locked out.
    * A lock never reaches across addresses: the real user, from their own address,
      still logs in while an outsider is locked out of the same name.
    * A successful login clears the pair's count.
    * At most ``MAX_TRACKED`` counts and as many locks are kept; past that the oldest
      are forgotten (the longest without a failure, the earliest to end).
    """

    def __init__(self, per_pair: int = MAX_FAILED_LOGINS,
                 per_address: int = ADDRESS_FAILED_LOGINS, window_s: float = LOCKOUT_S):
        self.per_pair = per_pair
        self.per_address = per_address
        self.window_s = window_s
        # key -> failure times in the window, and key -> end of its lock; each in the
        # order of its last change, oldest first
        self._failures: dict[tuple, list[float]] = {}
        self._locked_until: dict[tuple, float] = {}

    @staticmethod
    def _keys(name: str, address: str) -> tuple[tuple, tuple]:
        return ("pair", name, address), ("address", address)

    def locked(self, name: str, address: str, now: float) -> bool:
        """Whether an attempt for ``name`` from ``address`` is refused unchecked."""
        for key in self._keys(name, address):
            until = self._locked_until.get(key)
            if until is not None and now >= until:
                del self._locked_until[key]
                until = None
            if until is not None:
                return True
        return False

    def failed(self, name: str, address: str, now: float) -> None:
        for key, limit in zip(self._keys(name, address), (self.per_pair, self.per_address)):
            recent = [t for t in self._failures.get(key, []) if now - t < self.window_s]
            recent.append(now)
            if len(recent) >= limit:
                # the lock's window is fixed; counting starts afresh after it
                self._failures.pop(key, None)
                _remember(self._locked_until, key, now + self.window_s)
            else:
                _remember(self._failures, key, recent)

    def succeeded(self, name: str, address: str) -> None:
        self._failures.pop(self._keys(name, address)[0], None)


def _remember(table: dict, key, value) -> None:
    """Set ``key`` as the newest entry of ``table``, and forget its oldest past the cap."""
    table.pop(key, None)
    table[key] = value
    while len(table) > MAX_TRACKED:
        del table[next(iter(table))]


@dataclass(frozen=True)
class User:
    name: str
    role: str


class Users:
    """The accounts in one users file."""

    def __init__(self, path: Path):
        self.path = path
        self._file = PrivateTomlFile(path)
        self._throttle = LoginThrottle()
        self._lock = threading.Lock()

    def _load(self) -> dict[str, dict]:
        entries = self._file.read().get("users", {})
        for name, entry in entries.items():
            if entry.get("role") not in ROLES or not str(entry.get("password", "")
                                                         ).startswith("scrypt$"):
                raise ConfigError(f"{self.path}: user '{name}' needs role = one of "
                                  f"{', '.join(ROLES)} and a scrypt password; set it "
                                  f"with `appliance users add {name}`")
        return entries

    def authenticate(self, name: str, password: str, address: str = "-") -> User | None:
        """The account, if ``password`` is its password and ``address`` is not locked
        out for ``name`` (see ``LoginThrottle``); None otherwise."""
        entry = self._load().get(name)
        with self._lock:
            locked = self._throttle.locked(name, address, time.monotonic())
        # the same work whether or not the user exists or is locked out
        ok = verify_password(password, entry["password"] if entry else _DUMMY_HASH)
        if locked:
            return None
        with self._lock:
            if entry is None or not ok:
                self._throttle.failed(name, address, time.monotonic())
                return None
            self._throttle.succeeded(name, address)
        return User(name, entry["role"])

    def get(self, name: str) -> User | None:
        entry = self._load().get(name)
        return User(name, entry["role"]) if entry else None

    def names(self) -> list[str]:
        return sorted(self._load())

    def add(self, name: str, role: str, password: str) -> None:
        """Create or replace an account; the file is rewritten atomically, mode 0600."""
        if not NAME_PATTERN.match(name):
            raise InvalidRequest(f"user name '{name}' must be 2-32 characters: lower-case "
                                 f"letters, digits, '.', '_' or '-', starting with a letter")
        if role not in ROLES:
            raise InvalidRequest(f"role '{role}' is unknown; use one of {', '.join(ROLES)}")
        if len(password) < MIN_PASSWORD_CHARS:
            raise InvalidRequest(f"the password must have at least {MIN_PASSWORD_CHARS} "
                                 f"characters")
        entries = dict(self._load())
        entries[name] = {"role": role, "password": hash_password(password)}
        self._write(entries)

    def remove(self, name: str) -> None:
        """Delete an account: its sessions end at their next request (``ui.auth``)."""
        entries = dict(self._load())
        if entries.pop(name, None) is None:
            raise InvalidRequest(f"there is no account named '{name}'")
        self._write(entries)

    def _write(self, entries: dict[str, dict]) -> None:
        lines = ["# Reviewer accounts of the OCR appliance; edit with `appliance users`.\n"]
        for user, entry in sorted(entries.items()):
            lines.append(f'\n[users.{user}]\nrole = "{entry["role"]}"\n'
                         f'password = "{entry["password"]}"\n')
        self._file.write("".join(lines))


_DUMMY_HASH = hash_password(secrets.token_hex(8))
