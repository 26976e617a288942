"""The ``openai`` engine: one [[engine.remote]] endpoint, read like the local model.

The page semantics (prompts, page context, retry ladder, tiling, fallback to the
classic reader kept here) are every vision engine's (``appliance.engines.vision``);
here one answer is one streamed request to the endpoint (``client``). Up to
``max_concurrency`` requests are in flight at once: the worker reads that many pages
at once, and a page read in tiles shares the same requests.

A request the endpoint fails trips the circuit breaker (``breaker``): the page goes
back to the queue uncharged (``EndpointUnavailable``) and the endpoint gets no page
until a probe (a tiny page) is read again.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from PIL import Image

from appliance.engines.base import PageRequest, timed_reading
from appliance.engines.degeneration import RepetitionGuard
from appliance.engines.prompts import Prompt, prompt_for
from appliance.engines.remote.breaker import CircuitBreaker
from appliance.engines.remote.client import EndpointClient
from appliance.engines.vision import Generation, VisionEngine
from appliance.errors import EndpointUnavailable


PROBE_PAGE = Image.new("RGB", (32, 32), "white")


class RemoteEngine(VisionEngine):
    name = "openai"

    def __init__(self, endpoint: dict, *, threads: int = 2,
                 retry_ladder: list[str] | None = None, max_tokens: int = 0,
                 fixed_tokens: int = 0, auto_tiling: bool = True):
        super().__init__(image_side=endpoint["image_side"], retry_ladder=retry_ladder,
                         max_tokens=max_tokens, fixed_tokens=fixed_tokens,
                         auto_tiling=auto_tiling, threads=threads)
        self.client = EndpointClient(endpoint)
        self.slots = endpoint["max_concurrency"]
        self.breaker = CircuitBreaker(self.client.name, self._probe)
        self._requests = ThreadPoolExecutor(self.slots, thread_name_prefix=f"{self.client.name}")
        self._model_id = f"{self.client.model}@{self.client.name}"
        self._served_model = ""  # what the server last said answered

    @property
    def model_id(self) -> str:
        return self._model_id

    def provenance(self) -> dict:
        return {"endpoint": self.client.name, "endpoint_url": self.client.url,
                "model": self.client.model}

    def submit(self, image: Image.Image, prompt: Prompt, request: PageRequest, *,
               sampled: bool, give_up: threading.Event | None = None) -> Future:
        body = self.client.request_body(image, prompt, side=self.image_side,
                                        context=request.context,
                                        max_tokens=self.answer_tokens(prompt), sampled=sampled,
                                        fixed=bool(self.fixed_tokens))
        cancel = tuple(e for e in (request.cancel, give_up) if e is not None)
        # a question's answer is bounded by its schema: no guard needed, none wanted
        guarded = not self.fixed_tokens and prompt.schema is None
        return self._requests.submit(self._answer, body, request.deadline, cancel, guarded)

    def _answer(self, body: dict, deadline: float | None,
                cancel: tuple[threading.Event, ...], guarded: bool) -> Generation:
        if any(event.is_set() for event in cancel):
            return Generation("", [], "cancelled", "the page was taken back")
        if self.breaker.reason is not None:  # sent before the supervisor heard it is out
            raise EndpointUnavailable(f"endpoint {self.client.name} is out "
                                      f"({self.breaker.reason}); the page is queued again")
        try:
            answer = self.client.stream(body, deadline=deadline, cancel=cancel,
                                        guard=RepetitionGuard() if guarded else None)
        except EndpointUnavailable as exc:
            self.breaker.trip(exc.message)
            raise
        self._served_model = answer.served_model or self._served_model
        if self.fixed_tokens and answer.generation.stop == "length":
            answer.generation.stop = "stop"  # benchmarks: the length asked for, not a cut-off
        return answer.generation

    def _probe(self) -> None:
        """Raises unless the endpoint reads a tiny page again: a server can list its
        models and still fail or hang on every completion."""
        body = self.client.request_body(PROBE_PAGE, prompt_for("generic"), side=self.image_side,
                                        context="", max_tokens=1, sampled=False, fixed=False)
        self.client.stream(body, deadline=None, cancel=(), guard=None)

    def _read(self, image: Image.Image, request: PageRequest):
        result = super()._read(image, request)
        if "fallback_engine" in result.provenance:
            return result
        # without log-probabilities, confidence rests on the other signals; the page says so
        return result.noted({"served_model": self._served_model,
                             "logprobs": bool(result.tokens)})

    def close_model(self) -> None:
        self.breaker.close()
        self._requests.shutdown(wait=False, cancel_futures=True)
        self.client.close()


def bare_loop(pages: list[Path], *, endpoint: dict, fixed_tokens: int = 0,
              **_engine_options) -> float:
    """The yardstick for `appliance bench`: each page sent to the endpoint as one chat
    completion, one after another, nothing else. Returns the seconds it took."""
    client = EndpointClient(endpoint)
    prompt = prompt_for("generic")

    def read(image: Image.Image) -> None:
        body = client.request_body(image, prompt, side=endpoint["image_side"], context="",
                                   max_tokens=fixed_tokens or prompt.max_tokens,
                                   sampled=False, fixed=bool(fixed_tokens))
        client.stream(body, deadline=None, cancel=(), guard=None)

    try:
        return timed_reading(pages, read)
    finally:
        client.close()
