"""One page's decoding: what it asks for, its state in a slot, and its watch.

A :class:`Sequence` is one page in one of the batched decoder's slots: its position,
its answer so far, and the watch that ends it alone (the repetition guard, the token
cap, the deadline, a cancel). Greedy decoding is the argmax of the raw logits; sampled
decoding draws from the page's own seeded generator, so no page's answer depends on
its neighbours.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass

import numpy as np
from PIL import Image

from appliance.engines.degeneration import RepetitionGuard
from appliance.engines.vision import SAMPLED_TEMPERATURE, SEED, Generation

SAMPLED_REPEAT_PENALTY = 1.05  # mild: a strong penalty corrupts faithful repeated rows
REPEAT_WINDOW = 64  # llama.cpp's default penalty_last_n


@dataclass
class Decoding:
    """What one page asks of the decoder."""

    image: Image.Image  # RGB, at the model's input size
    user_text: str  # the user turn, holding the image marker where the image goes
    max_tokens: int
    deadline: float | None = None  # time.monotonic()
    fixed: bool = False  # benchmarks: exactly max_tokens tokens, no guard, no early end
    sampled: bool = False
    temperature: float = SAMPLED_TEMPERATURE  # of a sampled decoding
    repeat_penalty: float = SAMPLED_REPEAT_PENALTY
    cancel: tuple[threading.Event, ...] = ()  # any of them set: stop, "cancelled"
    # GBNF the answer must match (a Question's schema); its bounded length stands in
    # for the repetition guard
    grammar: str = ""


class Sequence:
    """One page in a slot: its position, its answer so far, its watch."""

    def __init__(self, slot: int, decoding: Decoding, future: Future):
        self.slot = slot
        self.decoding = decoding
        self.future = future
        self.pos = 0
        self.token = -1  # the last chosen token, fed at the next step
        self.tokens: list[dict] = []
        self.ids: list[int] = []
        self.text = bytearray()
        self.guard = None if decoding.fixed or decoding.grammar else RepetitionGuard()
        self.grammar = None  # its llama.cpp grammar sampler, while in a slot
        self.rng = np.random.default_rng(SEED) if decoding.sampled else None
        self.stop = ""
        self.reason = ""

    def finish(self, stop: str, reason: str) -> None:
        self.stop, self.reason = stop, reason

    def result(self) -> Generation:
        return Generation(self.text.decode("utf-8", errors="replace").strip(), self.tokens,
                          self.stop, self.reason)

    def interrupted(self) -> bool:
        """The page's deadline or cancel: checked before each step."""
        decoding = self.decoding
        if any(event.is_set() for event in decoding.cancel):
            self.finish("cancelled", "the page was taken back")
        elif decoding.deadline is not None and time.monotonic() > decoding.deadline:
            self.finish("deadline", "page deadline reached during generation")
        return bool(self.stop)

    def sample(self, values: np.ndarray) -> int:
        """Temperature sampling with a mild repeat penalty, from the page's own stream."""
        row = values.astype(np.float64)
        penalty = self.decoding.repeat_penalty
        recent = list(set(self.ids[-REPEAT_WINDOW:]))
        if recent:
            hit = row[recent]
            row[recent] = np.where(hit > 0, hit / penalty, hit * penalty)
        row = (row - row.max()) / self.decoding.temperature
        weights = np.exp(row)
        cumulative = np.cumsum(weights)
        return int(np.searchsorted(cumulative, self.rng.random() * cumulative[-1],
                                   side="right"))


def token_stats(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row of logits: the row's maximum, its log-sum-exp less that maximum, and the
    entropy (nats) of its softmax. One pass of exp over the batch, no per-row Python."""
    peak = rows.max(axis=1, keepdims=True)
    shifted = rows - peak
    weights = np.exp(shifted)
    total = weights.sum(axis=1)
    log_total = np.log(total)
    entropy = log_total - np.einsum("ij,ij->i", weights, shifted) / total
    return peak[:, 0], log_total, entropy


def score_tokens(rows: np.ndarray, scored: list[tuple[dict, int, int]]) -> None:
    """Fill in each chosen token's log-probability and its step's entropy."""
    peaks, log_totals, entropies = token_stats(rows)
    for record, row, token in scored:
        record["lp"] = round(float(rows[row, token] - peaks[row] - log_totals[row]), 4)
        record["h"] = round(float(entropies[row]), 4)
