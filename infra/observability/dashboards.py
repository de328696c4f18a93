"""Grafana dashboards of the mesh, built in code with grafana-foundation-sdk.

``python -m infra.observability.dashboards`` writes ``infra/observability/dashboards/*.json``;
``--check`` writes nothing and exits 1 when a committed file differs from what the code builds.

Two boards, both on a ``datasource`` variable (any Prometheus scraping the mesh with
``infra/observability/prometheus.yml``'s job names):

- ``mesh.json``, the operations board of the seeds (실시간 요청 현황, API 응답 시간, API별 성능 현황,
  일일 토큰 사용량, 에러율 추이): request rate, error rate, p50/p95/p99 per route and per RPC, a
  per-API status table, degraded searches, cache hit ratio, tokens, processes up;
- ``mesh-services.json``: inside each service: search degradation and the breaker, the embedding
  queue and batches, LLM TTFT, tokens/s, token usage, failures and cost, OCR fallbacks, CPU and memory.
"""

from __future__ import annotations

import argparse
import difflib
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from grafana_foundation_sdk.builders import common as cb
from grafana_foundation_sdk.builders import dashboard as db
from grafana_foundation_sdk.builders import prometheus, stat, table, timeseries
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import common as cm
from grafana_foundation_sdk.models import dashboard as dm
from grafana_foundation_sdk.models import prometheus as pm
from grafana_foundation_sdk.models import units

DASHBOARD_DIR = Path(__file__).resolve().parent / "dashboards"
TAG = "korean-inference-mesh"
DATASOURCE = dm.DataSourceRef(type_val="prometheus", uid="${datasource}")

# Selectors shared by the queries (the same as alerts.yml's).
MESH_JOBS = 'job=~"gateway|embedding|retrieval|reasoning|ocr"'
API = 'job="gateway", route!~"/metrics|/healthz|/readyz"'
RPC = 'method!~"/grpc[.](health|reflection)[.].*"'
SERVER_ERRORS = 'code=~"UNKNOWN|INTERNAL|UNAVAILABLE|DEADLINE_EXCEEDED|DATA_LOSS|UNIMPLEMENTED"'
RATE = "$__rate_interval"

Query = tuple[str, str]  # (PromQL expression, legend format)


def quantile(q: float, metric: str, selector: str, by: str = "") -> str:
    """histogram_quantile of a histogram's buckets summed by ``by`` (plus ``le``)."""
    labels = f"{by}, le" if by else "le"
    return f"histogram_quantile({q}, sum by ({labels}) (rate({metric}_bucket{{{selector}}}[{RATE}])))"


def ratio(part: str, whole: str, by: str = "") -> str:
    """sum(rate(part)) / sum(rate(whole)), by ``by``; a part with no series yet counts as zero when not split."""
    grouping = f" by ({by})" if by else ""
    numerator = f"sum{grouping} (rate({part}[{RATE}]))"
    if not by:
        numerator = f"({numerator} or vector(0))"
    return f"{numerator} / sum{grouping} (rate({whole}[{RATE}]))"


def _query(expr: str, legend: str, ref: str, *, instant: bool = False) -> prometheus.Dataquery:
    query = prometheus.Dataquery().expr(expr).ref_id(ref).datasource(DATASOURCE)
    if legend:
        query = query.legend_format(legend)
    if instant:
        query = query.instant().format(pm.PromQueryFormat.TABLE)
    return query


def _refs(count: int) -> list[str]:
    return [chr(ord("A") + i) for i in range(count)]


def _steps(*steps: tuple[float | None, str]) -> db.ThresholdsConfig:
    return db.ThresholdsConfig().mode(dm.ThresholdsMode.ABSOLUTE).steps(
        [dm.Threshold(value=value, color=color) for value, color in steps])


def timeseries_panel(title: str, description: str, queries: Sequence[Query], unit: str, *, span: int = 12,
                     height: int = 8, thresholds: db.ThresholdsConfig | None = None,
                     bars: bool = False) -> timeseries.Panel:
    """A time series panel over ``queries``; thresholds, if given, are drawn as dashed lines."""
    panel = (timeseries.Panel().title(title).description(description).datasource(DATASOURCE).unit(unit)
             .span(span).height(height).line_width(1).fill_opacity(10 if not bars else 80)
             .draw_style(cm.GraphDrawStyle.BARS if bars else cm.GraphDrawStyle.LINE)
             .show_points(cm.VisibilityMode.NEVER)
             .legend(cb.VizLegendOptions().display_mode(cm.LegendDisplayMode.TABLE)
                     .placement(cm.LegendPlacement.BOTTOM).show_legend(True).calcs(["mean", "max", "lastNotNull"]))
             .tooltip(cb.VizTooltipOptions().mode(cm.TooltipDisplayMode.MULTI).sort(cm.SortOrder.DESCENDING)))
    if thresholds is not None:
        panel = panel.thresholds(thresholds).thresholds_style(
            cb.GraphThresholdsStyleConfig().mode(cm.GraphTresholdsStyleMode.DASHED))
    for (expr, legend), ref in zip(queries, _refs(len(queries)), strict=True):
        panel = panel.with_target(_query(expr, legend, ref))
    return panel


def stat_panel(title: str, description: str, expr: str, unit: str, thresholds: db.ThresholdsConfig, *,
               span: int = 4, height: int = 5, mappings: list[dm.ValueMapping] | None = None) -> stat.Panel:
    """A single-value panel (last value, sparkline, coloured by ``thresholds``)."""
    panel = (stat.Panel().title(title).description(description).datasource(DATASOURCE).unit(unit)
             .span(span).height(height).thresholds(thresholds)
             .reduce_options(cb.ReduceDataOptions().calcs(["lastNotNull"]).values(False))
             .graph_mode(cm.BigValueGraphMode.AREA).color_mode(cm.BigValueColorMode.VALUE)
             .with_target(_query(expr, "", "A")))
    if mappings:
        panel = panel.mappings(mappings)
    return panel


def status_table(title: str, description: str, key: str, columns: Sequence[tuple[str, str, str]],
                 slow_s: float, critical_s: float, *, span: int = 24, height: int = 9) -> table.Panel:
    """One row per ``key``, one column per (name, instant query, unit), and a Status column from ``p95``."""
    p95 = next(expr for name, expr, _ in columns if name == "p95")
    refs = _refs(len(columns) + 1)
    panel = (table.Panel().title(title).description(description).datasource(DATASOURCE).span(span).height(height)
             .show_header(True).cell_height(cm.TableCellHeight.SM)
             .sort_by([cb.TableSortByFieldState().display_name("RPS").desc(True)]))
    for (name, expr, unit), ref in zip(columns, refs, strict=False):
        panel = panel.with_target(_query(expr, "", ref, instant=True)).override_by_name(
            f"Value #{ref}", [dm.DynamicConfigValue(id_val="displayName", value=name),
                              dm.DynamicConfigValue(id_val="unit", value=unit)])
    status_ref = refs[-1]
    latency = _steps((None, "green"), (slow_s, "orange"), (critical_s, "red"))
    status = [_range(None, slow_s, "OK", "green"), _range(slow_s, critical_s, "Slow", "orange"),
              _range(critical_s, None, "Critical", "red")]
    panel = panel.with_target(_query(p95, "", status_ref, instant=True)).override_by_name(
        f"Value #{status_ref}", [dm.DynamicConfigValue(id_val="displayName", value="Status"),
                                 dm.DynamicConfigValue(id_val="mappings", value=status),
                                 dm.DynamicConfigValue(id_val="thresholds", value=latency.build()),
                                 dm.DynamicConfigValue(id_val="custom.cellOptions",
                                                       value={"type": "color-background", "mode": "basic"})])
    return (panel.with_transformation(dm.DataTransformerConfig(id_val="merge", options={}))
            .with_transformation(dm.DataTransformerConfig(
                id_val="organize", options={"excludeByName": {"Time": True}, "indexByName": {key: 0}})))


def _range(low: float | None, high: float | None, text: str, color: str) -> dm.RangeMap:
    return dm.RangeMap(options=dm.DashboardRangeMapOptions(
        from_val=low, to=high, result=dm.ValueMappingResult(text=text, color=color)))


def _dashboard(title: str, uid: str, description: str) -> db.Dashboard:
    return (db.Dashboard(title).uid(uid).description(description).tags([TAG, "generated"])
            .editable().tooltip(dm.DashboardCursorSync.CROSSHAIR).refresh("30s").time("now-1h", "now")
            .timezone("browser")
            .with_variable(db.DatasourceVariable("datasource").label("Prometheus").type("prometheus"))
            .link(db.DashboardLink("Mesh dashboards").type(dm.DashboardLinkType.DASHBOARDS).tags([TAG])
                  .as_dropdown(True).include_vars(True).keep_time(True)))


def _numbered(board: db.Dashboard) -> dm.Dashboard:
    """The built dashboard with panel ids 1, 2, ... in layout order (stable JSON)."""
    model = board.build()
    for number, panel in enumerate(model.panels or [], start=1):
        panel.id_val = number
    return model


def overview() -> dm.Dashboard:
    """The operations board: requests, latency, errors and status per route and per RPC."""
    count = "mesh_gateway_request_seconds_count"
    seconds = "mesh_gateway_request_seconds"
    rpc_count = "mesh_grpc_server_handled_total"
    rpc_seconds = "mesh_grpc_server_handling_seconds"
    search = 'mesh_gateway_request_seconds_count{job="gateway", route="/v1/search"}'
    latency_lines = _steps((None, "green"), (10, "orange"), (30, "red"))
    board = (
        _dashboard("Korean inference mesh / Operations", "mesh-operations",
                   "The seeds' operations board: REST API and gRPC traffic, latency, errors and status.")
        .with_row(db.Row("Now (실시간 요청 현황)"))
        .with_panel(stat_panel("Request rate", "REST requests per second at the gateway (health and metrics excluded).",
                               f"sum(rate({count}{{{API}}}[{RATE}]))", units.RequestsPerSecond,
                               _steps((None, "blue"))))
        .with_panel(stat_panel("Error rate (5xx)", "Share of gateway requests answered 5xx; the alert fires above 5 %.",
                               ratio(f'{count}{{{API}, status=~"5.."}}', f"{count}{{{API}}}"), units.PercentUnit,
                               _steps((None, "green"), (0.01, "orange"), (0.05, "red"))))
        .with_panel(stat_panel("Degraded searches",
                               "Share of /v1/search answered keyword-only (embedding unavailable).",
                               ratio('mesh_gateway_search_degraded_total{job="gateway"}', search), units.PercentUnit,
                               _steps((None, "green"), (0.001, "orange"), (0.05, "red"))))
        .with_panel(stat_panel("Embedding cache hit ratio", "Query-embedding cache hits / (hits + misses).",
                               ratio('mesh_gateway_embedding_cache_total{job="gateway", event="hit"}',
                                     'mesh_gateway_embedding_cache_total{job="gateway", event=~"hit|miss"}'),
                               units.PercentUnit, _steps((None, "orange"), (0.3, "green"))))
        .with_panel(stat_panel("Tokens, last 24 h (일일 토큰 사용량)",
                               "LLM prompt + completion tokens in the last 24 hours.",
                               'sum(increase(mesh_reasoning_tokens_total{job="reasoning"}[1d])) or vector(0)',
                               units.Short, _steps((None, "blue"))))
        .with_panel(stat_panel("Processes up", "Mesh processes Prometheus can scrape (of 5).",
                               f"sum(up{{{MESH_JOBS}}})", units.Short, _steps((None, "red"), (5, "green"))))
        .with_row(db.Row("REST API latency and errors (API 응답 시간, 에러율 추이)"))
        .with_panel(timeseries_panel(
            "Gateway latency p50 / p95 / p99",
            "All routes together; warning above 10 s (p95), critical above 30 s (p99).",
            [(quantile(0.5, seconds, API), "p50"), (quantile(0.95, seconds, API), "p95"),
             (quantile(0.99, seconds, API), "p99")], units.Seconds, thresholds=latency_lines))
        .with_panel(timeseries_panel(
            "Request rate per route", "Requests per second by route template.",
            [(f"sum by (route) (rate({count}{{{API}}}[{RATE}]))", "{{route}}")], units.RequestsPerSecond))
        .with_panel(timeseries_panel("p50 latency per route", "Median latency by route.",
                                     [(quantile(0.5, seconds, API, "route"), "{{route}}")], units.Seconds, span=8))
        .with_panel(timeseries_panel("p95 latency per route", "Warning above 10 s.",
                                     [(quantile(0.95, seconds, API, "route"), "{{route}}")], units.Seconds, span=8,
                                     thresholds=latency_lines))
        .with_panel(timeseries_panel("p99 latency per route", "Critical above 30 s.",
                                     [(quantile(0.99, seconds, API, "route"), "{{route}}")], units.Seconds, span=8,
                                     thresholds=latency_lines))
        .with_panel(timeseries_panel(
            "Error rate per route (5xx share)", "Share of each route's requests answered 5xx; critical above 5 %.",
            [(ratio(f'{count}{{{API}, status=~"5.."}}', f"{count}{{{API}}}", "route"), "{{route}}")],
            units.PercentUnit, thresholds=_steps((None, "green"), (0.05, "red"))))
        .with_panel(timeseries_panel(
            "Responses by status", "Requests per second by HTTP status (4xx: the caller's; 5xx: the mesh's).",
            [(f"sum by (status) (rate({count}{{{API}}}[{RATE}]))", "{{status}}")], units.RequestsPerSecond))
        .with_row(db.Row("Per-API status (API별 성능 현황)"))
        .with_panel(status_table(
            "REST API status",
            "One row per route over the last 5 minutes; Status from p95: Slow ≥ 10 s, Critical ≥ 30 s.",
            "route",
            [("RPS", f"sum by (route) (rate({count}{{{API}}}[5m]))", units.RequestsPerSecond),
             ("p50", f"histogram_quantile(0.5, sum by (route, le) (rate({seconds}_bucket{{{API}}}[5m])))",
              units.Seconds),
             ("p95", f"histogram_quantile(0.95, sum by (route, le) (rate({seconds}_bucket{{{API}}}[5m])))",
              units.Seconds),
             ("p99", f"histogram_quantile(0.99, sum by (route, le) (rate({seconds}_bucket{{{API}}}[5m])))",
              units.Seconds),
             ("5xx share", f'sum by (route) (rate({count}{{{API}, status=~"5.."}}[5m])) / '
                           f"sum by (route) (rate({count}{{{API}}}[5m]))", units.PercentUnit)],
            slow_s=10, critical_s=30))
        .with_row(db.Row("gRPC services (per RPC)"))
        .with_panel(timeseries_panel(
            "RPC rate", "RPCs handled per second by service and method (health checks and reflection excluded).",
            [(f"sum by (job, method) (rate({rpc_count}{{{RPC}}}[{RATE}]))", "{{job}} {{method}}")],
            units.RequestsPerSecond))
        .with_panel(timeseries_panel(
            "RPC server-error share per service", "UNKNOWN, INTERNAL, UNAVAILABLE, DEADLINE_EXCEEDED, DATA_LOSS, "
            "UNIMPLEMENTED over all RPCs; critical above 5 %.",
            [(ratio(f"{rpc_count}{{{RPC}, {SERVER_ERRORS}}}", f"{rpc_count}{{{RPC}}}", "job"), "{{job}}")],
            units.PercentUnit, thresholds=_steps((None, "green"), (0.05, "red"))))
        .with_panel(timeseries_panel("RPC p50 per method", "Median handling time by method.",
                                     [(quantile(0.5, rpc_seconds, RPC, "job, method"), "{{method}}")], units.Seconds,
                                     span=8))
        .with_panel(timeseries_panel("RPC p95 per method", "95th percentile handling time by method.",
                                     [(quantile(0.95, rpc_seconds, RPC, "job, method"), "{{method}}")], units.Seconds,
                                     span=8))
        .with_panel(timeseries_panel("RPC p99 per method", "99th percentile handling time by method.",
                                     [(quantile(0.99, rpc_seconds, RPC, "job, method"), "{{method}}")], units.Seconds,
                                     span=8))
        .with_panel(timeseries_panel(
            "RPCs by status code (not OK)", "Non-OK codes per second: INVALID_ARGUMENT is the caller's, "
            "RESOURCE_EXHAUSTED is a full queue, the rest are the mesh's.",
            [(f'sum by (job, code) (rate({rpc_count}{{{RPC}, code!="OK"}}[{RATE}]))', "{{job}} {{code}}")],
            units.RequestsPerSecond, span=24))
        .with_panel(status_table(
            "RPC status", "One row per RPC over the last 5 minutes; Status from p95: Slow ≥ 10 s, Critical ≥ 30 s.",
            "method",
            [("RPS", f"sum by (method) (rate({rpc_count}{{{RPC}}}[5m]))", units.RequestsPerSecond),
             ("p50", f"histogram_quantile(0.5, sum by (method, le) (rate({rpc_seconds}_bucket{{{RPC}}}[5m])))",
              units.Seconds),
             ("p95", f"histogram_quantile(0.95, sum by (method, le) (rate({rpc_seconds}_bucket{{{RPC}}}[5m])))",
              units.Seconds),
             ("p99", f"histogram_quantile(0.99, sum by (method, le) (rate({rpc_seconds}_bucket{{{RPC}}}[5m])))",
              units.Seconds),
             ("error share", f"sum by (method) (rate({rpc_count}{{{RPC}, {SERVER_ERRORS}}}[5m])) / "
                             f"sum by (method) (rate({rpc_count}{{{RPC}}}[5m]))", units.PercentUnit)],
            slow_s=10, critical_s=30))
    )
    return _numbered(board)


def services() -> dm.Dashboard:
    """Inside the services: search degradation, embedding batching, the LLM, OCR, CPU and memory."""
    search = 'mesh_gateway_request_seconds_count{job="gateway", route="/v1/search"}'
    degraded = 'mesh_gateway_search_degraded_total{job="gateway"}'
    cache = 'mesh_gateway_embedding_cache_total{job="gateway"'
    emb = 'job="embedding"'
    llm = 'job="reasoning"'
    ocr = 'job="ocr"'
    cpu = f"rate(process_cpu_seconds_total{{{MESH_JOBS}}}[{RATE}])"
    board = (
        _dashboard("Korean inference mesh / Services", "mesh-services",
                   "Inside the services: search degradation, embedding queue and batches, LLM, OCR, resources.")
        .with_row(db.Row("Search and cache"))
        .with_panel(timeseries_panel(
            "Degraded (keyword-only) searches by reason", "Searches answered keyword-only per second; any is alerted.",
            [(f"sum by (reason) (rate({degraded}[{RATE}]))", "{{reason}}")], units.RequestsPerSecond, span=8))
        .with_panel(timeseries_panel(
            "Degraded search share", "Keyword-only searches / all /v1/search requests.",
            [(ratio(degraded, search), "degraded")], units.PercentUnit, span=8))
        .with_panel(stat_panel(
            "Embedding breaker", "The gateway's circuit breaker to the embedding service (open: keyword-only).",
            'max(mesh_gateway_breaker_open{job="gateway", dependency="embedding"})', units.Short,
            _steps((None, "green"), (1, "red")), span=8, height=8,
            mappings=[dm.ValueMap(options={"0": dm.ValueMappingResult(text="closed", color="green"),
                                           "1": dm.ValueMappingResult(text="open", color="red")})]))
        .with_panel(timeseries_panel(
            "Embedding cache hit ratio", "Query-embedding cache hits / (hits + misses), shared by every gateway.",
            [(ratio(f'{cache}, event="hit"}}', f'{cache}, event=~"hit|miss"}}'), "hit ratio")], units.PercentUnit))
        .with_panel(timeseries_panel(
            "Embedding cache events", "Cache lookups per second: hit, miss, error (Redis failing open).",
            [(f"sum by (event) (rate({cache}}}[{RATE}]))", "{{event}}")], units.OpsPerSecond))
        .with_row(db.Row("Embedding"))
        .with_panel(timeseries_panel(
            "Queue depth and capacity", "Texts waiting in the micro-batcher; the alert fires above 80 % of capacity.",
            [(f"sum by (instance) (mesh_embedding_queue_depth{{{emb}}})", "depth {{instance}}"),
             (f"sum by (instance) (mesh_embedding_queue_capacity{{{emb}}})", "capacity {{instance}}")], units.Short))
        .with_panel(timeseries_panel(
            "Batch size", "Texts per inference batch.",
            [(quantile(0.5, "mesh_embedding_batch_size", emb), "p50"),
             (quantile(0.95, "mesh_embedding_batch_size", emb), "p95"),
             (f"sum(rate(mesh_embedding_batch_size_sum{{{emb}}}[{RATE}])) / "
              f"sum(rate(mesh_embedding_batch_size_count{{{emb}}}[{RATE}]))", "mean")], units.Short))
        .with_panel(timeseries_panel(
            "Queue wait", "Time from enqueue to batch start.",
            [(quantile(0.5, "mesh_embedding_queue_wait_seconds", emb), "p50"),
             (quantile(0.95, "mesh_embedding_queue_wait_seconds", emb), "p95")], units.Seconds, span=8))
        .with_panel(timeseries_panel(
            "Inference time per batch", "Engine time per batch.",
            [(quantile(0.5, "mesh_embedding_inference_seconds", emb), "p50"),
             (quantile(0.95, "mesh_embedding_inference_seconds", emb), "p95")], units.Seconds, span=8))
        .with_panel(timeseries_panel(
            "Texts embedded per second", "Throughput of the engine (texts in batches).",
            [(f"sum(rate(mesh_embedding_batch_size_sum{{{emb}}}[{RATE}]))", "texts/s")], units.OpsPerSecond,
            span=8))
        .with_row(db.Row("LLM (reasoning)"))
        .with_panel(timeseries_panel(
            "Time to first token", "TTFT by backend; the seeds' target is 500 ms, the first-token deadline 5 s.",
            [(quantile(0.5, "mesh_reasoning_ttft_seconds", llm, "backend"), "p50 {{backend}}"),
             (quantile(0.95, "mesh_reasoning_ttft_seconds", llm, "backend"), "p95 {{backend}}")], units.Seconds,
            thresholds=_steps((None, "green"), (0.5, "orange"), (5, "red"))))
        .with_panel(timeseries_panel(
            "Tokens per second", "Per call (median of completion tokens / generation time; target > 30) and the "
            "total completion tokens per second.",
            [(quantile(0.5, "mesh_reasoning_tokens_per_second", llm, "backend"), "per call p50 {{backend}}"),
             (f'sum by (backend) (rate(mesh_reasoning_tokens_total{{{llm}, type="completion"}}[{RATE}]))',
              "total {{backend}}")], units.Short, thresholds=_steps((None, "red"), (30, "green"))))
        .with_panel(timeseries_panel(
            "Token usage", "Prompt and completion tokens per interval, by backend.",
            [(f"sum by (backend, type) (increase(mesh_reasoning_tokens_total{{{llm}}}[$__interval]))",
              "{{backend}} {{type}}")], units.Short, span=8, bars=True))
        .with_panel(timeseries_panel(
            "LLM failures in 5 min", "Failed or failed-over calls by kind; the alert fires above 3 in 5 minutes.",
            [(f"sum by (backend, kind) (increase(mesh_reasoning_failures_total{{{llm}}}[5m]))",
              "{{backend}} {{kind}}")], units.Short, span=8, thresholds=_steps((None, "green"), (3, "red"))))
        .with_panel(timeseries_panel(
            "Open LLM streams and cost", "Backend requests open right now, and spend in USD per hour.",
            [(f"sum by (backend) (mesh_reasoning_backend_inflight{{{llm}}})", "open {{backend}}"),
             (f"sum by (backend) (rate(mesh_reasoning_cost_usd_total{{{llm}}}[{RATE}])) * 3600",
              "USD/h {{backend}}")], units.Short, span=8))
        .with_panel(timeseries_panel(
            "Spend per caller", "LLM cost in USD per hour by API key id (the gateway's count of its responses' "
            "usage); the alert fires above 5 USD in an hour.",
            [('sum by (key) (rate(mesh_gateway_llm_cost_usd_total{job="gateway"}[' + RATE + "])) * 3600",
              "USD/h {{key}}")], units.Short, span=8, thresholds=_steps((None, "green"), (5, "red"))))
        .with_panel(timeseries_panel(
            "Tokens per caller and route", "Prompt and completion tokens per interval by key id and route; quota "
            "refusals (429) per interval.",
            [('sum by (key, route) (increase(mesh_gateway_llm_tokens_total{job="gateway", type=~"prompt|completion"}'
              "[$__interval]))", "{{key}} {{route}}"),
             ('sum by (key, period) (increase(mesh_gateway_quota_refused_total{job="gateway"}[$__interval]))'
              " or vector(0)", "refused {{key}} per {{period}}")], units.Short, span=8, bars=True))
        .with_panel(timeseries_panel(
            "Answer cache and escalations", "Semantic answer cache lookups per interval by outcome (hit: served "
            "without the model; refused: a close question code found to ask something else), and outputs of a "
            "cheaper route refused by code and asked of the larger one.",
            [('sum by (event) (increase(mesh_gateway_answer_cache_total{job="gateway"}[$__interval]))',
              "cache {{event}}"),
             ('sum by (feature, reason) (increase(mesh_gateway_escalations_total{job="gateway"}[$__interval]))'
              " or vector(0)", "escalated {{feature}} {{reason}}")], units.Short, span=8, bars=True))
        .with_row(db.Row("OCR"))
        .with_panel(timeseries_panel(
            "Fallback rate", "Pages Tesseract failed on / all pages read.",
            [(ratio(f"mesh_ocr_fallback_total{{{ocr}}}", f"mesh_ocr_pages_total{{{ocr}}}"), "fallback")],
            units.PercentUnit, span=6))
        .with_panel(timeseries_panel(
            "Fallbacks by reason and outcome", "Why Tesseract failed and what followed (VLM read, or not).",
            [(f"sum by (reason, outcome) (rate(mesh_ocr_fallback_total{{{ocr}}}[{RATE}]))",
              "{{reason}} → {{outcome}}")],
            units.OpsPerSecond, span=6))
        .with_panel(timeseries_panel(
            "Pages by engine", "Pages per second by the engine whose text was returned, and those read one way "
            "only because the engines were busy (two readings a page would halve throughput).",
            [(f"sum by (engine) (rate(mesh_ocr_pages_total{{{ocr}}}[{RATE}]))", "{{engine}}"),
             (f"sum(rate(mesh_ocr_busy_one_reading_total{{{ocr}}}[{RATE}]))", "read one way (busy)")],
            units.OpsPerSecond, span=6))
        .with_panel(timeseries_panel(
            "Time per page", "Preprocess + OCR + VLM per page.",
            [(quantile(0.5, "mesh_ocr_page_seconds", ocr), "p50"),
             (quantile(0.95, "mesh_ocr_page_seconds", ocr), "p95")],
            units.Seconds, span=6))
        .with_row(db.Row("Resources"))
        .with_panel(timeseries_panel(
            "CPU (share of limit)", "Process CPU / the cores it may use (one core when it exports no limit); "
            "warning above 80 % for 5 minutes.",
            [(f"({cpu} / on (job, instance) (mesh_process_cpu_limit_cores > 0)) or "
              f"({cpu} unless on (job, instance) (mesh_process_cpu_limit_cores > 0))", "{{job}}")],
            units.PercentUnit, span=8, thresholds=_steps((None, "green"), (0.8, "red"))))
        .with_panel(timeseries_panel(
            "Memory (share of limit)", "Resident memory / the process's limit; critical above 90 %.",
            [(f"process_resident_memory_bytes{{{MESH_JOBS}}} / on (job, instance) "
              "(mesh_process_memory_limit_bytes > 0)", "{{job}}")],
            units.PercentUnit, span=8, thresholds=_steps((None, "green"), (0.9, "red"))))
        .with_panel(timeseries_panel(
            "Resident memory", "Resident set size per process.",
            [(f"process_resident_memory_bytes{{{MESH_JOBS}}}", "{{job}}")], units.BytesIEC, span=8))
    )
    return _numbered(board)


BOARDS = {"mesh.json": overview, "mesh-services.json": services}


def render(model: dm.Dashboard) -> str:
    """The dashboard's JSON as committed (sorted keys, two-space indent, trailing newline)."""
    return JSONEncoder(sort_keys=True, indent=2, ensure_ascii=False).encode(model) + "\n"


def rendered() -> dict[str, str]:
    """File name -> JSON text of every dashboard."""
    return {name: render(build()) for name, build in BOARDS.items()}


def panel_queries(board: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(panel title, query ref id, PromQL expression) of every query of a dashboard's JSON."""
    found = []
    for panel in board.get("panels", []):
        for inner in [panel, *panel.get("panels", [])]:
            for target in inner.get("targets") or []:
                if target.get("expr"):
                    found.append((inner.get("title", ""), target.get("refId", ""), target["expr"]))
    return found


def differences(directory: Path = DASHBOARD_DIR) -> list[str]:
    """Unified diffs (or notes) for every file in ``directory`` that differs from what the code builds."""
    out = []
    expected = rendered()
    for name, text in expected.items():
        path = directory / name
        current = path.read_text(encoding="utf-8") if path.exists() else ""
        if current != text:
            out.append("".join(difflib.unified_diff(current.splitlines(True), text.splitlines(True),
                                                    f"{path} (committed)", f"{path} (generated)", n=1))
                       or f"{path}: missing")
    for path in sorted(directory.glob("*.json")):
        if path.name not in expected:
            out.append(f"{path}: not built by infra/observability/dashboards.py (remove it or add a builder)")
    return out


def write(directory: Path = DASHBOARD_DIR) -> list[Path]:
    """Write every dashboard into ``directory``; returns the paths written."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, text in rendered().items():
        path = directory / name
        path.write_text(text, encoding="utf-8")
        paths.append(path)
    return paths


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: write the dashboards, or with ``--check`` compare them with the committed files."""
    parser = argparse.ArgumentParser(prog="python -m infra.observability.dashboards", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 when a committed file differs")
    parser.add_argument("--out", type=Path, default=DASHBOARD_DIR, help="dashboard folder (default: %(default)s)")
    args = parser.parse_args(argv)
    if args.check:
        diffs = differences(args.out)
        for diff in diffs:
            print(diff, file=sys.stderr)
        if diffs:
            print("dashboards differ from the code: run python -m infra.observability.dashboards", file=sys.stderr)
            return 1
        print(f"{len(BOARDS)} dashboards up to date")
        return 0
    for path in write(args.out):
        board = json.loads(path.read_text(encoding="utf-8"))
        print(f"wrote {path.name}: {len(panel_queries(board))} queries")
    return 0


if __name__ == "__main__":
    sys.exit(main())
