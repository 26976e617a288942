"""`appliance doctor` for one [[engine.remote]] endpoint, asked as the remote engine asks.

In order: is it reachable (``GET /models``), does it list the configured model, does
it read an image (a small test page as one chat completion of at most
``PROBE_TOKENS`` tokens, built and streamed by the same ``EndpointClient`` code as a
production page, the endpoint's ``extra`` included), does it send token
log-probabilities, and how long that request took. A check that fails ends the
endpoint's checks: the next ones could only fail the same way.

The API key is sent, never shown: a detail is made of the endpoint's name, url and
model and of what the server answered.
"""

from __future__ import annotations

import time

from appliance.doctor import Check
from appliance.engines.base import warmup_image
from appliance.engines.prompts import prompt_for
from appliance.engines.remote.client import EndpointClient
from appliance.errors import ConfigError, EndpointUnavailable, EngineError

PROBE_TOKENS = 16
SLOW_SHARE = 0.5  # of timeout_s: the test page took so long that a busy server may time out

REACHABLE, MODEL, IMAGE, LOGPROBS, LATENCY = (
    "remote.reachable", "remote.model", "remote.image", "remote.logprobs", "remote.latency")


def endpoint_checks(endpoint: dict) -> list[Check]:
    """The checks of one endpoint (an ``[[engine.remote]]`` table as a dict)."""
    try:
        client = EndpointClient(endpoint)
    except ConfigError as exc:
        return [Check("FAIL", REACHABLE, f"{exc.message}: fix it in its [[engine.remote]] table")]
    try:
        return _checks(client, endpoint)
    finally:
        client.close()


def _checks(client: EndpointClient, endpoint: dict) -> list[Check]:
    name, model = client.name, client.model
    start = time.perf_counter()
    try:
        listed = client.models()
    except (EndpointUnavailable, EngineError) as exc:
        return [Check("FAIL", REACHABLE, f"{exc.message}; {_reach_hint(exc.message)}")]
    checks = [Check("ok", REACHABLE, f"{name} ({client.url}) answers GET /models in "
                                     f"{_ms(start)} ms")]
    if not _lists(listed, model):
        served = ", ".join(repr(m) for m in listed) or "no model at all"
        checks.append(Check("FAIL", MODEL, f"{name} does not serve model {model!r}; it lists "
                                           f"{served}: set model in its [[engine.remote]] "
                                           f"table to the one to read pages with"))
        return checks
    checks.append(Check("ok", MODEL, f"{name} lists {model!r}"))

    page = warmup_image()
    body = client.request_body(page, prompt_for("generic"), side=endpoint["image_side"],
                               context="", max_tokens=PROBE_TOKENS, sampled=False, fixed=False)
    start = time.perf_counter()
    try:
        answer = client.stream(body, deadline=None, cancel=(), guard=None)
    except (EndpointUnavailable, EngineError) as exc:
        checks.append(Check("FAIL", IMAGE, exc.message + _image_hint(exc.message)))
        return checks
    ms = _ms(start)
    generation = answer.generation
    served = f", served by {answer.served_model!r}" if answer.served_model else ""
    checks.append(Check("ok", IMAGE, f"{name} read a {page.width}x{page.height} test page: "
                                     f"{len(generation.text)} character(s) in at most "
                                     f"{PROBE_TOKENS} tokens{served}"))
    if answer.logprobs:
        checks.append(Check("ok", LOGPROBS, f"{name} sends token log-probabilities: pages "
                                            f"read there are scored on the model's own certainty"))
    else:
        checks.append(Check("warn", LOGPROBS, f"{name} sent no token log-probabilities (not "
                                              f"every server gives them; logprobs = false in "
                                              f"extra stops them): confidence then rests on "
                                              f"the other signals, and with the default review "
                                              f"thresholds its pages are never auto-accepted"))
    timeout_s = float(endpoint["timeout_s"])
    if ms > SLOW_SHARE * timeout_s * 1000:
        checks.append(Check("warn", LATENCY, f"{name}: {ms} ms for the test page, more than "
                                             f"half its timeout_s ({timeout_s:g} s): under "
                                             f"load it may go silent that long and be taken "
                                             f"out; raise timeout_s or lower max_concurrency"))
    else:
        checks.append(Check("ok", LATENCY, f"{name}: {ms} ms for the test page (one request, "
                                           f"image and at most {PROBE_TOKENS} tokens)"))
    return checks


def _lists(listed: list[str], model: str) -> bool:
    """Whether the server lists ``model``; Ollama lists a bare name as ``name:latest``."""
    return model in listed or (":" not in model and f"{model}:latest" in listed)


def _reach_hint(message: str) -> str:
    if "CERTIFICATE_VERIFY_FAILED" in message:
        return ("its certificate is not trusted here: set ca_file to the CA that signed it "
                "(the certificate itself, if self-signed)")
    if "HTTP" in message:  # the client's message says what the status means
        return "the daemon would take it out and probe it until it answers"
    if "not a model list" in message:
        return "is url the API base, ending in /v1?"
    return ("is the server running, and is its host:port reachable from this host "
            "(firewall)? The daemon would take it out and probe it until it answers")


def _image_hint(message: str) -> str:
    # a refused key, a busy server, no connection, silence: the client's message says
    # what to do; anything else may be a server that reads no images
    if any(said in message for said in ("check its api_key", "it is busy",
                                        "could not be reached", "did not answer within")):
        return ""
    return ("; the model must read images (llama-server: --mmproj, llama_cpp.server: "
            "--clip_model_path; vLLM, Ollama: a vision model)")


def _ms(start: float) -> int:
    return round((time.perf_counter() - start) * 1000)
