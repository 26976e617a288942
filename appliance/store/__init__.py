"""The store: SQLite through SQLModel. The only package that writes SQL."""

from appliance.store.db import Database

__all__ = ["Database"]
