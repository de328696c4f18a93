"""Every file under bench/results is named by what made it: a bench that still exists, the deployment check,
or a note saying which retired script made it and how to find it in the history."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def test_every_result_names_a_bench_that_exists_or_its_retirement():
    benches = {p.stem for p in (ROOT / "bench").glob("*.py")}
    sources = "\n".join(p.read_text(encoding="utf-8") for p in [*(ROOT / "bench").glob("*.py"),
                                                                 ROOT / "scripts" / "deploy_check.py"])
    orphans = []
    for result in sorted((ROOT / "bench" / "results").glob("*.md")):
        text = result.read_text(encoding="utf-8")
        made_by = re.search(r"python -m bench\.(\w+)", text)
        if "retired from `bench/`" in text or (made_by and made_by.group(1) in benches) or result.stem in sources:
            continue
        orphans.append(result.name)
    assert not orphans, f"results no bench or note names: {orphans}"


def test_bench_stays_a_minority_of_the_code():
    def lines(paths):
        return sum(len(p.read_text(encoding="utf-8").splitlines()) for p in paths)

    code = [p for top in ("services", "gateway", "clients", "infra", "scripts", "bench")
            for p in (ROOT / top).rglob("*.py")]
    bench = [p for p in code if p.parts[len(ROOT.parts)] == "bench"]
    # Issue 60's target is 20 %; 28.7 % after retiring the finished experiments (the rest guard targets the
    # docs cite). This keeps it from growing back while the remaining benches are merged.
    assert lines(bench) / lines(code) <= 0.30
