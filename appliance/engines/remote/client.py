"""One remote endpoint's HTTP side: a page's answer streamed from an OpenAI-compatible
``/chat/completions``, watched as it arrives.

The answer streams (``stream: true``) so that the repetition guard sees every token
as it is written and a looping page is cut off at once: closing the connection stops
llama-server, vLLM and llama-cpp-python's server generating. Token log-probabilities
are asked for (``logprobs``, ``top_logprobs``); where the server sends them, each
token keeps its log-probability and an entropy estimated from its top alternatives.

What goes wrong is sorted by whose fault it is:

- the endpoint's (``EndpointUnavailable``): no connection, a reset, a 5xx, a refused
  key, a busy server (429), an unknown model or path, or silence past ``timeout_s``;
- the page's (``EngineError``): the server refused this request (400, 413, 422) or
  answered something that is not a chat completion.

The API key goes out as a Bearer header and is never logged or put in an error.
"""

from __future__ import annotations

import json
import math
import ssl
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
from PIL import Image

from appliance.engines.chat import page_messages
from appliance.engines.degeneration import RepetitionGuard
from appliance.engines.prompts import Prompt
from appliance.engines.vision import SAMPLED_TEMPERATURE, SEED, Generation
from appliance.errors import ConfigError, EndpointUnavailable, EngineError

TOP_LOGPROBS = 5  # enough to estimate each step's entropy
ENDPOINT_DOWN_STATUS = {401, 403, 404, 408, 429}  # and every 5xx: not this page's fault
ERROR_TEXT_CHARS = 300


@dataclass(frozen=True)
class Answer:
    generation: Generation
    served_model: str  # what the server says answered
    logprobs: bool  # whether it sent token log-probabilities


class EndpointClient:
    """HTTP to one [[engine.remote]] endpoint; thread-safe (one connection pool)."""

    def __init__(self, endpoint: dict):
        self.name = endpoint["name"]
        self.url = endpoint["url"]
        self.model = endpoint["model"]
        self.timeout_s = float(endpoint["timeout_s"])
        self.extra = dict(endpoint.get("extra") or {})
        key = endpoint.get("api_key") or ""
        if endpoint.get("api_key_file"):
            try:
                key = Path(endpoint["api_key_file"]).read_text().strip()
            except OSError as exc:
                raise ConfigError(f"endpoint {self.name}: cannot read its api_key_file "
                                  f"({exc.strerror})") from None
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._http = httpx.Client(headers=headers, verify=_tls(endpoint), timeout=self.timeout_s,
                                  follow_redirects=False)

    def models(self) -> list[str]:
        """The model ids the server lists (``GET /models``)."""
        try:
            response = self._http.get(self.url + "/models")
        except httpx.HTTPError as exc:
            raise EndpointUnavailable(self._unreachable(exc)) from None
        self._raise_for_status(response, response.text)
        try:
            return [item["id"] for item in response.json()["data"]]
        except (ValueError, KeyError, TypeError):
            raise EngineError(f"endpoint {self.name} answered /models with something that "
                              f"is not a model list") from None

    def request_body(self, image: Image.Image, prompt: Prompt, *, side: int, context: str,
                     max_tokens: int, sampled: bool, fixed: bool) -> dict:
        body = {"model": self.model, "messages": page_messages(image, prompt.text, side, context),
                "max_tokens": max_tokens, "temperature": SAMPLED_TEMPERATURE if sampled else 0.0,
                "seed": SEED, "stream": True, "logprobs": True, "top_logprobs": TOP_LOGPROBS}
        if fixed:  # benchmarks: exactly max_tokens (llama.cpp and vLLM both know it)
            body["ignore_eos"] = True
        if prompt.schema is not None:  # llama-server's and llama-cpp-python's form
            body["response_format"] = {"type": "json_object", "schema": prompt.schema}
        return {**body, **self.extra}

    def stream(self, body: dict, *, deadline: float | None,
               cancel: tuple[threading.Event, ...], guard: RepetitionGuard | None) -> Answer:
        """Send one page and read its answer as it streams, ending it early on a cancel,
        the deadline or the guard."""
        silence_s = self.timeout_s
        if deadline is not None:  # silence past the deadline is the page's timeout
            silence_s = max(0.1, min(silence_s, deadline - time.monotonic() + 0.5))
        reader = _AnswerReader(guard)
        try:
            with self._http.stream("POST", self.url + "/chat/completions", json=body,
                                   timeout=httpx.Timeout(self.timeout_s, read=silence_s)
                                   ) as response:
                if response.status_code != 200:
                    self._raise_for_status(response, response.read().decode(errors="replace"))
                if not response.headers.get("content-type", "").startswith("text/event-stream"):
                    reader.whole(self._json(response.read()))  # a server that does not stream
                    return reader.answer()
                for line in response.iter_lines():
                    if any(event.is_set() for event in cancel):
                        return reader.answer("cancelled", "the page was taken back")
                    if deadline is not None and time.monotonic() > deadline:
                        return reader.answer("deadline", "page deadline reached during generation")
                    if not line.startswith("data:"):
                        continue  # comments, pings, blank separators
                    data = line[5:].strip()
                    if data == "[DONE]":
                        break
                    if reader.chunk(self._json(data.encode())):
                        break  # the guard stopped it: leaving closes the connection
        except httpx.TimeoutException as exc:
            if deadline is not None and time.monotonic() >= deadline:
                return reader.answer("deadline", "page deadline reached while the server was silent")
            raise EndpointUnavailable(self._unreachable(exc)) from None
        except httpx.HTTPError as exc:
            raise EndpointUnavailable(self._unreachable(exc)) from None
        return reader.answer()

    def _json(self, raw: bytes) -> dict:
        try:
            value = json.loads(raw)
        except ValueError:
            raise EngineError(f"endpoint {self.name} answered something that is not JSON: "
                              f"{raw[:120].decode(errors='replace')!r}") from None
        if not isinstance(value, dict):
            raise EngineError(f"endpoint {self.name} answered JSON that is not an object")
        return value

    def _raise_for_status(self, response: httpx.Response, text: str) -> None:
        status = response.status_code
        if status < 300:
            return
        said = " ".join(text.split())[:ERROR_TEXT_CHARS]
        if status >= 500 or status in ENDPOINT_DOWN_STATUS:
            hint = {401: "check its api_key", 403: "check its api_key",
                    404: "check its url (the API base, ending in /v1) and model",
                    429: "it is busy; lower its max_concurrency"}.get(status, "see its log")
            raise EndpointUnavailable(f"endpoint {self.name} answered HTTP {status} ({hint}): "
                                      f"{said}")
        raise EngineError(f"endpoint {self.name} refused this page with HTTP {status}: {said}")

    def _unreachable(self, exc: httpx.HTTPError) -> str:
        kind = ("did not answer within its timeout_s" if isinstance(exc, httpx.TimeoutException)
                else "could not be reached")
        return f"endpoint {self.name} {kind} ({type(exc).__name__}: {exc})"

    def close(self) -> None:
        self._http.close()


def _tls(endpoint: dict) -> ssl.SSLContext | bool:
    """How the server's certificate is checked: the system's CAs, a site CA, or not at
    all (``tls_verify = false``, for a test bench only)."""
    if not endpoint.get("tls_verify", True):
        return False
    try:
        return ssl.create_default_context(cafile=endpoint.get("ca_file"))
    except OSError as exc:
        raise ConfigError(f"endpoint {endpoint['name']}: cannot load its ca_file "
                          f"({exc.strerror or exc})") from None


class _AnswerReader:
    """The streamed chunks of one answer, put together and watched."""

    def __init__(self, guard: RepetitionGuard | None):
        self.guard = guard
        self.text: list[str] = []
        self.tokens: list[dict] = []
        self.stop = ""
        self.reason = ""
        self.served_model = ""
        self.logprobs = False

    def chunk(self, chunk: dict) -> bool:
        """Take one streamed chunk; True once the answer has ended."""
        choice = self._choice(chunk)
        piece = (choice.get("delta") or {}).get("content") or ""
        entries = ((choice.get("logprobs") or {}).get("content")) or []
        if entries:
            self.logprobs = True
            for entry in entries:
                self.tokens.append(_token(entry))
                if self._guard(entry.get("token") or ""):
                    break
        elif piece:
            self._guard(piece)
        self.text.append(piece)
        if self.stop:
            return True
        if finish := choice.get("finish_reason"):
            self.stop = "length" if finish == "length" else "stop"
            return True
        return False

    def whole(self, completion: dict) -> None:
        """A complete (not streamed) answer."""
        choice = self._choice(completion)
        self.text.append((choice.get("message") or {}).get("content") or "")
        entries = ((choice.get("logprobs") or {}).get("content")) or []
        self.logprobs = bool(entries)
        self.tokens = [_token(entry) for entry in entries]
        self.stop = "length" if choice.get("finish_reason") == "length" else "stop"

    def _choice(self, value: dict) -> dict:
        self.served_model = self.served_model or str(value.get("model") or "")
        choices = value.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise EngineError("the endpoint answered a chat completion with no choice in it")
        return choices[0]

    def _guard(self, piece: str) -> bool:
        if self.guard and (reason := self.guard.feed(piece)):
            self.stop, self.reason = "degenerate", reason
            return True
        return False

    def answer(self, stop: str = "", reason: str = "") -> Answer:
        if stop and not self.stop:
            self.stop, self.reason = stop, reason
        if not self.stop:  # the stream ended without saying why: the server stopped it
            self.stop = "stop"
        return Answer(Generation("".join(self.text).strip(), self.tokens, self.stop,
                                 self.reason), self.served_model, self.logprobs)


def _token(entry: dict) -> dict:
    """A token's record as the local engine keeps it: its text, its log-probability and
    the entropy of its step, estimated from the top alternatives (the rest of the
    probability as one more outcome)."""
    lp = float(entry.get("logprob", 0.0))
    probabilities = [math.exp(float(alt["logprob"])) for alt in entry.get("top_logprobs") or []
                     if isinstance(alt, dict) and alt.get("logprob") is not None]
    record = {"t": entry.get("token") or "", "lp": round(lp, 4)}
    if probabilities:
        rest = max(0.0, 1.0 - sum(probabilities))
        record["h"] = round(-sum(p * math.log(p) for p in [*probabilities, rest] if p > 0), 4)
    return record
