"""The ``llama`` engine: a Gemma-class vision GGUF + mmproj through llama.cpp.

One page is one chat turn: the page image (resized to the model's square input) and
the document type's prompt, decoded as one sequence of the engine's
:class:`BatchedDecoder`, which reads up to ``parallel`` pages at once on one copy of
the weights. Each sequence is watched token by token: each chosen token's
log-probability and the step's entropy are recorded, and the token cap, the deadline,
the cancel event or the repetition guard end that sequence alone.

Each attempt of a page climbs the retry ladder (after olmOCR): greedy, then sampled
at temperature 0.2 with a mild repeat penalty, then the page in overlapping tiles.
When the last rung degenerates too, the classic engine reads the page and the
result is flagged ``fallback``. An answer cut off by the token cap is read again in
tiles and stitched.
"""

from __future__ import annotations

import base64
import hashlib
import io
import logging
import threading
import time
from dataclasses import replace
from pathlib import Path

from PIL import Image

from appliance.engines.base import PageRequest, Recognition
from appliance.engines.llama.batched import BatchedDecoder, route_native_logs
from appliance.engines.llama.sequence import (SAMPLED_REPEAT_PENALTY, SAMPLED_TEMPERATURE, SEED,
                                              Decoding, Generation)
from appliance.engines.llama.prompts import (CONTEXT_VERSION, Prompt, context_text, prompt_for,
                                             user_turn)
from appliance.engines.llama.validate import inspect_model
from appliance.engines.tiling import crop_tiles, decide_tiling, plan_tiles, stitch
from appliance.errors import DegenerateOutput, PagePreempted, PageTimeout
from appliance.quality.markdown import markdown_to_text
from appliance.raster.layout import analyze

log = logging.getLogger(__name__)

TILE_OVERLAP = 0.15


def _data_uri(image: Image.Image, side: int) -> str:
    """The image at the model's square input size, as a PNG data URI.

    Resizing here (Lanczos) instead of in mtmd keeps the PNG small and fast to encode.
    """
    square = image.resize((side, side), Image.Resampling.LANCZOS)
    if square.mode != "RGB":
        square = square.convert("RGB")
    buffer = io.BytesIO()
    square.save(buffer, format="PNG", compress_level=1)
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def load_llama(model: str, mmproj: str, *, n_ctx: int, n_batch: int, n_gpu_layers: int,
               flash_attn: bool, threads: int):
    from llama_cpp import Llama
    from llama_cpp.llama_chat_format import MTMDChatHandler

    route_native_logs()
    return Llama(model_path=str(model),
                 chat_handler=MTMDChatHandler(clip_model_path=str(mmproj), verbose=False),
                 n_ctx=n_ctx, n_batch=n_batch, n_gpu_layers=n_gpu_layers, flash_attn=flash_attn,
                 # n_threads_batch defaults to every core, which makes prompt and image
                 # evaluation erratic next to other workers
                 n_threads=threads, n_threads_batch=threads, verbose=False)


def page_messages(image: Image.Image, prompt: Prompt, side: int,
                  context: str = "") -> list[dict]:
    """One chat turn: the previous page's end (if any), the page image and the document
    type's instructions."""
    parts = [{"type": "text", "text": context_text(context)}] if context else []
    return [{"role": "user", "content": [
        *parts,
        {"type": "image_url", "image_url": {"url": _data_uri(image, side)}},
        {"type": "text", "text": prompt.text},
    ]}]


def bare_loop(pages: list[Path], *, model: str, mmproj: str, n_ctx: int = 4096,
              n_batch: int = 512, n_gpu_layers: int = -1, flash_attn: bool = True,
              threads: int = 2, fixed_tokens: int = 0, **_engine_options) -> float:
    """The yardstick for `appliance bench`: load each page and call
    ``create_chat_completion`` on it, nothing else. Returns the seconds it took."""
    llm = load_llama(model, mmproj, n_ctx=n_ctx, n_batch=n_batch, n_gpu_layers=n_gpu_layers,
                     flash_attn=flash_attn, threads=threads)
    side = inspect_model(model, mmproj).image_size
    prompt = prompt_for("generic")
    def read(path: Path) -> None:
        with Image.open(path) as image:
            llm.create_chat_completion(messages=page_messages(image, prompt, side),
                                       max_tokens=fixed_tokens or prompt.max_tokens,
                                       temperature=0.0, repeat_penalty=1.0, seed=SEED)

    try:
        read(pages[0])  # warm-up, as a worker's
        start = time.perf_counter()
        for path in pages:
            read(path)
        return time.perf_counter() - start
    finally:
        llm.close()


class LlamaEngine:
    name = "llama"

    def __init__(self, model: str, mmproj: str, *, parallel: int = 1, n_ctx: int = 4096,
                 n_batch: int = 512, n_gpu_layers: int = -1, flash_attn: bool = True,
                 threads: int = 2, retry_ladder: list[str] | None = None, max_tokens: int = 0,
                 fixed_tokens: int = 0, auto_tiling: bool = True, model_sha256: str = "",
                 mmproj_sha256: str = ""):
        self.info = inspect_model(model, mmproj)  # refuse a bad pair before llama.cpp sees it
        self.slots = parallel  # pages decoded at once, one sequence each; n_ctx is per page
        self.ladder = retry_ladder or ["greedy", "sampled", "tiled"]
        self.max_tokens = max_tokens  # 0: each document type's own cap
        self.fixed_tokens = fixed_tokens  # benchmarks: every answer exactly this long
        self.auto_tiling = auto_tiling  # strips from the first attempt for small or dense print
        self.decoder = BatchedDecoder(model, mmproj, slots=parallel, n_ctx=n_ctx,
                                       n_batch=n_batch, n_gpu_layers=n_gpu_layers,
                                       flash_attn=flash_attn, threads=threads)
        self._model_id = f"{self.info.name}@{self.info.model_size}"
        self._files = {"model_sha256": model_sha256, "mmproj_sha256": mmproj_sha256}
        self._classic = None  # the fallback reader, created on first need
        self._classic_lock = threading.Lock()  # page threads share one classic reader
        self._threads = threads

    @property
    def model_id(self) -> str:
        return self._model_id

    def recipe(self, request: PageRequest) -> str:
        if request.engine == "classic":
            return self._classic_reader().recipe(request)
        context = (f" {CONTEXT_VERSION}:{hashlib.sha256(request.context.encode()).hexdigest()}"
                   if request.context else "")
        return (f"{prompt_for(request.doc_type).version} max_tokens={self.max_tokens} "
                f"fixed_tokens={self.fixed_tokens}{context}")

    def recognize(self, image: Image.Image, request: PageRequest) -> Recognition:
        if request.engine == "classic":
            return self._read_classic(image, request)
        result = self._read(image, request)
        # the decode loop's counters as this page ended: `bench` works out from them how
        # busy the loop was while the daemon fed it (their growth between two pages)
        result.provenance["decode_loop"] = {key: round(value, 3) for key, value in
                                            self.decoder.stats.to_dict().items()}
        return result

    def _read(self, image: Image.Image, request: PageRequest) -> Recognition:
        prompt = prompt_for(request.doc_type)
        rung = self.ladder[min(request.attempt, len(self.ladder)) - 1]
        last_rung = request.attempt >= len(self.ladder)
        provenance = {"prompt_version": prompt.version, "rung": rung,
                      "context_chars": len(request.context), **self._files}
        try:
            if rung == "tiled":
                return self._read_tiles(image, prompt, request, provenance, flags=["tiled"])
            if self.auto_tiling:
                layout = analyze(image)
                decision = decide_tiling(image.width, image.height,
                                         char_height_px=layout.char_height_px,
                                         line_count=len(layout.line_boxes),
                                         model_side=self.info.image_size)
                provenance["tiling"] = decision.reason
                if decision.tile:  # small or dense print: strips from the start
                    return self._read_tiles(image, prompt, request, provenance, flags=["tiled"])
            sampled = rung == "sampled"
            generation = self.generate(image, prompt, request, sampled=sampled)
            if sampled:
                provenance.update(temperature=SAMPLED_TEMPERATURE,
                                  repeat_penalty=SAMPLED_REPEAT_PENALTY)
            if generation.stop == "length":  # too much text for one answer: read in strips
                log.info("page answer hit its token cap; reading it in tiles")
                return self._read_tiles(image, prompt, request, provenance,
                                        flags=["tiled", "truncated_retry"])
            self._raise_if_failed(generation)
            return self._recognition(generation.text, generation.tokens, provenance, [])
        except DegenerateOutput as exc:
            if not last_rung:
                raise
            log.warning("last rung degenerated (%s); using the classic engine", exc.message)
            return self._fallback(image, request, provenance, exc.message)

    def _read_tiles(self, image, prompt: Prompt, request, provenance, flags) -> Recognition:
        """The page in square strips, so the model sees each at its full input
        resolution, undistorted. The strips are decoded side by side in free slots;
        when one fails the others are given up."""
        boxes = plan_tiles(image.width, image.height, tile_height=image.width,
                           overlap=TILE_OVERLAP)
        give_up = threading.Event()
        futures = [self.decoder.submit(self.decoding_for(
            tile, prompt,
            # the previous page's end belongs before the first strip only
            request if index == 0 else replace(request, context=""),
            sampled=False, give_up=give_up))
            for index, tile in enumerate(crop_tiles(image, boxes))]
        texts, tokens, truncated = [], [], False
        try:
            for future in futures:
                generation = self.decoder.wait(future)
                self._raise_if_failed(generation)
                truncated |= generation.stop == "length"
                texts.append(generation.text)
                tokens.extend(generation.tokens)
        finally:
            give_up.set()  # after a failure: the strips still decoding stop at once
        return self._recognition(stitch(texts), tokens, {**provenance, "tiles": len(boxes)},
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

    def generate(self, image: Image.Image, prompt: Prompt, request: PageRequest,
                 sampled: bool) -> Generation:
        return self.decoder.generate(self.decoding_for(image, prompt, request, sampled))

    def decoding_for(self, image: Image.Image, prompt: Prompt, request: PageRequest,
                  sampled: bool, give_up: threading.Event | None = None) -> Decoding:
        side = self.info.image_size
        # resized here, in the page's own thread: the decode loop only copies the pixels
        square = image.resize((side, side), Image.Resampling.LANCZOS).convert("RGB")
        max_tokens = (self.fixed_tokens or
                      min(prompt.max_tokens, self.max_tokens or prompt.max_tokens))
        return Decoding(square, user_turn(prompt, self.decoder.image_marker, request.context),
                        max_tokens=max_tokens, deadline=request.deadline,
                        fixed=bool(self.fixed_tokens), sampled=sampled,
                        cancel=tuple(e for e in (request.cancel, give_up) if e is not None))

    def decode_stats(self) -> dict:
        """Where the decode loop's time went since it started (for `bench`)."""
        return self.decoder.stats.to_dict()

    @staticmethod
    def _recognition(markdown: str, tokens: list[dict], provenance: dict, flags: list[str],
                     finish_reason: str = "stop") -> Recognition:
        return Recognition(text=markdown_to_text(markdown), markdown=markdown, tokens=tokens,
                           flags=flags, provenance=provenance, finish_reason=finish_reason)

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
        result = self._read_classic(image, request)
        result.flags = ["fallback"]
        result.provenance = {**provenance, "fallback_engine": self._classic.model_id,
                             "fallback_reason": reason}
        return result

    def close(self) -> None:
        self.decoder.close()
        if self._classic is not None:
            self._classic.close()
