"""The gateway's grounded answers over a scripted LLM: what the answer tests of more than one module share."""

from __future__ import annotations

import json
from contextlib import asynccontextmanager

from bench.standin import ChatStandIn
from services.reasoning.backends.openai_http import OpenAIBackend
from support.apps import asgi_client, gateway_app
from support.servers import running_reasoning


def answer_json(answerable: bool, answer: str, evidence: list) -> dict:
    """A scripted answer as the stand-in streams it (in a few pieces, as a backend would)."""
    text = json.dumps({"answerable": answerable, "answer": answer, "evidence": evidence}, ensure_ascii=False)
    return {"chunks": [text[i:i + 7] for i in range(0, len(text), 7)]}


@asynccontextmanager
async def answering(catalog, script: list[dict], embedding: int | None = None, reasoning: dict | None = None,
                    **settings):
    """The gateway (ASGI) over the catalog and a reasoning service (``reasoning``: its settings) whose LLM
    follows ``script``; and the stand-in."""
    standin = ChatStandIn(script)
    try:
        async with running_reasoning([OpenAIBackend("s", standin.url, "standin")], cold=True,
                                     **(reasoning or {})) as svc:
            # The relevance decision is off unless a test sets it: the model under test is the scripted one,
            # which answers at once (so derived queries need no minimum budget either).
            app = gateway_app(embedding or catalog[0], catalog[1], reasoning_targets=f"127.0.0.1:{svc.port}",
                              **{"answer_min_relevance": 0.0, "expand_min_s": 0.0, **settings})
            async with asgi_client(app) as http:
                yield http, standin
    finally:
        standin.close()
