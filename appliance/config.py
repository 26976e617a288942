"""config.toml -> typed settings.

The file at the top of the repository is the documented default. Every section and
key is declared here once, as a dataclass field; the loader walks those declarations,
so an unknown or misspelled key or a value of the wrong type stops start-up with a
message that names the key and the fix. Relative paths are resolved against the
directory of the config file, so a config and its data directory move together.
"""

from __future__ import annotations

import difflib
import ipaddress
import os
import re
import tomllib
import types
import typing
import urllib.parse
from dataclasses import dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import Literal

from appliance import locales
from appliance.engines.names import AUTO, CONFIG_NAMES, ENGINE_NAMES, REMOTE
from appliance.errors import ConfigError
from appliance.fields.choices import LOCATES, PICKS
from appliance.fields.kinds import KINDS

CONFIG_ENV = "APPLIANCE_CONFIG"
DEFAULT_CONFIG = Path(__file__).resolve().parent.parent / "config.toml"


@dataclass
class ServerSettings:
    host: str = "127.0.0.1"
    port: int = field(default=8480, metadata={"min": 0, "max": 65535})
    # On SIGTERM: how long pages being read may take to finish before they are queued
    # again; the systemd unit's TimeoutStopSec must be longer.
    drain_timeout_s: float = field(default=60.0, metadata={"min": 0, "max": 3600})
    # Reverse proxies (addresses, CIDRs) whose X-Forwarded-For and X-Forwarded-Proto
    # name the client; empty: none, every request is judged by its own peer address.
    trusted_proxies: list[str] = field(default_factory=list, metadata={"empty_ok": True})


@dataclass
class PathSettings:
    data_dir: Path = Path("var/data")
    output_dir: Path = Path("var/output")

    # the data directory's layout, in one place for the daemon and the offline commands
    @property
    def database(self) -> Path:
        return self.data_dir / "appliance.db"

    @property
    def spool(self) -> Path:
        return self.data_dir / "spool"

    @property
    def temp(self) -> Path:
        """The daemon's temporary files (request bodies, the UI's uploads), one folder a run."""
        return self.data_dir / "tmp"


RETRY_RUNGS = ("greedy", "sampled", "tiled")
# export.SUFFIXES names each file; fields.json is written for typed documents only
OUTPUT_FORMATS = ("md", "json", "txt", "hocr", "alto", "pdf", "fields.json")
DOC_TYPES = ("generic", "receipt", "invoice", "contract", "report", "table", "handwriting",
             "id_card", "fapiao")


@dataclass
class RemoteEndpoint:
    """One OpenAI-compatible vision server (llama-server, vLLM, Ollama, ...), an
    [[engine.remote]] table. Its pages are read there; everything else stays here."""

    url: str = field(default="", metadata={"required": True})  # the API base, e.g. https://gpu2:8080/v1
    model: str = field(default="", metadata={"required": True})  # as the server's /v1/models lists it
    name: str = ""  # a label for logs, metrics and provenance; defaults to the URL's host:port
    api_key: str = ""  # sent as a Bearer token, never logged; prefer api_key_file
    api_key_file: Path | None = None
    max_concurrency: int = field(default=4, metadata={"min": 1, "max": 256})  # its pages in flight
    # connecting, and the longest silence in an answer; past it the endpoint is taken out
    timeout_s: float = field(default=60.0, metadata={"min": 1})
    tls_verify: bool = True
    ca_file: Path | None = None  # a site CA for the server's certificate
    image_side: int = field(default=896, metadata={"min": 224, "max": 4096})  # the model's input
    # server-specific request fields, e.g. { repeat_penalty = 1.0 } for llama.cpp
    extra: dict = field(default_factory=dict, metadata={"empty_ok": True})


@dataclass
class EngineSettings:
    name: str = field(default=AUTO, metadata={"choices": CONFIG_NAMES})
    model: Path | None = None
    mmproj: Path | None = None
    # the cores each worker's engine uses; the classic engine reads as many pages at once,
    # a core each, and a page alone on all of them (engines.registry)
    threads: int = field(default=2, metadata={"min": 1, "max": 256})
    n_ctx: int = field(default=4096, metadata={"min": 512, "max": 131072})
    n_batch: int = field(default=512, metadata={"min": 32, "max": 8192})
    n_gpu_layers: int = field(default=-1, metadata={"min": -1})
    flash_attn: bool = True
    max_tokens: int = field(default=0, metadata={"min": 0})
    fixed_tokens: int = field(default=0, metadata={"min": 0})
    retry_ladder: list[str] = field(default_factory=lambda: list(RETRY_RUNGS),
                                    metadata={"choices": RETRY_RUNGS})
    auto_tiling: bool = True
    # pages the vision engine reads at once, each with its own KV cache of n_ctx
    parallel: int | Literal["auto"] = field(default="auto", metadata={"min": 1, "max": 64})
    page_context: bool = True
    result_cache: bool = True
    remote: list[RemoteEndpoint] = field(default_factory=list)


@dataclass
class WorkerSettings:
    count: int = field(default=1, metadata={"min": 1, "max": 64})
    page_timeout_s: float = field(default=120.0, metadata={"min": 1})
    warmup_timeout_s: float = field(default=180.0, metadata={"min": 1})
    max_attempts: int = field(default=3, metadata={"min": 1, "max": 20})
    poison_crashes: int = field(default=2, metadata={"min": 1, "max": 20})
    recycle_after_pages: int = field(default=1000, metadata={"min": 0})
    max_worker_rss_mb: int = field(default=0, metadata={"min": 0})
    max_worker_growth_mb: int = field(default=768, metadata={"min": 0})
    max_worker_vram_mb: int = field(default=0, metadata={"min": 0})


@dataclass
class OutputSettings:
    # what a finished document from a watched folder is written as in paths.output_dir
    formats: list[str] = field(default_factory=lambda: list(OUTPUT_FORMATS),
                               metadata={"choices": OUTPUT_FORMATS})
    # what a document sent over an API or the web UI is written as there: nothing unless
    # asked, since its sender fetches what it wants (every format is made on request)
    upload_formats: list[str] = field(default_factory=list,
                                      metadata={"choices": OUTPUT_FORMATS, "empty_ok": True})
    # the classic engine reads each vision page too, so that the model's words can be
    # placed on its word boxes (hOCR, ALTO, the JSON's lines); false saves that CPU
    # time, and vision pages then carry no positions
    place_vision_text: bool = True
    # a page's running header, footer and page number (``reading.furniture``): left where
    # they stand ("keep"), after the body under their own heading ("separate"), or out
    # of the text and Markdown ("drop"); they keep their role in the JSON, hOCR and ALTO
    page_furniture: Literal["keep", "separate", "drop"] = "separate"
    # the barcodes and QR codes of every page (a fapiao's QR code checks its fields); a
    # page read from a PDF's own text is rendered for them
    barcodes: bool = True
    # the check boxes of every page, found on its image and placed in its text as
    # ":selected:" and ":unselected:"; a page read from a PDF's own text is rendered
    selection_marks: bool = True
    # the searchable PDF: PDF/A-2b, PDF/A-3b, or a plain PDF (PDF/A that cannot be made,
    # e.g. from a born-digital PDF with fonts not embedded, is written plain, and logged)
    pdf_type: Literal["pdfa-2", "pdfa-3", "pdf"] = "pdfa-2"


@dataclass
class RasterSettings:
    pdf_dpi: int = field(default=200, metadata={"min": 50, "max": 600})


@dataclass
class PdfSettings:
    """Born-digital PDF pages read from their own text (``engines.pdf_text``); the
    measured reason for each limit is in config.toml."""

    text_layer: Literal["auto", "ignore", "prefer"] = "auto"
    max_page_chars: int = field(default=100_000, metadata={"min": 1})
    max_unmapped_share: float = field(default=0.02, metadata={"min": 0.0, "max": 1.0})
    max_outside_share: float = field(default=0.05, metadata={"min": 0.0, "max": 1.0})
    max_duplicate_share: float = field(default=0.1, metadata={"min": 0.0, "max": 1.0})
    invisible_sample_lines: int = field(default=8, metadata={"min": 1, "max": 100})
    max_invisible_cer: float = field(default=0.25, metadata={"min": 0.0, "max": 1.0})
    max_uncovered_ink: float = field(default=0.5, metadata={"min": 0.0, "max": 1.0})
    min_picture_area: float = field(default=0.005, metadata={"min": 0.0, "max": 1.0})
    scan_min_area: float = field(default=0.5, metadata={"min": 0.0, "max": 1.0})


@dataclass
class PreprocessSettings:
    # Page clean-up before recognition, the same for both engines. Each step can be
    # switched off; what each did is recorded in the page's provenance.
    enabled: bool = True
    orientation: bool = True
    deskew: bool = True
    deskew_min_angle_deg: float = field(default=1.5, metadata={"min": 0.0, "max": 45.0})
    crop_borders: bool = True
    contrast: bool = True
    denoise: bool = False
    resolution_profiles: bool = True


@dataclass
class MemorySettings:
    """GPU memory governance (host memory on hosts without an NVIDIA GPU)."""

    device_index: int = field(default=0, metadata={"min": 0})
    vram_load_limit: float = field(default=0.90, metadata={"min": 0.05, "max": 1.0})
    vram_high_watermark: float = field(default=0.85, metadata={"min": 0.05, "max": 1.0})
    vram_low_watermark: float = field(default=0.75, metadata={"min": 0.01, "max": 1.0})
    vram_critical: float = field(default=0.95, metadata={"min": 0.05, "max": 1.0})
    critical_samples: int = field(default=3, metadata={"min": 1})
    sample_interval_s: float = field(default=0.2, metadata={"min": 0.01})


@dataclass
class LimitSettings:
    max_bytes: int = field(default=200_000_000, metadata={"min": 1})
    max_pages: int = field(default=2000, metadata={"min": 1})
    max_pixels: int = field(default=120_000_000, metadata={"min": 10_000})


@dataclass
class QueueSettings:
    # Pages waiting per lane before intake answers "busy" (API 429, UI message,
    # watched files left in place for later).
    max_queued_pages_interactive: int = field(default=2000, metadata={"min": 1})
    max_queued_pages_batch: int = field(default=20000, metadata={"min": 1})
    retry_after_s: int = field(default=30, metadata={"min": 1})
    # Scheduling: a page's turn is its document's arrival time plus these delays
    # (lower goes first), so interactive work overtakes batch work and small
    # documents overtake large ones, while waiting long enough always wins.
    batch_delay_s: float = field(default=600.0, metadata={"min": 0})
    per_page_delay_s: float = field(default=2.0, metadata={"min": 0})
    max_size_delay_s: float = field(default=1800.0, metadata={"min": 0})
    # A born-digital PDF page is read from its own text in about a tenth of a second
    # (0.13 s measured, against 0.5 to 3 s for a scanned page on the classic engine):
    # it goes before scanned pages that arrived up to this long before it, so it does
    # not wait behind a folder of scans (38 s seen), while scans still age past a flood
    # of such pages.
    born_digital_advance_s: float = field(default=300.0, metadata={"min": 0})


@dataclass
class WatchFolder:
    """One watched (network) folder, a [[watch]] table."""

    path: Path = field(metadata={"required": True})
    name: str = ""  # a label for logs, tags and the UI; defaults to the folder's name
    mode: Literal["auto", "events", "poll"] = "auto"
    recursive: bool = False
    stability_s: float = field(default=5.0, metadata={"min": 0})
    failed_hold_s: float = field(default=60.0, metadata={"min": 0})
    poll_interval_s: float = field(default=5.0, metadata={"min": 0.1})
    rescan_interval_s: float = field(default=300.0, metadata={"min": 1})
    ignore: list[str] = field(default_factory=list)  # regexes on the name, added to the defaults
    doc_type: str = field(default="generic", metadata={"choices": DOC_TYPES})
    lane: Literal["interactive", "batch"] = "batch"
    engine: str = field(default="", metadata={"choices": ("", *ENGINE_NAMES)})
    on_duplicate: Literal["skip", "reprocess"] = "skip"
    disposition: Literal["move", "delete", "keep"] = "move"
    processed_dir: Path | None = None
    failed_dir: Path | None = None
    password: str = ""  # for encrypted PDFs dropped in this folder


@dataclass
class RequiredField:
    # A field a document type must show; its document goes to review when it is missing.
    doc_type: str = field(default="", metadata={"required": True, "choices": DOC_TYPES})
    name: str = field(default="", metadata={"required": True})
    pattern: str = field(default="", metadata={"required": True})  # a Python regex


@dataclass
class FieldSetting:
    """One field of a document type, a [[fields.<type>]] table: it replaces the shipped
    field of the same name, or adds one (``appliance.fields.schema``)."""

    name: str = field(default="", metadata={"required": True})
    kind: str = field(default="", metadata={"required": True, "choices": KINDS})
    required: bool = False
    # the words printed before or above the value; a line with one of not_labels is
    # not the field's (CASH is not the TOTAL)
    labels: list[str] = field(default_factory=list, metadata={"empty_ok": True})
    not_labels: list[str] = field(default_factory=list, metadata={"empty_ok": True})
    choices: list[str] = field(default_factory=list, metadata={"empty_ok": True})  # enum
    pattern: str = ""  # regex: the value must match it whole
    pick: str = field(default="first", metadata={"choices": PICKS})
    locate: str = field(default="label", metadata={"choices": LOCATES})
    # taken without its label when none is labelled (dates, IBANs, VAT ids, enums)
    anywhere: bool = False


@dataclass
class FieldsSettings:
    # How this site's documents write a date like 09/03/2024: day first (9 March), or
    # false for month first (September 3, as in the US). A date that can only be read
    # one way (25/12/2024, 12/25/2024) is read that way either way.
    day_first: bool = True
    # [[fields.receipt]], [[fields.invoice]], ...: a document type's fields over the
    # shipped ones (receipt, invoice and fapiao have fields out of the box)
    generic: list[FieldSetting] = field(default_factory=list)
    receipt: list[FieldSetting] = field(default_factory=list)
    invoice: list[FieldSetting] = field(default_factory=list)
    contract: list[FieldSetting] = field(default_factory=list)
    report: list[FieldSetting] = field(default_factory=list)
    table: list[FieldSetting] = field(default_factory=list)
    handwriting: list[FieldSetting] = field(default_factory=list)
    id_card: list[FieldSetting] = field(default_factory=list)
    fapiao: list[FieldSetting] = field(default_factory=list)


@dataclass
class ReviewSettings:
    # false: every page is accepted as read (confidence is still scored and stored).
    enabled: bool = True
    # Routing by page confidence (0-1): below review_below a page waits for review; up
    # to accept_from a deterministic sample of sample_rate is reviewed; above, accepted.
    review_below: float = field(default=0.5, metadata={"min": 0.0, "max": 1.0})
    accept_from: float = field(default=0.75, metadata={"min": 0.0, "max": 1.0})
    sample_rate: float = field(default=0.1, metadata={"min": 0.0, "max": 1.0})
    always_review: list[str] = field(default_factory=list,
                                     metadata={"choices": DOC_TYPES, "empty_ok": True})
    # A reading short of accept_from is compared with another engine's where that could
    # move it to another band: a vision reading with a classic one, a classic reading
    # with Tesseract's (when installed).
    second_opinion: bool = True
    # Tesseract's languages for that second reading, e.g. "eng+deu" (each installed as
    # Debian's tesseract-ocr-<lang>); a page is read in those of its own script.
    second_opinion_languages: str = "eng+chi_sim"
    lock_minutes: float = field(default=15.0, metadata={"min": 1.0, "max": 24 * 60.0})
    users_file: Path = Path("users.toml")
    required_fields: list[RequiredField] = field(default_factory=list)


@dataclass
class RetentionSettings:
    # Originals and page images of finished documents older than this are deleted;
    # results, hashes and the audit trail stay.
    hot_days: float = field(default=7.0, metadata={"min": 0.0})
    # How often the purge runs.
    interval_hours: float = field(default=1.0, metadata={"min": 0.01})
    # Intake refuses new files while the data directory's file system has less free.
    min_free_disk_mb: int = field(default=2048, metadata={"min": 0})
    # An API client's Idempotency-Key is remembered at least this long.
    idempotency_hours: float = field(default=24.0, metadata={"min": 1.0})


@dataclass
class AuthSettings:
    # API keys (digests only), managed with `appliance keys`. Auth is on once this file
    # holds a key or review.users_file an account: then every route but /healthz needs
    # a key (REST API, /readyz, /metrics) or a login (web UI, review console).
    api_keys_file: Path = Path("api-keys.toml")
    # Addresses (CIDRs) that may connect at all; empty: any. /healthz is always open.
    allow_from: list[str] = field(default_factory=list, metadata={"empty_ok": True})
    # Requests a minute per API key, unless the key has its own limit.
    rate_per_minute: int = field(default=600, metadata={"min": 1})
    # Origins allowed to call the API from a browser page elsewhere; empty: none (CORS off).
    cors_origins: list[str] = field(default_factory=list, metadata={"empty_ok": True})
    # On a server.host other hosts can reach, auth stays on while no key and no account
    # exist (nobody gets in, and the daemon refuses to start so); true serves it open.
    open: bool = False


@dataclass
class WebhookSettings:
    # Hosts a completion webhook may be sent to: names ("hooks.example.com"), wildcards
    # ("*.example.com") or addresses and CIDRs ("10.1.2.0/24"). Empty: no webhooks.
    allow_hosts: list[str] = field(default_factory=list, metadata={"empty_ok": True})


@dataclass
class DocIntelSettings:
    """The Document Intelligence API (``/documentintelligence``, ``appliance.docintel``)."""

    # A page routed to review: "wait" keeps the analysis running until a reviewer has
    # decided it; "skip" answers at once with the machine reading, its words' confidence
    # lowered, while the page still waits in the review console.
    review: Literal["wait", "skip"] = "wait"
    # The Retry-After (seconds) of a running analysis: how long a client waits between
    # polls; 0 sends none, so each client polls at its own interval.
    retry_after_s: int = field(default=1, metadata={"min": 0, "max": 60})
    # The locales features=languages tells apart (``docintel.languages``): a script that
    # one listed language alone writes costs nothing; two or more of one script cost the
    # model of each, 30 to 40 MB a language, once a request asks for languages.
    languages: list[str] = field(default_factory=lambda: list(locales.DEFAULT),
                                 metadata={"choices": locales.LOCALES})


@dataclass
class LoggingSettings:
    level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"


@dataclass
class Settings:
    server: ServerSettings = field(default_factory=ServerSettings)
    paths: PathSettings = field(default_factory=PathSettings)
    engine: EngineSettings = field(default_factory=EngineSettings)
    workers: WorkerSettings = field(default_factory=WorkerSettings)
    output: OutputSettings = field(default_factory=OutputSettings)
    raster: RasterSettings = field(default_factory=RasterSettings)
    pdf: PdfSettings = field(default_factory=PdfSettings)
    preprocess: PreprocessSettings = field(default_factory=PreprocessSettings)
    memory: MemorySettings = field(default_factory=MemorySettings)
    limits: LimitSettings = field(default_factory=LimitSettings)
    queue: QueueSettings = field(default_factory=QueueSettings)
    watch: list[WatchFolder] = field(default_factory=list)
    review: ReviewSettings = field(default_factory=ReviewSettings)
    fields: FieldsSettings = field(default_factory=FieldsSettings)
    retention: RetentionSettings = field(default_factory=RetentionSettings)
    auth: AuthSettings = field(default_factory=AuthSettings)
    webhooks: WebhookSettings = field(default_factory=WebhookSettings)
    di: DocIntelSettings = field(default_factory=DocIntelSettings)
    logging: LoggingSettings = field(default_factory=LoggingSettings)
    source: Path | None = None  # the file these settings came from; not a TOML key

    def output_formats(self, watch_folder: str | None) -> list[str]:
        """What a finished document is written as in paths.output_dir: a watched
        folder's (``watch_folder``, its name) as output.formats, any other as
        output.upload_formats."""
        return self.output.formats if watch_folder else self.output.upload_formats

    def pdf_password(self, watch_folder: str | None) -> str | None:
        """The password of the PDFs of the [[watch]] folder named so (None: no folder, or
        none set). The only secret a page needs: it stays in the config, never in the
        store."""
        return next((f.password for f in self.watch if f.name == watch_folder and f.password),
                    None)


def config_path(explicit: str | Path | None = None) -> Path:
    """--config wins, then $APPLIANCE_CONFIG, then the config.toml shipped at the top."""
    chosen = explicit or os.environ.get(CONFIG_ENV) or DEFAULT_CONFIG
    return Path(chosen).expanduser().resolve()


def load_settings(explicit: str | Path | None = None) -> Settings:
    path = config_path(explicit)
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"config file {path} does not exist: create it (copy config.toml) "
                          f"or point --config / ${CONFIG_ENV} at an existing file") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc}); fix the syntax at that line") from None
    return settings_from_dict(raw, base_dir=path.parent, source=path)


def dump_toml(sections: dict[str, dict]) -> str:
    """Write a config of [sections], [[lists]] of tables and [[section.lists]] inside a
    section (what tests and the benchmark generate)."""
    def value(v) -> str:
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, (int, float)):
            return repr(v)
        if isinstance(v, list):
            return "[" + ", ".join(value(item) for item in v) + "]"
        if isinstance(v, dict):
            return "{ " + ", ".join(f"{k} = {value(item)}" for k, item in v.items()) + " }"
        return '"' + str(v).replace("\\", "\\\\").replace('"', '\\"') + '"'

    def tables(v) -> bool:
        return isinstance(v, list) and bool(v) and all(isinstance(item, dict) for item in v)

    def table(header: str, body: dict, name: str) -> str:
        text = f"{header}\n" + "".join(f"{k} = {value(v)}\n" for k, v in body.items()
                                       if not tables(v)) + "\n"
        return text + "".join(table(f"[[{name}.{k}]]", item, f"{name}.{k}")
                              for k, v in body.items() if tables(v) for item in v)

    return "".join("".join(table(f"[[{name}]]", item, name) for item in body)
                   if isinstance(body, list) else table(f"[{name}]", body, name)
                   for name, body in sections.items())


def settings_from_dict(raw: dict, base_dir: Path, source: Path | None = None) -> Settings:
    where = source or "config"
    settings = _build(Settings, raw, prefix="", base_dir=base_dir, where=where)
    settings.source = source
    _check_watch_folders(settings, where)
    _check_review(settings.review, where)
    _check_networks(settings.auth.allow_from, "auth.allow_from", where)
    _check_networks(settings.server.trusted_proxies, "server.trusted_proxies", where)
    _check_remote(settings.engine, where)
    _check_fields(settings.fields, where)
    _check_di(settings.di, where)
    return settings


def _check_di(di: DocIntelSettings, where) -> None:
    if locales.told_apart(di.languages) < 2:  # nothing to tell apart
        raise ConfigError(f"{where}: di.languages = {di.languages!r} names one language, and "
                          f"zh-Hans and zh-Hant are one, Chinese; list at least two, e.g. "
                          f"[\"zh-Hans\", \"zh-Hant\", \"en\"]")


def _check_fields(settings: FieldsSettings, where) -> None:
    for doc_type in DOC_TYPES:
        names = set()
        for i, item in enumerate(getattr(settings, doc_type)):
            key = f"fields.{doc_type}[{i}]"
            if item.name in names:
                raise ConfigError(f"{where}: {key} repeats the field name {item.name!r}; "
                                  f"keep one table per field")
            names.add(item.name)
            if item.kind == "enum" and not item.choices:
                raise ConfigError(f"{where}: {key} is an enum without choices; add "
                                  f"choices = [\"...\", ...]")
            if item.kind == "regex" and not item.pattern:
                raise ConfigError(f"{where}: {key} is a regex field without a pattern; add "
                                  f"pattern = \"...\"")
            if item.pattern:
                try:
                    re.compile(item.pattern)
                except re.error as exc:
                    raise ConfigError(f"{where}: {key}.pattern is not a valid regular "
                                      f"expression ({exc}): {item.pattern!r}") from None
            if item.locate == "label" and not item.labels and item.kind in ("text", "money",
                                                                             "number", "regex"):
                raise ConfigError(f"{where}: {key} ({item.kind}) has no labels, so it can never "
                                  f"be found; add labels = [\"...\"] (the words printed "
                                  f"before its value)")


def _check_remote(engine: EngineSettings, where) -> None:
    names = set()
    for i, endpoint in enumerate(engine.remote):
        key = f"engine.remote[{i}]"
        url = urllib.parse.urlsplit(endpoint.url)
        if url.scheme not in ("http", "https") or not url.hostname:
            raise ConfigError(f"{where}: {key}.url = {endpoint.url!r} is not an http(s) URL; "
                              f"write the API base, e.g. \"http://gpu2:8080/v1\"")
        if url.username or url.password:
            raise ConfigError(f"{where}: {key}.url carries credentials; put the key in "
                              f"{key}.api_key_file instead")
        if endpoint.api_key and endpoint.api_key_file:
            raise ConfigError(f"{where}: {key} sets both api_key and api_key_file; keep one")
        endpoint.url = endpoint.url.rstrip("/")
        endpoint.name = endpoint.name or url.netloc
        if endpoint.name in names:
            raise ConfigError(f"{where}: two remote endpoints are named '{endpoint.name}'; "
                              f"give {key} a name of its own")
        names.add(endpoint.name)
    if engine.name == REMOTE and not engine.remote:
        raise ConfigError(f"{where}: engine.name = '{REMOTE}' needs at least one "
                          f"[[engine.remote]] table with its url and model")


def _check_networks(networks: list[str], key: str, where) -> None:
    for i, network in enumerate(networks):
        try:
            ipaddress.ip_network(network, strict=False)
        except ValueError:
            raise ConfigError(f"{where}: {key}[{i}] = {network!r} is not an address or "
                              f"network; write e.g. \"10.0.0.0/8\" or \"127.0.0.1\"") from None


_LANGUAGES = re.compile(r"[A-Za-z_]+(\+[A-Za-z_]+)*")


def _check_review(review: ReviewSettings, where) -> None:
    if review.review_below > review.accept_from:
        raise ConfigError(f"{where}: review.review_below ({review.review_below}) is above "
                          f"review.accept_from ({review.accept_from}); lower it or raise "
                          f"accept_from")
    if not _LANGUAGES.fullmatch(review.second_opinion_languages):
        raise ConfigError(f"{where}: review.second_opinion_languages = "
                          f"{review.second_opinion_languages!r} is not a list of Tesseract "
                          f"languages; write e.g. \"eng\" or \"eng+deu\"")
    for i, required in enumerate(review.required_fields):
        try:
            re.compile(required.pattern)
        except re.error as exc:
            raise ConfigError(f"{where}: review.required_fields[{i}].pattern is not a valid "
                              f"regular expression ({exc}); fix it") from None


def _inside(path: Path, tree: Path) -> bool:
    return path == tree or tree in path.parents


def _check_watch_folders(settings: Settings, where) -> None:
    """Rules on the [[watch]] folders: names of their own, a password a PDF can have,
    and a folder the appliance writes to must not be watched, or its own results would
    come back as new documents."""
    names = set()
    for i, folder in enumerate(settings.watch):
        key = f"watch[{i}]"
        folder.name = folder.name or folder.path.name
        if folder.name in names:
            raise ConfigError(f"{where}: two watched folders are named '{folder.name}'; "
                              f"give {key} its own name")
        names.add(folder.name)
        if "\0" in folder.password:  # qpdf and pdfium take passwords as C strings
            raise ConfigError(f"{where}: {key}.password holds a NUL character, which no "
                              f"PDF's password can; remove it")
        if folder.disposition == "move" and not (folder.processed_dir and folder.failed_dir):
            raise ConfigError(f"{where}: {key} has disposition = 'move' but no processed_dir "
                              f"and failed_dir; set both, or use 'keep' or 'delete'")
        written = {"paths.output_dir": settings.paths.output_dir,
                   "paths.data_dir": settings.paths.data_dir,
                   f"{key}.processed_dir": folder.processed_dir,
                   f"{key}.failed_dir": folder.failed_dir}
        for other in settings.watch:
            for label, target in written.items():
                if target is not None and _inside(target.resolve(), other.path.resolve()):
                    raise ConfigError(f"{where}: {label} ({target}) lies inside the watched "
                                      f"folder {other.path}; move it outside")


def _build(cls, raw: dict, prefix: str, base_dir: Path, where):
    known = {f.name: f for f in fields(cls) if f.name != "source"}
    for key in raw:
        if key not in known:
            hint = difflib.get_close_matches(key, known, n=1)
            fix = f"did you mean '{prefix}{hint[0]}'?" if hint else \
                f"valid keys here: {', '.join(sorted(known))}"
            raise ConfigError(f"{where}: unknown key '{prefix}{key}'; {fix} Remove or rename it.")
    hints = typing.get_type_hints(cls)
    values = {}
    for name, spec in known.items():
        dotted, kind = f"{prefix}{name}", hints[name]
        if is_dataclass(kind):  # a [section]; a missing one still gets resolved defaults
            section = raw.get(name, {})
            if not isinstance(section, dict):
                raise ConfigError(f"{where}: '{dotted}' must be a [{dotted}] table")
            values[name] = _build(kind, section, f"{dotted}.", base_dir, where)
        elif typing.get_origin(kind) is list and is_dataclass(typing.get_args(kind)[0]):
            tables = raw.get(name, [])  # [[name]] tables
            if not isinstance(tables, list) or not all(isinstance(t, dict) for t in tables):
                raise ConfigError(f"{where}: '{dotted}' must be written as [[{dotted}]] tables")
            item = typing.get_args(kind)[0]
            values[name] = [_build(item, table, f"{dotted}[{i}].", base_dir, where)
                            for i, table in enumerate(tables)]
        elif spec.metadata.get("required") and name not in raw:
            raise ConfigError(f"{where}: '{dotted}' is required; add it")
        elif name in raw:
            values[name] = _coerce(kind, raw[name], dotted, spec.metadata, base_dir, where)
        elif kind is Path:  # defaults are relative to the config file too
            values[name] = (base_dir / spec.default).resolve()
    return cls(**values)


def _coerce(kind, value, dotted: str, meta, base_dir: Path, where):
    if typing.get_origin(kind) in (typing.Union, types.UnionType) and int in typing.get_args(kind):
        return _coerce_number_or_word(kind, value, dotted, meta, where)
    if typing.get_origin(kind) is Literal:
        choices = typing.get_args(kind)
        if value not in choices:
            raise ConfigError(f"{where}: '{dotted}' = {value!r} is not allowed; "
                              f"use one of {', '.join(repr(c) for c in choices)}")
        return value
    if kind == Path | None:  # optional file: "" means none
        return None if value == "" else _coerce(Path, value, dotted, meta, base_dir, where)
    if kind is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: '{dotted}' must be a table, e.g. {{ key = 1.0 }}")
        return dict(value)
    if typing.get_origin(kind) is list:
        choices = meta.get("choices")
        if not isinstance(value, list) or (not value and not meta.get("empty_ok")) or (
                choices and any(item not in choices for item in value)):
            allowed = f" of {', '.join(repr(c) for c in choices)}" if choices else ""
            size = "a list" if meta.get("empty_ok") else "a non-empty list"
            raise ConfigError(f"{where}: '{dotted}' = {value!r} must be {size}{allowed}")
        return list(value)
    if kind is Path:
        if not isinstance(value, str) or not value:
            raise ConfigError(f"{where}: '{dotted}' must be a non-empty path string")
        path = Path(value).expanduser()
        return path if path.is_absolute() else (base_dir / path).resolve()
    if kind is bool:
        ok = isinstance(value, bool)
    elif kind is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif kind is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        value = float(value) if ok else value
    elif kind is str:
        ok = isinstance(value, str)
        if ok and meta.get("choices") and value not in meta["choices"]:
            raise ConfigError(f"{where}: '{dotted}' = {value!r} is not allowed; use one of "
                              f"{', '.join(repr(c) for c in meta['choices'])}")
    else:  # pragma: no cover - a field type this loader does not know is a programming error
        raise TypeError(f"unsupported config field type {kind} for {dotted}")
    if not ok:
        raise ConfigError(f"{where}: '{dotted}' = {value!r} must be of type {kind.__name__}")
    low, high = meta.get("min"), meta.get("max")
    if (low is not None and value < low) or (high is not None and value > high):
        bounds = f">= {low}" if high is None else f"between {low} and {high}"
        raise ConfigError(f"{where}: '{dotted}' = {value!r} is out of range; use a value {bounds}")
    return value


def _coerce_number_or_word(kind, value, dotted: str, meta, where):
    """``int | Literal[...]``: a whole number in range, or one of the words."""
    words = [word for arg in typing.get_args(kind) if typing.get_origin(arg) is Literal
             for word in typing.get_args(arg)]
    if isinstance(value, str) and value in words:
        return value
    low, high = meta["min"], meta["max"]
    if isinstance(value, int) and not isinstance(value, bool) and low <= value <= high:
        return value
    raise ConfigError(f"{where}: '{dotted}' = {value!r} is not allowed; use "
                      f"{' or '.join(repr(w) for w in words)} or a whole number between "
                      f"{low} and {high}")
