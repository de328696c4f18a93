# The project's commands. `make run` and `make test` are the README's two commands; both set up a
# fresh machine first (scripts/setup.sh is idempotent and quick when nothing changed).
.PHONY: setup run demo ops test test-fast test-unit check docs lint protos openapi model bench faults deploy-check \
        deploy-check-quick
PY := .venv/bin/python

setup:
	@bash scripts/setup.sh

run: setup
	@$(PY) scripts/run_mesh.py

# The demo of every feature against a mesh `make run` started (the gateway on :8080).
demo:
	@$(PY) scripts/run_mesh.py --demo-only

# The ops view next to `make run`: Prometheus, Alertmanager and the trace UI (Phoenix, from .venv-ops).
ops: setup
	@$(PY) scripts/run_ops.py

test: setup check docs
	@$(PY) -m pytest tests

# The documentation site (mkdocs.yml, docs/): built strictly (a broken link or a page missing from the
# navigation fails it) into .site/; the API reference pages are generated from the served spec and protos.
docs:
	@NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs build --strict --quiet

# Every test not marked slow (no real LLM, Triton or whole-mesh processes), without the set-up: < 3 min.
test-fast:
	@$(PY) -m pytest tests -m "not slow" -q -p no:cacheprovider

# Unit tests only, without the set-up (it assumes .venv, the model files and redis-server exist): < 60 s.
test-unit:
	@$(PY) -m pytest tests/unit -q -p no:cacheprovider

check:
	@$(PY) -m ruff check services clients gateway infra bench tests scripts
	@$(PY) -m mypy services clients gateway bench infra/triton/launcher.py infra/llm infra/observability scripts
	@.venv/bin/lint-imports --no-cache --no-logo
	@node_modules/.bin/buf lint
	@bash scripts/check_breaking.sh
	@$(PY) scripts/openapi_snapshot.py

protos:
	@$(PY) scripts/gen_protos.py

openapi:
	@$(PY) scripts/openapi_snapshot.py --write

model:
	@$(PY) -m services.embedding.modelbuild

bench: setup
	@$(PY) -m bench.embedding --data ../shared/data

# The fault suite (issue 17): kill/stop each process under load, bad-input corpus, overload, RSS; writes
# bench/results/faults.{md,json}. `--quick` is the tier tests/system/test_fault_suite.py runs.
faults: setup
	@$(PY) -m bench.faults

# The deployment as containers (issue 48): the image built here on a debootstrapped base, the dev overlay's
# manifests played by podman, every probe executed, a search through the containers, faults; writes
# bench/results/deploy.{md,json} and removes what it made (needs root: apt, podman). ~10 min.
deploy-check: setup
	@$(PY) scripts/deploy_check.py

# The quick tier: the image from the layer cache, one start, one search, no faults (~3 min warm). It runs
# beside `make test`, not in it: it needs root, apt and podman, and its first build alone takes longer than
# the 5 minutes the suite may give it.
deploy-check-quick: setup
	@$(PY) scripts/deploy_check.py --quick
