"""What code checks and fills around the model's calls and replies in an assistant turn.

The model proposes a call or a reply; code refutes a call whose text inputs the person did not write or
a date task for a message naming no date, fills a task's text, reference date and time zone from the
person and the session, and holds a reply begun in another script than the person's.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncGenerator, AsyncIterator
from datetime import date
from typing import Any

from clients.reasoning import ToolCall, ToolCalls
from gateway.answers.support import present, squash, terms
from services.runtime.korean import dates
from services.runtime.tasks.post import DEFAULT_TIMEZONE

HANGUL = re.compile(r"[가-힣]")
LATIN = re.compile(r"[A-Za-z]")
SCRIPT_LETTERS = 6  # letters a reply is held for before its script is judged


def writes_korean(text: str) -> bool:
    """Whether a person's message is written in Korean (more Hangul syllables than Latin letters)."""
    return len(HANGUL.findall(text)) > len(LATIN.findall(text))


def other_script(reply: str) -> bool:
    """Whether a reply's letters so far are Latin, not Hangul (judged for a person who wrote Korean)."""
    latin, hangul = len(LATIN.findall(reply)), len(HANGUL.findall(reply))
    return latin > hangul and latin >= 2


class OtherScript(Exception):
    """The model began its reply in another script than the person's."""


class BrokenCall(Exception):
    """The model's call broke its schema or the checks twice (a task's arguments in Han characters).

    The turn asks again once without the declared tasks.
    """


SUMMARY_CHARS = 600
FROM_CODE = ("text", "reference_date", "timezone")  # a task's inputs code takes from the person and the session
MIN_OWN_WORDS = 0.6  # share of a task argument's character pairs the message must hold (set before any run)


def model_parameters(schema: dict[str, Any]) -> dict[str, Any]:
    """A declared task's input schema less what code fills (:data:`FROM_CODE`): what the model writes.

    The person's words, the session's reference date and zone are taken by code (``Assistant._inputs``);
    asking the model to copy them costs prompt tokens, output tokens and a chance to change them.
    """
    props = schema.get("properties") or {}
    if not any(k in props for k in FROM_CODE):
        return schema
    out = {**schema, "properties": {k: v for k, v in props.items() if k not in FROM_CODE}}
    out["required"] = [k for k in schema.get("required") or [] if k not in FROM_CODE]
    return out


def own_words(value: str, message: str) -> float:
    """The share of ``value``'s character pairs (white space removed) that the message holds too."""
    squash = "".join(value.split())
    pairs = [squash[i:i + 2] for i in range(len(squash) - 1)]
    if not pairs:
        return 1.0 if squash in "".join(message.split()) else 0.0
    held = "".join(message.split())
    return sum(p in held for p in pairs) / len(pairs)


def summary(value: Any) -> str:
    """A tool's result as the model and the client see it: compact JSON, cut at ``SUMMARY_CHARS``."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return text if len(text) <= SUMMARY_CHARS else text[:SUMMARY_CHARS] + "…"


def canonical(call: ToolCall) -> str:
    """A call as one string (its name and parsed arguments): the same call twice is not run again."""
    try:
        arguments = json.loads(call.arguments or "{}")
    except ValueError:
        arguments = call.arguments
    return json.dumps([call.name, arguments], ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def refuted(schema: dict[str, Any], call: ToolCall, text: str) -> tuple[str, str] | None:
    """(the tool's name, why) when code refutes the call, else None.

    Refuted: a declared task whose text inputs are not the person's words (under :data:`MIN_OWN_WORDS`
    of an argument's character pairs are in the message: the model wrote the résumé or the answer to
    be scored itself); a task reading dates (its input has ``reference_date``) chosen for a message
    that names no date or time (read by grammar: services/runtime/korean/dates.py).
    """
    try:
        arguments = json.loads(call.arguments or "{}")
    except ValueError:
        arguments = {}
    for name in model_parameters(schema).get("required") or []:
        value = arguments.get(name)
        if isinstance(value, str) and value.strip() and own_words(value, text) < MIN_OWN_WORDS:
            return call.name, f"{name} is not in the message: the person did not write it"
    if "reference_date" not in schema.get("properties", {}):
        return None
    names_one = bool(dates.scan(text, date.today())) or dates.time_of_day(text) is not None
    return None if names_one else (call.name, "the message names no date or time")


def task_input(schema: dict[str, Any], meta: dict, arguments: dict, text: str) -> dict:
    """A declared task's input, its dates and words taken from the person, not the model.

    The person's own words become its ``text`` (the model's paraphrase loses dates and names), the
    session's ``reference_date`` its reference (without one the task reads against today in its
    zone); the model was never asked for them (:func:`model_parameters`).
    """
    props = schema.get("properties", {})
    out = {k: v for k, v in arguments.items() if k not in FROM_CODE}
    if "text" in props:
        out["text"] = text
    if "reference_date" in props and meta.get("reference_date"):
        out["reference_date"] = meta["reference_date"]
    if "timezone" in props:
        out["timezone"] = meta.get("timezone") or DEFAULT_TIMEZONE
    return out


async def in_persons_script(pieces: AsyncIterator[str | ToolCalls]) -> AsyncGenerator[str | ToolCalls, None]:
    """A reply to a person who wrote Korean: its first letters held until its script is known.

    :class:`OtherScript` is raised (nothing of the reply sent) when they are not Korean; a tool call passes.
    """
    held: list[str] | None = []
    async for piece in pieces:
        if held is None or not isinstance(piece, str):
            yield piece
            continue
        held.append(piece)
        text = "".join(held)
        if len(HANGUL.findall(text)) + len(LATIN.findall(text)) >= SCRIPT_LETTERS:
            if other_script(text):
                raise OtherScript(text[:80])
            for p in held:
                yield p
            held = None
    if held:
        if other_script("".join(held)):
            raise OtherScript("".join(held)[:80])
        for p in held:
            yield p


def about_documents(passages: list[str], text: str) -> bool:
    """Whether the documents are about what ``text`` asks (else the model's reply stands: "오늘 저녁 뭐 먹지?").

    About them: a message with no content word of its own ("뭐야?"), or a content word of the person's own
    message in a passage the search found (an answer the cache holds is about them too: the caller's
    check). Not the relevance decision: it reads the rewrite, which carries the earlier turns' subject into
    "오늘 저녁 뭐 먹지?".
    """
    own = terms(text)
    found = [squash(q) for q in passages]
    return not own or any(present(t, h) for t in own for h in found)
