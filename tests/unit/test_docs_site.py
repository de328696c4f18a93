"""The documentation site: every route the gateway serves is described on a hand-written page.

The HTTP reference is generated from the served spec (docs/hooks.py), so it lists every route by
construction; this checks the feature and operations pages, where a person learns what a route is for.
`make docs` builds the site with strict link checking.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_served_route_is_described_on_a_page():
    spec = json.loads((ROOT / "gateway" / "openapi.json").read_text(encoding="utf-8"))
    pages = "\n".join(p.read_text(encoding="utf-8") for p in (ROOT / "docs").rglob("*.md"))
    missing = []
    for path in spec["paths"]:
        pattern = re.escape(path).replace(r"\{", "{").replace(r"\}", "}")
        pattern = re.sub(r"\{[^}]+\}", r"[^/\\s\"'`]+", pattern) + r"(?![\w/:])"
        if not re.search(pattern, pages):
            missing.append(path)
    assert not missing, f"routes no docs page describes: {missing}"


def test_the_site_navigation_names_only_pages_that_exist_or_are_generated():
    import yaml

    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8").replace("!!python", "#"))
    generated = {"reference/http.md", "reference/grpc.md", "deployment/kubernetes.md", "deployment/capacity.md"}

    def leaves(node):
        if isinstance(node, str):
            yield node
        elif isinstance(node, list):
            for item in node:
                yield from leaves(item)
        elif isinstance(node, dict):
            for value in node.values():
                yield from leaves(value)

    for page in leaves(config["nav"]):
        assert page in generated or (ROOT / "docs" / page).is_file(), page


def test_the_readme_starts_with_the_two_commands_and_stays_short():
    """The README is the front door: two set-up commands first, at most 200 lines; the rest is on the site."""
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert lines[:4] == ["```bash", lines[1], lines[2], "```"], lines[:4]
    assert lines[1].startswith("make run ") and lines[2].startswith("make test "), lines[:4]
    assert len(lines) <= 200, f"README.md has {len(lines)} lines; move detail to a docs/ page and link it"
    for link in re.findall(r"\]\((docs/[^)#]+)", "\n".join(lines)):
        assert (ROOT / link).is_file(), f"README links a missing page: {link}"
