"""A resumed list job reuses a stored reason only for the same query and items (issue 77, item 3).

Before, reasons were stored by position (``gift:0``): a first run that skipped expansion stored the
reason of its one query's items at ``gift:0``; the run resumed on another instance derived queries,
and its first group — another query, other items — was shown the stored sentence. The model call is
replaced here by a function that writes which items it was shown (no model runs in a unit test); the
store is the gateway's in-process one.
"""

from __future__ import annotations

from types import SimpleNamespace

from gateway.conversations.finish import Finish
from gateway.conversations.profile import empty_profile
from gateway.conversations.reading import Vocabulary
from gateway.tasks.store import MemoryKeyValue


def group(query: str, *ids: str) -> dict:
    return {"query": query, "items": [{"id": i, "rank": n + 1, "score": 1.0, "title": f"상품 {i}",
                                       "payload": {"category": "향초"}} for n, i in enumerate(ids)]}


async def test_a_resumed_run_never_shows_a_reason_written_for_other_items():
    finish = Finish.__new__(Finish)
    finish.conversations = SimpleNamespace(store=MemoryKeyValue(), ttl_s=600)
    finish.reason_timeout_s = 5.0
    calls: list[str] = []

    async def text(messages, schema, name, key, total_s, max_tokens):  # the model's call, as a function
        shown = messages[-1][1].rsplit("[상품]\n", 1)[1]
        calls.append(shown)
        return f"{shown.splitlines()[0][2:]}에 어울리는 선물이에요.", None, None

    finish._text = text
    vocab, profile = Vocabulary(("향초",), ()), empty_profile()
    first = await finish._reason("job-1", "gift", profile, vocab, group("아내 생일 선물", "a", "b"))
    resumed = await finish._reason("job-1", "gift", profile, vocab, group("은은한 향초 선물", "c", "d"))
    assert first["reason"].startswith("상품 a") and resumed["reason"].startswith("상품 c"), (first, resumed)
    again = await finish._reason("job-1", "gift", profile, vocab, group("아내 생일 선물", "a", "b"))
    assert again == first and len(calls) == 2  # the same query and items: the stored sentence, no new call
