"""RepetitionGuard: real loops trip within a few hundred tokens; real page structure never does.

Tokens are simulated two ways, as a streaming tokenizer would hand them over: text
cut into random pieces of 1-4 characters (no stable tokenization, so only the
character checks can see a loop), and a SentencePiece-like split into words with
their leading space, single digits and short punctuation runs (stable, so the
token checks see it too). Token ids come from a vocabulary built on the fly.
"""

from __future__ import annotations

import random
import re

import pytest

from appliance.engines.degeneration import RepetitionGuard

_WORDISH = re.compile(r" ?[A-Za-z]+| ?\d|([^\w\s])\1{0,7}|\n| +|.")


def random_pieces(text: str, seed: int) -> list[str]:
    rng = random.Random(seed)
    pieces, i = [], 0
    while i < len(text):
        n = rng.randint(1, 4)
        pieces.append(text[i:i + n])
        i += n
    return pieces


def word_pieces(text: str) -> list[str]:
    return [m.group(0) for m in _WORDISH.finditer(text)]


def feed_all(
    pieces: list[str], *, with_ids: bool = True, guard: RepetitionGuard | None = None
) -> tuple[int, str] | None:
    """Feed pieces until the guard trips: (1-based index of the tripping piece, reason), or None."""
    guard = guard or RepetitionGuard()
    vocab: dict[str, int] = {}
    for n, piece in enumerate(pieces, 1):
        token_id = vocab.setdefault(piece, len(vocab)) if with_ids else None
        reason = guard.feed(piece, token_id)
        if reason:
            return n, reason
    return None


TOKENIZATIONS = [
    pytest.param(lambda t: random_pieces(t, 0), True, id="pieces-ids"),
    pytest.param(lambda t: random_pieces(t, 1), False, id="pieces-text"),
    pytest.param(lambda t: random_pieces(t, 2), True, id="pieces-seed2"),
    pytest.param(word_pieces, True, id="words-ids"),
    pytest.param(word_pieces, False, id="words-text"),
]

PREFIX = (
    "## Invoice 2024-117\n\nBill to: ACME Corporation, 12 Main Street, Springfield\n\n"
    "| Item | Qty | Price |\n|---|---|---|\n| Hex bolts M8 | 12 | 4.80 |\n| "
)


# --- real loops -----------------------------------------------------------------


@pytest.mark.parametrize("make_pieces, with_ids", TOKENIZATIONS)
@pytest.mark.parametrize("unit, period", [("6", 1), ("ab", 2), ("|6 ", 3), ("x, y, z", 7)])
def test_character_loops_trip_within_a_few_hundred_tokens(make_pieces, with_ids, unit, period):
    prefix, loop = make_pieces(PREFIX), make_pieces(unit * 500)
    tripped = feed_all(prefix + loop, with_ids=with_ids)
    assert tripped is not None
    n, reason = tripped
    assert len(prefix) < n <= len(prefix) + 300, (n - len(prefix), reason)
    assert reason.startswith((f"repeat: period {period} x", "stalled:")), reason


@pytest.mark.parametrize("make_pieces, with_ids", TOKENIZATIONS)
@pytest.mark.parametrize("unit", ["and ", "the total amount is due ", "| 6 | 6 |\n", "Page 1 of 1\n"])
def test_word_and_line_loops_trip(make_pieces, with_ids, unit):
    prefix, loop = make_pieces(PREFIX), make_pieces(unit * 300)
    tripped = feed_all(prefix + loop, with_ids=with_ids)
    assert tripped is not None
    assert len(prefix) < tripped[0] <= len(prefix) + 300, tripped


def test_the_smallest_period_is_reported():
    _, reason = feed_all(random_pieces(PREFIX + "x, y, z" * 200, 3))
    assert reason.startswith("repeat: period 7 x")


def test_token_loop_longer_than_the_character_period_trips_on_token_ids():
    # 20 multi-character tokens, ~170 characters a turn: beyond max_period (64
    # characters) and beyond the stall window's reach for a while, so only the
    # token-period check can catch it this early.
    words = ("invoice number customer reference delivery address payment terms "
             "discount shipping subtotal currency amount quantity description "
             "warehouse account balance statement remittance").split()
    pieces = [f" {w}" for w in words]
    assert sum(map(len, pieces)) > 64
    prefix = word_pieces(PREFIX)
    tripped = feed_all(prefix + pieces * 40)
    assert tripped is not None
    n, reason = tripped
    assert reason.startswith("repeat: token period 20 x 8"), reason
    assert n - len(prefix) == 20 * 8


def test_token_ids_decide_over_piece_text():
    # The same text looping under one id, then under changing ids: the id is the token.
    looping = RepetitionGuard()
    changing = RepetitionGuard()
    piece = " total amount due on receipt of this invoice"
    for i in range(200):
        looping.feed(piece, 7)
        changing.feed(piece, 1000 + i)
    assert looping.reason is not None and looping.reason.startswith("repeat:")
    # Character checks still see the text loop, whatever the ids say.
    assert changing.reason is not None and changing.reason.startswith("repeat: period")


def test_an_irregular_cycle_through_few_pieces_stalls():
    # Two short phrases in Thue-Morse order: no unit ever repeats three times in a
    # row, so no period check can fire, yet nothing new is being said.
    phrase_a = [(" 6", 1), (" |", 2), ("66", 3), (" |", 2), ("0", 4)]
    phrase_b = [(" 9", 5), ("x", 6), (" |", 2), ("99", 7), (" a", 8)]
    guard = RepetitionGuard()
    for n, piece in enumerate(word_pieces(PREFIX), 1):
        assert guard.feed(piece, 100 + n) is None
    fed = 0
    for i in range(200):
        phrase = phrase_b if bin(i).count("1") % 2 else phrase_a
        for piece, token_id in phrase:
            fed += 1
            if guard.feed(piece, token_id):
                break
        if guard.reason:
            break
    assert guard.reason is not None and guard.reason.startswith("stalled: "), guard.reason
    assert re.fullmatch(r"stalled: \d+ distinct 4-grams in last 200 tokens", guard.reason)
    assert fed <= 300


def test_rule_characters_still_trip_beyond_their_allowance():
    for filler in ["_", ".", "-", "| --- ", "|   "]:
        tripped = feed_all(random_pieces(filler * 400, 0))
        assert tripped is not None, filler
        assert tripped[1].startswith("repeat: period"), tripped


# --- real page structure --------------------------------------------------------

_FRUITS = "apple pear plum cherry banana kiwi mango lemon lime grape".split()
_TOC_TITLES = [
    "Introduction", "Scope of the agreement", "Definitions and interpretation", "Payment terms",
    "Delivery", "Warranty", "Limitation of liability", "Termination", "Confidentiality",
    "Governing law", "Annex A: price list", "Annex B: service levels",
]
_HEADER30 = "| " + " | ".join(f"Col {i}" for i in range(1, 31)) + " |\n"

CORPUS = {
    "similar table rows": "| # | Item | Price |\n|---|---|---|\n" + "".join(
        f"| {i} | {_FRUITS[i % 10]} | {(i * 37) % 100 / 10 + 1:.2f} |\n" for i in range(1, 80)
    ),
    "form lines": "".join(
        f"{label}: {'_' * (80 - len(label))}\n"
        for label in ["Full name", "Street address", "City", "Postcode", "Phone", "Email",
                      "Date of birth", "Signature", "Date", "Witness", "Witness signature"]
    ),
    "dot leaders": "## Contents\n\n" + "".join(
        f"{i}. {title} {'.' * (78 - len(title))} {i * 3}\n" for i, title in enumerate(_TOC_TITLES, 1)
    ),
    "separator |---|": _HEADER30 + "|" + "---|" * 30 + "\n| a |\n",
    "separator | --- |": _HEADER30 + "|" + " --- |" * 30 + "\n| a |\n",
    "separator | :---: |": _HEADER30 + "|" + " :---: |" * 30 + "\n| a |\n",
    "separator |------|": _HEADER30 + "|" + "------|" * 30 + "\n| a |\n",
    "separator | ------ |": _HEADER30 + "|" + " ------ |" * 30 + "\n| a |\n",
    "blank form rows": "| Date | Item | Qty | Price | Signature |\n|---|---|---|---|---|\n"
    + "|          |          |          |          |          |\n" * 6 + "\nTotal: ______\n",
    "dash rule": "Terms apply.\n\n" + "-" * 80 + "\n\n" + "=" * 80 + "\n\nEnd of statement.\n",
    "prose": (
        "The supplier shall deliver the goods described in Annex A to the address stated "
        "in the order, within ten working days of receiving it. Risk passes to the buyer "
        "on delivery; ownership passes when the invoice has been paid in full.\n"
    ),
}


@pytest.mark.parametrize("make_pieces, with_ids", TOKENIZATIONS)
@pytest.mark.parametrize("name", list(CORPUS))
def test_legitimate_repeated_structure_does_not_trip(name, make_pieces, with_ids):
    assert feed_all(make_pieces(CORPUS[name]), with_ids=with_ids) is None


@pytest.mark.parametrize("make_pieces, with_ids", TOKENIZATIONS)
def test_the_whole_corpus_in_one_stream_does_not_trip(make_pieces, with_ids):
    page = "\n".join(CORPUS.values())
    assert feed_all(make_pieces(page), with_ids=with_ids) is None


LONG_PARAGRAPH = (
    "Every morning the archive receives several crates of paper from the regional offices, "
    "and before anything can be scanned somebody has to open each folder, remove the staples, "
    "flatten the corners that were folded in transit and decide which pages belong together. "
    "Contracts arrive with their annexes stapled in the wrong order, invoices come with "
    "handwritten notes on the back, and receipts from petrol stations fade so quickly that "
    "some of them are almost blank by the time they reach the scanner. The clerks who do this "
    "work know the documents better than anyone else in the building: they can tell at a "
    "glance whether a delivery note comes from the northern depot or the harbour warehouse, "
    "because the two offices still use different forms printed by different suppliers. When "
    "the new scanning line was installed last spring, the team expected the machines to take "
    "over most of the sorting as well, but it turned out that judgement about what a page "
    "means cannot be automated as easily as the capture of its pixels. A torn page from a "
    "lease agreement may hold the only signature of a tenant who moved abroad years ago; a "
    "coffee stain across a table of quantities may hide the one figure an auditor will ask "
    "about next year. So the recognition software reads what it can, gives every page a "
    "score, and sends the doubtful ones to a person who compares the transcription with the "
    "image and corrects it. Over the first six months the share of pages that needed a human "
    "look fell from roughly one in five to about one in twenty, mostly because the models "
    "learned to cope with skewed scans, stamps that overlap the text and columns of numbers "
    "that run across a fold. Nobody on the team believes the last few percent will disappear "
    "soon. Old carbon copies, faxes of faxes and forms filled in with a blunt pencil remain "
    "hard, and a wrong amount on an invoice costs far more than the minute a reviewer spends "
    "checking it. What has changed is the rhythm of the day: instead of typing numbers into "
    "a database until lunchtime, the clerks now spend their mornings on the difficult cases "
    "and their afternoons improving the rules that route documents to the right queue. "
    "Some of them have started to keep a small notebook of the strangest pages they have "
    "seen, from a delivery note written on the back of a restaurant menu to a contract "
    "amendment typed on a machine whose letter e had broken off, and they say that the "
    "notebook has become the best training material the project has. Next year the "
    "archive plans to open the same service to the legal department, which keeps its "
    "files in a basement that floods whenever the river rises after a long week of rain."
)


def test_a_long_normal_paragraph_does_not_trip():
    pieces = word_pieces(LONG_PARAGRAPH)
    assert len(pieces) >= 500
    assert feed_all(pieces) is None
    assert feed_all(random_pieces(LONG_PARAGRAPH, 5), with_ids=False) is None


# --- the object's contract ------------------------------------------------------


def test_the_guard_stays_tripped_until_reset():
    guard = RepetitionGuard()
    assert guard.reason is None
    reason = None
    for _ in range(400):
        reason = guard.feed("6") or reason
    assert reason is not None and guard.reason == reason
    assert guard.feed("a perfectly new sentence") == reason

    guard.reset()
    assert guard.reason is None
    assert feed_all(word_pieces(LONG_PARAGRAPH), guard=guard) is None


@pytest.mark.parametrize("kwargs", [
    {"min_repeats": 1}, {"max_period": 0}, {"max_token_period": 0}, {"min_span_chars": 0},
    {"ngram": 0}, {"window_tokens": 3, "ngram": 4}, {"min_distinct_ratio": 1.5},
])
def test_nonsense_settings_are_refused(kwargs):
    with pytest.raises(ValueError):
        RepetitionGuard(**kwargs)
