"""The search a confirmed or current profile implies: hard constraints as filters, the rest as queries."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Fields:
    """The collection's payload fields the profile filters on."""

    price: str = "price"
    category: str = "category"
    attributes: str = "tags"


def search_of(profile: dict[str, Any], fields: Fields, top_k: int = 10) -> dict[str, Any]:
    """The search a profile implies: hard constraints as filters, the rest as the query (and one per category).

    Budget → a price range, must-have attributes → ``must``; excluded categories and forbidden attributes →
    ``must_not``. Recipient, occasion, wanted categories and keywords are soft: the query, plus one
    query per wanted category when there are several (merged across queries).
    """
    must: list[dict[str, Any]] = []
    must_not: list[dict[str, Any]] = []
    if profile["budget_min"] is not None or profile["budget_max"] is not None:
        span = {k: v for k, v in (("gte", profile["budget_min"]), ("lte", profile["budget_max"])) if v is not None}
        must.append({"field": fields.price, **span})
    must += [{"field": fields.attributes, "eq": tag} for tag in profile["must_have"]]
    if profile["excluded_categories"]:
        must_not.append({"field": fields.category, "any_of": list(profile["excluded_categories"])})
    if profile["forbidden"]:
        must_not.append({"field": fields.attributes, "any_of": list(profile["forbidden"])})
    who = " ".join(x for x in (profile["recipient"], profile["occasion"]) if x)
    words = [*profile["categories"], *profile["keywords"], *profile["must_have"]]
    query = " ".join(x for x in (who, "선물", *words) if x)
    out: dict[str, Any] = {"top_k": top_k}
    if len(profile["categories"]) >= 2:
        out["queries"] = [" ".join(x for x in (who, c, "선물", *profile["keywords"]) if x)
                          for c in profile["categories"][:4]]
    else:
        out["query"] = query
    if must or must_not:
        out["filter"] = {"must": must, "must_not": must_not}
    return out
