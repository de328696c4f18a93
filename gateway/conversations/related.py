"""Words outside the collection's vocabulary mapped onto it.

The model's values are checked against the turn's mentions, and refused descriptions ("먹는 건 말고")
matched to their nearest entry by embedding (the serving layer computes the similarities).
"""

from __future__ import annotations

import re
from typing import Any

from gateway.conversations import stance
from gateway.conversations.reading import CLAUSE_END, Mention, Vocabulary, _add, descriptions
from services.runtime.korean.particles import strip_particle


def _canonical(value: str, kind: str, found: list[Mention], vocab: Vocabulary) -> str | None:
    """The vocabulary entry the model's ``value`` names, if the turn writes it (or an alias of it)."""
    value = value.strip()
    for m in found:
        if value and m.kind == kind and (m.value == value or value in m.value or m.value in value):
            return m.value
    return None


# A word outside the vocabulary names the entry nearest to it by embedding (cosine of e5-small query vectors)
# when that entry is at least this near and nearer by this margin than the next (stated on 14 probe words in
# bench.conversations' NEAR_PROBES, before the implicit-refusal report split ran).
NEAR_FLOOR = 0.88
NEAR_MARGIN = 0.01


PRONOUNS = re.compile(r"^(?:그건|그거|그것|그것도|그거는|이건|이거|이것|저건|저거|음|아|네|좀|그냥|근데|그럼)$")


def _refused_word(text: str, at: int) -> str | None:
    """The word a refusal at ``at`` refuses when its clause names one before it (홍삼 말고), else None."""
    head = CLAUSE_END.split(text[:at])[-1]
    words = [strip_particle(w) for w in re.findall(r"[가-힣A-Za-z0-9]+", head)]
    words = [w for w in words if not PRONOUNS.match(w) and len(w) >= 2]
    return words[-1] if words else None


def to_relate(text: str, delta: dict[str, Any], vocab: Vocabulary) -> list[str]:
    """The words the serving layer maps onto the vocabulary by embedding, before :func:`merge`.

    Only for a turn that refuses something it describes (``먹는 건 말고``): the model's proposed exclusions
    that are no vocabulary word (음식, 술 종류), and the description itself.
    """
    described = descriptions(text, vocab)
    if not described:
        return []
    vocab_words = {w for w, _, _ in vocab.words()}
    proposed = stance.excluding_things(delta)
    return list(dict.fromkeys([*(w for w in proposed if w and w not in vocab_words), *described]))


def nearest(similarities: list[float], entries: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The entry a word names by embedding (see ``NEAR_FLOOR``), or none."""
    ranked = sorted(zip(similarities, entries, strict=True), key=lambda x: -x[0])
    if not ranked or ranked[0][0] < NEAR_FLOOR or len(ranked) > 1 and ranked[0][0] - ranked[1][0] < NEAR_MARGIN:
        return []
    return [ranked[0][1]]


def _described(described: list[str], delta: dict[str, Any], found: list[Mention], vocab: Vocabulary,
               related: dict[str, list[tuple[str, str]]], p: dict[str, Any], notes: list[str]) -> list[Mention]:
    """What a refused description excludes: the model's proposed exclusions, checked, and the entries near it.

    The turn refuses something it does not name (checked by :func:`descriptions`); the model's reading of
    it counts when it is a word of its own outside the vocabulary (음식) whose nearest entry the serving
    layer found (``related``), and the description's own nearest entry counts too. A vocabulary entry the
    model names for it is not taken: nothing in the turn or the embedding can confirm it (the embedded model
    named 전자, 어린이용, 식물 for 먹는 것: bench/results/conversations_implicit_run1.md). A description nothing
    maps is kept out of the query as an excluded keyword and named in ``notes``.
    """
    out: list[Mention] = []
    mentioned = {(m.kind, m.value) for m in found}
    entries = {w for w, _, _ in vocab.words()}
    for value in stance.excluding_things(delta):
        if value in entries:
            continue  # a vocabulary word the turn does not write: the embedded model's noise, unverifiable
        for kind, canon in related.get(value, []):
            if (kind, canon) not in mentioned:
                out.append(Mention(kind, canon, 0, 0))
                notes.append(f"{value!r} proposed for a refused description: {canon!r} excluded")
    for desc in described:
        for kind, canon in related.get(desc, []):
            out.append(Mention(kind, canon, 0, 0))
            notes.append(f"{desc!r} refused: {canon!r} is nearest to it")
        if not out:
            word = desc.replace(" 것", "")
            notes.append(f"{desc!r} refused: no vocabulary entry read for it")
            if word not in p["excluded_keywords"] and len(p["excluded_keywords"]) < 8:  # a refused description
                _add(p["excluded_keywords"], word)
    return out
