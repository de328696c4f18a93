#!/bin/sh
# Entry point of the mesh image: the first argument names the process, the rest are its flags.
#   embedding | retrieval | reasoning | ocr   python -m services.<name> "$@"
#   gateway                                   python -m gateway "$@"
#   llm                                       llama.cpp's llama-server (the `llm` image target only)
#   triton-repo DEST                          write a Triton model repository for GPU hosts into DEST
#                                             (infra/triton/gpu config + the image's fp32 model.onnx)
#   anything else                             executed as given (e.g. `python -c ...`)
set -eu
cmd="${1:-gateway}"
[ "$#" -gt 0 ] && shift
case "$cmd" in
  embedding|retrieval|reasoning|ocr)
    exec python -m "services.$cmd" "$@" ;;
  gateway)
    exec python -m gateway "$@" ;;
  llm)
    # Same flags as infra/llm/server.py: one slot (concurrent requests queue), DRY sampling, no web UI.
    exec /opt/llm/bin/llama-server --model "/opt/llm-models/${LLM_MODEL}.gguf" --alias "${LLM_MODEL}" \
      --host 0.0.0.0 --port "${LLM_PORT}" --ctx-size "${LLM_CTX}" --threads "${LLM_THREADS}" \
      --threads-batch "${LLM_THREADS}" --parallel 1 --no-ui --dry-multiplier "${LLM_DRY_MULTIPLIER}" "$@" ;;
  triton-repo)
    dest="${1:?usage: triton-repo DEST}"
    mkdir -p "$dest/e5_small/1"
    cp /app/infra/triton/gpu/e5_small/config.pbtxt "$dest/e5_small/config.pbtxt"
    cp -L "${MESH_MODEL_CACHE:-/opt/models}/current/model.onnx" "$dest/e5_small/1/model.onnx"
    echo "triton model repository written to $dest" ;;
  *)
    exec "$cmd" "$@" ;;
esac
