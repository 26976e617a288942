"""The raw batched-decode loop: what llama.cpp itself decodes per second on this host.

The yardstick for the batched engine (``parallel_bench``). B sequences each get a
prompt of random tokens as long as a page's prompt, then ``steps`` calls of
``llama_decode`` advance all B by one token each. No sampling, no image, no Python
beyond filling the batch: whatever the engine adds per step shows up as its ratio to
this loop at the same B, on the same model file, threads and context per sequence, the context made as the engine makes its own.

Only llama-cpp-python's low-level API is used, so it runs wherever the engine does.
"""

from __future__ import annotations

import logging
import random
import time
from dataclasses import dataclass

from appliance.engines.llama.batched import context_params, load_model

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RawRun:
    batch: int
    prompt_tokens: int
    steps: int
    seconds: float  # the decode steps only, prompts excluded

    @property
    def tokens_per_s(self) -> float:
        return self.batch * self.steps / self.seconds


class RawDecoder:
    """One model loaded once; ``run(B)`` makes a fresh context for B sequences."""

    def __init__(self, model: str, *, threads: int, n_ctx: int, n_gpu_layers: int = -1,
                 flash_attn: bool = True, n_batch: int = 512):
        import llama_cpp

        self._lib = llama_cpp
        self._model = load_model(model, n_gpu_layers)
        self._vocab = llama_cpp.llama_model_get_vocab(self._model)
        self._n_vocab = llama_cpp.llama_vocab_n_tokens(self._vocab)
        self.threads, self.n_ctx, self.n_batch = threads, n_ctx, n_batch
        self.flash_attn = flash_attn

    def count_tokens(self, text: str) -> int:
        """How many tokens ``text`` is to this model (special tokens parsed)."""
        data = text.encode()
        room = len(data) + 8  # a token is at least one byte, plus BOS
        tokens = (self._lib.llama_token * room)()
        return self._lib.llama_tokenize(self._vocab, data, len(data), tokens, room, True, True)

    def run(self, batch: int, *, prompt_tokens: int, steps: int, seed: int = 0) -> RawRun:
        """Prompts for ``batch`` sequences, then ``steps`` one-token steps of all of them."""
        if prompt_tokens + steps > self.n_ctx:
            raise ValueError(f"{prompt_tokens} prompt + {steps} generated tokens exceed "
                             f"n_ctx {self.n_ctx} per sequence")
        lib = self._lib
        params = context_params(slots=batch, n_ctx=self.n_ctx, n_batch=self.n_batch,
                                threads=self.threads, flash_attn=self.flash_attn)
        ctx = lib.llama_init_from_model(self._model, params)
        if not ctx:
            raise RuntimeError(f"llama.cpp could not create a context for {batch} sequences")
        cells = lib.llama_batch_init(max(self.n_batch, batch), 0, batch)
        rng = random.Random(seed)
        # the upper half of the vocabulary: clear of the control tokens, which come first
        token = lambda: rng.randrange(self._n_vocab // 2, self._n_vocab)

        def decode(items: list[tuple[int, int, bool]]) -> None:  # (position, sequence, logits)
            cells.n_tokens = len(items)
            for i, (pos, seq, logits) in enumerate(items):
                cells.token[i], cells.pos[i], cells.logits[i] = token(), pos, logits
                cells.n_seq_id[i], cells.seq_id[i][0] = 1, seq
            status = lib.llama_decode(ctx, cells)
            if status != 0:
                raise RuntimeError(f"llama_decode returned {status}")

        try:
            prompts = [(pos, seq, pos == prompt_tokens - 1)
                       for seq in range(batch) for pos in range(prompt_tokens)]
            for start in range(0, len(prompts), self.n_batch):
                decode(prompts[start:start + self.n_batch])
            lib.llama_synchronize(ctx)
            started = time.perf_counter()
            for step in range(steps):
                decode([(prompt_tokens + step, seq, True) for seq in range(batch)])
            lib.llama_synchronize(ctx)  # a GPU backend may still be computing the last step
            run = RawRun(batch, prompt_tokens, steps, time.perf_counter() - started)
        finally:
            lib.llama_batch_free(cells)
            lib.llama_free(ctx)
        log.info("raw decode batch=%d prompt_tokens=%d steps=%d tokens_per_s=%.2f",
                 batch, prompt_tokens, steps, run.tokens_per_s)
        return run

    def close(self) -> None:
        if self._model:
            self._lib.llama_model_free(self._model)
            self._model = None

