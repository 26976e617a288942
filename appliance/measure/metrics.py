"""Evaluation metrics: pure functions from ground truth and an engine's output to a number.

These numbers go into reports and release gates, so each docstring states its
definition exactly. Edit distances come from rapidfuzz (Levenshtein: insertions,
deletions and substitutions each cost 1) and apted (tree edit distance).
"""

from __future__ import annotations

import unicodedata
from collections import Counter
from dataclasses import dataclass, field

from apted import APTED, Config
from rapidfuzz import fuzz
from rapidfuzz.distance import Levenshtein

MIN_UNIT_CHARS = 4  # shorter units ("1", "of") match anywhere and say nothing about order
MIN_UNIT_SCORE = 80.0  # rapidfuzz partial_ratio, 0-100
ORDER_FREE_MIN_SCORE = 50.0  # under it, two pieces of text are not one text read twice


def normalize_text(text: str) -> str:
    """NFKC, every run of Unicode whitespace (line breaks included) to one space, stripped."""
    return " ".join(unicodedata.normalize("NFKC", text).split())


def cer(reference: str, hypothesis: str, *, ignore_whitespace: bool = False) -> float:
    """Character error rate: Levenshtein distance between the normalize_text'd strings,
    divided by the reference's length in characters. Case-sensitive.

    `ignore_whitespace` removes all whitespace from both first, so "614 -466" and
    "614-466" score 0. An empty reference scores 0.0 against an empty hypothesis and
    1.0 otherwise. Not capped: a hypothesis with many insertions scores above 1.
    """
    ref, hyp = normalize_text(reference), normalize_text(hypothesis)
    if ignore_whitespace:
        ref, hyp = ref.replace(" ", ""), hyp.replace(" ", "")
    if not ref:
        return 0.0 if not hyp else 1.0
    return Levenshtein.distance(ref, hyp) / len(ref)


def order_free_cer(units: list[str], hypothesis: str) -> float:
    """Character error rate whatever the order the units were read in, whitespace
    ignored: for truth whose order is not known (FUNSD's entities, SROIE's line boxes),
    where `cer` counts a line read in another row order as wrong characters.

    The units and the hypothesis's lines (normalize_text'd, whitespace removed) are
    paired greedily, the longest unit first, each with the piece of the hypothesis it
    matches best (rapidfuzz partial_ratio_alignment; a unit longer than a line takes
    the line and goes on with what is left of it; a line longer than a unit gives up
    the window matched). A pair scoring under ORDER_FREE_MIN_SCORE is no pair. The
    result is the Levenshtein distances of the pairs plus every character left over
    on either side, divided by the units' characters. Same empty rule as `cer`; not
    capped at 1.
    """
    refs = [piece for piece in (_squeezed(unit) for unit in units) if piece]
    hyps = [piece for piece in (_squeezed(line) for line in hypothesis.splitlines()) if piece]
    total = sum(map(len, refs))
    if not total:
        return 0.0 if not hyps else 1.0
    errors = 0
    while refs and hyps:
        ref = max(refs, key=len)
        refs.remove(ref)
        scored = [(fuzz.partial_ratio_alignment(ref, hyp), index) for index, hyp in enumerate(hyps)]
        match, index = max(scored, key=lambda item: item[0].score)
        if match.score < ORDER_FREE_MIN_SCORE:
            errors += len(ref)  # read nowhere
            continue
        hyp = hyps.pop(index)
        ref_part = ref[match.src_start:match.src_end]
        hyp_part = hyp[match.dest_start:match.dest_end]
        errors += Levenshtein.distance(ref_part, hyp_part)
        refs += [rest for rest in (ref[:match.src_start], ref[match.src_end:]) if rest]
        hyps += [rest for rest in (hyp[:match.dest_start], hyp[match.dest_end:]) if rest]
    errors += sum(map(len, refs)) + sum(map(len, hyps))
    return errors / total


def _squeezed(text: str) -> str:
    return normalize_text(text).replace(" ", "")


def wer(reference: str, hypothesis: str) -> float:
    """Word error rate: Levenshtein distance between the word sequences (normalize_text,
    split on spaces; case and punctuation kept) divided by the number of reference
    words. Same empty-reference rule as `cer`; not capped at 1."""
    ref, hyp = normalize_text(reference).split(), normalize_text(hypothesis).split()
    if not ref:
        return 0.0 if not hyp else 1.0
    return Levenshtein.distance(ref, hyp) / len(ref)


def bag_of_words_f1(reference: str, hypothesis: str) -> float:
    """Order-free word overlap: F1 of the multiset intersection of words (normalize_text,
    casefolded, split on spaces; punctuation kept). Precision = shared / hypothesis
    words, recall = shared / reference words. Both empty: 1.0; one empty: 0.0."""
    ref = Counter(normalize_text(reference).casefold().split())
    hyp = Counter(normalize_text(hypothesis).casefold().split())
    if not ref and not hyp:
        return 1.0
    shared = sum((ref & hyp).values())
    if shared == 0:
        return 0.0
    precision, recall = shared / hyp.total(), shared / ref.total()
    return 2 * precision * recall / (precision + recall)


def reading_order_distance(units: list[str], hypothesis: str) -> float | None:
    """How far the hypothesis strays from the true reading order, 0.0 (same order) to 1.0.

    `units` are ground-truth blocks or lines in true reading order. Each unit is located
    in the hypothesis by the best partial match (rapidfuzz partial_ratio_alignment on
    normalize_text'd strings). A unit is left out when it has fewer than
    MIN_UNIT_CHARS non-space characters, when its normalised text occurs more than once
    among the units, or when it matches a second place in the hypothesis about as well
    as the first (both make its position ambiguous), or when its best match scores
    below MIN_UNIT_SCORE. The found units' indices, ordered by where they start in
    the hypothesis, are compared with the same indices in ascending order: the result
    is their Levenshtein distance divided by the number of found units. A pair of
    swapped units costs 2 edits; swapped halves score 1.0. None when fewer than two
    units were found.
    """
    hyp = normalize_text(hypothesis)
    normalised = [normalize_text(unit) for unit in units]
    counts = Counter(normalised)
    found = []
    for index, unit in enumerate(normalised):
        if len(unit.replace(" ", "")) < MIN_UNIT_CHARS or counts[unit] > 1:
            continue
        match = fuzz.partial_ratio_alignment(unit, hyp, score_cutoff=MIN_UNIT_SCORE)
        if match is None:
            continue
        # Repetitive text (a phrase that recurs on the page) matches in several places
        # equally well; its position says nothing about order, so it is left out.
        masked = hyp[:match.dest_start] + "\0" * (match.dest_end - match.dest_start) \
            + hyp[match.dest_end:]
        if fuzz.partial_ratio(unit, masked, score_cutoff=match.score - 1):
            continue
        found.append((match.dest_start, index))
    if len(found) < 2:
        return None
    order = [index for _, index in sorted(found)]
    return Levenshtein.normalized_distance(order, sorted(order))


@dataclass
class _Node:
    tag: str
    text: str = ""
    children: list[_Node] = field(default_factory=list)


class _TedsConfig(Config):
    valuecls = float

    def rename(self, node1: _Node, node2: _Node) -> float:
        if node1.tag != node2.tag:
            return 1.0
        if node1.tag == "td":
            return Levenshtein.normalized_distance(node1.text, node2.text)
        return 0.0

    def children(self, node: _Node) -> list[_Node]:
        return node.children


def _table_tree(rows: list[list[str]]) -> _Node:
    return _Node("table", children=[
        _Node("tr", children=[_Node("td", normalize_text(cell)) for cell in row]) for row in rows
    ])


def _node_count(rows: list[list[str]]) -> int:
    return 1 + len(rows) + sum(len(row) for row in rows)


def teds(reference: list[list[str]], hypothesis: list[list[str]]) -> float:
    """Tree-edit-distance similarity (Zhong et al. 2020) of two tables given as rows of
    cell texts, 0.0 to 1.0 (identical).

    Each table becomes a tree table -> tr (one per row) -> td (one per cell, carrying
    the cell's normalize_text'd text). Inserting or deleting a node costs 1; renaming a
    td to a td costs the normalised Levenshtein distance of their texts (edits / longer
    length, 0..1); renaming across kinds costs 1. TEDS = 1 - distance / the larger
    node count (1 + rows + cells). No spans: a table given as rows has none.
    """
    trees = _table_tree(reference), _table_tree(hypothesis)
    distance = APTED(*trees, _TedsConfig()).compute_edit_distance()
    return 1.0 - distance / max(_node_count(reference), _node_count(hypothesis))


def table_similarity(
    reference_tables: list[list[list[str]]], hypothesis_tables: list[list[list[str]]]
) -> float | None:
    """Mean TEDS over tables paired in document order. A reference table with no
    hypothesis table, or an extra hypothesis table, scores 0 for its pair, so the mean
    runs over max(len(reference_tables), len(hypothesis_tables)) pairs. None when the
    reference has no tables (nothing to measure; extra tables there are the format
    contract's business)."""
    if not reference_tables:
        return None
    pairs = max(len(reference_tables), len(hypothesis_tables))
    scores = [teds(ref, hyp) for ref, hyp in zip(reference_tables, hypothesis_tables)]
    return sum(scores) / pairs


def normalize_field(value: str) -> str:
    """NFKC, casefolded, keeping only letters, digits and combining marks (Unicode
    categories L*, N*, M*): whitespace and punctuation go, so "RM 12.50" and "rm12,50"
    both become "rm1250"."""
    folded = unicodedata.normalize("NFKC", value).casefold()
    return "".join(ch for ch in folded if unicodedata.category(ch)[0] in "LNM")


def field_accuracy(fields: dict[str, str], hypothesis: str) -> dict[str, bool]:
    """Per key field, whether its normalize_field'd expected value occurs as a substring
    of the normalize_field'd hypothesis. An OCR engine does not extract fields, so
    "the value is there, exactly" is the honest test. Fields whose expected value
    normalises to "" are left out of the result. Because separators are dropped, a
    value can also match across neighbouring words (a short number inside a longer
    one): read short numeric fields' scores with that in mind."""
    text = normalize_field(hypothesis)
    expected = {key: normalize_field(value) for key, value in fields.items()}
    return {key: value in text for key, value in expected.items() if value}
