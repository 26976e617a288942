"""Spot a generation that has degenerated into a loop, while it streams.

Greedy decoding of a vision-language model sometimes stops reading the page and
starts repeating itself until ``max_tokens``: a digit run (``666666...``), a word
(``and and and``), a table fragment (``| 6 | 6 | 6 |``), a whole line or sentence,
or an irregular shuffle of a few pieces (``| 6 |66 | 6 |6 |66``). Every such token
is wasted GPU time and garbage in the result, so the llama engine feeds each
generated piece to a :class:`RepetitionGuard` and stops the generation as soon as
:meth:`RepetitionGuard.feed` returns a reason.

Three checks, each cheap per token:

- **Character period.** For every period ``p`` in ``1..max_period`` a counter holds
  how many trailing characters equal the character ``p`` positions earlier, so
  "the tail is a unit of length ``p`` repeated ``n`` times" is one comparison per
  period per character. Catches short units whatever the tokenizer did with them.
- **Token period.** The same counters over token ids (or over the piece text when
  no id is given). Catches loops of multi-character tokens whose character period
  is longer than ``max_period``: a looping line or sentence.
- **Stall window.** The number of distinct token n-grams among the last
  ``window_tokens`` n-grams that carry content. Catches a model cycling through a
  small set of pieces without an exact period, which the period checks never see,
  and catches short exact loops sooner than they do. An n-gram made only of rule
  characters (``|``, ``-``, ``_``, ``.``, ``:``, spaces, newlines, ...; see
  ``RULE_CHARS``) carries no content and does not enter the window: a 30-column
  separator row or a dot leader is a long run of few distinct pieces by nature,
  and is judged by the period checks alone, whose span allowance is sized for it.

Legitimately repeated page structure must pass. The defaults are sized from it:

- a dash, underscore or dot-leader run in a form or a table of contents
  (``________``, ``.........``): up to about 80-100 characters;
- a table separator row for up to ~30 columns (``|---|---|``, ``| :---: |``,
  ``| ------ |``): 30 repeats of a 4-9 character unit, at most ~270 characters;
- a table with many similar rows (``| 1 | apple | 2.00 |``): the rows differ, so
  there is no exact period, and their numbers and words keep the n-grams distinct.

Deliberately not caught, or caught late:

- a loop whose unit is longer than ``max_token_period`` tokens (a whole paragraph
  repeated): no period check looks that far and its n-grams stay distinct, so it
  runs to ``max_tokens``; a unit of ``p`` tokens up to that bound trips only after
  ``min_repeats * p`` tokens (a 64-token line: ~512), or ~200 for ``p`` < 30;
- a loop that changes something each time (``| 1 |``, ``| 2 |``, ``| 3 |`` ...) is
  new content by every measure here, and is left to ``max_tokens``;
- a page that really holds many identical lines looks exactly like a looping
  row and trips once it is long enough: a blank form table after 8 identical
  empty rows covering 320 characters (narrow rows: after ~18), identical rows
  that carry content after ~170 tokens of them. A known false positive, which the
  caller handles like any other stopped generation;
- a loop made only of rule characters (``| --- | --- |``, ``______``) is left to
  the period checks, so it runs for up to 320 characters, one token each at worst.

The guard is a pure object: no clock, no I/O, no model. Tests drive it with
hand-made token streams.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Hashable

__all__ = ["RULE_CHARS", "RepetitionGuard"]

# Characters that draw page structure (table rules, leaders, form lines, blank
# cells) rather than say something. A token made only of these is not content for
# the stall window.
RULE_CHARS = " \t\r\n|-_.:=+*#~·•…–—─━═"


class RepetitionGuard:
    """Fed one generated token at a time; says when the output has degenerated.

    Once it has tripped it stays tripped (every later :meth:`feed` returns the same
    reason) until :meth:`reset`, so a caller may check it lazily.

    Defaults, and why:

    ``max_period=64``
        Character units up to a short phrase or a narrow table row. Longer units are
        several tokens, which the token-period check covers; a larger value only
        adds per-character work.
    ``max_token_period=64``
        Token units up to a long line (~250 characters). Per-token cost is linear in it.
    ``min_repeats=8``
        A unit must repeat at least this many times. Two or three identical lines
        (an address block printed twice, a repeated heading) are real documents;
        eight identical consecutive units in a row almost never are, except in
        blank form tables (see the module docstring).
    ``min_span_chars=320``
        The repeated stretch must also cover this many characters. The longest
        legitimate periodic runs are table separator rows of ~30 columns (at most
        ~270 characters with padded 6-dash cells) and dash, underscore or dot
        leaders (~80-100 characters); 320 clears both with margin. A one-character
        loop fed one character per token therefore trips after 320 tokens at the
        latest, but the stall window catches such a loop after ~170 tokens.
    ``window_tokens=200``, ``ngram=4``, ``min_distinct_ratio=0.15``
        Trip when fewer than 30 distinct 4-grams are left among the last 200
        content 4-grams. Prose and real tables keep most of their 4-grams distinct
        (ratios well above 0.5); a looping unit of ``p`` tokens leaves only ``p``
        distinct 4-grams, so loops up to ~29 tokens long trip ~170-200 tokens after
        they start. 4-grams rather than single tokens, because a page legitimately
        reuses a small vocabulary (``|``, digits, spaces) in ever new orders.
        ``min_distinct_ratio=0`` turns the stall check off.
    """

    def __init__(
        self,
        *,
        max_period: int = 64,
        max_token_period: int = 64,
        min_repeats: int = 8,
        min_span_chars: int = 320,
        window_tokens: int = 200,
        ngram: int = 4,
        min_distinct_ratio: float = 0.15,
    ) -> None:
        if max_period < 1 or max_token_period < 1:
            raise ValueError("max_period and max_token_period must be at least 1")
        if min_repeats < 2:
            raise ValueError("min_repeats must be at least 2: one occurrence is not a repeat")
        if min_span_chars < 1:
            raise ValueError("min_span_chars must be at least 1")
        if ngram < 1 or window_tokens < ngram:
            raise ValueError("need 1 <= ngram <= window_tokens")
        if not 0.0 <= min_distinct_ratio <= 1.0:
            raise ValueError("min_distinct_ratio must lie in [0, 1]")
        self.max_period = max_period
        self.max_token_period = max_token_period
        self.min_repeats = min_repeats
        self.min_span_chars = min_span_chars
        self.window_tokens = window_tokens
        self.ngram = ngram
        self.min_distinct_ratio = min_distinct_ratio
        # A character run for period p trips once it reaches this length (the run
        # counts characters equal to the one p earlier, so the unit itself is p more).
        self._char_trip_run = [0] + [
            max(min_repeats * p, min_span_chars) - p for p in range(1, max_period + 1)
        ]
        self._min_distinct = min_distinct_ratio * window_tokens
        self.reset()

    def reset(self) -> None:
        """Forget everything: call between pages (or attempts) that reuse the guard."""
        self._reason: str | None = None
        # Character period: bounded tail and one run counter per period.
        self._chars: list[str] = []
        self._char_runs = [0] * (self.max_period + 1)
        # Token period: bounded tail of token keys, the running character offset after
        # each of them (to size a token unit in characters), one run counter per period.
        self._keys: list[Hashable] = []
        self._ends: list[int] = []
        self._token_runs = [0] * (self.max_token_period + 1)
        self._chars_seen = 0
        # Stall window: the last n keys (and whether each carries content), the last
        # W content n-grams and their multiset.
        self._last_keys: deque[Hashable] = deque(maxlen=self.ngram)
        self._last_content: deque[bool] = deque(maxlen=self.ngram)
        self._grams: deque[tuple[Hashable, ...]] = deque()
        self._gram_counts: Counter[tuple[Hashable, ...]] = Counter()

    @property
    def reason(self) -> str | None:
        """Why the output was judged degenerate, or None while it looks healthy."""
        return self._reason

    def feed(self, piece: str, token_id: int | None = None) -> str | None:
        """Take the next generated token; return the reason once the output has degenerated.

        ``piece`` is the token's text; ``token_id`` its vocabulary id when the caller
        has it (without it the piece text stands for the token). Costs
        O(``max_period``) per character and O(``max_token_period``) per token, on
        buffers of bounded size.
        """
        if self._reason is None:
            key: Hashable = token_id if token_id is not None else piece
            self._reason = (
                self._feed_chars(piece)
                or self._feed_token(key, len(piece))
                or self._feed_window(key, has_content=bool(piece.strip(RULE_CHARS)))
            )
        return self._reason

    def _feed_chars(self, piece: str) -> str | None:
        chars, runs, trip, top = self._chars, self._char_runs, self._char_trip_run, self.max_period
        found: str | None = None
        for ch in piece:
            chars.append(ch)
            n = len(chars)
            for p in range(1, min(top, n - 1) + 1):
                run = runs[p] + 1 if chars[n - 1 - p] == ch else 0
                runs[p] = run
                if found is None and run >= trip[p]:
                    unit = "".join(chars[n - p:])
                    found = f"repeat: period {p} x {(run + p) // p} {unit!r}"
            if n > 2 * top:  # amortised trim: keep at least max_period + 1 characters
                del chars[: n - top - 1]
        return found

    def _feed_token(self, key: Hashable, n_chars: int) -> str | None:
        keys, ends, runs, top = self._keys, self._ends, self._token_runs, self.max_token_period
        self._chars_seen += n_chars
        keys.append(key)
        ends.append(self._chars_seen)
        n = len(keys)
        found: str | None = None
        for p in range(1, min(top, n - 1) + 1):
            run = runs[p] + 1 if keys[n - 1 - p] == key else 0
            runs[p] = run
            repeats = (run + p) // p
            if found is None and repeats >= self.min_repeats:
                unit_chars = ends[n - 1] - ends[n - 1 - p]
                if repeats * unit_chars >= self.min_span_chars:
                    found = f"repeat: token period {p} x {repeats} (unit of {unit_chars} chars)"
        if n > 2 * top + 2:
            del keys[: n - top - 1]
            del ends[: n - top - 1]
        return found

    def _feed_window(self, key: Hashable, *, has_content: bool) -> str | None:
        self._last_keys.append(key)
        self._last_content.append(has_content)
        if len(self._last_keys) < self.ngram or not any(self._last_content):
            return None
        gram = tuple(self._last_keys)
        self._grams.append(gram)
        self._gram_counts[gram] += 1
        if len(self._grams) > self.window_tokens:
            old = self._grams.popleft()
            left = self._gram_counts[old] - 1
            if left:
                self._gram_counts[old] = left
            else:
                del self._gram_counts[old]
        if len(self._grams) == self.window_tokens and len(self._gram_counts) < self._min_distinct:
            return (
                f"stalled: {len(self._gram_counts)} distinct {self.ngram}-grams "
                f"in last {self.window_tokens} tokens"
            )
        return None
