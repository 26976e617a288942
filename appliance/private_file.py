"""A private TOML file of accounts or API keys: read again whenever it changes (an
operator may edit it while the daemon runs), written atomically with mode 0600
(it holds password hashes and key digests)."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

from appliance.errors import ConfigError


class PrivateTomlFile:
    def __init__(self, path: Path):
        self.path = path
        self._stamp: tuple[int, int] | None = None
        self._data: dict = {}

    def read(self) -> dict:
        """The parsed file ({} when it does not exist), parsed again only after a change."""
        try:
            stat = self.path.stat()
        except FileNotFoundError:
            self._stamp, self._data = None, {}
            return self._data
        stamp = (stat.st_mtime_ns, stat.st_size)
        if stamp != self._stamp:
            try:
                data = tomllib.loads(self.path.read_text(encoding="utf-8"))
            except tomllib.TOMLDecodeError as exc:
                raise ConfigError(f"{self.path}: not valid TOML ({exc})") from None
            self._stamp, self._data = stamp, data
        return self._data

    def write(self, text: str) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f".{self.path.name}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
        os.replace(tmp, self.path)
