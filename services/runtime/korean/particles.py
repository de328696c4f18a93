"""Korean particles (조사) and the bound words that may follow a noun: the one list every reader uses.

A word is found where it starts a word and ends where one of these (or no letter) follows: ``내일까지``
is 내일 and ``내일배움카드`` is not; ``5만 원짜리`` is an amount and ``V8 엔진`` holds none. Grammar, not a
domain list: the particles of the standard grammar, and the bound nouns and words that attach to a
number or a noun (짜리, 어치, 씩, 대, 쯤, 정도, 이하, 이상 ...).
"""

from __future__ import annotations

import re

# Case and auxiliary particles (and the copula's common forms); matched longest first.
PARTICLES = tuple("""
에게서 한테서 으로서 으로써 으로부터 에서부터 이라도 이라고 이랑 이나 이나마 이며 이고 이요 이에요 예요 입니다 이다
인데 이면 이라 에서 에게 한테 께서 부터 까지 마다 밖에 처럼 보다 조차 마저 이든 든지 으로 하고 에는 에도
과 와 을 를 은 는 이 가 의 로 에 도 만 나 랑 요 께 인 들
""".split())
# Particles that end a noun phrase a person names (a recipient, a topic, a company): cut before it is kept.
NOUN_ENDINGS = tuple("에게서 한테서 에서 에게 한테 께서 으로 이랑 하고 과 와 을 를 은 는 이 가 의 로 에 도 께 랑"
                     .split())
# Those and the longer forms a description's words carry (라는, 에서는, 캠핑용): cut before a word is compared.
WORD_ENDINGS = (*NOUN_ENDINGS, *"에서는 으로는 에게는 이라는 라는 처럼 까지 부터 보다 이나 용 만".split())
# Bound nouns and words after a number or an amount (5만 원짜리, 3천원씩, 10만원대, 2만 원어치, 5만원권).
BOUND = tuple("""
짜리 어치 씩 대 쯤 정도 가량 내외 안팎 남짓 언저리 이하 이내 미만 이상 초과 안쪽 아래 밑 넘게 넘는 넘어 선 권
부터 까지 만큼 이면 인데 으로 이요 요 씩이나 밖에 짜리로 에서 사이 가 이 은 는 을 를 에 의 도 만 과 와 로 이나
이랑 랑 하고 입니다 이에요 예요 이다 이고 이며 할인 결제 보내 송금 입금 주고 받고 줬 들었 지원 환급 충전 차이
""".split())

_PARTICLE_RE = "|".join(sorted(PARTICLES, key=len, reverse=True))
_BOUND_RE = "|".join(sorted(set(BOUND) | set(PARTICLES), key=len, reverse=True))
HANGUL = re.compile(r"[가-힣]")
# What may follow a word for it to end there: no letter, or a particle (then no more letters of the word).
WORD_END = re.compile(rf"(?![가-힣A-Za-z])|(?:{_PARTICLE_RE})")
# What may follow a currency word or a counter: no letter, or a bound word or particle.
AFTER_NOUN = re.compile(rf"(?![가-힣A-Za-z])|(?:{_BOUND_RE})")


def starts_word(text: str, at: int) -> bool:
    """Whether ``text[at]`` starts a word (nothing but a non-letter before it)."""
    return at == 0 or not (HANGUL.match(text[at - 1]) or text[at - 1].isascii() and text[at - 1].isalpha())


def ends_word(text: str, at: int, *, bound: bool = False) -> bool:
    """Whether a word ends at ``at``: no letter follows, or a particle (``bound``: or a bound word) does."""
    return bool((AFTER_NOUN if bound else WORD_END).match(text, at))


def strip_particle(word: str, endings: tuple[str, ...] = NOUN_ENDINGS, *, keep: int = 1) -> str:
    """``word`` with one trailing particle cut (at least ``keep`` characters left): 친구에게 → 친구."""
    for ending in sorted(endings, key=len, reverse=True):
        if word.endswith(ending) and len(word) - len(ending) >= keep:
            return word[: -len(ending)]
    return word
