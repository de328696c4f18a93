"""Where an assistant session lives: its hash in the sessions store (meta and numbered turns), owned by its key.

A turn's number is claimed once across instances (HSETNX); at most ``max_turns`` are kept, the oldest
dropped. A store that does not answer is a retryable 503.
"""

from __future__ import annotations

import json

from gateway.assistant import protocol as api
from gateway.http.errors import ApiError
from gateway.tasks.store import KeyValue, StoreUnavailable, numbered, session_hash
from services.runtime.tasks.post import DEFAULT_TIMEZONE


def unavailable(err: Exception) -> ApiError:
    """The sessions store did not answer."""
    return ApiError(503, "unavailable", f"the assistant's session store did not answer ({err})", retryable=True)


class SessionStore:
    """Assistant sessions in a key-value store: their meta, their turns, their time to live."""

    def __init__(self, store: KeyValue, *, ttl_s: int, max_turns: int) -> None:
        self.store = store
        self.ttl_s = ttl_s
        self.max_turns = max_turns

    @staticmethod
    def key(sid: str) -> str:
        """The session's hash."""
        return f"assistant:{sid}"

    async def _load(self, sid: str) -> tuple[dict, dict[int, dict]]:
        try:
            fields = await session_hash(self.store, self.key(sid), sid)
        except StoreUnavailable as err:
            raise unavailable(err) from None
        if not fields or "meta" not in fields:
            raise ApiError(404, "session_not_found", "no such assistant session (it may have expired)")
        return json.loads(fields["meta"]), numbered(fields)

    async def state(self, sid: str) -> api.SessionState:
        """The session and its latest turns."""
        meta, turns = await self._load(sid)
        try:
            left = await self.store.ttl(self.key(sid))
        except StoreUnavailable:
            left = self.ttl_s
        return api.SessionState(id=sid, collections=meta["collections"], tools=meta["tools"], model=meta["model"],
                                turns=[api.AssistantTurn(**turns[n]) for n in sorted(turns)],
                                earlier_turns=min(turns) - 1 if turns else 0, expires_in_s=left,
                                timezone=meta.get("timezone") or DEFAULT_TIMEZONE)

    async def _keep(self, sid: str, turns: dict[int, dict], record: dict) -> int:
        """Claim the next turn number (once, across instances); the oldest kept turn goes past ``max_turns``."""
        try:
            for _ in range(5):
                n = max(turns, default=0) + 1
                if await self.store.hsetnx(self.key(sid), f"t:{n}", json.dumps(record, ensure_ascii=False),
                                           self.ttl_s):
                    if n > self.max_turns:
                        await self.store.hdel(self.key(sid), f"t:{n - self.max_turns}")
                    turns[n] = record
                    return n
                _, turns = await self._load(sid)
        except StoreUnavailable as err:
            raise unavailable(err) from None
        raise ApiError(409, "turn_conflict", "the session changed five times during this turn; send it again",
                       retryable=True)
