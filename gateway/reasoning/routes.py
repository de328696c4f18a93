"""Model routes: a name (``fast``, ``quality``, a model id) -> a pool of reasoning instances and a backend model.

Requests name a route in ``model`` (OpenAI's field); the mesh's own features each take the route their
setting names, so one setting moves a feature to another model. Routes share the clients of the
instances they have in common; each has its own session ring.
"""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client import Counter

from clients.reasoning import AsyncReasoningClient
from gateway.access.context import caller
from gateway.config import GatewaySettings
from gateway.http.errors import ApiError
from gateway.reasoning.pool import ReasoningPool

ESCALATIONS = Counter("mesh_gateway_escalations", "outputs of a cheaper route refused by code and asked again of "
                      "the route it escalates to", ["feature", "reason"])
for _feature in ("answers", "tasks"):
    for _reason in ("unsupported", "invalid_output"):
        ESCALATIONS.labels(_feature, _reason)


@dataclass(frozen=True)
class ModelRoute:
    """One route: its name, its instances, and the backend model it asks for ('' = the instances' own)."""

    name: str
    pool: ReasoningPool
    model: str
    escalate: str = ""  # the route asked once when code refuses this one's output ('' none)


class ModelRoutes:
    """Every configured route, by name."""

    def __init__(self, clients: dict[str, AsyncReasoningClient], settings: GatewaySettings) -> None:
        self.default = settings.default_model_route
        self.routes = {name: ModelRoute(name, ReasoningPool({t: clients[t] for t in spec.targets}, settings, name,
                                                             spec.model), spec.model, spec.escalate)
                       for name, spec in settings.route_specs().items()}

    def names(self) -> list[str]:
        """Route names the caller may use, the default first."""
        me = caller()
        return [n for n in [self.default, *sorted(n for n in self.routes if n != self.default)] if me.may_use(n)]

    def get(self, name: str | None) -> ModelRoute:
        """The route ``name`` (None or empty: the default); 404 ``model_not_found`` for an unknown one."""
        route = self.routes.get(name or self.default)
        if route is None or not caller().may_use(route.name):  # a route the key may not use: as if unknown
            raise ApiError(404, "model_not_found", f"model {name!r} is not a model route; GET /v1/models lists them")
        return route

    def escalation(self, route: ModelRoute) -> ModelRoute | None:
        """The route asked once when code refuses ``route``'s output (None: it names none)."""
        up = self.routes.get(route.escalate) if route.escalate else None
        return up if up is not None and caller().may_use(up.name) else None
