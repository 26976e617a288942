"""The ``llama`` engine: a Gemma-class vision GGUF + mmproj through llama.cpp.

The page semantics (prompts, retry ladder, tiling, fallback) are those of every
vision engine (``appliance.engines.vision``). Here one answer is one sequence of the
engine's :class:`BatchedDecoder`, which reads up to ``parallel`` pages at once on one
copy of the weights: the image resized to the model's square input, watched token by
token (each chosen token's log-probability and the step's entropy are recorded; the
token cap, the deadline, the cancel event or the repetition guard end that sequence
alone). The sampled rung adds a mild repeat penalty.
"""

from __future__ import annotations

import functools
import json
import logging
import threading
from concurrent.futures import Future
from pathlib import Path

from PIL import Image

from appliance.engines.base import PageRequest, Recognition, timed_reading
from appliance.engines.chat import page_messages
from appliance.engines.llama.batched import BatchedDecoder, route_native_logs
from appliance.engines.llama.sequence import SAMPLED_REPEAT_PENALTY, Decoding
from appliance.gguf.pair import inspect_model
from appliance.engines.prompts import Prompt, prompt_for, user_turn
from appliance.engines.vision import SAMPLED_TEMPERATURE, SEED, Generation, VisionEngine

log = logging.getLogger(__name__)


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


def bare_loop(pages: list[Path], *, model: str, mmproj: str, n_ctx: int = 4096,
              n_batch: int = 512, n_gpu_layers: int = -1, flash_attn: bool = True,
              threads: int = 2, fixed_tokens: int = 0, **_engine_options) -> float:
    """The yardstick for `appliance bench`: load each page and call
    ``create_chat_completion`` on it, nothing else. Returns the seconds it took."""
    llm = load_llama(model, mmproj, n_ctx=n_ctx, n_batch=n_batch, n_gpu_layers=n_gpu_layers,
                     flash_attn=flash_attn, threads=threads)
    side = inspect_model(model, mmproj).image_size
    prompt = prompt_for("generic")
    try:
        return timed_reading(pages, lambda image: llm.create_chat_completion(
            messages=page_messages(image, prompt.text, side),
            max_tokens=fixed_tokens or prompt.max_tokens, temperature=0.0,
            repeat_penalty=1.0, seed=SEED))
    finally:
        llm.close()


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
                         auto_tiling=auto_tiling, threads=threads)
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
        return dict(self._files)

    def sampling(self) -> dict:
        return {"temperature": SAMPLED_TEMPERATURE, "repeat_penalty": SAMPLED_REPEAT_PENALTY}

    def _read(self, image: Image.Image, request: PageRequest) -> Recognition:
        result = super()._read(image, request)
        # the decode loop's counters as this page ended: `bench` works out from them how
        # busy the loop was while the daemon fed it (their growth between two pages)
        result.provenance["decode_loop"] = {key: round(value, 3) for key, value in
                                            self.decoder.stats.to_dict().items()}
        return result

    def submit(self, image: Image.Image, prompt: Prompt, request: PageRequest, *,
               sampled: bool, give_up: threading.Event | None = None) -> Future:
        return self.decoder.submit(self.decoding_for(image, prompt, request, sampled, give_up))

    def wait(self, future: Future) -> Generation:
        return self.decoder.wait(future)

    def decoding_for(self, image: Image.Image, prompt: Prompt, request: PageRequest,
                     sampled: bool, give_up: threading.Event | None = None) -> Decoding:
        side = self.image_side
        # resized here, in the page's own thread: the decode loop only copies the pixels
        square = image.resize((side, side), Image.Resampling.LANCZOS).convert("RGB")
        question = prompt.schema is not None
        return Decoding(square, user_turn(prompt, self.decoder.image_marker, request.context),
                        max_tokens=self.answer_tokens(prompt), deadline=request.deadline,
                        fixed=bool(self.fixed_tokens) and not question, sampled=sampled,
                        cancel=tuple(e for e in (request.cancel, give_up) if e is not None),
                        grammar=json_grammar(json.dumps(prompt.schema)) if question else "")

    def decode_stats(self) -> dict:
        """Where the decode loop's time went since it started (for `bench`)."""
        return self.decoder.stats.to_dict()

    def close_model(self) -> None:
        self.decoder.close()
