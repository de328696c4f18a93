"""What a turn says of each thing it names — wants it, refuses it, already has it, only mentions it (issue 80).

The model proposes a stance per thing (``stances`` of the ``spec_delta`` task); code verifies it
against the turn, because word lists of refusals miss every new way of saying no ("시계는 이미 차고
다니셔", "술은 끊으셨어", "꽃은 병원에서 안 된대") and a 1.5B model files wanted things as refused:

- **the thing is named in this turn**: the proposed words are written in the turn and cover a
  vocabulary mention (its entry or an alias), or — outside the vocabulary — the serving layer's
  embedding finds its nearest entry (the same rule as a refused description's);
- **the turn says something of it**: its clause (from the mention to the next mention or clause end)
  holds a predicate of its own, or it is joined (이나, 랑, 하고 …) to a thing whose refusal holds —
  a bare listing ("지갑이나 가방 20만 원 이하") is no refusal whatever the model says;
- **no acceptance in that clause**: the grammar of :data:`ACCEPT` (괜찮아, 좋겠어, 좋아해, 어때, 도 돼,
  낫겠다, 원해, 갖고 싶어 … with any ending), unless negated (안 좋아, 좋지 않아, 못 괜찮). A refusal
  the model proposes beside an acceptance is dropped with a note, and a category it names is wanted.

``have`` (already has it, was given it, gets it elsewhere) excludes like ``refuse``: a gift search
should not show it. ``want`` adds a category (an attribute still needs the turn's wish, see
``profile.wishes``); ``mention`` changes nothing. Refusals code reads by itself (``profile.refusals``)
stand whatever the model proposes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

STANCES = ("want", "refuse", "have", "mention")
EXCLUDING = ("refuse", "have")

# Acceptance: a stem, then any ending. The stems are grammar (a verb or adjective of liking, fitting or
# allowing), not items; their endings are free (괜찮아요, 괜찮을 것 같아, 괜찮대, 괜찮으시대요).
_ACCEPT_STEM = (r"(?:괜찮|좋(?:아하|아|겠|을|은|다|네|고|더|대|으|던)|낫(?:겠|다|네|지)|나을|나아|어때|어떨|어떠|어떤가"
                r"|원하|원해|원한|갖고\s*싶|받고\s*싶|사고\s*싶|가지고\s*싶|(?:해|써|줘|사)?도\s*(?:돼|되|괜찮|좋)"
                r"|마음에\s*들|맘에\s*들|좋아하|반기|환영"
                # a request is a wish too: 보여 주세요, 추천해 줘, 찾고 있어, 골라 줘, 세트로 해 주세요, 그걸로 할게
                r"|보여|보이|추천|찾아|찾고|찾는|골라|고르|부탁|위주로|(?:으)?로\s*(?:해|할|하|된|만든)"
                # a description of the one wanted: 가죽이면, 작은 걸로, 은색인 거
                r"|걸로|거로|것으로|이면|(?<=[가-힣])면\s*(?:좋|돼|되)|인\s*(?:거|걸|것))")
# A question asks about the thing, it does not refuse it (시계는 어떤 게 인기 있어? 커피는 뭐가 좋아?).
QUESTION = re.compile(r"\?|어떤|어떻|무슨|뭐|뭘|무엇|얼마|어디|언제|어느|몇|(?:까|까요|나요|니)\s*$")
# The thing as the clause's topic: what the rest of the clause comments on (시계는, 꽃도, 캐릭터 들어간 건).
TOPIC = re.compile(r"^\s*+(?:(?:은|는|도|들은|들도|종류는)(?![가-힣])|같은\s*+(?:건|거는|것은)"
                   r"|[가-힣]+\s*+(?:건|거는|것은)(?![가-힣]))")
ACCEPT = re.compile(_ACCEPT_STEM)
# Negation around an acceptance: 안/못 before it (as a word or glued: 안좋아), 지 않 / 진 않 / 지는 않 / 지 못 after.
_NEG_BEFORE = re.compile(r"(?:안|못)\s*$")
_NEG_AFTER = re.compile(r"^[가-힣]{0,3}?(?:지|진|지는|지도|지가)\s*(?:않|못|마)")
# A predicate of its own: a verb, an adjective or a copula (Kiwi's tags) in the words after the mention.
# Particles, amounts and nouns alone ("이나 ", "으로 4만 원 선에서") say nothing of the thing.
_PREDICATE = {"VV", "VA", "VX", "VCP", "VCN", "XSV", "XSA"}


def accepts(clause: str) -> bool:
    """Whether ``clause`` accepts (wants, allows, likes) what it is about: an acceptance stem not negated."""
    for m in ACCEPT.finditer(clause):
        before = clause[max(0, m.start() - 3):m.start()]
        if _NEG_BEFORE.search(before) or _NEG_AFTER.match(clause[m.end():m.end() + 8]):
            continue
        return True
    return False


def asks(clause: str) -> bool:
    """Whether ``clause`` is a question about its topic."""
    return bool(QUESTION.search(clause))


def says_something(text: str, start: int, end: int) -> bool:
    """Whether ``text[start:end]`` holds a predicate of its own (a verb, an adjective or a copula).

    The span is the words after a mention, to the next mention or the clause end; Kiwi reads them in the
    context of the whole turn.
    """
    return any(t.tag.split("-")[0] in _PREDICATE and start <= t.start < end for t in _tokens(text))


@lru_cache(maxsize=256)
def _tokens(text: str) -> tuple[Any, ...]:
    from services.runtime.korean import morphs

    return tuple(morphs.tokens(text[:1000]))


@dataclass(frozen=True)
class Proposed:
    """One stance the model proposed: the words it quoted and what the turn says of them."""

    thing: str
    stance: str


def proposed(delta: dict[str, Any]) -> list[Proposed]:
    """The model's stances, well-formed ones only (a string thing of 1-20 characters, a known stance)."""
    out: list[Proposed] = []
    for row in delta.get("stances") or []:
        if not isinstance(row, dict):
            continue
        thing, stance = str(row.get("thing") or "").strip(), str(row.get("stance") or "").strip()
        if 1 <= len(thing) <= 20 and stance in STANCES:
            out.append(Proposed(thing, stance))
    return out


def spans(text: str, thing: str) -> list[tuple[int, int]]:
    """Where ``thing`` is written in ``text`` (spaces ignored inside it: 전자 기기 = 전자기기)."""
    if not thing.strip():
        return []
    pattern = r"\s*".join(re.escape(ch) for ch in thing.replace(" ", ""))
    return [(m.start(), m.end()) for m in re.finditer(pattern, text)]


def clause_of(text: str, found: list[Any], i: int, clause_end: re.Pattern, joined: re.Pattern) -> str:
    """What the turn says of mention ``i`` ("" for a listing): see :func:`_clause`."""
    return _clause(text, found, i, clause_end, joined) or ""


def _clause(text: str, found: list[Any], i: int, clause_end: re.Pattern, joined: re.Pattern) -> str | None:
    """What the turn says of mention ``i`` (None for a listing).

    The words after it to the next mention, or — when those hold no predicate and are no listing ("와인은
    둘 다 술을 멀리해서") — on to the clause's end.
    """
    nxt = found[i + 1].start if i + 1 < len(found) else len(text)
    segment = text[found[i].end:nxt]
    if joined.match(segment):
        return None
    clause = clause_end.split(segment, maxsplit=1)[0]
    if len(clause) == len(segment) and nxt < len(text) \
            and not says_something(text, found[i].end, found[i].end + len(clause)):
        clause = clause_end.split(text[found[i].end:], maxsplit=1)[0]
    return clause


def excluding_things(delta: dict[str, Any]) -> list[str]:
    """Every thing the model proposes to leave out: its refused or already-had stances and its exclusion lists."""
    out = [p.thing for p in proposed(delta) if p.stance in EXCLUDING]
    out += [str(v).strip() for key in ("exclude_categories", "forbidden") for v in delta.get(key) or []]
    return list(dict.fromkeys(w for w in out if w))


@dataclass
class Read:
    """What the model's stances, verified, say of the turn's mentions (indexes into its mentions)."""

    refused: set[int]  # the refusal holds: named, said something of, not accepted
    commented: set[int]  # proposed by code: a topic (시계는 …) whose comment neither accepts, asks nor requests
    accepted: set[int]  # a refusal proposed beside an acceptance of it: dropped, the thing is wanted
    wanted: set[int]  # the model says the person wants it
    outside: list[str]  # refused things outside the vocabulary that the turn writes and says something of
    notes: list[str]


def verify(text: str, found: list[Any], delta: dict[str, Any], code_refused: set[int], clause_end: re.Pattern,
           joined: re.Pattern) -> Read:
    """The model's stances checked against the turn (see the module's rules).

    ``found``: the turn's vocabulary mentions (``start``, ``end``, ``value``), in order; ``code_refused``:
    those code refuses by itself; ``clause_end`` and ``joined`` split clauses and recognise a listing
    ("이나", "랑") between two mentions.
    """
    read = Read(set(), set(), set(), set(), [], [])
    candidates: set[int] = set()
    for p in proposed(delta):
        where = spans(text, p.thing)
        if not where:
            if p.stance in EXCLUDING:
                read.notes.append(f"{p.stance} {p.thing!r} ignored: the turn does not write it")
            continue
        covered = [i for i, m in enumerate(found) if any(s < m.end and m.start < e for s, e in where)]
        if p.stance == "want":
            read.wanted.update(covered)
        elif p.stance in EXCLUDING and covered:
            candidates.update(covered)
        elif p.stance in EXCLUDING:  # a thing outside the vocabulary (홍삼): kept out of the query if it holds
            end = where[0][1]
            clause = clause_end.split(text[end:], maxsplit=1)[0]
            if accepts(clause):
                read.notes.append(f"{p.stance} {p.thing!r} ignored: the turn accepts it")
            elif says_something(text, end, end + len(clause)):
                read.outside.append(p.thing)
            else:
                read.notes.append(f"{p.stance} {p.thing!r} ignored: the turn says nothing of it")
    for i, m in enumerate(found):  # code's own reading: a topic whose comment neither accepts nor asks
        if i in code_refused or i in candidates or not TOPIC.match(text[m.end:]):
            continue
        clause = _clause(text, found, i, clause_end, joined)
        if clause is not None and not accepts(clause) and not asks(text[m.end:m.end + len(clause) + 1]) \
                and says_something(text, m.end, m.end + len(clause)):
            candidates.add(i)
            read.commented.add(i)
    for i in sorted(candidates, reverse=True):  # from the last: a listing joins a thing to the refused one after it
        if i in code_refused:
            continue
        segment = text[found[i].end:found[i + 1].start if i + 1 < len(found) else len(text)]
        clause = _clause(text, found, i, clause_end, joined) or clause_end.split(segment, maxsplit=1)[0]
        if accepts(clause) or asks(text[found[i].end:found[i].end + len(clause) + 1]):
            read.accepted.add(i)
            read.notes.append(f"refusal of {found[i].value!r} proposed, but the turn accepts or asks about it: kept")
        elif joined.match(segment):  # a listing (향수하고 꽃은 …): refused with the thing after it, or not at all
            if i + 1 in read.refused or i + 1 in code_refused:
                read.refused.add(i)
                read.notes.append(f"{found[i].value!r} refused with the thing listed after it")
            else:
                read.notes.append(f"refusal of {found[i].value!r} proposed, but the turn only lists it: ignored")
        elif says_something(text, found[i].end, found[i].end + len(clause)):
            read.refused.add(i)
            by = "the turn's comment on it" if i in read.commented else "the model's reading, checked against the turn"
            read.notes.append(f"{found[i].value!r} refused ({by})")
        else:
            read.notes.append(f"refusal of {found[i].value!r} proposed, but the turn says nothing of it: ignored")
    return read


_NOUNS = {"NNG", "NNP", "NR", "SL", "SN", "SH", "XSN", "XPN"}


def nominal(word: str) -> bool:
    """Whether ``word`` names a thing: Kiwi reads it as nouns only (after its particles and a copula's ending).

    "홍삼", "커피 세트", "레고" are; "알아보고", "찾고", "때문에 비싼", "먹는" are not.
    """
    from services.runtime.korean import morphs

    toks = list(morphs.tokens(word[:40]))
    while toks and (toks[-1].tag.startswith(("J", "E")) or toks[-1].tag == "VCP"):
        toks.pop()
    return bool(toks) and all(t.tag in _NOUNS for t in toks) and any(t.tag in ("NNG", "NNP", "SL") for t in toks)
