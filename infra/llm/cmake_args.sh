#!/usr/bin/env bash
# Prints the CMake flags that build llama.cpp (inside llama-cpp-python) for the CPU this runs on.
#
# The portable build (-DGGML_NATIVE=OFF: SSE4.2, AVX, AVX2, FMA, F16C) leaves AVX-512 and VNNI unused.
# Only instruction sets this CPU reports are enabled, so the binary still runs wherever it was built;
# infra/llm/build_server.sh keys its cache on these flags. AMX is left off: the -DGGML_NATIVE=ON build
# that enabled it crashed on load on a 2-core Xeon.
set -euo pipefail
flags=" $(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | cut -d: -f2) "
has() { [[ "$flags" == *" $1 "* ]]; }
args=(-DGGML_NATIVE=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF)
if has avx512f && has avx512cd && has avx512vl && has avx512dq && has avx512bw; then
  args+=(-DGGML_AVX512=ON)
  has avx512vbmi && args+=(-DGGML_AVX512_VBMI=ON)
  has avx512_vnni && args+=(-DGGML_AVX512_VNNI=ON)
  has avx512_bf16 && args+=(-DGGML_AVX512_BF16=ON)
fi
has avx_vnni && args+=(-DGGML_AVX_VNNI=ON)
echo "${args[*]}"
