"""MkDocs hook: pages generated at build time from the sources, never copied by hand.

- ``reference/http.md``: every route of the gateway's served OpenAPI spec (``gateway/openapi.json``, the
  snapshot the gateway serves byte for byte): method, path, summary, request body, answers, and each
  streamed event with the schema of its data (``x-itemSchema``);
- ``reference/grpc.md``: every service, RPC and message of ``protos/`` with their comments;
- ``deployment/kubernetes.md`` and ``deployment/capacity.md``: ``infra/deploy.md`` and ``infra/CAPACITY.md``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[1]


def _schema_name(schema: dict) -> str:
    ref = schema.get("$ref") or (schema.get("items") or {}).get("$ref") or ""
    return ref.rsplit("/", 1)[-1] or schema.get("type", "")


def http_reference() -> str:
    """The gateway's routes from its served spec."""
    spec = json.loads((ROOT / "gateway" / "openapi.json").read_text(encoding="utf-8"))
    out = [f"# HTTP API ({spec['info']['title']} {spec['info']['version']})", "",
           "Generated from `gateway/openapi.json`, the spec the gateway serves at `/openapi.json` (Swagger UI at "
           "`/docs` on a running gateway). Every route below is described on a feature page too "
           "(`tests/unit/test_docs_site.py` keeps it so).", ""]
    for path, ops in spec["paths"].items():
        for method, op in ops.items():
            out += [f"## `{method.upper()} {path}`", "", op.get("summary", ""), ""]
            body = (op.get("requestBody") or {}).get("content") or {}
            for kind, media in body.items():
                out.append(f"- request: `{kind}` {_schema_name(media.get('schema', {}))}".rstrip())
            for code, answer in op.get("responses", {}).items():
                said = answer.get("description") or ""
                out.append(f"- `{code}`: {said.splitlines()[0] if said else ''}")
                events = ((answer.get("content") or {}).get("text/event-stream") or {}).get("x-itemSchema")
                for variant in (events or {}).get("oneOf", []):
                    data = variant["properties"]["data"]
                    shape = f"`{data['const']}`" if "const" in data else _schema_name(data["contentSchema"])
                    out.append(f"    - event `{variant['properties']['event']['const']}`: {shape}")
            out.append("")
    return "\n".join(out)


_BLOCK = re.compile(r"((?:^[ \t]*//.*\n)*)^[ \t]*(service|message|enum|rpc)\s+(\w+)(.*)$", re.M)


def grpc_reference() -> str:
    """Services, RPCs and messages of every proto, each with its comment."""
    out = ["# gRPC API", "", "Generated from `protos/` (buf lint and buf breaking check them in `make check`).", ""]
    for proto in sorted((ROOT / "protos").rglob("*.proto")):
        out += [f"## `{proto.relative_to(ROOT / 'protos')}`", ""]
        for comment, kind, name, rest in _BLOCK.findall(proto.read_text(encoding="utf-8")):
            text = " ".join(line.strip().lstrip("/").strip() for line in comment.splitlines() if line.strip())
            signature = f"{name}{rest.split('{')[0].rstrip(' ;')}" if kind == "rpc" else name
            level = "###" if kind in ("service", "message", "enum") else "-"
            out.append(f"{level} {kind} `{signature}`" + (f": {text}" if kind == "rpc" and text else ""))
            if kind != "rpc":
                out += ["", text, ""] if text else [""]
        out.append("")
    return "\n".join(out)


def _infra(name: str, title: str) -> str:
    text = (ROOT / "infra" / name).read_text(encoding="utf-8")
    return text if text.startswith("# ") else f"# {title}\n\n{text}"


def on_files(files: Files, config) -> Files:  # noqa: ANN001 - MkDocs' hook signature
    """Add the generated pages."""
    for uri, content in (("reference/http.md", http_reference()), ("reference/grpc.md", grpc_reference()),
                         ("deployment/kubernetes.md", _infra("deploy.md", "Deploying")),
                         ("deployment/capacity.md", _infra("CAPACITY.md", "Capacity"))):
        files.append(File.generated(config, uri, content=content))
    return files
