#!/usr/bin/env bash
# A/B of two sluice builds on the same models, alternating (the side that goes first swaps every
# round, so drift hits both): `sluice bench --backend cuda -p 512 -n 128 -r 2`, one line per run.
#   tools/device_ab.sh ROUNDS OLD_SLUICE NEW_SLUICE MODEL.gguf...
# Both binaries must find their libraries (LD_LIBRARY_PATH). Meant for the GPU machine.
set -uo pipefail
rounds=${1:?usage: tools/device_ab.sh ROUNDS OLD NEW MODEL...}
old=${2:?old sluice}
new=${3:?new sluice}
shift 3
for r in $(seq "$rounds"); do
  for model in "$@"; do
    order="old new"
    [ $((r % 2)) = 0 ] && order="new old"
    for side in $order; do
      bin=$new
      [ "$side" = old ] && bin=$old
      figures=$("$bin" bench -m "$model" --backend cuda -p 512 -n 128 -r 2 2>&1 |
        awk '/^(pp|tg)[0-9]/{printf "%s=%s ", $1, $2}')
      echo "round $r $(basename "$model") $side: $figures"
    done
  done
done
