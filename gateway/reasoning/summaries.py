"""Summaries within their own short deadline: a failure is an explicit empty summary, never a failed request."""

from __future__ import annotations

import time
import uuid

from clients.errors import InvalidArgument, MeshClientError
from clients.reasoning import Options, Timeouts
from gateway.http.deadline import Deadline
from gateway.reasoning import protocol as api
from gateway.reasoning.events import usage_of
from gateway.reasoning.pool import ReasoningPool


class Summaries:
    """Summaries on the session's (or text's) instance, bounded by ``summary_timeout_s``."""

    def __init__(self, pool: ReasoningPool, summary_timeout_s: float) -> None:
        self.pool = pool
        self.summary_timeout_s = summary_timeout_s

    async def summarize(self, body: api.SummaryRequest, deadline: Deadline) -> api.SummaryResponse:
        """A summary within the summary deadline, or ``failed`` with an empty summary (bad input is a 400)."""
        key = body.session_id or uuid.uuid5(uuid.NAMESPACE_OID, body.text[:200]).hex
        total = min(self.summary_timeout_s, deadline.check())
        options = Options(timeouts=Timeouts(total_s=total, first_token_s=total, generation_s=total),
                          model=self.pool.model)
        start = time.perf_counter()
        with self.pool.hold(key) as client:
            try:
                resp = await client.summarize(body.text, max_sentences=body.max_sentences,
                                                            options=options, timeout_s=total + 1.0)
            except InvalidArgument:
                raise
            except MeshClientError as err:
                return api.SummaryResponse(summary="", failed=True, failure_reason=f"{err.code.name}: {err.message} "
                                           f"after {(time.perf_counter() - start) * 1e3:.0f} ms")
        return api.SummaryResponse(summary=resp.summary, failed=resp.failed, failure_reason=resp.failure_reason or None,
                                   usage=usage_of(resp.usage))
