"""The semantic answer cache: a checked answer served again to a question that asks the same thing.

An answer the support checks kept (``reason: answered``) is stored with its question's vector under
the collection's *generation*, the search settings and the embedding revision. A later question on
the same collection is served that answer, marked ``cached: "semantic"``, when its vector's cosine to
the stored one reaches ``threshold`` **and** code finds it asks the same thing
(:func:`gateway.answers.sameneed.same_need`: same numbers, no term the passages lack, no term of the
passages replaced). The model is not asked; the usage is none.

Invalidation: every write through the gateway (a collection created or deleted, documents deleted,
an ingest, file or reindex job started and finished, a rollback) gives the collection a new random
generation, so nothing stored before it is looked at again; a write that bypasses the gateway is
bounded by the TTL. The generation and the entries live in the cache's store (Redis shared by every
instance, or this process); any store failure is a miss (counted), never an error.

Entries of one (collection, generation, scope) are one hash of question + vector (float16, base64),
read whole per lookup and capped at ``max_entries`` (a full hash takes no more until the generation
changes or it expires); the answers themselves are separate keys, read only for a candidate. Linear
scan: a few hundred entries cost well under a millisecond of numpy; beyond thousands per collection a
vector index (Redis' or Qdrant's) would be the next step.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import secrets
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
from prometheus_client import Counter

from gateway.answers.sameneed import same_need
from gateway.tasks.store import KeyValue, StoreUnavailable

log = logging.getLogger(__name__)

ANSWER_CACHE = Counter("mesh_gateway_answer_cache", "semantic answer cache lookups by outcome", ["event"])
for _event in ("hit", "miss", "refused", "stored", "full", "error"):
    ANSWER_CACHE.labels(_event)

GENERATIONS = "semcache:gen"
CANDIDATES = 3  # nearest entries above the threshold checked by code, best first


@dataclass(frozen=True)
class Hit:
    """A cached answer served: the stored response, the question it answered and the cosine."""

    response: dict[str, Any]
    question: str
    similarity: float


def scope_of(**settings: Any) -> str:
    """A short hash of everything besides the question that shapes an answer (search settings, route, revision)."""
    return hashlib.sha256(json.dumps(settings, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _unit(vector: list[float] | np.ndarray) -> np.ndarray:
    v = np.asarray(vector, dtype=np.float32)
    norm = float(np.linalg.norm(v))
    return v / norm if norm else v


class AnswerCache:
    """Lookups and stores over a :class:`KeyValue`; see the module's docstring."""

    def __init__(self, store: KeyValue, *, threshold: float, ttl_s: int, max_entries: int) -> None:
        self.store = store
        self.threshold = threshold
        self.ttl_s = ttl_s
        self.max_entries = max_entries
        self._warned = False

    def _failed(self, op: str, err: Exception) -> None:
        ANSWER_CACHE.labels("error").inc()
        if not self._warned:
            self._warned = True
            log.warning("answer cache %s failed (%s): served without the cache", op, err)

    async def generation(self, collection: str) -> str | None:
        """The collection's current generation (made on first use); None when the store does not answer."""
        try:
            fields = await self.store.hgetall(GENERATIONS)
            gen = fields.get(collection)
            if gen is None:
                await self.store.hsetnx(GENERATIONS, collection, secrets.token_hex(8), self.ttl_s * 24)
                gen = (await self.store.hgetall(GENERATIONS)).get(collection)
            return gen
        except StoreUnavailable as err:
            self._failed("generation", err)
            return None

    async def changed(self, collection: str) -> None:
        """The collection's data changed: a new generation (nothing stored before is looked at again)."""
        try:
            await self.store.hset(GENERATIONS, collection, secrets.token_hex(8), self.ttl_s * 24)
        except StoreUnavailable as err:
            # The old entries stay reachable until their TTL: said loudly, as it may serve a stale answer.
            log.error("answer cache: the new generation of %s was not stored (%s)", collection, err)
            ANSWER_CACHE.labels("error").inc()

    @staticmethod
    def _entries_key(collection: str, gen: str, scope: str) -> str:
        return f"semcache:{collection}:{gen}:{scope}"

    async def find(self, collection: str, gen: str, scope: str, question: str,
                   vector: list[float] | np.ndarray) -> Hit | None:
        """The cached answer ``question`` may be served, or None (a miss, a refusal by code, or a store failure)."""
        try:
            fields = await self.store.hgetall(self._entries_key(collection, gen, scope))
        except StoreUnavailable as err:
            self._failed("lookup", err)
            return None
        if not fields:
            ANSWER_CACHE.labels("miss").inc()
            return None
        ids, questions, rows = [], [], []
        for entry_id, raw in fields.items():
            entry = json.loads(raw)
            ids.append(entry_id)
            questions.append(entry["q"])
            rows.append(np.frombuffer(base64.b64decode(entry["v"]), dtype=np.float16))
        sims = np.stack(rows).astype(np.float32) @ _unit(vector)
        order = [i for i in np.argsort(-sims)[:CANDIDATES] if sims[i] >= self.threshold]
        refused = False
        for i in order:
            try:
                stored = await self.store.get(f"semcache:a:{ids[i]}")
            except StoreUnavailable as err:
                self._failed("lookup", err)
                return None
            if stored is None:
                continue
            response = json.loads(stored)
            passages = "\n".join(p["text"] for p in response.get("passages", []))
            cited = "\n".join(c["text"] for c in response.get("citations", []))
            if same_need(question, questions[i], passages, cited) is None:
                ANSWER_CACHE.labels("hit").inc()
                return Hit(response, questions[i], round(float(sims[i]), 4))
            refused = True
        ANSWER_CACHE.labels("refused" if refused else "miss").inc()
        return None

    async def put(self, collection: str, gen: str, scope: str, question: str, vector: list[float] | np.ndarray,
                  response: dict[str, Any]) -> None:
        """Store a checked answer (a full entry hash takes none; a store failure is counted and ignored)."""
        key = self._entries_key(collection, gen, scope)
        try:
            if await self.store.hlen(key) >= self.max_entries:
                ANSWER_CACHE.labels("full").inc()
                return
            entry_id = hashlib.sha256(f"{key}\n{question}\n{time.time_ns()}".encode()).hexdigest()[:24]
            await self.store.set(f"semcache:a:{entry_id}", json.dumps(response, ensure_ascii=False), self.ttl_s)
            vec = base64.b64encode(_unit(vector).astype(np.float16).tobytes()).decode()
            await self.store.hset(key, entry_id, json.dumps({"q": question, "v": vec}, ensure_ascii=False), self.ttl_s)
        except StoreUnavailable as err:
            self._failed("store", err)
            return
        ANSWER_CACHE.labels("stored").inc()
