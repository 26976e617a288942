"""Reviewer accounts: a TOML file of users with scrypt-hashed passwords and a role.

    [users.anna]
    role = "reviewer"
    password = "scrypt$16384$8$1$<salt b64>$<hash b64>"

``appliance users add NAME`` writes entries; the file is created 0600 and never holds
a password in clear. Roles: ``reviewer`` (the review console) and ``admin`` (also the
operator's pages). The file is read again when it changes, so accounts added while
the daemon runs can log in at once. Five failed logins for one name lock it for five
minutes.
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
# Password guessing: after this many failed logins for one name within LOCKOUT_S, the
# name is refused, right password or not, until the oldest failure is that old.
MAX_FAILED_LOGINS = 5
LOCKOUT_S = 300.0


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


@dataclass(frozen=True)
class User:
    name: str
    role: str


class Users:
    """The accounts in one users file."""

    def __init__(self, path: Path):
        self.path = path
        self._file = PrivateTomlFile(path)
        self._failures: dict[str, list[float]] = {}
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

    def authenticate(self, name: str, password: str) -> User | None:
        entry = self._load().get(name)
        locked = self._locked_out(name)
        # the same work whether or not the user exists or is locked out
        ok = verify_password(password, entry["password"] if entry else _DUMMY_HASH)
        if entry is None or locked or not ok:
            with self._lock:
                self._failures.setdefault(name, []).append(time.monotonic())
            return None
        with self._lock:
            self._failures.pop(name, None)
        return User(name, entry["role"])

    def _locked_out(self, name: str) -> bool:
        now = time.monotonic()
        with self._lock:
            recent = [t for t in self._failures.get(name, []) if now - t < LOCKOUT_S]
            self._failures[name] = recent
            return len(recent) >= MAX_FAILED_LOGINS

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
        lines = ["# Reviewer accounts of the OCR appliance; edit with `appliance users`.\n"]
        for user, entry in sorted(entries.items()):
            lines.append(f'\n[users.{user}]\nrole = "{entry["role"]}"\n'
                         f'password = "{entry["password"]}"\n')
        self._file.write("".join(lines))


_DUMMY_HASH = hash_password(secrets.token_hex(8))
