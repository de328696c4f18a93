#!/usr/bin/env bash
# buf breaking (FILE) against the last commit on main that has protos/, when there is one.
set -euo pipefail
cd "$(dirname "$0")/.."
BASE="${BUF_BREAKING_AGAINST:-}"
if [[ -z "$BASE" ]]; then
  if git rev-parse --verify -q HEAD~1 >/dev/null && git cat-file -e HEAD~1:protos 2>/dev/null; then
    BASE="HEAD~1"
  else
    echo "[buf breaking] no earlier commit with protos/; skipped"; exit 0
  fi
fi
node_modules/.bin/buf breaking --against ".git#ref=${BASE}"
echo "[buf breaking] OK against ${BASE}"
