"""The bytes of files waiting in ingest jobs, bounded at submit: a file job that would pass it is a 503 now.

A file job carries its upload in the job store until it runs (raw bytes, not base64: stored once, at its
size). That store is the Redis the OCR service's jobs live on, with ``noeviction``: without a bound, ten
queued 20 MB uploads made OCR refuse every job and twenty failed every job write. So every queued
upload is counted here at submit — one hash field per upload, ``bytes expires_ms`` — and released when
its job ends; a submit that would take the total over ``max_bytes`` is a 503 with ``Retry-After``.

What it survives and who shares it: the hash lives on the gateway's ``--redis-url`` store, shared by every
gateway instance; each counts its own uploads in and out. The check and the write are two calls, so
instances racing can pass the bound by at most (instances − 1) × one file; an upload whose job never
ends (an instance killed mid-job) is dropped from the count when its job would have expired. An
evicting Redis may drop the hash: the count then restarts from the uploads submitted after it, and the
job store's own memory bound stays the last guard (``JobStoreFull``: also a 503).
"""

from __future__ import annotations

import time
import uuid

from gateway.http.errors import ApiError
from gateway.tasks.store import KeyValue, StoreUnavailable

KEY = "files:queued-bytes"


class UploadBudget:
    """Bytes of uploads queued in file jobs, at most ``max_bytes`` (0: no bound)."""

    def __init__(self, store: KeyValue, max_bytes: int, ttl_s: int) -> None:
        self.store = store
        self.max_bytes = max_bytes
        self.ttl_s = ttl_s  # a job's lifetime: an entry left by a job that never ended goes with it

    async def queued(self) -> int:
        """Bytes counted now (entries past their expiry dropped)."""
        now = time.time() * 1000
        total = 0
        for token, value in (await self.store.hgetall(KEY)).items():
            size, _, expires = value.partition(" ")
            if float(expires or 0) < now:
                await self.store.hdel(KEY, token)
            else:
                total += int(size)
        return total

    async def reserve(self, size: int) -> str:
        """Count ``size`` bytes in; the token to release them with (503 with Retry-After when over the bound)."""
        token = uuid.uuid4().hex
        if not self.max_bytes:
            return token
        try:
            queued = await self.queued()
            if queued + size > self.max_bytes:
                raise ApiError(503, "unavailable", f"files waiting to be ingested hold {queued:,} bytes; this "
                               f"{size:,}-byte file would pass the gateway's bound of {self.max_bytes:,} "
                               "(--max-queued-file-bytes): retry when some have been read",
                               retryable=True, retry_after_s=10.0)
            await self.store.hset(KEY, token, f"{size} {int(time.time() * 1000 + self.ttl_s * 1000)}", self.ttl_s)
        except StoreUnavailable as err:
            raise ApiError(503, "unavailable", f"the upload budget cannot be read: {err}", retryable=True,
                           retry_after_s=5.0) from None
        return token

    async def release(self, token: str) -> None:
        """Count an upload out (its job ended); a store that is down leaves it to expire."""
        try:
            await self.store.hdel(KEY, token)
        except StoreUnavailable:
            pass
