"""Prompt assembly, kept prefix-cache friendly: [system, unchanged] + [history, append-only] + [turn].

Everything that varies per call comes last, so a serving engine that caches the longest common
prefix (llama.cpp, vLLM) reuses the system message and the conversation so far.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from services.bootstrap.errors import InvalidInput, Violation
from services.reasoning.generation import estimate_tokens
from services.runtime.korean.gifts import facets

# One call per card (services/reasoning/reasons.py): the model sees one item and the query, so it cannot
# borrow another card's facts, and a card is shown as soon as its own short call ends. The system text and
# the worked examples stay the same across calls and the query comes first in the last turn, so a serving
# engine's prefix cache keeps all but the item's lines.
REASONS_SYSTEM = (
    "당신은 쇼핑몰의 추천 도우미입니다. 검색한 사람의 말과 상품 하나를 받아, 이 상품이 그 사람에게 왜 맞는지 "
    "한국어로 씁니다.\n"
    "- short: 이 상품만의 특징 하나가 그 사람의 요청(받는 사람, 계기, 쓰임)에 맞는 점, 한 구절 (10~25자).\n"
    "- long: short와 다른 쓸모를 말하는 한 문장 (25~50자). 상품의 대상(남성용, 여성용, 나이)에 맞지 않는 사람에게 "
    "권하지 않습니다.\n"
    "- 검색어와 상품 이름을 되풀이하지 않고 자기 말로 씁니다. 정보에 없는 사실은 쓰지 않습니다.\n"
    "JSON으로만 답합니다: {\"short\": ..., \"long\": ...}")
# Worked examples written for this project, in domains no test or bench set uses (pets, gardening, a
# kitchen), sent as earlier turns after the system message: (query, title, description, answer).
REASONS_EXAMPLES = (
    ("강아지 키우는 친구 선물", "미끄럼 방지 강아지 발매트", "category: 반려용품, price: 29000",
     {"short": "뛰노는 강아지의 발을 지켜 주는 선물",
      "long": "바닥에서 덜 미끄러지고, 더러워지면 빨아서 다시 깔 수 있습니다."}),
    ("베란다 텃밭 시작", "방울토마토 재배 키트, 씨앗과 화분과 흙 포함", "category: 원예, price: 15000",
     {"short": "처음 가꾸는 텃밭의 가벼운 첫걸음",
      "long": "필요한 것이 한 상자에 들어 있어 따로 장을 보지 않고 바로 심어 볼 수 있습니다."}),
    ("요리 초보 자취생", "손잡이가 분리되는 스테인리스 냄비 3종", "category: 주방용품, price: 69000",
     {"short": "좁은 부엌에서도 쓰기 편한 살림",
      "long": "손잡이를 떼면 겹쳐서 넣어 둘 수 있어 수납 공간이 작은 집에 알맞습니다."}),
)
# What the worked examples show (their items and their reasons): a card that repeats them is not about
# its own item (services/reasoning/checks.py counts that as a copy).
REASONS_EXAMPLE_TEXTS = (*(f"{title} {description}" for _, title, description, _ in REASONS_EXAMPLES),
                         *(answer[k] for *_, answer in REASONS_EXAMPLES for k in ("short", "long")))
SUMMARY_SYSTEM = "당신은 한국어 글을 정확하고 짧게 요약하는 도우미입니다. 요약만 답합니다."


@dataclass(frozen=True)
class Turn:
    """One earlier message of a conversation."""

    role: str  # "user" | "assistant"
    content: str


def chat_messages(system: str, history: list[Turn], message: str, max_history_tokens: int) -> list[dict[str, str]]:
    """Validate and assemble a chat turn; history over the cap is refused, never trimmed or reordered."""
    violations = []
    if not message.strip():
        violations.append(Violation("message", "empty"))
    for i, turn in enumerate(history):
        if turn.role not in ("user", "assistant"):
            violations.append(Violation(f"history[{i}].role", "must be ROLE_USER or ROLE_ASSISTANT"))
        if not turn.content.strip():
            violations.append(Violation(f"history[{i}].content", "empty"))
    history_msgs = [{"role": t.role, "content": t.content} for t in history]
    used = estimate_tokens(history_msgs)
    if used > max_history_tokens:
        violations.append(Violation("history", f"{used} estimated tokens is over the limit of {max_history_tokens}; "
                                               "summarise the conversation or start a new session"))
    if violations:
        raise InvalidInput("invalid chat request", violations)
    head = [{"role": "system", "content": system}] if system.strip() else []
    return [*head, *history_msgs, {"role": "user", "content": message}]


# The answer's length caps (the prompt asks for 10-25 and 25-50 characters): the output tokens they allow.
SHORT_CAP = 40
LONG_CAP = 90


def reason_schema(short_max: int = SHORT_CAP, long_max: int = LONG_CAP) -> dict:
    """The JSON schema of one card's answer, each field length-capped.

    The caps bound the output tokens (a grammar-constrained backend cannot run past them).
    """
    return {"type": "object", "additionalProperties": False, "required": ["short", "long"],
            "properties": {"short": {"type": "string", "minLength": 1, "maxLength": short_max},
                           "long": {"type": "string", "minLength": 1, "maxLength": long_max}}}


def reason_turn(query: str, title: str, description: str, notes: list[str] | None = None) -> str:
    """The user turn of one card: the query first (shared by every card of a list), then the item."""
    lines = [f"검색어: {query}"]
    who, why = facets(query)
    if who or why:
        lines.append("요청: " + ", ".join([*(f"받는 사람 {w}" for w in who[:2]), *(f"계기 {w}" for w in why[:2])]))
    lines.append(f"상품: {title}")
    if description:
        lines.append(f"정보: {description}")
    if notes:
        lines += ["이전 답이 규칙을 어겼습니다. 고쳐서 다시 쓰세요:", *(f"- {note}" for note in notes)]
    return "\n".join(lines)


def reason_messages(query: str, title: str, description: str, notes: list[str] | None = None
                    ) -> list[dict[str, str]]:
    """One card's call: system, the worked examples as earlier turns, this card.

    ``notes``: what this card's previous answer broke (a regeneration).
    """
    messages = [{"role": "system", "content": REASONS_SYSTEM}]
    for ex_query, ex_title, ex_description, answer in REASONS_EXAMPLES:
        messages += [{"role": "user", "content": reason_turn(ex_query, ex_title, ex_description)},
                     {"role": "assistant", "content": json.dumps(answer, ensure_ascii=False)}]
    return [*messages, {"role": "user", "content": reason_turn(query, title, description, notes)}]


def summary_messages(text: str, max_sentences: int) -> list[dict[str, str]]:
    """A summary request."""
    return [{"role": "system", "content": SUMMARY_SYSTEM},
            {"role": "user", "content": f"다음 글을 {max_sentences}문장 이내로 요약하세요.\n\n{text}"}]
