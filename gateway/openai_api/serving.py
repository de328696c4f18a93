"""OpenAI-compatible embeddings and models over the embedding client (what the official client expects)."""

from __future__ import annotations

import asyncio
import base64
from typing import Literal

import numpy as np

from gateway.http.deadline import Deadline
from gateway.http.errors import ApiError, FieldError
from gateway.openai_api import protocol as api
from gateway.reasoning.routes import ModelRoutes
from gateway.vectors.query import QueryVectors

OWNER = "korean-inference-mesh"
QUERY_SUFFIX = ":query"  # the same model, embedding its input as queries ("query: " prefix)


class OpenAiCompat:
    """``/v1/embeddings`` and ``/v1/models`` (the embedding model and the chat model routes)."""

    def __init__(self, vectors: QueryVectors, routes: ModelRoutes) -> None:
        self.vectors = vectors
        self.routes = routes

    async def models(self, deadline: Deadline) -> api.ModelList:
        """The embedding model, as passages and as queries, then the chat model routes (the default first)."""
        info = await self.vectors.info(deadline)
        return api.ModelList(data=[api.ModelCard(id=mid, created=0, owned_by=OWNER)
                                   for mid in (info.model_id, info.model_id + QUERY_SUFFIX, *self.routes.names())])

    async def model(self, model_id: str, deadline: Deadline) -> api.ModelCard:
        """One model (the official client's ``models.retrieve``); 404 naming what is served."""
        for card in (await self.models(deadline)).data:
            if card.id == model_id:
                return card
        raise ApiError(404, "not_found", f"model {model_id!r} is not served; GET /v1/models lists them")

    async def embeddings(self, req: api.EmbeddingsRequest, deadline: Deadline) -> api.EmbeddingsResponse:
        """Embed texts; base64 is little-endian float32, as the official client expects."""
        info = await self.vectors.info(deadline)
        kind: Literal["query", "passage"] = "query" if req.model.endswith(QUERY_SUFFIX) else "passage"
        if req.model.removesuffix(QUERY_SUFFIX) != info.model_id:
            raise ApiError(404, "not_found", f"model {req.model!r} is not served; GET /v1/models lists them")
        if req.dimensions is not None and req.dimensions != info.dim:
            raise ApiError(400, "invalid_argument", "unsupported dimensions",
                           fields=[FieldError(field="dimensions", description=f"this model has {info.dim}")])
        texts = [req.input] if isinstance(req.input, str) else req.input
        if not 1 <= len(texts) <= 256:
            raise ApiError(400, "invalid_argument", "invalid input",
                           fields=[FieldError(field="input", description="give 1 to 256 texts")])
        if kind == "query":  # queries share the search path's cache
            vectors, tokens = await self.vectors.query_vectors(texts, deadline)
        else:
            result = await self.vectors.embed_batch(texts, kind, deadline)
            vectors, tokens = list(result.vectors), int(sum(result.token_counts))
        data = []
        for i, vec in enumerate(vectors):
            emb: list[float] | str = (base64.b64encode(np.asarray(vec, dtype="<f4").tobytes()).decode()
                                      if req.encoding_format == "base64" else vec.tolist())
            data.append(api.EmbeddingData(index=i, embedding=emb))
            if i % RENDER_EVERY == RENDER_EVERY - 1:
                await asyncio.sleep(0)  # 256 vectors of 384 floats are milliseconds of work: others go between
        return api.EmbeddingsResponse(data=data, model=req.model,
                                      usage=api.Usage(prompt_tokens=tokens, total_tokens=tokens))


RENDER_EVERY = 32  # vectors built or encoded between two turns of the event loop


async def rendered(resp: api.EmbeddingsResponse) -> bytes:
    """The response as JSON, a few vectors at a time with the event loop free in between.

    FastAPI's own encoding of 256 x 384 floats (its jsonable encoder) holds the loop for tens of
    milliseconds; pydantic's encoder per vector takes ~0.03 ms.
    """
    parts = []
    for i, item in enumerate(resp.data):
        parts.append(item.model_dump_json())
        if i % RENDER_EVERY == RENDER_EVERY - 1:
            await asyncio.sleep(0)
    head = resp.model_dump_json(exclude={"data"})
    return ('{"data":[' + ",".join(parts) + "]," + head[1:]).encode()
