"""Continuous batching: one llama.cpp context decodes up to N pages at once.

One copy of the weights, one vision (mtmd) context and one llama context with N
sequence slots, each with its own KV cache at the slot's context. One thread owns
them (llama.cpp contexts are not thread-safe) and runs the loop:

- a page waiting for a slot joins as soon as one frees: its prompt and image are
  evaluated into the slot's own sequence, while the others wait that long (llama-server
  does the same with images);
- every step advances all active sequences by one token in one ``llama_decode`` batch;
- a finished sequence's KV cells are released at once.

Callers, one thread per page, block in :meth:`BatchedDecoder.generate`.

Each sequence keeps its own watch (``sequence.Sequence``): the chosen token's
log-probability and the step's entropy, the repetition guard, the token cap, the
deadline and the cancel event. Each ends that sequence alone; the others go on.

A sequence with a grammar (a question's JSON schema) gets its own llama.cpp grammar
sampler: the token the logits choose is kept when the grammar allows it, and only
otherwise is the whole vocabulary masked and the choice made again (as llama.cpp's
own sampler chain does: a full pass over 262k tokens is slow).
"""

from __future__ import annotations

import ctypes
import logging
import queue
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field

import numpy as np

from appliance.engines import native
from appliance.engines.llama.sequence import Decoding, Sequence, score_tokens
from appliance.engines.llama.template import ChatTemplate
from appliance.engines.vision import Generation
from appliance.errors import ApplianceError, EngineError, ModelError

log = logging.getLogger(__name__)

LOOP_CHECK_S = 1.0  # how often a waiting caller checks that the loop still runs
# llama_token_data, for handing candidate tokens to a grammar sampler without copies
TOKEN_DATA = np.dtype([("id", np.int32), ("logit", np.float32), ("p", np.float32)])


@dataclass
class DecodeStats:
    """Counters since the loop started, for `bench`: where the loop's time went."""

    started: float = field(default_factory=time.perf_counter)
    idle_s: float = 0.0  # waiting with no sequence to advance
    decode_s: float = 0.0  # generation steps inside llama_decode
    prompt_s: float = 0.0  # evaluating prompts and images
    generated_tokens: int = 0
    steps: int = 0

    def to_dict(self) -> dict:
        return {"wall_s": time.perf_counter() - self.started, "idle_s": self.idle_s,
                "decode_s": self.decode_s, "prompt_s": self.prompt_s,
                "generated_tokens": self.generated_tokens, "steps": self.steps}


_NATIVE_WARN, _NATIVE_ERROR = 3, 4  # enum ggml_log_level in ggml.h


def route_native_logs() -> None:
    """Send llama.cpp's and mtmd's own log lines through `logging`, warnings and errors
    only: mtmd prints every prompt chunk per call, whatever `verbose` says."""
    import llama_cpp
    from llama_cpp import mtmd_cpp

    @llama_cpp.llama_log_callback
    def forward(level: int, text: bytes, _user_data) -> None:
        if level in (_NATIVE_WARN, _NATIVE_ERROR):
            log.log(logging.WARNING if level == _NATIVE_WARN else logging.ERROR, "llama.cpp: %s",
                    text.decode("utf-8", errors="replace").rstrip())

    route_native_logs.callback = forward  # ctypes callbacks must outlive their use
    llama_cpp.llama_log_set(forward, None)
    mtmd_cpp.mtmd_log_set(forward, None)
    mtmd_cpp.mtmd_helper_log_set(forward, None)


ALL_LAYERS = 0x7FFFFFFF  # llama.cpp offloads min(this, n_layer) layers


def load_model(path: str, n_gpu_layers: int):
    """The model's weights, ``n_gpu_layers`` of them offloaded (-1: all)."""
    import llama_cpp as L

    native.require_first()
    route_native_logs()
    L.llama_backend_init()
    params = L.llama_model_default_params()
    params.n_gpu_layers = ALL_LAYERS if n_gpu_layers < 0 else n_gpu_layers
    model = L.llama_model_load_from_file(str(path).encode(), params)
    if not model:
        raise ModelError(f"llama.cpp could not load {path}")
    return model


def context_params(*, slots: int, n_ctx: int, n_batch: int, threads: int, flash_attn: bool):
    """A context for ``slots`` sequences of ``n_ctx`` tokens each: the engine's, and
    the raw loop's that it is measured against."""
    import llama_cpp as L

    params = L.llama_context_default_params()
    params.n_ctx = n_ctx * slots
    params.n_batch = params.n_ubatch = n_batch
    params.n_seq_max = slots
    # One KV buffer for all slots (the engine enforces each slot's n_ctx). A stream per
    # slot (kv_unified = False) made each step 50x slower on llama.cpp 0.3.36's CPU
    # backend: 5.6 s against 0.1 s, 4 sequences of a 1B model.
    params.kv_unified = True
    params.n_threads = params.n_threads_batch = threads
    params.flash_attn_type = (L.LLAMA_FLASH_ATTN_TYPE_ENABLED if flash_attn
                              else L.LLAMA_FLASH_ATTN_TYPE_DISABLED)
    return params


class BatchedDecoder:
    """One model, N sequence slots, one decoding thread."""

    def __init__(self, model: str, mmproj: str, *, slots: int, n_ctx: int, n_batch: int,
                 n_gpu_layers: int, flash_attn: bool, threads: int):
        import llama_cpp as L
        from llama_cpp import mtmd_cpp

        self._L, self._mtmd = L, mtmd_cpp
        self.n_ctx = n_ctx  # per slot
        self._n_batch = n_batch
        self._model = load_model(model, n_gpu_layers)
        params = context_params(slots=slots, n_ctx=n_ctx, n_batch=n_batch, threads=threads,
                                flash_attn=flash_attn)
        self._ctx = L.llama_init_from_model(self._model, params)
        if not self._ctx:
            self._free()
            raise ModelError(f"llama.cpp could not make a context of {slots} x {n_ctx}")
        vision = mtmd_cpp.mtmd_context_params_default()
        vision.use_gpu = n_gpu_layers != 0
        vision.print_timings = False
        vision.n_threads = threads
        vision.flash_attn_type = params.flash_attn_type
        self._vision = mtmd_cpp.mtmd_init_from_file(str(mmproj).encode(), self._model, vision)
        if not self._vision:
            self._free()
            raise ModelError(f"llama.cpp could not load the projector {mmproj}")
        self.image_marker = mtmd_cpp.mtmd_default_marker().decode()
        self._memory = L.llama_get_memory(self._ctx)
        self._vocab = L.llama_model_get_vocab(self._model)
        try:
            self._chat = ChatTemplate(L, self._model, self._vocab)
        except ModelError:
            self._free()
            raise
        self.n_vocab = L.llama_vocab_n_tokens(self._vocab)
        self._end_tokens = sorted({t for t in (L.llama_vocab_eos(self._vocab),
                                               L.llama_vocab_eot(self._vocab)) if t >= 0})
        self._batch = L.llama_batch_init(slots, 0, 1)  # one token a sequence a step
        self._one = np.zeros(1, TOKEN_DATA)  # a chosen token, put to its grammar
        self._every = np.zeros(self.n_vocab, TOKEN_DATA)  # the vocabulary, masked by one
        self._every["id"] = np.arange(self.n_vocab)
        self._pieces: dict[int, bytes] = {}
        self.stats = DecodeStats()
        self._scorer = ThreadPoolExecutor(1, thread_name_prefix="token-scores")
        self._scoring: Future | None = None
        self._waiting: queue.SimpleQueue[tuple[Decoding, Future] | None] = queue.SimpleQueue()
        self._free_slots = list(range(slots))
        self._active: list[Sequence] = []
        self._closing = False
        self._thread = threading.Thread(target=self._run, name="decode-loop", daemon=True)
        self._thread.start()

    # --- the callers' side ---

    def chat_prompt(self, user_text: str) -> str:
        """The model's own chat template around one user turn, ready for the answer."""
        return self._chat.prompt(user_text)

    def submit(self, decoding: Decoding) -> Future:
        """Queue one page for a slot; the Future holds its Generation. Thread-safe."""
        future: Future = Future()
        self._waiting.put((decoding, future))
        return future

    def generate(self, decoding: Decoding) -> Generation:
        """Decode one page; blocks until its sequence ends. Thread-safe."""
        return self.wait(self.submit(decoding))

    def wait(self, future: Future) -> Generation:
        while True:
            try:
                return future.result(timeout=LOOP_CHECK_S)
            except FutureTimeout:
                if not self._thread.is_alive():  # it failed, or closed, before our turn
                    raise EngineError("the decode loop has stopped; the page will be "
                                      "read again") from None

    def close(self) -> None:
        if not self._closing:
            self._closing = True
            self._waiting.put(None)
            self._thread.join()
            self._scorer.shutdown()
            self._free()

    # --- the loop (its own thread) ---

    def _run(self) -> None:
        try:
            while True:
                if not self._admit():
                    break
                if self._active:
                    self._step()
        except BaseException as exc:  # a broken context: fail every page, never hang them
            log.exception("decode loop failed")
            failure = EngineError(f"the decode loop failed ({type(exc).__name__}: {exc})")
            for sequence in self._active:
                sequence.future.set_exception(failure)
            while True:
                try:
                    item = self._waiting.get_nowait()
                except queue.Empty:
                    break
                if item is not None:
                    item[1].set_exception(failure)
        finally:
            for sequence in self._active:
                if not sequence.future.done():
                    sequence.future.set_exception(EngineError("the engine shut down"))

    def _admit(self) -> bool:
        """Start waiting pages in free slots. Blocks while there is nothing to do.
        False when the decoder is closing."""
        while self._free_slots:
            block = not self._active
            start = time.perf_counter()
            try:
                item = self._waiting.get(block=block)
            except queue.Empty:
                return True
            if block:
                self.stats.idle_s += time.perf_counter() - start
            if item is None:
                return False
            decoding, future = item
            if future.set_running_or_notify_cancel():
                self._start(decoding, future)
        return True

    def _start(self, decoding: Decoding, future: Future) -> None:
        sequence = Sequence(self._free_slots.pop(), decoding, future)
        start = time.perf_counter()
        try:
            if decoding.grammar:
                sequence.grammar = self._L.llama_sampler_init_grammar(
                    self._vocab, decoding.grammar.encode(), b"root")
                if not sequence.grammar:
                    raise EngineError("llama.cpp could not parse the answer's grammar")
            if not sequence.interrupted():
                self._evaluate_prompt(sequence)
        except ApplianceError as exc:
            self._release(sequence)
            future.set_exception(exc)
            return
        finally:
            self.stats.prompt_s += time.perf_counter() - start
        if sequence.stop:
            self._finish(sequence)
        else:
            self._active.append(sequence)

    def _evaluate_prompt(self, sequence: Sequence) -> None:
        L, mtmd = self._L, self._mtmd
        decoding = sequence.decoding
        rgb = np.ascontiguousarray(np.asarray(decoding.image))
        bitmap = mtmd.mtmd_bitmap_init(rgb.shape[1], rgb.shape[0],
                                      rgb.ctypes.data_as(ctypes.POINTER(ctypes.c_uint8)))
        chunks = mtmd.mtmd_input_chunks_init()
        try:
            text = mtmd.mtmd_input_text()
            prompt = self.chat_prompt(decoding.user_text).encode()
            text.text, text.text_len = prompt, len(prompt)
            text.add_special = text.parse_special = True
            bitmaps = (mtmd.mtmd_bitmap_p_ctypes * 1)(bitmap)
            if mtmd.mtmd_tokenize(self._vision, chunks, ctypes.byref(text), bitmaps, 1) != 0:
                raise EngineError("the page prompt could not be tokenized")
            # the KV cache holds a cell per token; under M-RoPE an image takes fewer
            # positions than tokens
            n_prompt = mtmd.mtmd_helper_get_n_tokens(chunks)
            if n_prompt + 1 >= self.n_ctx:
                raise EngineError(f"the prompt ({n_prompt} tokens) does not fit the "
                                  f"slot's context of {self.n_ctx}; raise engine.n_ctx")
            L.llama_memory_seq_rm(self._memory, sequence.slot, -1, -1)
            n_past = L.llama_pos(0)
            if mtmd.mtmd_helper_eval_chunks(self._vision, self._ctx, chunks, 0, sequence.slot,
                                            self._n_batch, True, ctypes.byref(n_past)) != 0:
                raise EngineError("llama.cpp could not evaluate the page image and prompt")
        finally:
            mtmd.mtmd_input_chunks_free(chunks)
            mtmd.mtmd_bitmap_free(bitmap)
        sequence.pos = n_past.value
        logits = np.ctypeslib.as_array(L.llama_get_logits_ith(self._ctx, -1),
                                       shape=(self.n_vocab,))
        self._advance([sequence], logits[None, :])

    def _step(self) -> None:
        """Advance every active sequence by one token in one llama_decode."""
        live = [s for s in self._active if not s.interrupted()]
        for sequence in self._active:
            if sequence.stop:
                self._finish(sequence)
        self._active = live
        if not live:
            return
        batch = self._batch
        batch.n_tokens = len(live)
        for i, sequence in enumerate(live):
            batch.token[i] = sequence.token
            batch.pos[i] = sequence.pos
            batch.n_seq_id[i] = 1
            batch.seq_id[i][0] = sequence.slot
            batch.logits[i] = True
        start = time.perf_counter()
        status = self._L.llama_decode(self._ctx, batch)
        self.stats.decode_s += time.perf_counter() - start
        self.stats.steps += 1
        if status != 0:
            raise EngineError(f"llama_decode returned {status}")
        for sequence in live:
            sequence.pos += 1
        logits = np.ctypeslib.as_array(self._L.llama_get_logits(self._ctx),
                                       shape=(len(live), self.n_vocab))
        self._advance(live, logits)
        for sequence in live:
            if sequence.stop:
                self._finish(sequence)
        self._active = [s for s in live if not s.stop]

    def _advance(self, sequences: list[Sequence], logits: np.ndarray) -> None:
        """Choose each sequence's next token from its row of logits, and watch it.

        The tokens' scores (a full softmax over the vocabulary per row: 0.4 ms a row
        for Gemma's 262k tokens on one core) are worked out by the scoring thread
        while the next step decodes, from a copy: llama.cpp writes the next step's
        logits over these."""
        rows = logits.copy()
        scored = []
        for row, sequence in enumerate(sequences):
            decoding = sequence.decoding
            values = logits[row]
            if decoding.fixed:  # the answer may not end before its fixed length
                values[self._end_tokens] = -np.inf
            token = self._choose(sequence, values)
            if sequence.grammar is not None:
                token = self._grammatical(sequence, values, token)
            if not decoding.fixed and self._L.llama_vocab_is_eog(self._vocab, token):
                sequence.finish("stop", "")
                continue
            if sequence.grammar is not None:
                self._L.llama_sampler_accept(sequence.grammar, token)
            piece = self._piece(token)
            sequence.token = token
            sequence.ids.append(token)
            sequence.text += piece
            text = piece.decode("utf-8", errors="replace")
            record = {"t": text}
            sequence.tokens.append(record)
            scored.append((record, row, token))
            self.stats.generated_tokens += 1
            if sequence.guard and (reason := sequence.guard.feed(text, token)):
                sequence.finish("degenerate", reason)
            elif len(sequence.tokens) >= decoding.max_tokens:
                sequence.finish("stop" if decoding.fixed else "length",
                                f"token cap of {decoding.max_tokens} reached")
            elif sequence.pos + 1 >= self.n_ctx:
                sequence.finish("length", f"the slot's context of {self.n_ctx} is full")
        if scored:
            self._scoring = self._scorer.submit(score_tokens, rows, scored)

    @staticmethod
    def _choose(sequence: Sequence, values: np.ndarray) -> int:
        return sequence.sample(values) if sequence.decoding.sampled else int(np.argmax(values))

    def _grammatical(self, sequence: Sequence, values: np.ndarray, token: int) -> int:
        """``token`` if the sequence's grammar allows it next, else the choice among
        the tokens it allows."""
        one = self._one
        one["id"], one["logit"] = token, values[token]
        self._constrain(sequence.grammar, one)
        if np.isfinite(one["logit"][0]):
            return token
        every = self._every
        every["logit"] = values
        self._constrain(sequence.grammar, every)
        allowed = every["logit"]
        if not np.isfinite(allowed.max()):
            raise EngineError("the answer's grammar allows no next token")
        return self._choose(sequence, allowed)

    def _constrain(self, grammar, candidates: np.ndarray) -> None:
        """Set the logit of each candidate the grammar does not allow next to -inf."""
        L = self._L
        array = L.llama_token_data_array(
            data=candidates.ctypes.data_as(ctypes.POINTER(L.llama_token_data)),
            size=len(candidates), selected=-1, sorted=False)
        L.llama_sampler_apply(grammar, ctypes.byref(array))

    def _piece(self, token: int) -> bytes:
        piece = self._pieces.get(token)
        if piece is None:
            buffer = ctypes.create_string_buffer(64)
            n = self._L.llama_token_to_piece(self._vocab, token, buffer, 64, 0, False)
            piece = self._pieces[token] = buffer.raw[:max(n, 0)]
        return piece

    def _finish(self, sequence: Sequence) -> None:
        self._release(sequence)
        if self._scoring is not None:
            self._scoring.result()  # its last token's scores are in (the thread keeps order)
        sequence.future.set_result(sequence.result())

    def _release(self, sequence: Sequence) -> None:
        if sequence.grammar is not None:
            self._L.llama_sampler_free(sequence.grammar)
            sequence.grammar = None
        self._L.llama_memory_seq_rm(self._memory, sequence.slot, -1, -1)
        self._free_slots.append(sequence.slot)

    def _free(self) -> None:
        L = self._L
        if getattr(self, "_batch", None) is not None:
            L.llama_batch_free(self._batch)
            self._batch = None
        if getattr(self, "_vision", None):
            self._mtmd.mtmd_free(self._vision)
            self._vision = None
        if getattr(self, "_ctx", None):
            L.llama_free(self._ctx)
            self._ctx = None
        if getattr(self, "_model", None):
            L.llama_model_free(self._model)
            self._model = None
