"""The ``llama`` engine: a Gemma-class vision GGUF + mmproj through llama-cpp-python.

One page is one chat turn: the page image (resized to the model's square input) and
the document type's prompt. Decoding is greedy. Generation is watched token by
token by a logits processor, the only hook that sees every token (``max_tokens`` is
not enforced while the output ends in an incomplete UTF-8 sequence, and the mtmd
chat handler drops stopping criteria). It records each chosen token's
log-probability and the step's entropy, and ends the turn early by forcing the
end-of-generation token when the page's token cap, its deadline or the repetition
guard trips.

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
import math
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

import numpy as np
from PIL import Image

from appliance.engines.base import PageRequest, Recognition
from appliance.engines.degeneration import RepetitionGuard
from appliance.engines.llama.prompts import CONTEXT_VERSION, Prompt, context_text, prompt_for
from appliance.engines.llama.validate import inspect_model
from appliance.engines.tiling import crop_tiles, decide_tiling, plan_tiles, stitch
from appliance.errors import DegenerateOutput, PageTimeout
from appliance.quality.markdown import markdown_to_text
from appliance.raster.layout import analyze

log = logging.getLogger(__name__)

TILE_OVERLAP = 0.15
SAMPLED_TEMPERATURE = 0.2
SAMPLED_REPEAT_PENALTY = 1.05  # mild: a strong penalty corrupts faithful repeated rows
SEED = 0  # sampled attempts stay reproducible


@dataclass
class Generation:
    text: str
    tokens: list[dict]
    stop: str  # "stop" (end of turn) | "length" | "deadline" | "degenerate"
    reason: str = ""


@dataclass
class TokenWatch:
    """The logits processor: per-token confidence, and the early stops.

    ``__call__(input_ids, logits)`` runs once per generated token with the raw
    logits of that step. The token chosen at step k is ``input_ids[-1]`` at step
    k + 1, so its log-probability is looked up in the previous step's
    log-softmax (under greedy decoding it is that row's maximum).
    """

    detokenize: Callable[[list[int]], bytes]
    end_token: int
    max_tokens: int
    deadline: float | None
    fixed: bool = False  # benchmark mode: exactly max_tokens tokens, no guard, no early end
    guard: RepetitionGuard | None = field(default_factory=RepetitionGuard)
    tokens: list[dict] = field(default_factory=list)
    stop: str = "stop"
    reason: str = ""
    _ending: bool = False
    _prev_logprobs: np.ndarray | None = None
    _prev_entropy: float = 0.0

    def __post_init__(self):
        if self.fixed:
            self.guard = None

    def __call__(self, input_ids: np.ndarray, logits: np.ndarray) -> np.ndarray:
        if self._ending:
            return self._force_end(logits)
        if self._prev_logprobs is not None:
            self._record(int(input_ids[-1]))
            if self.stop == "degenerate":
                return self._end(self.stop, self.reason, logits)
        shifted = logits.astype(np.float32) - np.max(logits)
        log_z = math.log(float(np.sum(np.exp(shifted))))
        self._prev_logprobs = shifted - log_z
        probs = np.exp(self._prev_logprobs)
        self._prev_entropy = float(-np.sum(probs * self._prev_logprobs))
        if len(self.tokens) >= self.max_tokens:
            return self._end("stop" if self.fixed else "length",
                             f"token cap of {self.max_tokens} reached", logits)
        if self.deadline is not None and time.monotonic() > self.deadline:
            return self._end("deadline", "page deadline reached during generation", logits)
        if self.fixed:  # the answer may not end before its fixed length
            logits = logits.copy()
            logits[self.end_token] = -np.inf
        return logits

    def _record(self, token: int) -> None:
        piece = self.detokenize([token]).decode("utf-8", errors="replace")
        self.tokens.append({"t": piece, "lp": round(float(self._prev_logprobs[token]), 4),
                            "h": round(self._prev_entropy, 4)})
        reason = self.guard.feed(piece, token) if self.guard else None
        if reason:
            self.stop, self.reason = "degenerate", reason

    def _end(self, stop: str, reason: str, logits: np.ndarray) -> np.ndarray:
        self.stop, self.reason, self._ending = stop, reason, True
        return self._force_end(logits)

    def _force_end(self, logits: np.ndarray) -> np.ndarray:
        forced = np.full_like(logits, -np.inf)
        forced[self.end_token] = 0.0
        return forced


_NATIVE_WARN, _NATIVE_ERROR = 3, 4  # enum ggml_log_level in ggml.h


def _route_native_logs() -> None:
    """Send llama.cpp's and mtmd's own log lines through `logging`, warnings and errors
    only: mtmd prints every prompt chunk per call, whatever `verbose` says."""
    import llama_cpp
    from llama_cpp import mtmd_cpp

    @llama_cpp.llama_log_callback
    def forward(level: int, text: bytes, _user_data) -> None:
        if level in (_NATIVE_WARN, _NATIVE_ERROR):
            log.log(logging.WARNING if level == _NATIVE_WARN else logging.ERROR, "llama.cpp: %s",
                    text.decode("utf-8", errors="replace").rstrip())

    _route_native_logs.callback = forward  # ctypes callbacks must outlive their use
    llama_cpp.llama_log_set(forward, None)
    mtmd_cpp.mtmd_log_set(forward, None)
    mtmd_cpp.mtmd_helper_log_set(forward, None)


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

    _route_native_logs()
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
    slots = 1  # pages decoded at once (engine.parallel)

    def __init__(self, model: str, mmproj: str, *, n_ctx: int = 4096, n_batch: int = 512,
                 n_gpu_layers: int = -1, flash_attn: bool = True, threads: int = 2,
                 retry_ladder: list[str] | None = None, max_tokens: int = 0,
                 fixed_tokens: int = 0, auto_tiling: bool = True, parallel: int = 1,
                 model_sha256: str = "", mmproj_sha256: str = ""):
        self.info = inspect_model(model, mmproj)  # refuse a bad pair before llama.cpp sees it
        self.ladder = retry_ladder or ["greedy", "sampled", "tiled"]
        self.max_tokens = max_tokens  # 0: each document type's own cap
        self.fixed_tokens = fixed_tokens  # benchmarks: every answer exactly this long
        self.auto_tiling = auto_tiling  # strips from the first attempt for small or dense print
        # the sequence slots the daemon's memory plan made room for; this engine still
        # decodes one page at a time (slots = 1) until batched decoding uses them
        self.parallel = parallel
        self._llm = load_llama(model, mmproj, n_ctx=n_ctx, n_batch=n_batch,
                               n_gpu_layers=n_gpu_layers, flash_attn=flash_attn, threads=threads)
        self._end_token = self._llm.token_eos()
        self._model_id = f"{self.info.name}@{self.info.model_size}"
        self._files = {"model_sha256": model_sha256, "mmproj_sha256": mmproj_sha256}
        self._classic = None  # the fallback reader, created on first need
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
            return self._classic_reader().recognize(image, request)
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
        # square strips: the model sees each at its full input resolution, undistorted
        boxes = plan_tiles(image.width, image.height, tile_height=image.width,
                           overlap=TILE_OVERLAP)
        texts, tokens, truncated = [], [], False
        for index, tile in enumerate(crop_tiles(image, boxes)):
            # the previous page's end belongs before the first strip only
            tile_request = request if index == 0 else replace(request, context="")
            generation = self.generate(tile, prompt, tile_request, sampled=False)
            self._raise_if_failed(generation)
            truncated |= generation.stop == "length"
            texts.append(generation.text)
            tokens.extend(generation.tokens)
        return self._recognition(stitch(texts), tokens, {**provenance, "tiles": len(boxes)},
                                 [*flags, "truncated"] if truncated else flags,
                                 finish_reason="length" if truncated else "stop")

    @staticmethod
    def _raise_if_failed(generation: Generation) -> None:
        if generation.stop == "degenerate":
            raise DegenerateOutput(f"the model's output degenerated ({generation.reason})")
        if generation.stop == "deadline":
            raise PageTimeout("the page's deadline passed while the model was writing; "
                              "raise workers.page_timeout_s or lower the page's size")

    def generate(self, image: Image.Image, prompt: Prompt, request: PageRequest,
                  sampled: bool) -> Generation:
        from llama_cpp import LogitsProcessorList

        max_tokens = (self.fixed_tokens or
                      min(prompt.max_tokens, self.max_tokens or prompt.max_tokens))
        watch = TokenWatch(detokenize=self._llm.detokenize, end_token=self._end_token,
                           max_tokens=max_tokens, deadline=request.deadline,
                           fixed=bool(self.fixed_tokens))
        response = self._llm.create_chat_completion(
            messages=page_messages(image, prompt, self.info.image_size, request.context),
            max_tokens=max_tokens + 8,  # our cap comes first
            temperature=SAMPLED_TEMPERATURE if sampled else 0.0,
            repeat_penalty=SAMPLED_REPEAT_PENALTY if sampled else 1.0,
            seed=SEED, logits_processor=LogitsProcessorList([watch]))
        text = response["choices"][0]["message"]["content"] or ""
        return Generation(text.strip(), watch.tokens, watch.stop, watch.reason)

    @staticmethod
    def _recognition(markdown: str, tokens: list[dict], provenance: dict, flags: list[str],
                     finish_reason: str = "stop") -> Recognition:
        return Recognition(text=markdown_to_text(markdown), markdown=markdown, tokens=tokens,
                           flags=flags, provenance=provenance, finish_reason=finish_reason)

    def _classic_reader(self):
        from appliance.engines.classic import ClassicEngine

        if self._classic is None:
            self._classic = ClassicEngine(threads=self._threads)
        return self._classic

    def _fallback(self, image, request, provenance, reason: str) -> Recognition:
        result = self._classic_reader().recognize(image, request)
        result.flags = ["fallback"]
        result.provenance = {**provenance, "fallback_engine": self._classic.model_id,
                             "fallback_reason": reason}
        return result

    def close(self) -> None:
        self._llm.close()
        if self._classic is not None:
            self._classic.close()
