"""What every vision-language engine does with a page, whatever runs the model.

One page is one chat turn: the page image and the document type's prompt (with the
end of the previous page, if any). Each attempt of a page climbs the retry ladder
(after olmOCR): greedy, then sampled at a low temperature, then the page in
overlapping tiles. When the last rung degenerates too, the classic engine reads the
page and the result is flagged ``fallback``. An answer cut off by the token cap is
read again in tiles and stitched; small or dense print is read in tiles from the
first attempt.

A :class:`VisionEngine` subclass says only how one answer is generated: ``submit``
starts a generation of one image (a page or a tile) and returns a Future of its
:class:`Generation`, watched token by token as it is written (the repetition guard,
the token cap, the deadline, a cancel). The local llama.cpp engine decodes it in a
slot of its batched decoder; the remote engine streams it from an OpenAI-compatible
server.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from concurrent.futures import Future
from dataclasses import dataclass, replace

from PIL import Image

from appliance.engines.base import PageRequest, Question
from appliance.engines.converters import to_markdown
from appliance.engines.prompts import CONTEXT_VERSION, Prompt, prompt_for
from appliance.engines.registry import FALLBACK  # a request for the classic reader kept inside
from appliance.engines.tiling import (
    crop_tiles, decide_tiling, plan_region_tiles, plan_tiles, stitch,
)
from appliance.errors import DegenerateOutput, PagePreempted, PageTimeout
from appliance.gguf.families import Family
from appliance.page import Recognition
from appliance.quality.markdown import markdown_to_text
from appliance.raster.layout import Layout, analyze

log = logging.getLogger(__name__)

TILE_OVERLAP = 0.15
SAMPLED_TEMPERATURE = 0.2  # the ladder's second rung
SEED = 0  # sampled attempts stay reproducible


@dataclass
class Generation:
    """One image's answer."""

    text: str
    tokens: list[dict]  # per token: "t" its text, "lp" its log-probability, "h" the entropy
    # "stop" (end of turn) | "length" | "deadline" | "degenerate" | "cancelled"
    stop: str
    reason: str = ""


class VisionEngine:
    """The page semantics shared by the vision engines; see the module's docstring."""

    name: str
    slots: int

    def __init__(self, *, image_side: int, retry_ladder: list[str] | None, max_tokens: int,
                 fixed_tokens: int, auto_tiling: bool, threads: int,
                 family: Family | None = None):
        self.image_side = image_side  # the model's square input
        # how the model wants to be asked and read; None: a model of unknown family
        # (behind a server), asked with the instructions, answering Markdown
        self.family = family
        self.ladder = retry_ladder or ["greedy", "sampled", "tiled"]
        self.max_tokens = max_tokens  # 0: each document type's own cap
        self.fixed_tokens = fixed_tokens  # benchmarks: every answer exactly this long
        self.auto_tiling = auto_tiling  # strips from the first attempt for small or dense print
        self._classic = None  # the fallback reader, created on first need
        self._classic_lock = threading.Lock()  # page threads share one classic reader
        self._threads = threads

    # --- what a subclass provides ---

    @property
    def model_id(self) -> str:
        raise NotImplementedError

    def submit(self, image: Image.Image, prompt: Prompt, request: PageRequest, *,
               sampled: bool, give_up: threading.Event | None = None) -> Future:
        """Start generating one image's answer; the Future holds its Generation.
        ``give_up`` set, or ``request.cancel`` set, ends it ("cancelled")."""
        raise NotImplementedError

    def wait(self, future: Future) -> Generation:
        return future.result()

    def provenance(self) -> dict:
        """What every page's provenance records about the model that read it."""
        return {}

    def close_model(self) -> None:
        raise NotImplementedError

    # --- the page ---

    def reader(self, request: PageRequest) -> tuple[str, str]:
        if request.engine == FALLBACK:
            return self._classic_reader().reader(request)
        return self.name, self.model_id

    def recipe(self, request: PageRequest) -> str:
        if request.engine == FALLBACK:
            return self._classic_reader().recipe(request)
        context = (f" {CONTEXT_VERSION}:{hashlib.sha256(request.context.encode()).hexdigest()}"
                   if request.context else "")
        return (f"{self.prompt(request.doc_type).version} max_tokens={self.max_tokens} "
                f"fixed_tokens={self.fixed_tokens}{context}")

    def prompt(self, doc_type: str) -> Prompt:
        return prompt_for(doc_type, self.family)

    def markdown(self, answer: str) -> str:
        """An answer in the appliance's Markdown, whatever format the model writes."""
        return to_markdown(self.family.output if self.family else "markdown", answer)

    def recognize(self, image: Image.Image, request: PageRequest) -> Recognition:
        if request.engine == FALLBACK:
            return self._read_classic(image, request)
        return self._read(image, request)

    def generate(self, image: Image.Image, prompt: Prompt, request: PageRequest,
                 sampled: bool) -> Generation:
        return self.wait(self.submit(image, prompt, request, sampled=sampled))

    def answer_tokens(self, prompt: Prompt) -> int:
        """The token cap of one answer: a question's is its own, the bound of its schema."""
        if prompt.schema is not None:
            return prompt.max_tokens
        return self.fixed_tokens or min(prompt.max_tokens, self.max_tokens or prompt.max_tokens)

    def ask(self, image: Image.Image, question: Question, request: PageRequest) -> str | None:
        """The model's answer to ``question`` about the page: a JSON text of its schema,
        greedy; None when it did not end within its token cap (the page's context was
        too small for the longest answer the schema allows). Raises as a page reading
        does when the page is taken back or its deadline passes."""
        prompt = Prompt(request.doc_type, question.version, question.text,
                        question.max_tokens, question.schema)
        generation = self.generate(image, prompt, replace(request, context=""), sampled=False)
        self._raise_if_failed(generation)
        if generation.stop != "stop":
            log.warning("the answer to %s ended early (%s: %s)", question.version,
                        generation.stop, generation.reason)
            return None
        return generation.text

    def _read(self, image: Image.Image, request: PageRequest) -> Recognition:
        prompt = self.prompt(request.doc_type)
        rung = self.ladder[min(request.attempt, len(self.ladder)) - 1]
        last_rung = request.attempt >= len(self.ladder)
        provenance = {"prompt_version": prompt.version, "rung": rung,
                      "context_chars": len(request.context), **self.provenance()}
        layout = None
        try:
            if rung == "tiled":
                return self._read_tiles(image, prompt, request, provenance, ["tiled"], layout)
            if self.auto_tiling:
                layout = analyze(image)
                decision = decide_tiling(image.width, image.height,
                                         char_height_px=layout.char_height_px,
                                         line_count=len(layout.line_boxes),
                                         model_side=self.image_side)
                provenance["tiling"] = decision.reason
                if decision.tile:  # small or dense print: strips from the start
                    return self._read_tiles(image, prompt, request, provenance, ["tiled"],
                                            layout)
            sampled = rung == "sampled"
            generation = self.generate(image, prompt, request, sampled=sampled)
            if sampled:
                provenance.update(self.sampling())
            if generation.stop == "length":  # too much text for one answer: read in strips
                log.info("page answer hit its token cap; reading it in tiles")
                return self._read_tiles(image, prompt, request, provenance,
                                        ["tiled", "truncated_retry"], layout)
            self._raise_if_failed(generation)
            return self._recognition(self.markdown(generation.text), generation.tokens,
                                     provenance, [])
        except DegenerateOutput as exc:
            if not last_rung:
                raise
            log.warning("last rung degenerated (%s); using the classic engine", exc.message)
            return self._fallback(image, request, provenance, exc.message)

    def sampling(self) -> dict:
        """How the sampled rung decodes, for the provenance."""
        return {"temperature": self.family.temperature if self.family else SAMPLED_TEMPERATURE}

    def _read_tiles(self, image, prompt: Prompt, request, provenance, flags,
                    layout: Layout | None) -> Recognition:
        """The page in strips as tall as the page is wide, so the model sees each at
        its full input resolution: full-width strips, or on a page set in columns each
        column's own strips, column after column (the request's ``columns``). The
        strips are generated side by side; when one fails the others are given up."""
        regions = request.columns and request.columns(layout or analyze(image),
                                                      image.width, image.height)
        groups = (plan_region_tiles(regions, tile_height=image.width, overlap=TILE_OVERLAP)
                  if regions else
                  [plan_tiles(image.width, image.height, tile_height=image.width,
                              overlap=TILE_OVERLAP)])
        boxes = [box for group in groups for box in group]
        give_up = threading.Event()
        futures = [self.submit(
            tile, prompt,
            # the previous page's end belongs before the first strip only
            request if index == 0 else replace(request, context=""),
            sampled=False, give_up=give_up)
            for index, tile in enumerate(crop_tiles(image, boxes))]
        texts, tokens, truncated = [], [], False
        try:
            for future in futures:
                generation = self.wait(future)
                self._raise_if_failed(generation)
                truncated |= generation.stop == "length"
                texts.append(self.markdown(generation.text))
                tokens.extend(generation.tokens)
        finally:
            give_up.set()  # after a failure: the strips still being written stop at once
        read, start = [], 0
        for group in groups:  # strips overlap only within their column
            read.append(stitch(texts[start:start + len(group)]))
            start += len(group)
        text = "\n\n".join(part for part in read if part.strip())
        if regions:
            provenance = {**provenance, "column_regions": len(regions)}
        return self._recognition(text, tokens, {**provenance, "tiles": len(boxes)},
                                 [*flags, "truncated"] if truncated else flags,
                                 finish_reason="length" if truncated else "stop")

    @staticmethod
    def _raise_if_failed(generation: Generation) -> None:
        if generation.stop == "degenerate":
            raise DegenerateOutput(f"the model's output degenerated ({generation.reason})")
        if generation.stop == "cancelled":
            raise PagePreempted("the page was taken back from the engine; it is queued "
                                "again without counting an attempt")
        if generation.stop == "deadline":
            raise PageTimeout("the page's deadline passed while the model was writing; "
                              "raise workers.page_timeout_s or lower the page's size")

    @staticmethod
    def _recognition(markdown: str, tokens: list[dict], provenance: dict, flags: list[str],
                     finish_reason: str = "stop") -> Recognition:
        return Recognition(text=markdown_to_text(markdown), markdown=markdown, tokens=tokens,
                           flags=flags, provenance=provenance, finish_reason=finish_reason)

    # --- the classic reader kept inside ---

    def _classic_reader(self):
        from appliance.engines.classic import ClassicEngine

        with self._classic_lock:
            if self._classic is None:
                self._classic = ClassicEngine(threads=self._threads)
        return self._classic

    def _read_classic(self, image: Image.Image, request: PageRequest) -> Recognition:
        """The classic engine's reading (fallback, second opinion), one page at a time:
        its ONNX Runtime sessions already use the cores."""
        reader = self._classic_reader()
        with self._classic_lock:
            return reader.recognize(image, request)

    def _fallback(self, image, request, provenance, reason: str) -> Recognition:
        return replace(self._read_classic(image, request), flags=["fallback"],
                       provenance={**provenance, "fallback_engine": self._classic.model_id,
                                   "fallback_reason": reason})

    def close(self) -> None:
        self.close_model()
        if self._classic is not None:
            self._classic.close()
