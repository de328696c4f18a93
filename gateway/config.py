"""Settings of the gateway process (env prefix ``MESH_GATEWAY_``)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Literal

from pydantic import Field, FilePath, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


@dataclass(frozen=True)
class RouteSpec:
    """One model route: the reasoning instances it sends to and the backend model it asks them for."""

    name: str
    targets: tuple[str, ...]
    model: str
    # A route asked once, with the same prompt, when code refuses this route's output (an unsupported
    # answer, output that broke its schema twice); '' for none. Only the first route escalates.
    escalate: str = ""


def _targets(raw: str) -> tuple[str, ...]:
    return tuple(dict.fromkeys(t.strip() for t in raw.split(",") if t.strip()))


class GatewaySettings(BaseSettings):
    """Gateway: REST for backends, composing embedding and retrieval over gRPC."""

    model_config = SettingsConfigDict(env_prefix="MESH_GATEWAY_")

    host: str = Field("127.0.0.1", description="address to bind")
    port: int = Field(8080, ge=0, le=65535, description="HTTP port")
    embedding_target: str = Field("127.0.0.1:50051", description="embedding service host:port")
    more_embedding_targets: str = Field(
        "", pattern=r"^([^,\s]+(,[^,\s]+)*)?$",
        description="further embedding services (host:port, comma-separated), each serving another model revision "
                    "during a model change: a search's query is embedded by the one serving its collection's "
                    "revision (with none of them, retrieval embeds it)")
    retrieval_target: str = Field("127.0.0.1:50052", description="retrieval service host:port")
    retrieval_writer_target: str = Field("", description="the retrieval writer (host:port) for catalog changes, "
                                                         "ingest and reindex jobs and rollbacks, when searches go to "
                                                         "reader replicas on --retrieval-target; empty: that target")
    ocr_target: str = Field("127.0.0.1:50054", description="OCR service host:port")
    reasoning_targets: str = Field("127.0.0.1:50053",
                                   description="reasoning instances host:port, comma-separated (sessions hashed)")
    model_routes: str = Field("", description='model routes as JSON: {"name": {"targets": "host:port,...", '
                                             '"model": "backend model id (empty: the instances\' own)", '
                                             '"escalate": "a route asked once when code refuses this one\'s '
                                             'output (optional)"}}; '
                                             "empty: one route, --default-model-route, over --reasoning-targets")
    default_model_route: str = Field("local", min_length=1, max_length=128,
                                     description="the route a request naming no model takes, and the name of "
                                                 "the one route over --reasoning-targets when no routes are set")
    chat_route: str = Field("", description="model route of /v1/chat (empty: the default route)")
    chat_history_tokens: int = Field(3000, ge=1, description="history budget of /v1/chat's `fit` policy (estimated "
                                                             "tokens; keep it at or below the reasoning service's "
                                                             "--max-history-tokens)")
    recommendations_route: str = Field("", description="model route of the reasons of /v1/recommendations "
                                                       "(empty: the default route)")
    summaries_route: str = Field("", description="model route of /v1/summaries (empty: the default route)")
    expand_route: str = Field("", description="model route that writes derived queries (search `expand`; empty: "
                                              "the default route)")
    expand_timeout_s: float = Field(8.0, gt=0, le=120, description="deadline of writing derived queries (then the "
                                                                   "query alone is searched, marked)")
    expand_min_s: float = Field(5.0, ge=0, le=120, description="the least time derived queries are given: a search "
                                                               "whose deadline leaves less (half of it goes to "
                                                               "them) is refused with 400 naming expand, never "
                                                               "run with an option that cannot work (the embedded "
                                                               "model took at most 3.7 s on bench/results/"
                                                               "expand_min8.md, which chose 5)")
    answers_route: str = Field("", description="model route of /v1/answers (empty: the default route)")
    answer_rewrite_timeout_s: float = Field(8.0, gt=0, le=120,
                                            description="deadline of rewriting a follow-up into a standalone question "
                                                        "(then the turn is searched as written, marked)")
    answer_context_chars: int = Field(1200, ge=200, le=20000,
                                      description="characters of passages packed into an answer's prompt (1200: "
                                                  "about 1,000 prompt tokens, ~60 s of prefill for the embedded "
                                                  "model on two cores; raise it behind a GPU route)")
    answer_min_score: float = Field(0.70, ge=-1, le=1,
                                    description="similarity floor of /v1/answers: passages whose dense cosine "
                                                "similarity is below it are not used (0: none dropped; 0.70 chosen "
                                                "on the answers-ko tune split, bench/results/answers_floor.md)")
    answer_min_relevance: float | None = Field(0.0, ge=0, le=1,
                                               description="the relevance decision's threshold: below it the LLM "
                                                           "is not called (reason not_relevant); 0 (default): off; "
                                                           "empty: the one fitted on the answers-ko tune split, "
                                                           "which does not transfer to other collections "
                                                           "(bench/results/answers_relevance.md)")
    answer_max_tokens: int = Field(384, ge=16, le=4096, description="tokens an answer may take")
    answer_cache: bool = Field(True, description="the semantic answer cache: a checked answer served again to a "
                                                "question that asks the same thing (cosine and code, "
                                                "gateway/answers/cache.py); off: every question asks the model")
    answer_cache_threshold: float = Field(0.90, ge=0, le=1,
                                          description="the cosine from which a cached question is a candidate "
                                                      "(code then checks numbers and terms); chosen on the "
                                                      "semantic-cache tune split (bench/results/semantic_cache.md)")
    answer_cache_ttl_s: int = Field(3600, ge=1, le=30 * 86400,
                                    description="how long a cached answer lives (bounds what a write that bypasses "
                                                "the gateway leaves stale)")
    answer_cache_max_entries: int = Field(500, ge=1, le=100000,
                                          description="cached answers per collection and search settings (a full "
                                                      "cache takes none until the collection changes or they expire)")
    tasks_dirs: str = Field("", description="more directories of task files (comma-separated), served after the "
                                            "built-in ones (services/runtime/tasks/defs); a bad file stops the start")
    tasks_route: str = Field("", description="model route of declared tasks whose role --task-routes does not map "
                                             "(empty: the default route)")
    task_routes: str = Field("", description='task roles to model routes as JSON, e.g. {"interview": "large", '
                                             '"calendar": "local"} (a task file names its role in `route`)')
    interview_ttl_s: int = Field(7200, ge=60, le=7 * 86400,
                                 description="how long an interview's state is kept after its last write (in "
                                             "--sessions-redis-url's Redis, shared by every instance; without one, "
                                             "in process)")
    interview_follow_up_below_chars: int = Field(100, ge=0, le=4000,
                                                 description="an answer to a main question shorter than this gets "
                                                             "one follow-up question (0: never)")
    conversation_ttl_s: int = Field(86400, ge=60, le=30 * 86400,
                                    description="how long a conversation's profile and turns are kept after its "
                                                "last turn (in --sessions-redis-url's Redis; without one, in process)")
    assistant_ttl_s: int = Field(86400, ge=60, le=30 * 86400,
                                 description="how long an assistant session is kept after its last turn (in "
                                             "--sessions-redis-url's Redis; without one, in process)")
    assistant_history_turns: int = Field(5, ge=0, le=50, description="earlier turns of an assistant session in each "
                                                                     "prompt (bounds a turn's input tokens)")
    assistant_tool_rounds: int = Field(3, ge=1, le=10, description="tools an assistant turn may run, one after "
                                                                   "another, before the model must reply")
    assistant_tools_file: str = Field("", description="backend tools the assistant may call (JSON: allowed_hosts, "
                                                      "tools with name, description, parameters schema, https URL, "
                                                      "timeout_s, cache_ttl_s, max_bytes); empty: none")
    conversation_response_route: str = Field("", description="model route that writes what people read at a "
                                                             "conversation's end: the turn replies, the confirm "
                                                             "summary, the lists' reasons (empty: the default route)")
    conversation_summary_timeout_s: float = Field(5.0, gt=0, le=60, description="the confirm summary's deadline "
                                                                               "(asked once; null after it)")
    conversation_reply_timeout_s: float = Field(15.0, gt=0, le=120, description="a turn reply's deadline "
                                                                               "(turns:stream; null after it)")
    conversation_reason_timeout_s: float = Field(8.0, gt=0, le=120, description="each list query's reason call "
                                                                               "(its items have none after it)")
    conversation_max_turns: int = Field(50, ge=1, le=10_000,
                                        description="turns a conversation keeps (the latest; the number of older "
                                                    "ones is kept as a count): bounds its hash, read on each turn")
    interview_score_ahead: bool = Field(True, description="score each interview answer in the background as soon "
                                                          "as it is recorded, so the report only gathers")
    interview_prepare: bool = Field(True, description="write the next main question in the background as soon as a "
                                                      "question is served")
    reasoning_load_epsilon: float = Field(0.25, gt=0, le=10,
                                          description="bounded-load slack: an instance takes <= (1+e) x average")
    reasoning_timeout_ms: int = Field(60000, ge=10, le=600000,
                                      description="request deadline of LLM routes when no header is sent")
    reasoning_first_token_s: float = Field(5.0, gt=0, le=600, description="first-token deadline of LLM calls")
    reasoning_generation_s: float = Field(20.0, gt=0, le=600, description="generation deadline of LLM calls")
    reasoning_total_s: float = Field(30.0, gt=0, le=600, description="total deadline of one LLM call")
    summary_timeout_s: float = Field(5.0, gt=0, le=600, description="deadline of a summary (never retried)")
    default_timeout_ms: int = Field(2000, ge=10, le=600000, description="request deadline when no header is sent")
    admin_timeout_ms: int = Field(30000, ge=10, le=600000,
                                  description="default deadline of every call but search (no header sent)")
    embed_budget_share: float = Field(0.4, gt=0, le=1, description="share of the deadline the embedding hop may use")
    redis_url: str = Field("", description="redis://host:port/db for shared caches; empty = in-process LRU")
    sessions_redis_url: str = Field("", description="redis:// for interview and conversation sessions: a Redis with "
                                                    "noeviction and persistence (AOF), apart from the evicting "
                                                    "cache; empty: --redis-url (logged: an LRU may evict sessions)")
    jobs_redis_url: str = Field("", description="redis:// for ingest/reindex jobs when they must not share "
                                                "the cache's Redis (an LRU may evict them); empty: --redis-url")
    jobs_redis_cluster: bool = Field(False, description="the jobs' Redis (--jobs-redis-url) is a node of a "
                                                        "Redis Cluster: connect with the cluster client (every "
                                                        "job key of a namespace hashes to one slot); the caches "
                                                        "stay on --redis-url")
    cache_ttl_s: int = Field(86400, ge=1, description="embedding cache TTL")
    cache_max_entries: int = Field(100000, ge=1, description="LRU cap of the embedding cache")
    breaker_failures: int = Field(3, ge=1, description="consecutive embedding failures that open the breaker")
    breaker_reset_s: float = Field(5.0, gt=0, description="how long an open breaker waits before a trial call")
    api_keys: SecretStr = Field(SecretStr(""), description="comma-separated API keys (X-API-Key or Authorization: "
                                                        "Bearer); with none (and no file) the gateway starts "
                                                        "only with --allow-no-auth")
    api_keys_file: FilePath | None = Field(None, description="file of API keys (a mounted secret): one per line, or "
                                                             "YAML/JSON with scopes per key (docs/operations/"
                                                             "tenancy.md); read again when it changes")
    quotas_file: FilePath | None = Field(None, description="quotas per API key id (YAML or JSON: tokens and cost per "
                                                           "day and month, a soft share); read again when it "
                                                           "changes (gateway/usage/quotas.py)")
    usage_accounting: bool = Field(True, description="count LLM usage per key, route and model and enforce "
                                                     "--quotas-file (off: neither; GET /v1/usage shows nothing new)")
    quota_request_tokens: int = Field(1000, ge=1, le=1_000_000,
                                      description="tokens a request in flight reserves against its key's quotas "
                                                  "(what concurrent callers may overshoot by, per request)")
    quota_lease_s: float = Field(900.0, ge=10, le=86400,
                                 description="how long a reservation holds quota room at most: a gateway killed "
                                             "mid-request frees its reservations after this, not at the period's end")
    allow_no_auth: bool = Field(False, description="serve with no API key at all (local development: `make run`, "
                                                   "the tests and benches set it); otherwise a gateway without "
                                                   "keys refuses to start")
    max_body_bytes: int = Field(2_000_000, ge=1024, description="largest request body accepted")
    max_ingest_body_bytes: int = Field(32_000_000, ge=1024,
                                       description="largest ingest request body (10,000 documents of ~3 KB)")
    tls_cert_file: FilePath | None = Field(None, description="serve HTTPS with this certificate (PEM; with "
                                                             "--tls-key-file); unset: plain HTTP")
    tls_key_file: FilePath | None = Field(None, description="the certificate's private key (PEM)")
    header_timeout_s: float = Field(10.0, gt=0, le=300, description="time a connection has to send each "
                                                                   "request's headers before it is closed")
    max_connections: int = Field(1000, ge=1, description="connections and requests served at once; beyond it "
                                                         "new ones get 503 (half-open connections cannot pile up)")
    protect_ops: bool = Field(False, description="with API keys set, also require one for /readyz, /metrics, "
                                                 "/docs and /openapi.json")
    rate_limit_per_s: float = Field(0.0, ge=0, description="requests a second per caller (API key, or address "
                                                            "without keys) on /v1/ routes; 0 = no limit")
    rate_limit_burst: int = Field(50, ge=1, description="requests a caller may send at once above its rate")
    max_inflight_search: int = Field(16, ge=0, description="searches (and recommendations) in flight at once; "
                                                          "more wait --shed-wait-s, then 429; 0 = no cap")
    max_inflight_embeddings: int = Field(4, ge=0, description="/v1/embeddings calls in flight at once; 0 = no cap")
    max_inflight_llm: int = Field(0, ge=0, description="LLM work in flight at once, one cap shared by every route "
                                                       "that calls the model (its POSTs; reads of stored state take "
                                                       "none): more wait --shed-wait-s, then 429; derived queries "
                                                       "and interview preparations over it are skipped; 0 = no cap")
    loop_lag_probe_ms: float = Field(10.0, ge=0, le=1000, description="how often the event loop's lag is sampled "
                                                                      "(mesh_gateway_event_loop_lag_seconds); 0 = off")
    loop_stall_ms: float = Field(0.0, ge=0, le=60_000, description="report every callback that holds the event "
                                 "loop longer than this (a WARNING with the stack that held it, and "
                                 "mesh_event_loop_stalls_total); 0 = off")
    loop_stall_file: str = Field("", description="also append each such report to this file (the test suite's "
                                 "event-loop guard reads it)")
    shed_wait_s: float = Field(0.5, ge=0, le=60, description="how long a request waits for a slot before 429")
    job_ttl_s: int = Field(7 * 86400, ge=60, description="how long a job's record is kept after its last change")
    ingest_outage_s: float = Field(60.0, ge=0, le=3600, description="how long an ingest job waits for the "
                                                                  "retrieval service to come back (its stream "
                                                                  "reopened from the first batch not acknowledged) "
                                                                  "before it fails")
    job_lease_s: float = Field(15.0, gt=0.5, le=600, description="a job held by an instance silent this long is "
                                                                "resumed by another instance")
    job_workers: int = Field(2, ge=0, le=64, description="ingest/reindex jobs this instance runs at once")
    max_queued_jobs: int = Field(100, ge=1, description="jobs waiting before a submit answers 429")
    max_queued_file_bytes: int = Field(64_000_000, ge=0, description="bytes of uploads waiting in file ingest jobs "
                                       "(held in the job store's Redis until read) before a file submit answers 503 "
                                       "with Retry-After; 0 = no bound")
    max_ocr_body_bytes: int = Field(30_000_000, ge=1024, description="largest OCR or masking job request body "
                                                                     "(base64)")
    max_extract_body_bytes: int = Field(14_000_000, ge=1024, description="largest /v1/ocr:extract request body "
                                        "(base64 of a 10 MB upload)")
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field("INFO", description="Python log level")
    debug: bool = Field(False, description="print tracebacks for start-up errors (a flag: --debug)")
    workers: int = Field(1, ge=1, le=64, description="worker processes serving the same port (SO_REUSEPORT); "
                                                     "with more than 1 this process supervises them")
    reuse_port: bool = Field(False, description="bind with SO_REUSEPORT (set by the supervisor for its workers)")
    metrics_port: int = Field(-1, ge=-1, le=65535,
                              description="also serve /metrics on this port (each worker: port + its index); "
                                          "-1: only on the gateway's own port")
    trace_exporter: Literal["none", "console", "otlp"] | None = Field(
        None, description="where spans go; unset: OTEL_TRACES_EXPORTER, else none (otlp reads "
                          "OTEL_EXPORTER_OTLP_ENDPOINT and OTEL_EXPORTER_OTLP_PROTOCOL)")

    def route_specs(self) -> dict[str, RouteSpec]:
        """The model routes by name (one over ``reasoning_targets`` when none are configured)."""
        if not self.model_routes.strip():
            return {self.default_model_route: RouteSpec(self.default_model_route, _targets(self.reasoning_targets), "")}
        table = json.loads(self.model_routes)
        return {name: RouteSpec(name, _targets(str(spec.get("targets", ""))), str(spec.get("model", "")),
                                str(spec.get("escalate", "")))
                for name, spec in table.items()}

    @model_validator(mode="after")
    def _expand_budget(self) -> GatewaySettings:
        if self.expand_min_s > self.expand_timeout_s:
            raise ValueError(f"expand_min_s ({self.expand_min_s:g}) is over expand_timeout_s "
                             f"({self.expand_timeout_s:g}): every expand would be refused")
        return self

    @model_validator(mode="after")
    def _jobs_cluster(self) -> GatewaySettings:
        if self.jobs_redis_cluster and not self.jobs_redis_url:
            raise ValueError("jobs_redis_cluster needs jobs_redis_url (a node of the cluster); the caches' "
                             "--redis-url is a plain Redis")
        return self

    @model_validator(mode="after")
    def _routes(self) -> GatewaySettings:
        if self.model_routes.strip():
            try:
                table = json.loads(self.model_routes)
            except ValueError as err:
                raise ValueError(f"model_routes is not JSON: {err}") from None
            if not isinstance(table, dict) or not table:
                raise ValueError('model_routes must be a JSON object {"name": {"targets": ..., "model": ...}}')
            for name, spec in table.items():
                if not isinstance(spec, dict) or not _targets(str(spec.get("targets", ""))):
                    raise ValueError(f"model_routes[{name!r}] needs targets (host:port, comma-separated)")
                if set(spec) - {"targets", "model", "escalate"}:
                    raise ValueError(f"model_routes[{name!r}]: unknown keys "
                                     f"{sorted(set(spec) - {'targets', 'model', 'escalate'})}")
        names = set(self.route_specs())
        for name, spec in self.route_specs().items():
            if spec.escalate and (spec.escalate not in names or spec.escalate == name):
                raise ValueError(f"model_routes[{name!r}].escalate {spec.escalate!r} is not another model route "
                                 f"(routes: {sorted(names)})")
        for field_name in ("default_model_route", "chat_route", "recommendations_route", "summaries_route",
                           "expand_route", "answers_route", "tasks_route"):
            value = getattr(self, field_name)
            if value and value not in names:
                raise ValueError(f"{field_name} {value!r} is not a model route (routes: {sorted(names)})")
        for role, route in self.task_route_table().items():
            if route not in names:
                raise ValueError(f"task_routes[{role!r}] {route!r} is not a model route (routes: {sorted(names)})")
        return self

    def task_route_table(self) -> dict[str, str]:
        """Task role -> model route (``''``: --tasks-route, else the default route)."""
        table: object = {}
        if self.task_routes.strip():
            try:
                table = json.loads(self.task_routes)
            except ValueError as err:
                raise ValueError(f"task_routes is not JSON: {err}") from None
        if not isinstance(table, dict) or not all(isinstance(v, str) and v for v in table.values()):
            raise ValueError('task_routes must be a JSON object {"role": "model route name"}')
        return {**table, "": self.route_of(self.tasks_route)}

    def more_targets(self) -> list[str]:
        """The further embedding targets, in order."""
        return [t for t in self.more_embedding_targets.split(",") if t]

    def task_dirs(self) -> list[str]:
        """The extra task directories, in order."""
        return [d.strip() for d in self.tasks_dirs.split(",") if d.strip()]

    def route_of(self, feature_route: str) -> str:
        """A feature's route: its own setting, else the default route."""
        return feature_route or self.default_model_route

    @field_validator("redis_url", "jobs_redis_url", "sessions_redis_url")
    @classmethod
    def _redis_scheme(cls, value: str) -> str:
        if value and not value.startswith(("redis://", "rediss://", "unix://")):
            raise ValueError("must start with redis://, rediss:// or unix:// (or be empty for the in-process cache)")
        return value
