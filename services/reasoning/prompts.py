"""Prompt assembly, kept prefix-cache friendly: [system, unchanged] + [history, append-only] + [turn].

Everything that varies per call comes last, so a serving engine that caches the longest common
prefix (llama.cpp, vLLM) reuses the system message and the conversation so far.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from services.bootstrap.errors import InvalidInput, Violation
from services.reasoning.generation import estimate_tokens

REASONS_SYSTEM = (
    "당신은 한국 온라인 서점과 쇼핑몰의 추천 도우미입니다. 검색어와 상품 카드들을 받아, 카드마다 이 상품이 "
    "검색한 사람에게 왜 맞는지 한국어로 씁니다.\n"
    "규칙:\n"
    "1. 카드마다 그 카드의 상품만 씁니다. 다른 카드의 상품, 용도, 가격은 절대 쓰지 않습니다.\n"
    "2. 상품 설명을 옮겨 적지 않습니다. 검색어의 상황(누구에게, 언제, 무엇을 위해)에서 이 상품이 주는 쓸모나 "
    "좋은 점을 자기 말로 씁니다. 상품 설명의 낱말은 두 개까지만 씁니다.\n"
    "3. short: 한 구절, 10~30자. long: short에 없는 내용의 한 문장, 25~70자.\n"
    "4. 같은 구절을 두 번 쓰지 않습니다. 정보에 없는 사실은 지어내지 않습니다.\n"
    "JSON으로만 답합니다: {\"reasons\": [{\"id\": 카드 id, \"short\": ..., \"long\": ...}]}, 카드 순서대로.")
# A worked example written for this project (a domain no test or bench set uses), sent as one earlier
# turn after the system message: both stay the same across calls, so the prefix cache keeps them.
REASONS_EXAMPLE_QUERY = "캠핑 처음 가는 친구 선물"
REASONS_EXAMPLE_ITEMS = [("e1", "접이식 알루미늄 캠핑 의자", "캠핑용품, 1.2kg, 38,000원"),
                         ("e2", "충전식 LED 랜턴", "캠핑용품, 밝기 3단계, USB-C 충전, 27,000원")]
REASONS_EXAMPLE_ANSWER = (
    '{"reasons": [{"id": "e1", "short": "첫 캠핑에서 편히 쉴 자리를 챙겨 주는 선물", '
    '"long": "가벼워서 캠핑이 처음인 친구도 부담 없이 들고 다니며 어디서든 바로 펴고 앉을 수 있습니다."}, '
    '{"id": "e2", "short": "어두운 캠핑장의 밤을 밝혀 줄 실용적인 선물", '
    '"long": "해가 지면 금방 어두워지는 캠핑장에서 휴대폰 충전기로 다시 채워 쓸 수 있는 조명입니다."}]}')
# What the worked example shows (its items and its answer's reasons): a card that repeats it is not about
# its own item (services/reasoning/checks.py counts that as a copy).
REASONS_EXAMPLE_TEXTS = (*(f"{title} {description}" for _, title, description in REASONS_EXAMPLE_ITEMS),
                         *(r[k] for r in json.loads(REASONS_EXAMPLE_ANSWER)["reasons"] for k in ("short", "long")))
# The long reason is one sentence: on bench/reasoning.py's tuning queries the earlier two-sentence rule
# (40-120 characters) took ~30 % more tokens and passed no more cards (python -m bench.llm_sampling
# --compare prompt, bench/results/llm_prompts_length.md).
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


# The answer's length caps (the prompt asks for 10-30 and 25-70 characters): the output tokens they allow.
SHORT_CAP = 40
LONG_CAP = 100


def reasons_schema(item_ids: list[str], short_max: int = 50, long_max: int = 160) -> dict:
    """The JSON schema of one reasons answer: exactly one entry per item, each field length-capped.

    The caps bound the output tokens (a grammar-constrained backend cannot run past them).
    """
    n = len(item_ids)
    return {
        "type": "object", "additionalProperties": False, "required": ["reasons"],
        "properties": {"reasons": {"type": "array", "minItems": n, "maxItems": n, "items": {
            "type": "object", "additionalProperties": False, "required": ["id", "short", "long"],
            "properties": {"id": {"type": "string", "enum": item_ids},
                           "short": {"type": "string", "minLength": 1, "maxLength": short_max},
                           "long": {"type": "string", "minLength": 1, "maxLength": long_max}}}}},
    }


# One instruction after the cards, the query named once in it. The earlier per-card instruction (the query
# repeated in each of five cards) made the user turn ~175 tokens longer, about 1.2 s more before the first
# token on two cores (bench/results/llm_prompts_length.md); the issue-58 tune split decided (bench.reasons).
TASK = ""
CLOSING = "카드 {n}개 모두, 카드 순서대로, 검색어 '{query}'에 비추어 short와 long을 JSON으로 쓰세요."


def item_cards(query: str, items: list[tuple[str, str, str]], notes: dict[str, list[str]] | None = None,
               task: str = TASK) -> str:
    """The user turn: the query, then each item as structured fields with its own instruction.

    ``notes`` names, per item id, what an earlier answer got wrong (a regeneration); ``task`` is the
    per-card instruction (``{i}``: the card's number, ``{query}``: the query).
    """
    lines = [f"검색어: {query}", ""]
    for i, (item_id, title, description) in enumerate(items, 1):
        lines += [f"[카드 {i}] id: {item_id}", f"- 이름: {title}"]
        if description:
            lines.append(f"- 정보: {description}")
        for note in (notes or {}).get(item_id, []):
            lines.append(f"- 고칠 점: {note}")
        if task:
            lines.append(task.format(i=i, query=query))
        lines.append("")
    lines.append(CLOSING.format(n=len(items), query=query))
    return "\n".join(lines)


def reasons_messages(query: str, items: list[tuple[str, str, str]], strict_retry: bool = False,
                     notes: dict[str, list[str]] | None = None, task: str = TASK) -> list[dict[str, str]]:
    """One call for a query and its items (id, title, description): system, the example turn, this turn.

    ``strict_retry``: the previous answer broke the schema; ``notes``: per item, the checks it failed.
    """
    user = item_cards(query, items, notes, task)
    if notes:
        user += "\n이전 답이 규칙을 어겼습니다. '고칠 점'을 지켜 다시 쓰세요."
    if strict_retry:
        user += "\n이전 답이 형식에 맞지 않았습니다. 각 id를 정확히 한 번씩, 카드 순서대로 쓰세요."
    return [{"role": "system", "content": REASONS_SYSTEM},
            {"role": "user", "content": item_cards(REASONS_EXAMPLE_QUERY, REASONS_EXAMPLE_ITEMS, task=task)},
            {"role": "assistant", "content": REASONS_EXAMPLE_ANSWER},
            {"role": "user", "content": user}]


def summary_messages(text: str, max_sentences: int) -> list[dict[str, str]]:
    """A summary request."""
    return [{"role": "system", "content": SUMMARY_SYSTEM},
            {"role": "user", "content": f"다음 글을 {max_sentences}문장 이내로 요약하세요.\n\n{text}"}]
