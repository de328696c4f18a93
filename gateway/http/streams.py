"""Server-sent event streams described by the models the code sends: what a route streams is what its spec says.

A streaming route declares its :class:`Stream`: each event name with the Pydantic model of its ``data``.
The route writes events only through :meth:`Stream.send`, which refuses a name the stream does not declare
or data that is not an instance of the declared model, so an event cannot be sent without a schema. The
route's OpenAPI response is generated from the same declaration (:meth:`Stream.doc`): per event, an object
``{event, data}`` whose ``data`` is JSON (``contentMediaType``) with the model's schema (``contentSchema``).

The document is OpenAPI 3.1 (what FastAPI emits, and what the Swagger UI bundled for offline use and the
client generators read), so the per-event schema is under ``x-itemSchema`` in exactly the shape OpenAPI
3.2 gives ``itemSchema`` for ``text/event-stream``; :func:`add_stream_schemas` puts the models into
``components.schemas`` when the spec is generated.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from clients.errors import MeshClientError
from gateway.http.errors import ApiError, ErrorBody, from_client_error

REF = "#/components/schemas/{model}"
ITEM_SCHEMA = "x-itemSchema"  # OpenAPI 3.2's itemSchema, as an extension of a 3.1 document
_STREAMS: list[Stream] = []


class TextDelta(BaseModel):
    """A piece of text as it is written (``delta``)."""

    text: str


class Stream:
    """The events one streaming route sends: name → the model of its ``data`` (``error`` is always one)."""

    def __init__(self, events: dict[str, type[BaseModel]], *, description: str, unnamed: bool = False,
                 data_only: tuple[str, ...] = (), exclude_unset: bool = False) -> None:
        """A stream of ``events``; ``description`` says their order.

        ``unnamed``: events sent as ``data:`` alone (OpenAI's chunks: the name only picks the model);
        ``data_only``: literal ``data:`` lines (``[DONE]``); ``exclude_unset``: fields never set are left out.
        """
        self.events = events if unnamed else {**events, "error": events.get("error", ErrorBody)}
        self.description = description
        self.unnamed = unnamed
        self.data_only = data_only
        self.exclude_unset = exclude_unset
        _STREAMS.append(self)

    def send(self, event: str, data: BaseModel) -> bytes:
        """One server-sent event; a name or a data type the stream does not declare is a programming error."""
        model = self.events.get(event)
        if model is None or not isinstance(data, model):
            raise TypeError(f"event {event!r} with {type(data).__name__} is not declared by this stream "
                            f"({', '.join(f'{k}: {v.__name__}' for k, v in self.events.items())})")
        # json.dumps, not model_dump_json: the bytes every route sent before the streams had schemas
        # (", " and ": " separators), which clients matching lines rely on.
        body = json.dumps(data.model_dump(mode="json", exclude_unset=self.exclude_unset), ensure_ascii=False)
        return (f"data: {body}\n\n" if self.unnamed else f"event: {event}\ndata: {body}\n\n").encode()

    def line(self, data: str) -> bytes:
        """One of the stream's literal ``data:`` lines."""
        if data not in self.data_only:
            raise TypeError(f"data line {data!r} is not declared by this stream")
        return f"data: {data}\n\n".encode()

    def error(self, err: ApiError | MeshClientError) -> bytes:
        """An ``error`` event with the ErrorBody shape every route uses."""
        return self.send("error", (err if isinstance(err, ApiError) else from_client_error(err)).body)

    def item_schema(self) -> dict[str, Any]:
        """One event of the stream, as OpenAPI 3.2 describes an SSE item (event, data)."""
        def data(model: type[BaseModel]) -> dict[str, Any]:
            return {"type": "string", "contentMediaType": "application/json",
                    "contentSchema": {"$ref": REF.format(model=model.__name__)}}

        if self.unnamed:
            variants: list[dict[str, Any]] = [
                {"type": "object", "required": ["data"],
                 "properties": {"event": {"const": "message"}, "data": data(model)}}
                for model in dict.fromkeys(self.events.values())]
        else:
            variants = [{"type": "object", "required": ["event", "data"],
                         "properties": {"event": {"const": name}, "data": data(model)}}
                        for name, model in self.events.items()]
        variants += [{"type": "object", "required": ["data"],
                      "properties": {"event": {"const": "message"}, "data": {"const": line}}}
                     for line in self.data_only]
        return {"oneOf": variants}

    def doc(self) -> dict[int | str, dict[str, Any]]:
        """The route's 200 response: ``text/event-stream`` with a schema per event."""
        return {200: {"description": self.description,
                      "content": {"text/event-stream": {"schema": {"type": "string"},
                                                        ITEM_SCHEMA: self.item_schema()}}}}


def add_stream_schemas(spec: dict[str, Any]) -> dict[str, Any]:
    """``spec`` with every declared stream's models in ``components.schemas`` (a clash of names is an error)."""
    models = list(dict.fromkeys(m for s in _STREAMS for m in s.events.values()))
    _, top = models_json_schema([(m, "serialization") for m in models], ref_template=REF)
    schemas = spec.setdefault("components", {}).setdefault("schemas", {})
    for name, schema in top.get("$defs", {}).items():
        if name in schemas and _without_defaults(schemas[name]) != _without_defaults(schema):
            raise RuntimeError(f"two different schemas are named {name!r}: rename the stream event's model")
        schemas.setdefault(name, schema)
    return spec


def _without_defaults(schema: Any, mapping: bool = False) -> Any:
    """A schema without ``default`` keywords (FastAPI's response schemas leave them out, pydantic's keep them)."""
    if isinstance(schema, dict):
        return {k: _without_defaults(v, k in ("properties", "$defs")) for k, v in schema.items()
                if mapping or k != "default"}
    if isinstance(schema, list):
        return [_without_defaults(v) for v in schema]
    return schema


def parse(body: str) -> list[tuple[str, str]]:
    """A whole event-stream body as (event, data) pairs (``message`` when a block names no event)."""
    out = []
    for block in body.replace("\r\n", "\n").strip().split("\n\n"):
        event, data = "message", []
        for line in block.splitlines():
            key, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if key == "event":
                event = value
            elif key == "data":
                data.append(value)
        if data:
            out.append((event, "\n".join(data)))
    return out
