#!/usr/bin/env bash
# Where a decode step's GPU time goes: Nsight Compute's duration of every kernel of a graphs-off
# `sluice eval` (5 prompt tokens, 8 greedy tokens), summed by kernel name and divided by its 8
# forward passes (the prompt, then 7 one-token steps: the last greedy token is not fed back;
# this divided by 9 before session 12, understating every per-step figure by 1/9) (caches not flushed; ncu locks the clocks to base, so times run ~25% above a
# real run's; NCU_FLAGS="--clock-control none" leaves them at the boost clocks a real run has):
#   tools/ncu_kernels.sh SLUICE MODEL.gguf [NCU]
set -euo pipefail
sluice=${1:?usage: tools/ncu_kernels.sh SLUICE MODEL.gguf [NCU]}
model=${2:?model}
ncu=${3:-/usr/local/cuda/bin/ncu}
csv=$(mktemp)
trap 'rm -f "$csv"' EXIT
# shellcheck disable=SC2086  # NCU_FLAGS: words for ncu
SLUICE_CUDA_GRAPHS=0 "$ncu" --cache-control none ${NCU_FLAGS:-} --metrics gpu__time_duration.sum --csv \
  "$sluice" eval -m "$model" --backend cuda --tokens 1,2,3,4,5 --greedy 8 2>/dev/null |
  grep '^"' > "$csv"
python3 - "$csv" 8 <<'PY'
import collections, csv, sys
steps = float(sys.argv[2])
scale = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3}
by_name = collections.defaultdict(list)
for row in csv.DictReader(open(sys.argv[1])):
    if row.get("Metric Name") != "gpu__time_duration.sum":
        continue
    value = float(row["Metric Value"].replace(",", ""))
    by_name[row["Kernel Name"][:90]].append(value * scale.get(row.get("Metric Unit", ""), 1.0))
total = sum(sum(v) for v in by_name.values())
print(f"launches {sum(len(v) for v in by_name.values())}, kernel time {total:.1f} us, "
      f"per step {total / steps:.1f} us")
for name, times in sorted(by_name.items(), key=lambda kv: -sum(kv[1]))[:25]:
    print(f"{sum(times) / steps:9.1f} us/step {len(times) / steps:7.1f} launches/step "
          f"{sum(times) / len(times):7.2f} us each  {name}")
PY
