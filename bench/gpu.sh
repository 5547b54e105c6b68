#!/usr/bin/env bash
# GPT-2 124M on one GPU: training tokens/s + MFU (bf16, compile, flash SDPA, fused AdamW,
# block 1024) and generation tokens/s. `bench/gpu.sh --dry-run` checks it on a CPU.
# PYTHON picks the interpreter (default: the first of .venv/bin/python, python3 whose torch
# imports, and, unless --dry-run, sees a GPU).
set -euo pipefail
cd "$(dirname "$0")/.."
want_cuda=1
for arg in "$@"; do [ "$arg" = "--dry-run" ] && want_cuda=0; done
if [ -z "${PYTHON:-}" ]; then
  for candidate in .venv/bin/python python3 python; do
    command -v "$candidate" >/dev/null 2>&1 || continue
    if [ "$want_cuda" = 1 ]; then
      check='import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)'
    else
      check='import torch'
    fi
    if "$candidate" -c "$check" >/dev/null 2>&1; then PYTHON=$candidate; break; fi
  done
fi
if [ -z "${PYTHON:-}" ]; then
  need="torch"; [ "$want_cuda" = 1 ] && need="torch and a CUDA device"
  echo "bench/gpu.sh: error: no python with $need found; set PYTHON" >&2
  exit 2
fi
export PYTHONPATH="$PWD/src:$PWD${PYTHONPATH:+:$PYTHONPATH}"
exec "$PYTHON" -m bench.gpu "$@"
