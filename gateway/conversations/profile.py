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
from services.runtime.korean.amounts import amounts
from services.runtime.korean.gifts import OCCASIONS, RECIPIENTS
from services.runtime.korean.particles import starts_word, strip_particle

# Words that name an attribute tag (the tag itself always does). Used only for tags the collection has.
ATTRIBUTE_ALIASES = {
    "알코올": ("술", "주류"), "무알코올": ("무알콜",), "견과류": ("견과", "땅콩", "호두"),
    "전자": ("전자 제품", "전자제품", "전기 제품", "전기제품", "전자기기"), "향": ("향기", "냄새"),
    "어린이용": ("아이용", "아동용"), "친환경": ("에코",)}
CATEGORY_ALIASES = {"꽃": ("꽃다발", "화분", "꽃바구니"), "주얼리": ("귀걸이", "목걸이", "팔찌", "반지"),
                    "이어폰": ("헤드폰",), "장난감": ("레고", "인형")}
REFUSAL = (r"(?:빼|제외|말고|싫|별로|안\s*돼|안\s*되|됐|안\s*마[시셔신]|못\s*먹|못\s*드|안\s*드|안\s*좋아"
           r"|알레르기|무서워|필요\s*없|이미\s*있|이미\s*많)")
# Refusals told without a refusal word (grammar, not a list of items): the clause's topic is already had
# (지갑은 이미 있어, 장난감은 집에 많대), was given or bought before (향초는 지난번에 줬어), comes from elsewhere
# (회사에서 준대요), or is not used (화장품은 잘 안 써요, 커피는 매일 마셔서 식상해). They count only for a mention
# marked as the clause's topic or subject (은/는/이/가/도), so "각인 있는 걸로" stays a wish.
HAVE = (r"(?:있(?:어|대|다|으니|으시|는데|거든|습|잖|으셔)|갖고\s*(?:있|계)|가지고\s*(?:있|계)"
        r"|많(?:아|대|으니|이\s*(?:있|받)|거든)|가득|쌓여|넘쳐)")
GAVE = r"(?:줬|주었|드렸|사\s*줬|사\s*드렸|선물했|받았|샀|사\s*왔)"
OTHERS = r"(?:준대|준다고|주신대|나온대|(?:본인이|직접|알아서|스스로)\s*(?:잘\s*)?(?:사|구매|고르|골라))"
DISUSE = (r"(?:안\s*(?:써|쓰|입|마셔|마시|드셔|드시|먹|읽|해)|잘\s*안|못\s*(?:드|먹|마|써)|질리|질렸|식상|시들|"
          r"쓰(?:시)?(?:는|던)\s*(?:것|거)만|살쪄|지겨|"
          r"물려|깨져)")
CUE = rf"(?:{HAVE}|{GAVE}|{OTHERS}|{DISUSE})"
TOPIC_MARK = re.compile(r"^\s*+(?:은|는|이|가|도|들은|들도|들이|종류는|같은\s*+(?:건|거|것))")
# A refused description without a vocabulary word (먹는 건 말고, 단 음식은 못 드세요): up to two words before the
# topic particle; the serving layer maps it onto the collection's vocabulary (gateway/conversations/sessions.py).
DESCRIPTION = re.compile(r"(?P<desc>(?<![가-힣])(?:[가-힣]+\s)?[가-힣]+?)\s*+(?P<mark>건|거는|거|것은|것도|은|는)\s*"
                         r"(?:다\s*|좀\s*|그냥\s*)?$")
# What makes a mentioned attribute a must-have ("각인 되는 걸로", "캐릭터 들어간 게 좋대요"); a bare mention
# ("와인 세트") or a soft wish ("비건이면 더 좋아요") is none.
WISH = r"(?:되는|되게|들어간|들어\s*있는|있는\s*걸|가능한|걸로|으?로\s*해|이어야|여야|좋대|필수)"
HANGUL = re.compile(r"[가-힣]")
AMOUNTISH = re.compile(r"\d|[만천]\s*원|빼|싫|말고")  # a budget or a refusal is no search keyword
TOPIC = re.compile(r"(?<![가-힣A-Za-z0-9])([가-힣A-Za-z0-9]{2,})(?:은|는|이|가|도)\s")
THAT = re.compile(r"(?:그건|그거|그것|그것도|그건요|그중에|그\s*+제품)\s*+(?:(?:은|는|도)\s*+)?" + REFUSAL)


@dataclass(frozen=True)
class Vocabulary:
    """A collection's categories and attribute tags (the closed lists the profile may hold)."""

    categories: tuple[str, ...] = ()
    attributes: tuple[str, ...] = ()

    def words(self) -> list[tuple[str, str, str]]:
        """(word as written, kind, canonical) for every category, attribute and alias, longest first."""
        out = [(c, "category", c) for c in self.categories]
        out += [(a, "category", c) for c in self.categories for a in CATEGORY_ALIASES.get(c, ())]
        out += [(t, "attribute", t) for t in self.attributes]
        out += [(a, "attribute", t) for t in self.attributes for a in ATTRIBUTE_ALIASES.get(t, ())]
        return sorted(out, key=lambda w: -len(w[0]))


@dataclass
class Mention:
    """A vocabulary word the turn writes."""

    kind: str  # "category" or "attribute"
    value: str
    start: int
    end: int


def mentions(text: str, vocab: Vocabulary) -> list[Mention]:
    """Every vocabulary word in ``text`` that starts a word, longest match first.

    꽃향 is the attribute, not the category 꽃; the 향 of 취향 is no mention.
    """
    taken: list[tuple[int, int]] = []
    found: list[Mention] = []
    for word, kind, value in vocab.words():
        for m in re.finditer(re.escape(word), text):
            if m.start() > 0 and HANGUL.match(text[m.start() - 1]):
                continue
            if any(m.start() < e and s < m.end() for s, e in taken):
                continue
            taken.append((m.start(), m.end()))
            found.append(Mention(kind, value, m.start(), m.end()))
    return sorted(found, key=lambda m: m.start)


CLAUSE_END = re.compile(r"[.!?;]|그리고|대신|그럼|근데")
AND = re.compile(r"^\s*(?:이나|나|랑|이랑|와|과|하고|및|,)\s*$")


def refusals(text: str, found: list[Mention]) -> set[int]:
    """The mentions the turn refuses.

    A refusal word (빼, 말고, 싫, 안 돼 ...) after a mention and before the next one, in its clause, refuses it
    ("전기 담요 같은 전자 제품은 빼 주세요" refuses 전자, not 담요); a mention joined to a refused one by 이나, 랑,
    와 ... is refused with it ("향수랑 꽃은 빼 주세요").
    """
    out: set[int] = set()
    for i in range(len(found) - 1, -1, -1):
        end = found[i + 1].start if i + 1 < len(found) else len(text)
        segment = text[found[i].end:end]
        clause = CLAUSE_END.split(segment, maxsplit=1)[0]
        if re.search(REFUSAL, clause) or TOPIC_MARK.match(segment) and re.search(CUE, clause) \
                and not stance.asks(segment[:len(clause) + 1]):  # "시계는 어떤 게 인기 있어?" asks, it does not refuse
            out.add(i)
        elif i + 1 in out and AND.match(segment):
            out.add(i)
    return out


def descriptions(text: str, vocab: Vocabulary) -> list[str]:
    """The things a turn refuses by describing them, not by a vocabulary word: ``먹는 건 말고`` → ``먹는 것``.

    A refusal or a cue (see ``CUE``) whose clause's topic holds no vocabulary word; the description is up
    to two words before the topic particle, 건/거 written back as 것. Code maps it onto the vocabulary only
    through the serving layer's embedding (:func:`merge`'s ``related``).
    """
    out: list[str] = []
    found = mentions(text, vocab)
    for clause in re.split(r"[.!?;,]|그리고|대신|그럼|근데", text):
        hit = re.search(REFUSAL, clause) or re.search(CUE, clause)
        if not hit:
            continue
        head = clause[:hit.start()]
        offset = text.find(clause)
        if any(offset <= m.start < offset + hit.start() for m in found):
            continue
        m = DESCRIPTION.search(head)
        if m is None:
            continue
        desc = m["desc"].strip()
        if m["mark"] in ("건", "거는", "거", "것은", "것도"):
            desc += " 것"
        if len(desc.replace(" ", "")) >= 2 and desc not in out:
            out.append(desc)
    return out


def wishes(text: str, found: list[Mention]) -> set[int]:
    """The attribute mentions the turn asks for ("각인 되는 걸로"): a wish word before the next mention."""
    out = set()
    for i, m in enumerate(found):
        end = found[i + 1].start if i + 1 < len(found) else len(text)
        if m.kind == "attribute" and re.search(WISH, CLAUSE_END.split(text[m.end:end], maxsplit=1)[0]):
            out.add(i)
    return out


def empty_profile() -> dict[str, Any]:
    """A conversation's profile before its first turn."""
    return {"recipient": None, "occasion": None, "budget_min": None, "budget_max": None, "categories": [],
            "excluded_categories": [], "must_have": [], "forbidden": [], "keywords": [], "excluded_keywords": [],
            "last_mentioned": None}


def _add(items: list[str], value: str) -> None:
    if value not in items:
        items.append(value)


def _drop(items: list[str], value: str) -> None:
    if value in items:
        items.remove(value)


@dataclass
class Merge:
    """One turn merged: the new profile and what code kept, ignored or resolved (``notes``)."""

    profile: dict[str, Any]
    notes: list[str] = field(default_factory=list)


# A later amount that revises the one before it, by grammar: the first told as past or denied (5만 원이었는데,
# 5만 원 말고, 5만 원이 아니라), or the second as where the budget moves to (8만 원으로 늘릴게, 올려서, 바꿀게).
_WAS = re.compile(r"^\s*+(?:이었|였|이던|이라고\s*했|라고\s*했|생각했|잡았|했)[가-힣]*"
                  r"|^\s*+(?:말고|아니[고라다]|이\s*아니|대신)")
_TO = re.compile(r"^\s*+(?:까지|으?로)?\s*+(?:늘|올|줄이|줄여|줄일|낮|내리|내려|바꾸|바꿀|바꿔|변경|조정|상향|하향)")


def revises(text: str, first: Any, second: Any) -> bool:
    """Whether the amount ``second`` replaces ``first`` (a correction) rather than closing a range with it."""
    between = text[first.end:second.start]
    return bool(_WAS.match(between) or _TO.match(text[second.end:]) and "사이" not in text[second.end:])


def _without_amounts(text: str) -> str:
    """``text`` with every amount, and a correction word right after it (말고, 아니라), blanked (same length)."""
    out = text
    for a in amounts(text):
        end = a.end
        m = re.match(r"^\s*+(?:이|가|은|는)?\s*+(?:말고|아니라|아니고|대신)", text[end:])
        if m:
            end += m.end()
        out = out[:a.start] + " " * (end - a.start) + out[end:]
    return out


def budget(text: str, profile: dict[str, Any]) -> tuple[int | None, int | None] | None:
    """The budget after ``text`` (None: the turn names no amount in won)."""
    found = [a for a in amounts(text) if a.currency in (None, "KRW") and a.integer is not None and a.integer > 0]
    if not found:
        return None
    low, high = profile["budget_min"], profile["budget_max"]
    if len(found) >= 2 and revises(text, found[0], found[1]):
        found = found[1:]  # "5만 원이었는데 8만 원까지 늘릴게": the later amount alone, setting its side
    elif len(found) >= 2:
        values = sorted(a.integer for a in found[:2] if a.integer is not None)
        return values[0], values[-1]
    one = found[0]
    if one.bound == "range" and one.high is not None:
        return one.integer, int(one.high)
    if one.bound == "min":
        low = one.integer
        if high is not None and low is not None and high < low:
            high = None
    else:
        high = one.integer
        if low is not None and high is not None and low > high:
            low = None
    return low, high


GENERIC = ("선물", "추천", "물건", "제품")  # what every turn is about: never a recipient or an occasion


def _listed(words: tuple[str, ...], text: str) -> list[str]:
    """The listed words the turn writes, in order, each with the one syllable before it in its word (여동생)."""
    found: list[tuple[int, int, str]] = []
    for w in words:
        at = text.find(w)
        while at >= 0 and (any(at < e and s < at + len(w) for s, e, _ in found)
                           or not (starts_word(text, at) or at > 0 and starts_word(text, at - 1))
                           or not _whole(text, at, w)):
            at = text.find(w, at + 1)
        if at < 0:
            continue
        start = at - 1 if at > 0 and HANGUL.match(text[at - 1]) and starts_word(text, at - 1) else at
        found.append((start, at + len(w), text[start:at + len(w)]))
    return [w for _, _, w in sorted(found)]


def _whole(text: str, at: int, word: str) -> bool:
    """Whether ``word`` at ``at`` is the word itself, not part of a longer one.

    Not a title (이사님), and a one-syllable word (돌, 딸) not the start of a longer one (돌아가, 딸기) unless a
    particle follows it.
    """
    after = text[at + len(word):at + len(word) + 1]
    if after == "님" and not word.endswith("님"):
        return False
    return not (len(word) == 1 and after and HANGUL.match(after) and after not in "이가은는을를에의도과와랑")


# Kin told through another person ("친구 아들", "동생의 딸"): the gift is for the last of them.
_OF = re.compile(r"^\s*(?:의\s*)?$")


def _compounds(listed: list[str], text: str) -> list[str]:
    """Adjacent listed kin words joined into one ("친구 아들"), in the order written."""
    out: list[str] = []
    for w in listed:
        if out:
            prev = out[-1]
            at, here = text.find(prev), text.find(w, text.find(prev) + len(prev))
            if at >= 0 and here >= 0 and _OF.match(text[at + len(prev):here]):
                out[-1] = f"{prev} {w}"
                continue
        out.append(w)
    return out


def _slot(key: str, words: tuple[str, ...], other: tuple[str, ...], proposed: str, text: str, current: str | None,
          vocab_words: set[str], notes: list[str]) -> str | None:
    """Recipient or occasion after the turn.

    A listed word the turn writes that the model's proposal holds (it may change the slot); else, for an
    empty slot, the first listed word the turn writes; only when it writes none, the proposal itself when
    the turn writes it as one short word of its own that is no word of the other slot nor a generic one
    ("팀원들" → 팀원; not "집들" of 집들이, nor "선물").
    """
    listed = sorted(_listed(tuple(sorted(words, key=len, reverse=True)), text),
                    key=lambda w: text.find(w))
    listed = [w for i, w in enumerate(listed) if not any(w in x and w != x for x in listed[:i] + listed[i + 1:])]
    if key == "recipient":
        listed = _compounds(listed, text)
    proposed = proposed.strip()
    if proposed and _quoted(text, proposed):
        covering = [w for w in listed if w in proposed or proposed in w]
        if covering:
            return covering[0]
        word = strip_particle(strip_particle(proposed.split()[-1]), ("들",))  # 회사 동기 → 동기 (the head is last)
        at = text.replace(" ", "").find(word.replace(" ", ""))
        own_word = at >= 0 and starts_word(text.replace(" ", ""), at)
        if current is None and not listed and word and len(word) <= 6 and own_word \
                and word not in vocab_words and word not in GENERIC and not any(o in proposed for o in other):
            return word
        notes.append(f"{key} {proposed!r} ignored: not one short word of its own the turn writes")
    elif proposed:
        notes.append(f"{key} {proposed!r} ignored: the turn does not write it")
    if current is None and listed:
        return listed[0]
    return current


def _quoted(text: str, value: str) -> bool:
    return bool(value) and value.replace(" ", "") in text.replace(" ", "")


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


@dataclass(frozen=True)
class Fields:
    """The collection's payload fields the profile filters on."""

    price: str = "price"
    category: str = "category"
    attributes: str = "tags"


def search_of(profile: dict[str, Any], fields: Fields, top_k: int = 10) -> dict[str, Any]:
    """The search a profile implies: hard constraints as filters, the rest as the query (and one per category).

    Budget → a price range, must-have attributes → ``must``; excluded categories and forbidden attributes →
    ``must_not``. Recipient, occasion, wanted categories and keywords are soft: the query, plus one
    query per wanted category when there are several (merged across queries).
    """
    must: list[dict[str, Any]] = []
    must_not: list[dict[str, Any]] = []
    if profile["budget_min"] is not None or profile["budget_max"] is not None:
        span = {k: v for k, v in (("gte", profile["budget_min"]), ("lte", profile["budget_max"])) if v is not None}
        must.append({"field": fields.price, **span})
    must += [{"field": fields.attributes, "eq": tag} for tag in profile["must_have"]]
    if profile["excluded_categories"]:
        must_not.append({"field": fields.category, "any_of": list(profile["excluded_categories"])})
    if profile["forbidden"]:
        must_not.append({"field": fields.attributes, "any_of": list(profile["forbidden"])})
    who = " ".join(x for x in (profile["recipient"], profile["occasion"]) if x)
    words = [*profile["categories"], *profile["keywords"], *profile["must_have"]]
    query = " ".join(x for x in (who, "선물", *words) if x)
    out: dict[str, Any] = {"top_k": top_k}
    if len(profile["categories"]) >= 2:
        out["queries"] = [" ".join(x for x in (who, c, "선물", *profile["keywords"]) if x)
                          for c in profile["categories"][:4]]
    else:
        out["query"] = query
    if must or must_not:
        out["filter"] = {"must": must, "must_not": must_not}
    return out
