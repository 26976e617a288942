"""The ``llama`` engine: a vision GGUF + mmproj of a known family through llama.cpp.

The page semantics (prompts, retry ladder, tiling, fallback) are those of every
vision engine (``appliance.engines.vision``). Here one answer is one sequence of the
engine's :class:`BatchedDecoder`, which reads up to ``parallel`` pages at once on one
copy of the weights: the image resized to the model's input (a square, or within
the pixel budget of a dynamic-resolution model), watched token by token (each chosen token's log-probability and the step's entropy are recorded; the
token cap, the deadline, the cancel event or the repetition guard end that sequence
alone). The sampled rung uses the family's temperature and repeat penalty
(``gguf/families.py``), whose prompts, and whose output converter, the page gets.
"""

from __future__ import annotations

import functools
import json
import logging
import threading
from concurrent.futures import Future
from pathlib import Path

from PIL import Image

from appliance.engines import native
from appliance.engines.base import PageRequest, timed_reading
from appliance.engines.chat import page_messages
from appliance.engines.llama.batched import BatchedDecoder, route_native_logs
from appliance.engines.llama.sequence import Decoding
from appliance.engines.prompts import Prompt, prompt_for, user_turn
from appliance.engines.vision import SEED, Generation, VisionEngine
from appliance.gguf.pair import ModelInfo, inspect_model
from appliance.page import Recognition

log = logging.getLogger(__name__)

# a page turn's tokens besides the image: the template, the prompt, the end of the
# previous page (at most about 150), and the image's row and frame tokens
PROMPT_TOKENS = 400


def load_llama(model: str, mmproj: str, *, n_ctx: int, n_batch: int, n_gpu_layers: int,
               flash_attn: bool, threads: int):
    from llama_cpp import Llama
    from llama_cpp.llama_chat_format import MTMDChatHandler

    native.require_first()
    route_native_logs()
    return Llama(model_path=str(model),
                 chat_handler=MTMDChatHandler(clip_model_path=str(mmproj), verbose=False),
                 n_ctx=n_ctx, n_batch=n_batch, n_gpu_layers=n_gpu_layers, flash_attn=flash_attn,
                 # n_threads_batch defaults to every core, which makes prompt and image
                 # evaluation erratic next to other workers
                 n_threads=threads, n_threads_batch=threads, verbose=False)


def bare_loop(pages: list[Path], *, model: str, mmproj: str, n_ctx: int = 4096,
              n_batch: int = 512, n_gpu_layers: int = -1, flash_attn: bool = True,
              threads: int = 2, fixed_tokens: int = 0, **_engine_options) -> float:
    """The yardstick for `appliance bench`: load each page and call
    ``create_chat_completion`` on it, nothing else. Returns the seconds it took."""
    llm = load_llama(model, mmproj, n_ctx=n_ctx, n_batch=n_batch, n_gpu_layers=n_gpu_layers,
                     flash_attn=flash_attn, threads=threads)
    info = inspect_model(model, mmproj)
    side = info.image_size
    prompt = prompt_for("generic", info.profile)
    try:
        return timed_reading(pages, lambda image: llm.create_chat_completion(
            messages=page_messages(image, prompt.text, side),
            max_tokens=fixed_tokens or prompt.max_tokens, temperature=0.0,
            repeat_penalty=1.0, seed=SEED))
    finally:
        llm.close()


def model_input(image: Image.Image, info: ModelInfo, image_tokens: int) -> Image.Image:
    """The image as the projector takes it: a square of its side, or, at dynamic
    resolution, the page's own shape scaled into its pixel budget and into
    ``image_tokens`` (the room the slot's context leaves it). mtmd would shrink a
    larger one to the budget itself, but not to the context."""
    if not info.dynamic_resolution:
        side = info.image_size
        return image.resize((side, side), Image.Resampling.LANCZOS).convert("RGB")
    budget = min(info.max_pixels, max(image_tokens, info.image_tokens_min) * info.token_pixels)
    scale = min(1.0, (budget / (image.width * image.height)) ** 0.5)
    size = (max(1, int(image.width * scale)), max(1, int(image.height * scale)))
    return (image if scale == 1.0 else image.resize(size, Image.Resampling.LANCZOS)
            ).convert("RGB")


@functools.lru_cache(maxsize=32)
def json_grammar(schema: str) -> str:
    """The GBNF of a JSON Schema (as JSON text): llama-cpp-python's converter."""
    from llama_cpp.llama_grammar import json_schema_to_gbnf

    return json_schema_to_gbnf(schema)


class LlamaEngine(VisionEngine):
    name = "llama"

    def __init__(self, model: str, mmproj: str, *, parallel: int = 1, n_ctx: int = 4096,
                 n_batch: int = 512, n_gpu_layers: int = -1, flash_attn: bool = True,
                 threads: int = 2, retry_ladder: list[str] | None = None, max_tokens: int = 0,
                 fixed_tokens: int = 0, auto_tiling: bool = True, model_sha256: str = "",
                 mmproj_sha256: str = ""):
        self.info = inspect_model(model, mmproj)  # refuse a bad pair before llama.cpp sees it
        super().__init__(image_side=self.info.image_size, retry_ladder=retry_ladder,
                         max_tokens=max_tokens, fixed_tokens=fixed_tokens,
                         auto_tiling=auto_tiling, threads=threads, family=self.info.profile)
        self.slots = parallel  # pages decoded at once, one sequence each; n_ctx is per page
        self.decoder = BatchedDecoder(model, mmproj, slots=parallel, n_ctx=n_ctx,
                                       n_batch=n_batch, n_gpu_layers=n_gpu_layers,
                                       flash_attn=flash_attn, threads=threads)
        self._model_id = f"{self.info.name}@{self.info.model_size}"
        self._files = {"model_sha256": model_sha256, "mmproj_sha256": mmproj_sha256}

    @property
    def model_id(self) -> str:
        return self._model_id

    def provenance(self) -> dict:
        return {**self._files, "family": self.family.name}

    def sampling(self) -> dict:
        return {"temperature": self.family.temperature,
                "repeat_penalty": self.family.repeat_penalty}

    def _read(self, image: Image.Image, request: PageRequest) -> Recognition:
        result = super()._read(image, request)
        # the decode loop's counters as this page ended: `bench` works out from them how
        # busy the loop was while the daemon fed it (their growth between two pages)
        return result.noted({"decode_loop": {key: round(value, 3) for key, value in
                                             self.decoder.stats.to_dict().items()}})

    def submit(self, image: Image.Image, prompt: Prompt, request: PageRequest, *,
               sampled: bool, give_up: threading.Event | None = None) -> Future:
        return self.decoder.submit(self.decoding_for(image, prompt, request, sampled, give_up))

    def wait(self, future: Future) -> Generation:
        return self.decoder.wait(future)

    def decoding_for(self, image: Image.Image, prompt: Prompt, request: PageRequest,
                     sampled: bool, give_up: threading.Event | None = None) -> Decoding:
        question = prompt.schema is not None
        answer = self.answer_tokens(prompt)
        room = self.decoder.n_ctx - answer - PROMPT_TOKENS  # what the image may take
        # resized here, in the page's own thread: the decode loop only copies the pixels
        return Decoding(model_input(image, self.info, room),
                        user_turn(prompt, self.decoder.image_marker, request.context),
                        max_tokens=answer, deadline=request.deadline,
                        fixed=bool(self.fixed_tokens) and not question, sampled=sampled,
                        temperature=self.family.temperature,
                        repeat_penalty=self.family.repeat_penalty,
                        cancel=tuple(e for e in (request.cancel, give_up) if e is not None),
                        grammar=json_grammar(json.dumps(prompt.schema)) if question else "")

    def decode_stats(self) -> dict:
        """Where the decode loop's time went since it started (for `bench`)."""
        return self.decoder.stats.to_dict()

    def close_model(self) -> None:
        self.decoder.close()
