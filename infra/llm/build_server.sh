#!/usr/bin/env bash
# Builds llama.cpp's own server (llama-server, C++) for this CPU and prints the folder that holds it.
#
# The sources are the llama.cpp vendored in the pinned llama-cpp-python sdist (infra/llm/requirements.txt
# pins the version the Docker image also uses), so there is one pin. The flags come from
# infra/llm/cmake_args.sh (CMAKE_ARGS overrides). The result is cached per version and flags under
# ~/.cache/korean-mesh/llama-server/ and built once (~5 min on two cores); later calls print it at once.
# PYTHON names the interpreter that downloads the sources (default .venv/bin/python; the Docker image's
# llm-build stage passes its own).
# Why not llama-cpp-python's own server: in a one-off comparison on a 2-core Xeon it wrote reasons 1.6x slower than llama-server
# on the same model and flags (rebuilding it with the same AVX-512 flags gave no gain), see README "Reasoning".
set -euo pipefail
cd "$(dirname "$0")/../.."
PIN=$(grep -m1 '^llama-cpp-python' infra/llm/requirements.txt | sed 's/\[server\]//')
VERSION=${PIN#*==}
ARGS="${CMAKE_ARGS:-$(infra/llm/cmake_args.sh)}"
OUT="${XDG_CACHE_HOME:-$HOME/.cache}/korean-mesh/llama-server/$VERSION-$(echo "$ARGS" | sha256sum | cut -c1-12)"
if [[ -x "$OUT/bin/llama-server" ]]; then echo "$OUT"; exit 0; fi
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
echo "[llm] building llama-server $VERSION for this CPU ($ARGS), ~5 min" >&2
"${PYTHON:-.venv/bin/python}" -m pip download -q --no-deps --no-binary :all: -d "$WORK" "$PIN" >&2
tar -xzf "$WORK"/llama_cpp_python-*.tar.gz -C "$WORK"
SRC=$(echo "$WORK"/llama_cpp_python-*/vendor/llama.cpp)
# shellcheck disable=SC2086  # ARGS is a list of flags
cmake -S "$SRC" -B "$WORK/build" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF -DLLAMA_CURL=OFF \
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF $ARGS >"$WORK/cmake.log" 2>&1 \
  || { tail -20 "$WORK/cmake.log" >&2; exit 1; }
cmake --build "$WORK/build" -j"$(nproc)" --target llama-server >>"$WORK/cmake.log" 2>&1 \
  || { tail -20 "$WORK/cmake.log" >&2; exit 1; }
mkdir -p "$OUT.partial/bin"
cp "$WORK/build/bin/llama-server" "$OUT.partial/bin/"
"$OUT.partial/bin/llama-server" --version >/dev/null 2>&1 || { echo "[llm] the built llama-server does not start" >&2; exit 1; }
rm -rf "$OUT" && mv "$OUT.partial" "$OUT"
echo "$OUT"
