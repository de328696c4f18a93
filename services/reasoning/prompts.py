"""Prompt assembly, kept prefix-cache friendly: [system, unchanged] + [history, append-only] + [turn].

Everything that varies per call comes last, so a serving engine that caches the longest common
prefix (llama.cpp, vLLM) reuses the system message and the conversation so far.
"""

from __future__ import annotations

from dataclasses import dataclass

from services.bootstrap.errors import InvalidInput, Violation
from services.reasoning.generation import estimate_tokens

REASONS_SYSTEM = (
    "당신은 한국 온라인 서점과 쇼핑몰의 추천 도우미입니다. 사용자의 검색어와 검색된 상품 목록을 보고, "
    "각 상품이 그 검색어에 왜 어울리는지 한국어로 설명합니다. 상품 정보에 없는 사실은 지어내지 않습니다. "
    "반드시 JSON으로만 답합니다: {\"reasons\": [{\"id\": 상품 id, \"short\": 한 줄 이유, "
    "\"long\": 두세 문장 이유}]}. 모든 상품에 대해 목록 순서대로 하나씩 씁니다.")
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


def reasons_schema(item_ids: list[str]) -> dict:
    """The JSON schema of one reasons answer: exactly one entry per item."""
    n = len(item_ids)
    return {
        "type": "object", "additionalProperties": False, "required": ["reasons"],
        "properties": {"reasons": {"type": "array", "minItems": n, "maxItems": n, "items": {
            "type": "object", "additionalProperties": False, "required": ["id", "short", "long"],
            "properties": {"id": {"type": "string", "enum": item_ids},
                           "short": {"type": "string", "minLength": 1, "maxLength": 80},
                           "long": {"type": "string", "minLength": 1, "maxLength": 400}}}}},
    }


def reasons_messages(query: str, items: list[tuple[str, str, str]], strict_retry: bool = False) -> list[dict[str, str]]:
    """One call for a query and all its items (id, title, description)."""
    lines = [f"검색어: {query}", "상품 목록:"]
    for i, (item_id, title, description) in enumerate(items, 1):
        lines.append(f"{i}. id={item_id} | {title}" + (f" | {description}" if description else ""))
    lines.append(f"{len(items)}개 상품 모두에 대해 short(40자 이내)와 long(두세 문장)을 JSON으로 쓰세요.")
    if strict_retry:
        lines.append("이전 답이 형식에 맞지 않았습니다. 각 id를 정확히 한 번씩, 목록 순서대로 쓰세요.")
    return [{"role": "system", "content": REASONS_SYSTEM}, {"role": "user", "content": "\n".join(lines)}]


def summary_messages(text: str, max_sentences: int) -> list[dict[str, str]]:
    """A summary request."""
    return [{"role": "system", "content": SUMMARY_SYSTEM},
            {"role": "user", "content": f"다음 글을 {max_sentences}문장 이내로 요약하세요.\n\n{text}"}]
