"""The lists' reasons: one model sentence per query, checked, and code's own per item when it fails.

One model call writes one sentence per query, checked to describe every item it stands under
(`confirm.off_items`); about half fail that check (bench/results/gift_lists_report5.md: 47.6 % kept), and
a failed call left its items with no reason at all. Code then writes one per item from what it can see —
who and what for (the confirmed profile), what the item is (its title's phrases), which of the person's
wishes it meets (a named category, a wished attribute), and its price against the budget:
"고모 생신 선물 · 원하신 담요 · 울 블렌드 체크 담요, 고급 선물 포장 · 52,000원, 예산 안". It claims nothing
beyond those facts, never names what was refused, and is marked ``reason_source: rule`` so a backend can
show or hide it.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Awaitable, Callable
from typing import Any

from prometheus_client import Counter

from clients.reasoning import Usage
from gateway.conversations import confirm
from gateway.conversations.protocol import LATE
from gateway.conversations.query import Fields
from gateway.conversations.reading import Vocabulary
from gateway.reasoning.events import counted
from gateway.tasks.store import StoreUnavailable

REASON_CALLS = Counter("mesh_gateway_list_reasons", "list reason calls (one per query) by outcome", ["outcome"])
for _outcome in ("ok", "late", "failed", "unfaithful"):
    REASON_CALLS.labels(_outcome)
# The grammar closes the string at REASON_CHARS; the token budget must cover it (a Korean character is
# one to two tokens), or the answer is cut before its closing quote and fails as a schema violation
# (bench/results/gift_lists.md, report2: 13 of 18 reason calls cut at 64 tokens).
REASON_CHARS = 50
REASON_TOKENS = 2 * REASON_CHARS + 16
REASON_SCHEMA = {"type": "object", "additionalProperties": False, "required": ["reason"],
                 "properties": {"reason": {"type": "string", "maxLength": REASON_CHARS}}}
REASON_SYSTEM = ("선물 목록 아래에 붙일 추천 이유를 한국어로 40자 이내의 짧은 한 문장으로 씁니다. 상품마다 이름이나 "
                 "특징을 한 단어씩 넣고, 뺀 것은 말하지 마세요. 요청과 상품 설명에 있는 것만 쓰고, 값이나 사실을 "
                 "지어내지 마세요. JSON으로만 답하세요.")

RULE_CHARS = 90  # longer than the model's 50: it lists facts, each short


def _phrases(title: str) -> list[str]:
    """The title's phrases without its leading [label]: "[담요] 울 블렌드 체크 담요, 고급 선물 포장" → two."""
    text = re.sub(r"^\s*\[[^\]]*\]\s*", "", title)
    return [p.strip() for p in text.split(",") if p.strip()]


def _tags(value: Any) -> list[str]:
    if isinstance(value, list):
        return [str(v) for v in value]
    return [t.strip() for t in re.split(r"[/,·]", str(value or "")) if t.strip()]


def rule_reason(profile: dict[str, Any], title: str, payload: dict[str, Any], *, category_field: str = "category",
                price_field: str = "price", tags_field: str = "tags", for_self: bool = False) -> str:
    """A factual reason for one listed item: facets · wishes met · what it is · price against the budget."""
    who = "나를 위한" if for_self else " ".join(str(x) for x in (profile.get("recipient"), profile.get("occasion"))
                                                if x)
    head = f"{who} 선물" if who else ""
    category = str(payload.get(category_field) or "")
    tags = _tags(payload.get(tags_field))
    wished = [category] if category and category in (profile.get("categories") or []) else []
    wished += [t for t in tags if t in (profile.get("must_have") or [])]
    met = f"원하신 {'·'.join(wished[:2])}" if wished else ""
    price = payload.get(price_field)
    cost = ""
    if isinstance(price, int | float) and not isinstance(price, bool) and price > 0:
        low, high = profile.get("budget_min"), profile.get("budget_max")
        inside = (low is not None or high is not None) and (low is None or price >= low) \
            and (high is None or price <= high)
        cost = f"{int(price):,}원" + (", 예산 안" if inside else "")
    phrases = _phrases(title)
    fixed = [x for x in (head, met) if x]
    room = RULE_CHARS - sum(len(x) + 3 for x in (*fixed, cost) if x)
    what = phrases[0][:max(room, 12)] if phrases else ""
    if len(phrases) > 1 and len(what) + 2 + len(phrases[1]) <= room:
        what += ", " + phrases[1]
    return " · ".join(x for x in (*fixed, what, cost) if x)[:RULE_CHARS]


def rule_reasons(profile: dict[str, Any], fields: Fields, group: dict[str, Any], *, for_self: bool) -> None:
    """Mark a group's items with their reason's source; a group whose model reason failed gets code's per item."""
    if group.get("reason"):
        for item in group["items"]:
            item["reason_source"] = "model"
        return
    for item in group["items"]:
        item["reason"] = rule_reason(profile, item["title_full"], item["payload"], category_field=fields.category,
                                     price_field=fields.price, tags_field=fields.attributes, for_self=for_self)
        item["reason_source"] = "rule"


def slot(name: str, group: dict[str, Any]) -> str:
    """Where a group's reason is kept: its list, query and item ids.

    Not its position: a resumed run may derive other queries, and a reason written for other items
    must not be shown under these.
    """
    what = json.dumps([group["query"], [i["id"] for i in group["items"]]], ensure_ascii=False)
    return f"{name}:{hashlib.sha256(what.encode()).hexdigest()[:16]}"


TextCall = Callable[..., Awaitable[tuple[str | None, str | None, Usage | None]]]


async def model_reason(text_call: TextCall, store: Any, ttl_s: int, timeout_s: float, job_id: str, name: str,
                       profile: dict, vocab: Vocabulary, group: dict[str, Any]) -> dict[str, Any]:
    """One call for one query's items: its sentence, checked (a job resumed elsewhere reuses a stored one).

    ``text_call(messages, schema, name, key, total_s, max_tokens)`` asks the response route once.
    """
    where, key = slot(name, group), f"conversation-lists:{job_id}"
    try:
        done = (await store.hgetall(key)).get(where)
    except StoreUnavailable:
        done = None
    if done:
        return json.loads(done)
    items = "\n".join(f"- {i['title']}" for i in group["items"][:5])
    request = confirm.profile_lines(profile)
    messages: list[tuple[confirm.Role, str]] = [
        ("system", REASON_SYSTEM), ("user", f"[선물 요청]\n{request}\n검색어: {group['query']}\n[상품]\n{items}")]
    text, why, usage = await text_call(messages, REASON_SCHEMA, "reason", job_id + where, timeout_s, REASON_TOKENS)
    if usage is not None:
        counted(usage)  # charged to the key that started the list job (gateway/wiring.py for_owner)
    if text is not None:
        extra = [w for i in group["items"] for w in (i["title"], str(i["payload"].get("category", "")))]
        problems = confirm.unfaithful(text, profile, vocab, also=extra) \
            + confirm.off_items(text, [i["title"] for i in group["items"][:5]], profile)
        if problems:
            text, why = None, "unfaithful: " + "; ".join(problems)
    outcome = {"reason": text, "reason_status": "ok" if text else "failed", "reason_error": why}
    REASON_CALLS.labels("ok" if text else ("unfaithful" if why and why.startswith("unfaithful") else
                                           "late" if why == LATE else "failed")).inc()
    try:
        await store.hsetnx(key, where, json.dumps(outcome, ensure_ascii=False), ttl_s)
    except StoreUnavailable:
        pass
    return outcome
