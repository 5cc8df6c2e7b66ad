#!/usr/bin/env python3
"""Issue 9: expert-cache policies under realistic routing — the policy x layout x budget matrix.

Drives the real ExpertCache through build/bench/sluice_trace_replay (real slots, io_uring,
O_DIRECT, real files) with traces from tools/routing_trace.py, for two presets:

  qwen3-30b-a3b      on the 48-layer synthetic Qwen3-30B-A3B Q4_K (.cache/synth, + its sidecar);
                     the trace covers its first --qwen-layers layers
  deepseek-v4-flash  on an experts-only GGUF with DeepSeek V4 Flash's routing shape (256 experts,
                     6 used) made here: --ds-layers layers, IQ2_XXS experts of 2048 x 1024
                     (a quarter of the real matrices' elements, to fit the disk), + its sidecar

Per preset: a profile is recorded on one decode (trace seed 2) and every configuration replays
another decode of the same model shape (seed 1) — profile-driven policies never see the trace
they are scored on. Configurations: eviction lru / lru-frequency, pools size / profile,
pre-warm off / on, layout model file / sidecar / sidecar in co-activation order (replayed as the
id-ordered sidecar with ids renamed to their co-activation positions: the same offsets an
ordered sidecar is read at). Budgets are fractions of the trace's expert slots. The page cache
is dropped before each run (O_DIRECT reads bypass it anyway), configurations alternate within
each repetition, and times are medians over --reps runs.

  .venv/bin/python bench/cache_policies.py --build build-hb --reps 3 > results.json
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import routing_trace as rt  # noqa: E402

CONFIGS = [  # (label, replay arguments)
    ("lru", ["--eviction", "lru"]),
    ("lru-frequency", ["--eviction", "lru-frequency"]),
    ("lru-frequency+profile-pools", ["--eviction", "lru-frequency", "--pools", "profile"]),
    ("lru-frequency+prewarm", ["--eviction", "lru-frequency", "--prewarm"]),
    ("lru-frequency+profile-pools+prewarm",
     ["--eviction", "lru-frequency", "--pools", "profile", "--prewarm"]),
    ("lru-frequency, model-file layout", ["--eviction", "lru-frequency", "--layout", "model"]),
    ("lru-frequency, sidecar unmerged", ["--eviction", "lru-frequency", "--no-merge"]),
    ("lru-frequency, co-activation order",
     ["--eviction", "lru-frequency", "--layout", "coactivation"]),
    ("lru-frequency+profile-pools+prewarm, co-activation order",
     ["--eviction", "lru-frequency", "--pools", "profile", "--prewarm", "--layout",
      "coactivation"]),
]


def make_experts_gguf(path: Path, n_layer: int, n_expert: int, n_embd: int, n_ff: int) -> None:
    """An experts-only GGUF (random IQ2_XXS bytes: only reads are timed, nothing is computed)."""
    import gguf

    writer = gguf.GGUFWriter(str(path), "deepseek4")
    writer.add_expert_count(n_expert)
    writer.add_expert_used_count(6)
    qtype = gguf.GGMLQuantizationType.IQ2_XXS
    block, size = gguf.GGML_QUANT_SIZES[qtype]
    rng = np.random.default_rng(0)
    for il in range(n_layer):
        for part, (cols, rows) in (("gate", (n_embd, n_ff)), ("up", (n_embd, n_ff)),
                                   ("down", (n_ff, n_embd))):
            row_bytes = cols // block * size
            data = rng.integers(0, 256, size=(n_expert, rows, row_bytes), dtype=np.uint8)
            # The byte shape [n_expert, rows, row_bytes]; gguf turns it into ne [cols, rows, E].
            writer.add_tensor(f"blk.{il}.ffn_{part}_exps.weight", data, raw_dtype=qtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def drop_page_cache() -> bool:
    try:
        os.sync()
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
        return True
    except OSError:
        return False


def replay(binary: Path, model: Path, trace: Path, budget: float, extra: list[str]) -> dict:
    done = subprocess.run([str(binary), str(model), str(trace), "--budget", str(budget)] + extra,
                          capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        raise SystemExit(f"replay failed: {done.stderr.strip()}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default="build", help="build directory with bench/ binaries")
    ap.add_argument("--replay", help="the sluice_trace_replay binary (default: BUILD/bench/...)")
    ap.add_argument("--work", default=str(ROOT / ".cache" / "cache-policies"))
    ap.add_argument("--qwen-model", default=str(ROOT / ".cache/synth/qwen3-30b-a3b-q4_k.gguf"))
    ap.add_argument("--qwen-layers", type=int, default=16)
    ap.add_argument("--ds-layers", type=int, default=6)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--budgets", default="0.1,0.25,0.5")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--presets", default="qwen3-30b-a3b,deepseek-v4-flash")
    ap.add_argument("--configs", default="", help="semicolon-separated labels (default: all)")
    args = ap.parse_args()

    binary = Path(args.replay) if args.replay else ROOT / args.build / "bench" / "sluice_trace_replay"
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    budgets = [float(b) for b in args.budgets.split(",")]
    configs = [c for c in CONFIGS if not args.configs or c[0] in args.configs.split(";")]
    results = {"dropped_page_cache": drop_page_cache(), "tokens": args.tokens, "rows": [],
               "traces": {}}
    for preset in args.presets.split(","):
        if preset == "qwen3-30b-a3b":
            model, n_layer = Path(args.qwen_model), args.qwen_layers
        else:
            model, n_layer = work / "dsv4-flash-shape-experts.gguf", args.ds_layers
            if not model.exists():
                make_experts_gguf(model, n_layer, 256, 2048, 1024)
            if not Path(str(model) + ".experts").exists():
                subprocess.run([str(binary), str(model), "/dev/null", "--write-sidecar",
                                str(model) + ".experts"], check=False, capture_output=True)
        params = dict(rt.PRESETS[preset], n_layer=n_layer, tokens=args.tokens)
        traces = {}
        for seed in (1, 2):  # 1: scored; 2: the decode the profile is recorded on
            trace, shape = rt.generate(**params, seed=seed, model_seed=0)
            path = work / f"{preset}-seed{seed}.txt"
            rt.write_trace(str(path), trace, dict(params, seed=seed, model_seed=0, preset=preset))
            traces[seed] = path
            results["traces"][f"{preset} seed {seed}"] = dict(
                params=params, realised=rt.realised_stats(trace, shape))
        profile = work / f"{preset}.profile.json"
        replay(binary, model, traces[2], 0.1, ["--save-profile", str(profile)])
        for budget in budgets:
            runs: dict[str, list[dict]] = {label: [] for label, _ in configs}
            for rep in range(args.reps):
                order = configs if rep % 2 == 0 else list(reversed(configs))  # alternate order
                for label, extra in order:
                    drop_page_cache()
                    runs[label].append(replay(binary, model, traces[1], budget,
                                              extra + ["--profile", str(profile)]))
            for label, _ in configs:
                r = runs[label]
                row = dict(r[0], preset=preset, config=label, budget=budget, reps=len(r),
                           ms_per_token_median=statistics.median(x["ms_per_token_mean"]
                                                                 for x in r),
                           ms_per_token_all=[round(x["ms_per_token_mean"], 2) for x in r])
                results["rows"].append(row)
                print(f"{preset:18} {budget:4} {label:58} hit {row['hit_rate']:.3f} "
                      f"MiB/tok {row['bytes_per_token'] / 2**20:7.1f} "
                      f"reads/tok {row['reads_per_token']:6.1f} "
                      f"ms/tok {row['ms_per_token_median']:7.1f} {row['ms_per_token_all']}",
                      file=sys.stderr, flush=True)
    print(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
