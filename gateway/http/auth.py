"""API keys at the gateway: ``X-API-Key`` or the stock ``Authorization: Bearer`` header, and each key's scopes.

Keys come from the environment (``MESH_GATEWAY_API_KEYS``, comma-separated) or a file
(``--api-keys-file``: one key per line, or YAML/JSON with scopes per key, gateway/access/keys.py),
never from a command-line flag (readable in ``/proc/<pid>/cmdline``). The middleware sets who the
request acts for (gateway/access/context.py) and refuses a route the key's groups do not include
(gateway/access/routes.py).
"""

from __future__ import annotations

from typing import Any

from gateway.access.context import acting_as, require_read, require_write
from gateway.access.keys import ALL_ACCESS, ANONYMOUS, NOBODY, ApiKeys, key_id
from gateway.access.routes import ROUTES
from gateway.http.errors import ApiError, error_response
from gateway.http.telemetry import _flat, route_template

__all__ = ["ANONYMOUS", "ApiKeys", "RequireApiKey", "key_id"]


def _path_name(routes: list[Any], scope: dict, template: str) -> str:
    """The ``{name}`` path parameter of the route of ``template`` that ``scope`` matches ('' when none)."""
    from starlette.routing import Match

    for route in _flat(routes):
        if getattr(route, "path", None) != template:
            continue
        match, child = route.matches(scope)
        if match == Match.FULL:
            return str(child.get("path_params", {}).get("name", ""))
    return ""


class RequireApiKey:
    """ASGI middleware: 401 with the standard error body unless the request carries an accepted key.

    ``/v1/`` routes always need a key when keys are configured; the operator paths (``/readyz``,
    ``/metrics``, ``/docs``, ``/openapi.json``) need one too with ``protect_ops``. ``/healthz`` never does
    (a liveness probe carries no secret). A key whose groups do not include the route's is a 403; a
    ``/v1/`` route with no access decision is a 403 for every key.
    """

    OPS = ("/readyz", "/metrics", "/docs", "/openapi.json")

    def __init__(self, app: Any, keys: ApiKeys, protect_ops: bool = False, routes: list[Any] | None = None) -> None:
        self.app = app
        self.keys = keys
        self.protect_ops = protect_ops
        self.routes = routes or []

    def _guarded(self, path: str) -> bool:
        return path.startswith("/v1/") or (self.protect_ops and path.startswith(self.OPS))

    async def __call__(self, scope, receive, send):  # noqa: D102
        if scope["type"] != "http":  # the lifespan (building the mesh, warming routes) is the gateway's own work
            return await self.app(scope, receive, send)
        if not self.keys.enabled or not self._guarded(scope.get("path", "")):
            with acting_as(ALL_ACCESS if not self.keys.enabled else NOBODY):
                return await self.app(scope, receive, send)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers") or []}
        principal = self.keys.identify(headers)
        if principal is None:
            refused = ApiError(401, "unauthenticated", "missing or wrong API key (X-API-Key or Authorization: Bearer)")
            return await error_response(refused)(scope, receive, send)
        if scope.get("path", "").startswith("/v1/"):
            template = route_template(self.routes, scope)
            access = ROUTES.get((scope.get("method", ""), template))
            if template != "unmatched" and (access is None or
                                            (access.group != "any" and not principal.may_call(access.group))):
                why = (f"this key's groups do not include {access.group!r}" if access is not None
                       else "this route has no access decision")
                return await error_response(ApiError(403, "permission_denied", why))(scope, receive, send)
            if access is not None and access.owns.startswith("collection:") and "{name}" in template:
                name = _path_name(self.routes, scope, template)  # checked before the body is read or validated
                with acting_as(principal):
                    try:
                        (require_write if access.owns == "collection:write" else require_read)(name)
                    except ApiError as refused:
                        return await error_response(refused)(scope, receive, send)
        scope.setdefault("state", {})["key_id"] = principal.id  # request.state.key_id: usage and quotas name it
        with acting_as(principal):
            return await self.app(scope, receive, send)
