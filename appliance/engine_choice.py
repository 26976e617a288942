"""Which engine this host's workers run, and what the configuration tells their page
stages: the choice `engine.name = "auto"` makes between the vision model and the
embedded engine, with the notice the operator gets when it falls back, and one worker
per remote endpoint. The daemon, the doctor and the benches ask it alike, so a bench
measures the workers the daemon would start.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

from appliance.config import Settings
from appliance.engines import registry
from appliance.errors import ConfigError, ModelError
from appliance.fields.schema import schemas
from appliance.gguf.pair import inspect_model
from appliance.pipeline.host import WorkerSpec
from appliance.pipeline.stages import PageSettings


def result_cache_dir(settings: Settings) -> Path | None:
    """Where the workers keep the readings they may serve again; None: no cache."""
    return settings.paths.data_dir / "cache" if settings.engine.result_cache else None


def page_settings(settings: Settings) -> PageSettings:
    """What the configuration tells every worker's page stages (``pipeline.stages``)."""
    return PageSettings(
        preprocess=settings.preprocess, pdf=settings.pdf, cache_dir=result_cache_dir(settings),
        second_opinion_bands=((settings.review.review_below, settings.review.accept_from)
                              if settings.review.second_opinion else None),
        second_opinion_languages=settings.review.second_opinion_languages,
        place_vision_text=settings.output.place_vision_text,
        page_furniture=settings.output.page_furniture, barcodes=settings.output.barcodes,
        selection_marks=settings.output.selection_marks,
        field_specs=schemas(settings.fields))


def _worker_spec(settings: Settings, engine: str, options: dict) -> WorkerSpec:
    return WorkerSpec(engine, options, settings.logging.level, page_settings(settings))


# What the operator is told when `auto` cannot run the vision model it was set for, in
# English (the log, the status API, the web UI's English); the web UI says each case in
# its reader's language, the model's failure (``reason``) too
ENGINE_NOTICES = {
    "no_model": "No vision model is configured, so the embedded {engine} engine ({library}) "
                "is reading pages. To add one, put a Gemma GGUF and its mmproj in models/ and "
                "set engine.model and engine.mmproj (see models/README.md).",
    "model_failed": "The configured vision model failed its checks ({reason}), so the "
                    "embedded {engine} engine is reading pages. Run `appliance doctor` for "
                    "details.",
    "model_failed_remote": "The configured vision model failed its checks ({reason}), so "
                           "only the remote endpoints read pages. Run `appliance doctor` for "
                           "details.",
}


@dataclass(frozen=True)
class EngineNotice:
    """Why pages are not read by the vision model `auto` was set for: ``case`` (a key of
    ENGINE_NOTICES) and its values (the engine reading instead, the model's failure's
    code and message)."""

    case: str
    values: dict[str, str]

    def __str__(self) -> str:
        return ENGINE_NOTICES[self.case].format(reason=self.values.get("message"), **self.values)


def resolve_engine(settings: Settings) -> tuple[WorkerSpec | None, EngineNotice | None]:
    """Which engine this host's workers run (None: only remote endpoints read pages),
    and a notice for the operator when `auto` had to fall back to the embedded engine
    (registry.FALLBACK) or to the remote endpoints."""
    engine = settings.engine
    if not registry.reads_local(engine.name):
        return None, None

    def spec(entry: registry.EngineEntry) -> WorkerSpec:
        return _worker_spec(settings, entry.name, entry.options(engine))

    wanted, strict = registry.configured(engine.name), registry.strict(engine.name)
    fallback = registry.entry(registry.FALLBACK)
    remote = registry.reads_remote(engine.name) and bool(engine.remote)
    if not wanted.model_files:
        return spec(wanted), None
    if not (engine.model and engine.mmproj):
        if strict:
            raise ConfigError(f"engine.name = '{wanted.name}' needs engine.model and "
                              f"engine.mmproj; see models/README.md")
        if remote:  # the endpoints read every page; no local vision model is expected
            return None, None
        return spec(fallback), EngineNotice("no_model", {"engine": fallback.name,
                                                         "library": fallback.library})
    try:
        inspect_model(engine.model, engine.mmproj)
    except ModelError as exc:
        if strict:
            raise
        failure = {"code": exc.code, "message": exc.message}
        if remote:
            return None, EngineNotice("model_failed_remote", failure)
        return spec(fallback), EngineNotice("model_failed", {**failure,
                                                             "engine": fallback.name})
    return spec(wanted), None


def remote_specs(settings: Settings) -> list[WorkerSpec]:
    """One worker per [[engine.remote]] endpoint, when engine.name sends pages there."""
    engine = settings.engine
    if not registry.reads_remote(engine.name):
        return []
    entry = registry.remote_engine()
    return [_worker_spec(settings, entry.name,
                         {**entry.options(engine), "endpoint": asdict(endpoint)})
            for endpoint in engine.remote]
