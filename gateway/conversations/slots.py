"""Recipient and occasion after a turn.

The listed words a turn writes (with kin compounds such as "친구 아들"), or the model's proposal when
the turn writes it as one short word of its own.
"""

from __future__ import annotations

import re

from gateway.conversations.reading import HANGUL
from services.runtime.korean.particles import starts_word, strip_particle

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
