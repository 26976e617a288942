"""The SQLite engine: WAL, busy timeout, one writer at a time, schema version and migrations."""

from __future__ import annotations

import re
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from sqlalchemy import event, text
from sqlalchemy.engine import Engine
from sqlmodel import Session, SQLModel, create_engine, select

from appliance.errors import SchemaMismatch
from appliance.store.grams import cjk_grams
from appliance.store.models import (
    PAGE_COUNT_FILL, PAGE_COUNT_TRIGGERS, PAGEGRAMS_DDL, PAGEGRAMS_FILL, PAGETEXT_DDL,
    PAGETEXT_FILL, PAGETEXT_REVIEW_FILL, SCHEMA_VERSION, SchemaMeta, PageStatus,
)

BUSY_TIMEOUT_MS = 15_000


def _sqlite_engine(path: Path, immediate: bool) -> Engine:
    engine = create_engine(f"sqlite:///{path}", connect_args={
        "check_same_thread": False, "timeout": BUSY_TIMEOUT_MS / 1000,
        # We issue BEGIN ourselves (below): pysqlite's implicit transactions would
        # start too late to hold the write lock for a whole read-modify-write.
        "isolation_level": None,
    })

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn, _record):
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        cur.execute("PRAGMA synchronous=FULL")  # a committed page survives power loss
        cur.execute("PRAGMA foreign_keys=ON")
        cur.close()
        dbapi_conn.create_function("cjk_grams", 1, cjk_grams, deterministic=True)  # PAGEGRAMS_FILL

    @event.listens_for(engine, "begin")
    def _on_begin(conn):
        # Writers take the lock up front, so two claimers can never both read the
        # same queued page; readers stay deferred and never block in WAL mode.
        conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")

    return engine


# Version -> the statements that bring a database of that version one version up.
MIGRATIONS: dict[str, list[str]] = {
    "1": [  # confidence, routing and review; retention
        "ALTER TABLE page ADD COLUMN review_since FLOAT",
        "ALTER TABLE page ADD COLUMN review_owner VARCHAR",
        "ALTER TABLE page ADD COLUMN review_lock_expires_at FLOAT",
        "ALTER TABLE page ADD COLUMN options JSON",
        "ALTER TABLE pageresult ADD COLUMN confidence FLOAT",
        "ALTER TABLE pageresult ADD COLUMN signals JSON",
        "ALTER TABLE pageresult ADD COLUMN reasons JSON",
        "ALTER TABLE document ADD COLUMN purged_at FLOAT",
    ],
    "2": [  # idempotent submissions (the table itself is new); watched files' mtime
        "ALTER TABLE document ADD COLUMN source_mtime_ns INTEGER",
    ],
    "3": [  # pages read several at once: crash attribution
        "ALTER TABLE page ADD COLUMN crash_suspect BOOLEAN NOT NULL DEFAULT 0",
    ],
    "4": [],  # documents' key fields: the fieldset table is new
    "5": [  # the values a vision model read for a page's fields
        "ALTER TABLE pageresult ADD COLUMN field_answer JSON",
    ],
    "6": [  # full-text search (its index and the triggers are made with the tables)
        PAGETEXT_FILL,
        *(f"ALTER TABLE document ADD COLUMN pages_{status} INTEGER NOT NULL DEFAULT 0"
          for status in PageStatus),
        PAGE_COUNT_FILL,
        "ALTER TABLE idempotencykey ADD COLUMN sha256 VARCHAR",  # uploads with a password
    ],
    "7": [  # results that cannot be written end output_failed (the contenthold table is
        # new); the review queue computed in SQL (store.reviews)
        "ALTER TABLE document ADD COLUMN output_error VARCHAR",
        "CREATE INDEX IF NOT EXISTS ix_page_review ON page (status, review_owner)",
    ],
    "8": [],  # the Document Intelligence API: the analysis table is new
    "9": [  # search: pages waiting for review by their machine text, CJK text by its pairs
        PAGETEXT_REVIEW_FILL,
        PAGEGRAMS_FILL,
    ],
    "10": [  # born-digital pages read from their own text, asked per document
        "ALTER TABLE document ADD COLUMN text_layer VARCHAR",
    ],
    "11": [  # each page's barcodes
        "ALTER TABLE pageresult ADD COLUMN barcodes JSON",
    ],
    "12": [  # born-digital pages go ahead of scans
        "ALTER TABLE page ADD COLUMN born_digital BOOLEAN NOT NULL DEFAULT 0",
    ],
    "13": [  # each page's selection marks
        "ALTER TABLE pageresult ADD COLUMN selection_marks JSON",
    ],
    "14": [  # CJK text's pairs across the line breaks inside its words (grams.unwrapped)
        "DELETE FROM pagegrams",
        PAGEGRAMS_FILL,
    ],
}


_ADD_COLUMN = re.compile(r"ALTER TABLE (\w+) ADD COLUMN (\w+)")


def _adds_existing_column(session: Session, statement: str) -> bool:
    """A column a later version's table was made with already: a table that is newer
    than the store's version is created whole (``create_all``) before the migrations."""
    if (match := _ADD_COLUMN.match(statement)) is None:
        return False
    columns = session.exec(text(f"PRAGMA table_info({match[1]})")).all()
    return any(column[1] == match[2] for column in columns)


class Database:
    """Owns the two engines on one SQLite file: one for writes, one for reads."""

    def __init__(self, path: Path):
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._writer = _sqlite_engine(path, immediate=True)
        self._reader = _sqlite_engine(path, immediate=False)
        self._init_schema()

    def _init_schema(self) -> None:
        SQLModel.metadata.create_all(self._writer)  # new tables; new columns: MIGRATIONS
        with self.write() as session:
            session.exec(text(PAGETEXT_DDL))
            session.exec(text(PAGEGRAMS_DDL))
            meta = session.get(SchemaMeta, "schema_version")
            if meta is None:
                session.add(SchemaMeta(key="schema_version", value=str(SCHEMA_VERSION)))
                self._add_triggers(session)
                return
            while meta.value in MIGRATIONS:  # each step one version up, in this transaction
                for statement in MIGRATIONS[meta.value]:
                    if not _adds_existing_column(session, statement):
                        session.exec(text(statement))
                meta.value = str(int(meta.value) + 1)
                session.add(meta)
            if meta.value != str(SCHEMA_VERSION):
                raise SchemaMismatch(
                    f"database {self.path} has schema version {meta.value}, this build needs "
                    f"{SCHEMA_VERSION}; run the matching appliance version or move the data "
                    f"directory aside to start fresh")
            self._add_triggers(session)

    @staticmethod
    def _add_triggers(session: Session) -> None:
        """After the migrations: the triggers name columns they may add."""
        for statement in PAGE_COUNT_TRIGGERS:
            session.exec(text(statement))

    @contextmanager
    def write(self) -> Iterator[Session]:
        """One write transaction: committed on success, rolled back on any error."""
        with Session(self._writer, expire_on_commit=False) as session:
            with session.begin():
                yield session

    @contextmanager
    def read(self) -> Iterator[Session]:
        with Session(self._reader, expire_on_commit=False) as session:
            with session.begin():
                yield session

    def schema_version(self) -> int:
        with self.read() as session:
            return int(session.exec(select(SchemaMeta.value).where(
                SchemaMeta.key == "schema_version")).one())

    def close(self) -> None:
        self._writer.dispose()
        self._reader.dispose()
