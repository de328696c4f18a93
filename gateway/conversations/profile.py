"""A conversation's search profile, merged turn by turn by code (pure functions; the model only proposes).

Seeds 000 and 004: the user talks ("아내 생일 선물 찾는데요" → "예산은 10만 원 정도" → "향수는 빼 주세요"),
a small model extracts each turn's change (the ``spec_delta`` task) and code keeps the profile:

- **budget**: read by code from the turn (services/runtime/korean/amounts.py), never the model's number:
  one amount sets the side its word names (이하/까지/안쪽/이내/미만 → max; 이상/부터/넘는 → min;
  정도/쯤/none → max); two amounts are the min and the max; a later amount overrides the side it sets
  (and a min above the new max is dropped).
- **mentions are checked against the turn**: a recipient, occasion, category, attribute or keyword the
  model names counts only when the turn writes it (or, for a category or attribute, one of its
  aliases: 술 → 알코올); categories and attributes are the collection's own vocabulary.
- **exclusions**: the model's, plus those code reads itself — a vocabulary word followed in its clause
  by a refusal (빼, 제외, 말고, 싫, 별로, 안 돼, 안 마시, 못 먹, 알레르기) —; "그건 빼고" excludes the
  last thing mentioned (in this turn before the words, else the turns before). An exclusion removes the
  same inclusion; a later inclusion lifts an earlier exclusion; a turn that both wants and excludes a
  thing excludes it, and the profile says so in ``notes``.
- **later turns override** recipient and occasion.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from gateway.conversations import stance
from gateway.conversations.budget import _without_amounts, budget
from gateway.conversations.reading import (
    AMOUNTISH,
    AND,
    CLAUSE_END,
    CUE,
    GAVE,
    REFUSAL,
    THAT,
    TOPIC,
    Mention,
    Vocabulary,
    _add,
    _drop,
    descriptions,
    mentions,
    refusals,
    wishes,
)
from gateway.conversations.related import _canonical, _described, _refused_word
from gateway.conversations.slots import GENERIC, _listed, _quoted, _slot
from services.runtime.korean.gifts import OCCASIONS, RECIPIENTS


def empty_profile() -> dict[str, Any]:
    """A conversation's profile before its first turn."""
    return {"recipient": None, "occasion": None, "budget_min": None, "budget_max": None, "categories": [],
            "excluded_categories": [], "must_have": [], "forbidden": [], "keywords": [], "excluded_keywords": [],
            "last_mentioned": None}


@dataclass
class Merge:
    """One turn merged: the new profile and what code kept, ignored or resolved (``notes``)."""

    profile: dict[str, Any]
    notes: list[str] = field(default_factory=list)


def merge(profile: dict[str, Any], delta: dict[str, Any], text: str, vocab: Vocabulary,
          related: dict[str, list[tuple[str, str]]] | None = None) -> Merge:
    """``profile`` after the turn ``text`` whose change the model proposed as ``delta`` (a new dict).

    Categories and attributes are read from the turn by code: a mention the turn refuses is excluded
    (forbidden); any other category is wanted, and an attribute the turn asks for ("각인 되는 걸로") is a
    must-have. The model's proposals add wanted categories the turn writes and code did not read; an
    exclusion or a must-have the model proposes counts only when the turn says it (a 1.5B model files
    wanted things under excluded: bench/results/conversations_run1.md).
    """
    p: dict[str, Any] = {k: (list(v) if isinstance(v, list) else v) for k, v in profile.items()}
    out = Merge(p)
    found = mentions(text, vocab)
    vocab_words = {w for w, _, _ in vocab.words()}
    present = " ".join(c for c in re.split(r"[.!?;,]", text) if not re.search(GAVE, c))  # 생일에 드렸어: a past one
    for key, words, other, said in (("recipient", RECIPIENTS, OCCASIONS, text),
                                    ("occasion", OCCASIONS, RECIPIENTS, present)):
        p[key] = _slot(key, words, other, delta.get(key) or "", said, p[key], vocab_words, out.notes)
    span = budget(text, p)
    if span is not None:
        p["budget_min"], p["budget_max"] = span
    refused_at = refusals(text, found)
    read = stance.verify(text, found, delta, refused_at, CLAUSE_END, AND)
    refused_at |= read.refused
    out.notes += read.notes
    for thing in read.outside:  # a refused thing outside the vocabulary: kept out of the query, if it is a thing
        if stance.nominal(thing) and thing not in p["excluded_keywords"] and len(p["excluded_keywords"]) < 8:
            _add(p["excluded_keywords"], thing)
            _drop(p["keywords"], thing)
            out.notes.append(f"{thing!r} refused: kept out of the query")
    excluded = [found[i] for i in sorted(refused_at)]
    that = THAT.search(text)
    if that:
        before = [m for m in found if m.end <= that.start()]
        topics = [w for w in TOPIC.findall(text[:that.start()]) if w not in RECIPIENTS and w not in OCCASIONS
                  and stance.nominal(w)]
        if before:
            excluded.append(before[-1])
        elif topics:  # "홍삼은 이미 많으셔서 그건 빼고요": a word outside the vocabulary, kept out of the query
            _add(p["excluded_keywords"], topics[-1])
            _drop(p["keywords"], topics[-1])
            out.notes.append(f"'그건' read as {topics[-1]!r}")
        elif p["last_mentioned"]:
            kind, value = p["last_mentioned"]
            excluded.append(Mention(kind, value, 0, 0))
            out.notes.append(f"'그건' read as the last thing mentioned: {value!r}")
    described = descriptions(text, vocab)
    if described:
        excluded += _described(described, delta, found, vocab, related or {}, p, out.notes)
    plain = _without_amounts(text)  # "5만 원 말고 7만 원": a budget's correction, no refusal of a thing
    refusal = re.search(REFUSAL, plain) or re.search(CUE, plain)
    own = _refused_word(text, refusal.start()) if refusal else None
    if own and not found and not described and not that and not read.outside and stance.nominal(own):
        # "홍삼 말고": a word outside the vocabulary, refused
        if own not in p["excluded_keywords"] and len(p["excluded_keywords"]) < 8:
            _add(p["excluded_keywords"], own)
            _drop(p["keywords"], own)
        out.notes.append(f"{own!r} refused: kept out of the query")
    elif delta.get("exclude_last") and refusal and not refused_at and not described and not that \
            and p["last_mentioned"] and not found:
        kind, value = p["last_mentioned"]  # the model's signal, checked: the turn refuses and names nothing itself
        excluded.append(Mention(kind, value, 0, 0))
        out.notes.append(f"exclude_last: the turn refuses without naming; {value!r} excluded")
    excluded_values = {(m.kind, m.value) for m in excluded}
    for kind, key in (("category", "exclude_categories"), ("attribute", "forbidden")):
        for value in delta.get(key) or []:
            canon = _canonical(value, kind, found, vocab)
            if (kind, value) in excluded_values:
                continue
            if canon is None or (kind, canon) not in excluded_values:
                out.notes.append(f"exclusion {value!r} ignored: the turn does not refuse it")
    wished = wishes(text, found)
    wanted = [(m.kind, m.value) for i, m in enumerate(found)
              if i not in refused_at and (m.kind == "category" or i in wished)]
    wants = [x.thing for x in stance.proposed(delta) if x.stance == "want"]
    for value in [*(delta.get("want_categories") or []), *wants]:
        canon = _canonical(value, "category", found, vocab)
        if canon is None:
            out.notes.append(f"{value!r} ignored: not a category the turn writes")
        elif ("category", canon) not in wanted:
            wanted.append(("category", canon))
    for value in delta.get("must_have") or []:
        canon = _canonical(value, "attribute", found, vocab)
        if canon is None or ("attribute", canon) not in wanted:
            out.notes.append(f"must-have {value!r} ignored: the turn does not ask for it")
    for kind, value in wanted:
        if (kind, value) in excluded_values:
            out.notes.append(f"{value!r} both wanted and excluded in one turn: excluded")
            continue
        _add(p["categories" if kind == "category" else "must_have"], value)
        _drop(p["excluded_categories" if kind == "category" else "forbidden"], value)
    for kind, value in dict.fromkeys((m.kind, m.value) for m in excluded):  # in the order the turn says them
        if kind == "category":
            _add(p["excluded_categories"], value)
            _drop(p["categories"], value)
        else:
            _add(p["forbidden"], value)
            _drop(p["must_have"], value)
    refused_spans = [(m.start, m.end + len(stance.clause_of(text, found, i, CLAUSE_END, AND)))
                     for i, m in enumerate(found) if i in refused_at]
    slots = [w for w in (*_listed(RECIPIENTS, text), *_listed(OCCASIONS, text), p["recipient"], p["occasion"]) if w]
    for word in delta.get("keywords") or []:
        word = word.strip()
        at = text.replace(" ", "").find(word.replace(" ", "")) if word else -1
        if word and _quoted(text, word) and word not in vocab_words and word not in p["excluded_keywords"] \
                and not any(word in w or w in word for w in slots) and not AMOUNTISH.search(word) \
                and len(p["keywords"]) < 8 and word not in GENERIC and stance.nominal(word) \
                and not any(s <= text.find(word) < e for s, e in refused_spans) and at >= 0:
            _add(p["keywords"], word)  # a content noun of the turn, not who or why, not said of a refused thing
    kept = [m for m in found if (m.kind, m.value) not in excluded_values]
    if kept:
        p["last_mentioned"] = [kept[-1].kind, kept[-1].value]
    return out
