"""Every route's access decision: the group a key needs to call it, and what it does with owned state.

A ``/v1/`` route missing here is refused (403) for every key once keys are on, and the isolation
test (tests/service/test_tenant_isolation.py, generated from the served OpenAPI document) fails until
the route has a row: a route is never shared between tenants by omission.

``owns`` names what the route touches:

- ``none``: no state that outlives the request (or state shared on purpose: the answer cache is per
  collection, which the key's scopes already decide);
- ``create:<kind>`` / ``read:<kind>``: it creates, or reads/continues/cancels, a resource of that kind
  named in its path; another key's is a 404;
- ``collection:read`` / ``collection:write``: the collection named in its path or body, against the key's
  collection scopes;
- ``self``: the caller's own records only (usage).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Access:
    """One route's decision."""

    group: str  # search, llm, files, admin, or "any" (every accepted key)
    owns: str


_LLM_NONE = Access("llm", "none")
ROUTES: dict[tuple[str, str], Access] = {
    ("POST", "/v1/search"): Access("search", "collection:read"),
    ("POST", "/v1/embeddings"): Access("search", "none"),
    ("GET", "/v1/collections"): Access("search", "collection:read"),  # lists the readable ones only
    ("GET", "/v1/collections/{name}"): Access("search", "collection:read"),
    ("POST", "/v1/collections"): Access("admin", "collection:write"),
    ("DELETE", "/v1/collections/{name}"): Access("admin", "collection:write"),
    ("POST", "/v1/collections/{name}/upgrade"): Access("admin", "collection:write"),
    ("POST", "/v1/collections/{name}/reindex"): Access("admin", "collection:write"),
    ("POST", "/v1/collections/{name}/rollback"): Access("admin", "collection:write"),
    ("POST", "/v1/collections/{name}/documents"): Access("search", "collection:write"),  # and creates a job
    ("POST", "/v1/collections/{name}/documents:delete"): Access("search", "collection:write"),
    ("POST", "/v1/collections/{name}/files"): Access("files", "collection:write"),  # and creates a job
    ("GET", "/v1/jobs/{job_id}"): Access("any", "read:job"),
    ("POST", "/v1/jobs/{job_id}:cancel"): Access("any", "read:job"),
    ("POST", "/v1/ocr/jobs"): Access("files", "create:ocr_job"),
    ("GET", "/v1/ocr/jobs/{job_id}"): Access("files", "read:ocr_job"),
    ("POST", "/v1/ocr:extract"): Access("files", "none"),
    ("POST", "/v1/masking/jobs"): Access("files", "create:masking_job"),
    ("GET", "/v1/masking/jobs/{job_id}"): Access("files", "read:masking_job"),
    ("GET", "/v1/masking/jobs/{job_id}/pages/{index}.png"): Access("files", "read:masking_job"),
    ("POST", "/v1/pii:detect"): Access("files", "none"),
    ("POST", "/v1/files:read"): Access("files", "none"),
    ("POST", "/v1/chat"): _LLM_NONE,
    ("POST", "/v1/chat/completions"): _LLM_NONE,
    ("GET", "/v1/models"): Access("any", "none"),  # lists the routes the key may use
    ("GET", "/v1/models/{model_id}"): Access("any", "none"),
    ("POST", "/v1/summaries"): _LLM_NONE,
    ("POST", "/v1/recommendations"): Access("llm", "collection:read"),
    ("POST", "/v1/recommendations:stream"): Access("llm", "collection:read"),
    ("POST", "/v1/answers"): Access("llm", "collection:read"),
    ("POST", "/v1/answers:stream"): Access("llm", "collection:read"),
    ("GET", "/v1/tasks"): Access("any", "none"),
    ("POST", "/v1/tasks/{name}"): _LLM_NONE,
    ("POST", "/v1/tasks/{name}:stream"): _LLM_NONE,
    ("POST", "/v1/interviews"): Access("llm", "create:interview"),
    ("GET", "/v1/interviews/{interview_id}"): Access("llm", "read:interview"),
    ("POST", "/v1/interviews/{interview_id}/answers"): Access("llm", "read:interview"),
    ("POST", "/v1/interviews/{interview_id}/report"): Access("llm", "read:interview"),
    ("POST", "/v1/interviews/{interview_id}/report:stream"): Access("llm", "read:interview"),
    ("POST", "/v1/conversations"): Access("llm", "create:conversation"),
    ("GET", "/v1/conversations/{conversation_id}"): Access("llm", "read:conversation"),
    ("POST", "/v1/conversations/{conversation_id}/turns"): Access("llm", "read:conversation"),
    ("POST", "/v1/conversations/{conversation_id}/turns:stream"): Access("llm", "read:conversation"),
    ("POST", "/v1/conversations/{conversation_id}:confirm"): Access("llm", "read:conversation"),
    ("POST", "/v1/conversations/{conversation_id}:reopen"): Access("llm", "read:conversation"),
    ("POST", "/v1/conversations/{conversation_id}/lists"): Access("llm", "read:conversation"),
    ("GET", "/v1/conversations/{conversation_id}/lists/{job_id}"): Access("llm", "read:conversation"),
    ("POST", "/v1/assistant/sessions"): Access("llm", "create:assistant_session"),
    ("GET", "/v1/assistant/sessions/{session_id}"): Access("llm", "read:assistant_session"),
    ("POST", "/v1/assistant/sessions/{session_id}/messages"): Access("llm", "read:assistant_session"),
    ("GET", "/v1/usage"): Access("any", "self"),
}
