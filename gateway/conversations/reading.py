"""What a turn says, read by code (pure functions over the turn's text).

The vocabulary's mentions, the refusals and wishes around them, and the things a turn refuses without
naming them ("먹는 건 말고").
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gateway.conversations import stance

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


def _add(items: list[str], value: str) -> None:
    if value not in items:
        items.append(value)


def _drop(items: list[str], value: str) -> None:
    if value in items:
        items.remove(value)
