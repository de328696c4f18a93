"""What a question asks about, read by code: its subject, its qualifiers and the type of answer it wants.

The evidence of a kept answer must hold them (gateway/answers/support.py); a 1.5B model answers "첫
번째 콘서트" from the sentence on the second one, and 벨로스 왕국 from a sentence on another country.

- **subject**: the noun phrases the question is about — its first phrase (up to the particle that ends
  it: 은/는/이/가/의/에/에서/에게/을/를/로 …) and every phrase marked as a possessor (``…의``) — as their
  content terms, and Latin-and-digit names whole (``W3`` is not ``W2``);
- **qualifiers**: ordinals (첫/첫째/첫 번째/처음/최초 as 1, 두 번째 …, ``N번째``, ``N차``, ``N집``, ``N호``,
  ``N호선``, 초대 as 1, 마지막) and years (``2019년``), each compared as a value: 첫번째 ≠ 두 번째;
- **answer type**, from the question's wh-word and the word after it: ``몇 <unit>``/``얼마`` → a number
  (with that unit when the answer writes one; a rank may be a word: 우승), ``언제``/``몇 년``/``몇 월``
  → a date or a time, ``어디``/``누구``/``누가``/``무엇``/``무슨``/``어떤`` → not a bare number or date.

Rules stated before split A was run (bench/data/answers_near_a.json shaped them). Runs of the assistant's
follow-up split (bench/data/assistant_followups.json) shaped three more: subject words stemmed, nouns of
time or order (동안, 다음) never a subject, and an everyday word (wordfreq's Korean list, Zipf >= 4.0,
the threshold set on split A's and that split's words) missing from every passage found not required
(자격, 월급: the person's wording). Split C (answers_near_c.json), written after them, reported them and
then shaped one more: the word after 몇 read as a counter by grammar, whatever it is (:func:`counted`:
몇 W is not 1.6kg, 몇 척 is not 30만 명). Split D (answers_near_d.json), written after it, reported it.
Replays of splits C and D and of answers-ko (the kept answers re-checked, bench/results) then shaped
the rest: the question's rare nouns anywhere in it (Kiwi, :func:`_rare`), quoted titles, numbered
names, the question's own numbers, the counter after a number and 몇 시. Split E
(answers_near_e.json), written before them, reported them; after it, a rarer common noun refuses only
when another passage found holds it (the gateway's own answers tests asked "반품 신청 기한은요?" and
"연차 휴가 일수", and no frequency threshold separated 기한 and 일수 from 막차), and split F
(answers_near_f.json), written after that, reported it. E's and F's misses then shaped three more: a
name Kiwi splits read as its whole nominal run (민가영), days (토요일, 주말) and superlatives (가장 긴) as
qualifiers. Split G (answers_near_g.json), written after them, reports them.
"""

from __future__ import annotations

import functools
import math
import re
import unicodedata
from dataclasses import dataclass
from typing import Any

from gateway.answers import support

_NATIVE_ORDINAL = {"첫": 1, "첫째": 1, "처음": 1, "최초": 1, "초대": 1, "두": 2, "둘째": 2, "세": 3, "셋째": 3,
                   "네": 4, "넷째": 4, "다섯": 5, "다섯째": 5, "여섯": 6, "일곱": 7, "여덟": 8, "아홉": 9, "열": 10}
_ORDINAL = re.compile(r"(?P<n>(?<!\d)\d++|첫째|둘째|셋째|넷째|다섯째|첫|두|세|네|다섯|여섯|일곱|여덟|아홉|열)"
                      r"\s*+번\s*+째"
                      r"|(?<![가-힣])(?P<w>첫째|둘째|셋째|넷째|다섯째|처음|최초|초대|마지막)"
                      r"|(?<![가-힣])(?P<first>첫)(?=\s*[가-힣])"
                      r"|(?<!\d)(?P<d>\d++)\s*+(?P<u>번째|차|집|호선|호|회)(?=$|[^가-힣]|의|은|는|이|가|을|를|에|에서|과|와|도|로|까지)")
_YEAR = re.compile(r"(?<!\d)(?P<y>\d{4})\s*년")
_PLACEHOLDER = "qqq"
_WH = re.compile(r"몇|며칠|얼마|언제|어디|누구|누가|무엇|무슨|어떤|어느|뭐")
# Endings that join clauses (직원인데, 가는데, 있지만, 하면서): a word ending in one is a predicate.
_CONNECTIVES = ("인데", "는데", "은데", "지만", "면서", "니까", "다가", "려고", "도록", "해서", "하고", "하면", "으면")
# Particles that end a noun phrase (the subject's extent); longest first.
_PHRASE_END = sorted(("은", "는", "이", "가", "의", "에", "에서", "에게", "을", "를", "로", "으로", "와", "과",
                      "도", "에는", "에서는", "으로는", "이랑", "하고"), key=len, reverse=True)
# Nouns that place a thing in time or order rather than name it (bound and relational nouns: 수습 기간 *동안*,
# 1차 면접 *다음* 단계): never a subject term, as 때, 것, 수 are not (support.STOP).
_RELATIONAL = {"동안", "그동안", "다음", "이전", "이후", "사이", "당시", "무렵", "직후", "직전"}
COMMON_ZIPF = 4.0  # set on split A's and the assistant follow-up split's words (see the module doc)
_LATIN_NAME = re.compile(r"(?<![A-Za-z0-9])(?:[A-Za-z]++\d|\d++[A-Za-z])[A-Za-z0-9]*+")
_RANK_WORDS = ("우승", "준우승", "정상", "꼴찌")
# The words a time is told in without digits (매달 보름, 입사 후, 다음 주, 방학 때): a 언제 answer holds one
# as a word of its own, or a word ending in one of _TEMPORAL_END (매달, 월요일, 연말).
_TEMPORAL_END = re.compile(r"(?:요일|달|월|일|년|주|말|초|때|날|철|기간|무렵|시즌|마다|까지|부터|이후|이전)$")
_TEMPORAL = re.compile(r"매|보름|그믐|주|달|월|일|년|해|시|분|때|후|전|뒤|까지|부터|마다|오전|오후|아침|점심|저녁"
                       r"|밤|새벽|날|요일|초|말|중순|하순|상순|분기|반기|학기|시즌|봄|여름|가을|겨울|방학|연휴|오늘|내일|어제|모레|지금"
                       r"|곧|이번|다음|지난|당일|즉시|바로|언제든|수시|상시|마감|직후|직전|무렵|쯤|경")
_WHEN = re.compile(r"언제|몇\s*(?:년\s*(?:도|에)|월|시(?!간))|며칠\s*에")
_CLOCK = re.compile(r"몇\s*시")
_CLOCK_TIME = re.compile(r"\d\s*(?:시(?!간)|:\d)|(?:한|두|세|네|다섯|여섯|일곱|여덟|아홉|열|열한|열두)\s*시(?!간)"
                         r"|정오|자정")
_HOW_MANY = re.compile(r"몇\s*(?P<u>[가-힣A-Za-z%]+(?:/[A-Za-z]+)?)?|얼마(?:나)?|며칠")
_WHAT = re.compile(r"어디|누구|누가|무엇|뭐|무슨|어떤|어느\s*(?:팀|곳|회사|도시|나라|기관|은행)|이름|제목")


@dataclass(frozen=True)
class Asked:
    """What a question asks about."""

    subject: tuple[str, ...]  # content terms and whole names that must be in the evidence
    ordinals: tuple[str, ...]  # normalised: "1번째", "2집", "last"
    years: tuple[str, ...]
    kind: str  # "number", "date", "name" or "" (not read)
    unit: str  # the unit a "number" question asks for ("" none)
    counter: str = ""  # the word after 몇 as written, its endings cut ("척", "W", "구간"): any counter
    names: tuple[str, ...] = ()  # proper nouns (Kiwi), titles, numbered and Latin names outside the subject
    rare: tuple[str, ...] = ()  # the question's other common nouns (Kiwi) that are not everyday words
    numbers: tuple[str, ...] = ()  # the question's own numbers with their units, dates apart (3단지, 6개월)
    days: tuple[str, ...] = ()  # the days it asks about (토요일, 주말, 공휴일): a qualifier
    most: str = ""  # the first letter of the word after 가장/제일 (가장 *긴* 구간: 긴): a qualifier


# The endings a counter after 몇 carries in a question: copulas, particles (grammar, a closed set).
_COUNTER_ENDINGS = sorted(("이야", "야", "이에요", "에요", "예요", "인가요", "인가", "인지", "이었어", "였어", "였나요",
                           "이었나요", "였지", "이었지", "이", "가", "을", "를", "은", "는", "씩", "쯤", "정도", "로",
                           "으로", "에", "이나", "나", "까지", "이래", "래", "일까", "이지", "지", "요", "짜리",
                           "입니까", "이죠", "죠", "인데", "이고", "고", "도", "만", "라고", "이라고", "에서",
                           "의", "에게", "이면", "면"), key=len,
                          reverse=True)
_LATIN_COUNTER = re.compile(r"[A-Za-z%]++(?:/[A-Za-z]++)?")
# Ordinals, ranks, dates and ages: read elsewhere.
_NOT_COUNTERS = ("번째", "위", "등", "차", "년", "월", "일", "시", "살", "세")


def _counter(raw: str) -> str:
    """The counter of "몇 <word>" as written: "W인가요" is W, "구간이야" 구간, "척" 척 ("" when none)."""
    latin = _LATIN_COUNTER.match(raw)
    if latin:
        return latin.group()
    word = raw
    for _ in range(3):
        cut = next((e for e in _COUNTER_ENDINGS if len(word) > len(e) and word.endswith(e)), "")
        if not cut:
            break
        word = word[: -len(cut)]
    return "" if word in _NOT_COUNTERS or not re.fullmatch(r"[가-힣]{1,3}", word) else word


# Counters that count the same thing (grammar of Korean counting, not topic words): 번 and 회, 글자 and 자.
_COUNTER_SAME = {"번": "회", "회": "번", "글자": "자", "자": "글자"}
_DATE = re.compile(r"(?<!\d)\d++\s?(?:년|월|일)")
_CALENDAR = re.compile(r"(?<!\d)(?:\d{4}\s?년|\d{1,2}\s?월)")


def counted(counter: str, evidence: str) -> bool:
    """Whether ``evidence`` may count in ``counter`` (False: it counts in other units only).

    A Latin unit must follow a digit (m is not km, W is not kg). A Korean counter refuses only where the
    evidence's numbers all carry other units it reads (몇 척 asked, 30만 명 held) and the counter is nowhere
    in it: a number in words (별 하나) or an unread counter may still count it.
    """
    if not counter:
        return True
    same = {counter, support.UNIT_SAME.get(counter, counter), _COUNTER_SAME.get(counter, counter)}
    same |= {k for k, v in support.UNIT_SAME.items() if v == counter}
    text = unicodedata.normalize("NFKC", evidence)
    if re.fullmatch(r"[A-Za-z%]+(?:/[A-Za-z]+)?", counter):
        return any(re.search(r"\d\s?" + re.escape(c) + r"(?![A-Za-z])", text, re.IGNORECASE) for c in same)
    if any(c in text for c in same):
        return True
    counts = _DATE.sub(" ", text)  # a date (2019년 6월) counts nothing
    units = _units(counts)
    return not units or "" in units or bool(same & set(units))


def _units(text: str) -> list[str]:
    """The unit or counter of each number of ``text``.

    A unit read (명, km), else the noun right after it (25만 상자: 상자, by Kiwi), else "" (a number whose
    counter cannot be read counts anything).
    """
    from services.runtime.korean import morphs
    from services.runtime.korean.numbers import numbers as numbers_in

    out = []
    for n in numbers_in(text, support.UNIT):
        unit = support.UNIT.match(text, n.end)
        if n.hangul and unit is None:
            continue
        if unit:
            out.append(support.UNIT_SAME.get(unit["u"], unit["u"]))
            continue
        after = re.match(r"\s?([가-힣]{1,8}+)", text[n.end:n.end + 12])
        first = morphs.tokens(after.group(1))[:1] if after else []
        out.append(first[0].form if first and first[0].tag in ("NNG", "NNB") and first[0].start == 0 else "")
    return out


def _norm(text: str) -> str:
    return unicodedata.normalize("NFKC", text)


def ordinals(text: str) -> set[str]:
    """The ordinals ``text`` writes, normalised (첫 번째, 첫째, 처음, 최초, 초대 → ``1번째``; 2집 → ``2집``)."""
    out = set()
    for m in _ORDINAL.finditer(_norm(text)):
        if m["n"]:
            n = int(m["n"]) if m["n"].isdigit() else _NATIVE_ORDINAL[m["n"]]
            out.add(f"{n}번째")
        elif m["w"]:
            out.add("last" if m["w"] == "마지막" else f"{_NATIVE_ORDINAL[m['w']]}번째")
        elif m["first"]:
            out.add("1번째")
        else:
            unit = m["u"]
            out.add(f"{int(m['d'])}{'번째' if unit in ('번째', '차', '회') else unit}")
    return out


def _phrases(question: str) -> list[str]:
    """The subject's noun phrases: the first one, and every one marked as a possessor (…의)."""
    words = _norm(question).split()
    phrases: list[str] = []
    current: list[str] = []
    first_done = False
    for i, word in enumerate(words):
        ending = next((e for e in _PHRASE_END if len(word) > len(e) and word.endswith(e)), "")
        current.append(word[: -len(ending)] if ending else word)
        if ending:
            if not first_done and ending != "의" and len(current) > 1 and i + 1 < len(words) \
                    and _WH.match(words[i + 1]):
                current = current[:-1]  # "배송 기간은 며칠": the word just before the question word is what it asks
            if not first_done or ending == "의":  # the first phrase, a possessor: its last words only
                phrases.append(" ".join(current[-4:] if not first_done else current[-2:]))
            first_done = True
            current = []
    return phrases  # a question with no phrase a particle ends (a keyword query) names no subject


def read(question: str) -> Asked:
    """The subject, qualifiers and answer type of ``question`` (see the module)."""
    text = _norm(question)
    subject: list[str] = []
    # Qualifiers are checked as values: in the phrases they stand as a placeholder (its particle kept).
    for phrase in _phrases(_ORDINAL.sub(_PLACEHOLDER, _YEAR.sub(_PLACEHOLDER, text))):
        for word in phrase.casefold().split():
            word = word.strip("'\"‘’“”「」『』()[]")
            if _PLACEHOLDER in word or len(word) < 2 or word in support.STOP or word.isdigit() \
                    or word.endswith(_CONNECTIVES):
                continue  # "직원인데": a clause's predicate inside the phrase, not a name
            word = _stem(word)  # "협상할 때": the noun, not its ending; still compared whole (강하늘 is not 강하은)
            if len(word) < 2 or word in support.STOP or word in _RELATIONAL:
                continue
            if (_LATIN_NAME.fullmatch(word) or not any(c.isdigit() for c in word)) and word not in subject:
                subject.append(word)
    kind, unit, counter = "", "", ""
    when = _WHEN.search(text)
    many = _HOW_MANY.search(text)
    if when and (many is None or when.start() <= many.start()):
        kind = "date"
        unit = "시" if _CLOCK.match(when.group()) else ""  # 몇 시: a time of day, not a day
    elif many:
        kind = "number"
        raw = (many["u"] or "") if many.group().startswith("몇") else ""
        unit = next((support.UNIT_SAME.get(u, u) for u in (raw, raw[:2], raw[:1]) if u and support.UNIT.fullmatch(u)),
                    "") if raw else ""
        if raw in ("번째", "위", "등"):
            unit = ""
        counter = _counter(raw) if raw else ""
    elif _WHAT.search(text):
        kind = "name"
    return Asked(tuple(subject), tuple(sorted(ordinals(text))), tuple(m["y"] for m in _YEAR.finditer(text)),
                 kind, unit, counter, *_rare(text, subject),
                 tuple(support.numbers(_DATE.sub(" ", _ORDINAL.sub(" ", text[:QUESTION_MAX])))),
                 tuple(dict.fromkeys(m.group() for m in _DAYS.finditer(text))),
                 (_MOST.search(text) or {"w": ""})["w"][:1])


_QUOTED = re.compile(r"['‘「『《\"“](?P<t>[^'’」』》\"”\n]{1,60}+)['’」』》\"”]")
# A name with a number in it: glued inside a word (잇섬2대교, 가온3터널) or a noun and a number standing
# alone after it (시즌 2, 파트 3); a number glued to a counter or a word after it (3구간, 7번, 2년) is a
# quantity, not a name.
_NUMBERED = re.compile(r"(?<![가-힣\d])[가-힣]{2,}+\d++(?=[가-힣])"
                       r"|(?<![가-힣])[가-힣]{2,}+ ++\d++"
                       r"(?=$|[\s?!.,'’\"”]|(?:의|은|는|이|가|을|를|에|도|와|과|로)(?![가-힣]))")
# The days a question may ask about (the calendar's closed set of day names): the evidence must name the
# same day, or every day (매일, 연중무휴). "토요일에는 몇 시에 문을 열어?" is not answered by a weekday hour.
_DAYS = re.compile(r"[월화수목금토일]요일|평일|주말|주중|공휴일|휴일|명절|연휴")
_EVERY_DAY = re.compile(r"매일|날마다|연중무휴|휴무\s*없이|365일|언제나|항상")
# A superlative: 가장/제일 and the word it grades (가장 긴, 제일 많이); the evidence must grade the same way.
_MOST = re.compile(r"(?:가장|제일)\s*(?P<w>[가-힣]+)")
_NOMINAL = ("NNG", "NNP", "XSN", "XPN", "NR", "SN", "SL", "SH")  # the pieces of a noun Kiwi splits
QUESTION_MAX = 500  # characters of a question read for nouns (Kiwi is linear; a question is short)


def _rare(text: str, subject: list[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The names of ``text`` and its other nouns that are not everyday words, outside ``subject``.

    Read by Kiwi over the whole question, so a name anywhere in it counts ("해솔시 시내버스 노선 개편 뒤 배차
    간격": the subject phrase keeps its last words; 화가 이도현: 화가 is a noun, not 화 + 가). Each as written
    in the question (Kiwi's lemma of 청솔고 is 청소). An everyday word (:func:`common`) is how a person asks
    (방법, 요금, 직원). Names: proper nouns (해솔, 이도현), Latin-and-digit names, quoted titles, numbered
    names, which the evidence must hold. The rest are common nouns that are not everyday words (막차, 기한,
    일수): one refuses the answer only when another passage found holds it (the collection speaks of it
    elsewhere, so the evidence is about something else); otherwise it may be the person's own wording, and
    no frequency list tells which (기한 and 방문객 are asked with, 막차 and 산책로 asked about, at the same
    Zipf frequencies).
    """
    from services.runtime.korean import morphs

    text = text[:QUESTION_MAX]
    out: list[str] = []
    nouns: list[str] = []
    tokens = morphs.tokens(text)
    for token in tokens:
        word = text[token.start:token.start + token.len].casefold()
        if token.tag in ("NNG", "NNP") and len(word) >= 2 and word not in support.STOP \
                and word not in _RELATIONAL and not _WH.fullmatch(word) and not common(word):
            (out if token.tag == "NNP" else nouns).append(word)
    # A name is the whole run of nominal pieces around a proper noun within one word: Kiwi reads 민가영
    # as 민/NNP 가/XSN 영/NR and 서울마라톤 as 서울/NNP 마라톤/NNG (the run, not 민 or 서울, is the name).
    run: list[Any] = []
    for token in [*tokens, None]:
        if token is not None and token.tag in _NOMINAL and (not run or token.start == run[-1].start + run[-1].len):
            run.append(token)
            continue
        if any(t.tag == "NNP" for t in run) and len(run) > 1:
            word = text[run[0].start:run[-1].start + run[-1].len].casefold()
            if not common(word):
                out.append(word)
        run = [token] if token is not None and token.tag in _NOMINAL else []
    out += [m.group().casefold() for m in _LATIN_NAME.finditer(text)]
    # Titles and numbered names are asked whole: '햇빛 식당' is not '달빛 식당', 잇섬2대교 not 잇섬대교,
    # 시즌 2 not the series.
    out += ["".join(m["t"].casefold().split()) for m in _QUOTED.finditer(text) if len(m["t"].strip()) >= 2]
    out += ["".join(m.group().casefold().split()) for m in _NUMBERED.finditer(text)]
    names = tuple(w for w in dict.fromkeys(out) if w not in subject)
    return names, tuple(w for w in dict.fromkeys(nouns) if w not in subject and w not in names)



def _stem(word: str) -> str:
    """A word without its trailing particle or ending (two at most), as support.terms strips them."""
    for _ in range(2):
        suffix = next((x for x in support.SUFFIXES if len(word) > len(x) + 1 and word.endswith(x)), "")
        if not suffix:
            break
        word = word[: -len(suffix)]
    return word


def merged(rewritten: str, original: str) -> Asked:
    """What a rewritten follow-up asks: the rewrite's subject, the qualifiers of both, and the type the person asked.

    A rewrite by a small model drops the question word ("그 회사 자기계발비는 얼마야?" became "한빛소프트웨어
    자기계발비는?"); the answer must still be of the type the person asked for.
    """
    new, own = read(rewritten), read(original)
    kind, unit, counter = (own.kind, own.unit, own.counter) if own.kind else (new.kind, new.unit, new.counter)
    return Asked(new.subject, tuple(sorted(set(new.ordinals) | set(own.ordinals))),
                 tuple(dict.fromkeys(new.years + own.years)), kind, unit, counter, new.names, new.rare,
                 new.numbers, new.days or own.days, new.most or own.most)


def _is_date(answer: str) -> bool:
    from services.runtime.korean import dates

    if re.search(r"\d", answer) or dates.time_of_day(answer):
        return True
    for word in _norm(answer).split():
        stem = word
        for _ in range(2):
            ending = next((e for e in _PHRASE_END if len(stem) > len(e) and stem.endswith(e)), "")
            stem = stem[: -len(ending)] if ending else stem
        if _TEMPORAL.fullmatch(stem) or _TEMPORAL_END.search(stem):
            return True
    return False


def _has_number(answer: str) -> bool:
    from services.runtime.korean.numbers import numbers as numbers_in

    return bool(numbers_in(answer)) or bool(re.search(r"\d|하나|둘|셋|넷|다섯|여섯|일곱|여덟|아홉|열|한|두|세|네",
                                                      answer))


@functools.cache
def frequencies() -> dict[str, float]:
    """The Korean list of wordfreq (word -> frequency), read once (0.15 s: the gateway reads it at start)."""
    from wordfreq import get_frequency_dict  # the Korean list read as it is (no MeCab: words are looked up whole)

    return get_frequency_dict("ko")


def common(word: str) -> bool:
    """Whether ``word`` is an everyday Korean word (Zipf frequency >= :data:`COMMON_ZIPF` in wordfreq's list).

    Everyday words (자격, 월급, 사항) are how people ask about a thing in other words than a document's;
    names and rare words (벨로스, 알아사드, 한빛소프트웨어) are what a question is about.
    """
    f = frequencies().get(word, 0.0)
    return f > 0 and math.log10(f) + 9 >= COMMON_ZIPF


def mismatch(asked: Asked, answer: str, evidence: str, passage: str | None = None,
             found: str | None = None) -> str | None:
    """Which check refuses ``answer`` on ``evidence`` (sentences and their passage titles), or None.

    ``passage``: the whole text of the evidence's passages (with their titles), where the subject is looked
    for (a subject is often named once, in another sentence); the qualifiers are looked for in ``evidence``.
    ``found``: the text of every passage found. A subject term missing from the evidence's passages refuses
    the answer when another passage found holds it (the evidence is about something else) or when it is
    not an everyday word (:func:`common`: a name the collection never mentions); an everyday word no
    passage holds is the person's wording ("자격 요건" for "경력 3년 이상"), not a subject.

    ``subject_not_in_evidence``: a subject term (or name) is not in the evidence; ``qualifier_mismatch``:
    an ordinal or a year of the question is not the evidence's; ``answer_type``: the answer is not of the
    type asked (or a number of another unit than the one asked).
    """
    haystack = "".join(_norm(passage if passage is not None else evidence).casefold().split())
    elsewhere = "".join(_norm(found).casefold().split()) if found is not None else None
    for term in asked.subject:  # whole words: 강하늘 is not 강하은
        if term not in haystack and (elsewhere is None or term in elsewhere or not common(term)):
            return "subject_not_in_evidence"
    if any(name not in haystack for name in asked.names):
        return "subject_not_in_evidence"  # a name or title of the question the evidence never says
    if elsewhere is not None and any(term not in haystack and term in elsewhere for term in asked.rare):
        return "subject_not_in_evidence"  # a rare noun the evidence never says and another passage found does
    held = ordinals(evidence)
    if any(o not in held for o in asked.ordinals):
        return "qualifier_mismatch"
    if any(y not in {m["y"] for m in _YEAR.finditer(_norm(evidence))} for y in asked.years):
        return "qualifier_mismatch"
    if asked.numbers and not set(asked.numbers) <= set(support.numbers(_norm(evidence))):
        return "qualifier_mismatch"  # 3단지 asked, 2단지 said; 6개월 연체 asked, no 6개월 in the evidence
    if asked.days and not _EVERY_DAY.search(haystack) and any(d not in haystack for d in asked.days):
        return "qualifier_mismatch"  # 주말 asked, a weekday hour held (found on splits E and F)
    if asked.most and not any(m["w"].startswith(asked.most) for m in _MOST.finditer(_norm(passage or evidence))):
        return "qualifier_mismatch"  # 가장 짧은 asked, 가장 긴 held (split C), or no superlative at all (F)
    if asked.kind == "number" and not counted(asked.counter, evidence):
        return "answer_type"  # 몇 척 asked, the evidence counts 명: a number of another thing
    if asked.kind == "number" and _CALENDAR.search(answer) and not support.numbers(_DATE.sub(" ", answer)):
        return "answer_type"  # 얼마 asked, a date answered ("출시 가격은 얼마야?" → 2020년 11월; found on split D)
    return "answer_type" if not of_type(asked, answer) else None


def of_type(asked: Asked, answer: str) -> bool:
    """Whether ``answer`` is of the type the question asks (a number of the unit asked, a date, a name)."""
    if asked.kind == "number":
        if not _has_number(answer) and not any(w in answer for w in _RANK_WORDS):
            return False
        if asked.unit:
            units = {re.sub(r"^[\d.e+\-]+", "", n) for n in support.numbers(answer)}
            units.discard("")
            if units and asked.unit not in units:
                return False
    elif asked.kind == "date" and asked.unit == "시" and not _CLOCK_TIME.search(_norm(answer)):
        return False  # 몇 시 asked, a day answered ("초롱도서관은 몇 시에 문을 닫나요?" → 매주 월요일)
    elif asked.kind == "date" and not _is_date(answer):  # 언제: a date, a time or a word a time is told in
        return False
    elif asked.kind == "name" and not support.terms(answer) and re.search(r"\d", answer):
        return False  # a place, a person or a name asked: a bare number or date is not one
    return True
