#!/usr/bin/env python3
"""Seeded generator of MoE routing traces with the locality trained models show.

Random-weight synthetic models route almost uniformly, so a cache fed by their router learns
nothing about real locality. This writes traces — per token, per MoE layer, the chosen expert ids
in selection order — whose statistics follow what was measured on real models, for
`sluice_trace_replay` (bench/) to drive the real ExpertCache with:

  * next-token repeat: each of a token's n_used experts is, with probability `repeat`, one of the
    previous token's experts in that layer (0.45 measured on Qwen3-30B-A3B); the others are
    drawn fresh, never from the previous set, so the realised repeat fraction is `repeat`;
  * skewed per-layer popularity: fresh draws follow a Zipf law (exponent `zipf`) over a random
    permutation of the experts, a different one per layer;
  * co-activation clusters: each layer's experts are split into random groups of `cluster`
    experts; after the first fresh draw of a token, each further fresh draw comes with
    probability `affinity` from the group of an expert already chosen (by popularity within it).

The model's shape (popularity order, clusters) comes from `--model-seed`; one decode's sampling
from `--seed`: two seeds with one model seed are two decodes of one model (a profile saved on one
and used on the other is the honest way to test profile-driven policies).

File format (text): line 1 a JSON header {"format": "sluice routing trace", "version": 1,
"n_layer", "n_expert", "n_used", "tokens", "params"}; then one line per token of
n_layer * n_used integers, layer after layer, each layer's ids in selection order.

  python tools/routing_trace.py --preset qwen3-30b-a3b --tokens 256 --seed 1 -o trace.txt
  python tools/routing_trace.py --stats trace.txt        # realised statistics of a trace
"""
from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np

FORMAT = "sluice routing trace"

# Presets: the shape of the real model and the locality measured or reported on it.
# qwen3-30b-a3b: 48 layers, 128 experts, 8 used; 45% next-token repeat (measured).
# deepseek-v4-flash: 43 layers, 256 experts, 6 used; a 512-token decode touches 240-248 of 256
#   experts per layer (reported) — zipf 0.9 over 512 tokens gives a median of 245; its repeat
#   fraction is not reported, so Qwen's 0.45 is assumed.
PRESETS = {
    "qwen3-30b-a3b": dict(n_layer=48, n_expert=128, n_used=8, tokens=512, repeat=0.45, zipf=0.9,
                          cluster=8, affinity=0.5),
    "deepseek-v4-flash": dict(n_layer=43, n_expert=256, n_used=6, tokens=512, repeat=0.45,
                              zipf=0.9, cluster=8, affinity=0.5),
}
PARAMS = ("n_layer", "n_expert", "n_used", "tokens", "repeat", "zipf", "cluster", "affinity")


class ModelShape:
    """Per layer: popularity of each expert (Zipf over a permutation) and its cluster."""

    def __init__(self, n_layer: int, n_expert: int, zipf: float, cluster: int, model_seed: int):
        rng = np.random.default_rng(model_seed)
        ranks = np.arange(1, n_expert + 1, dtype=np.float64)
        weights = ranks ** -zipf
        self.popularity = []  # [n_layer][n_expert], sums to 1
        self.cluster_of = []  # [n_layer][n_expert] -> group index
        self.members = []  # [n_layer][group] -> expert ids
        for _ in range(n_layer):
            p = np.empty(n_expert)
            p[rng.permutation(n_expert)] = weights
            self.popularity.append(p / p.sum())
            shuffled = rng.permutation(n_expert)
            groups = [shuffled[i:i + cluster] for i in range(0, n_expert, max(cluster, 1))]
            of = np.empty(n_expert, dtype=np.int64)
            for g, ids in enumerate(groups):
                of[ids] = g
            self.cluster_of.append(of)
            self.members.append(groups)


def draw(rng, p: np.ndarray, allowed: np.ndarray) -> int:
    """One expert by popularity among `allowed` (a boolean mask, not all False)."""
    q = np.where(allowed, p, 0.0)
    total = q.sum()
    if total <= 0:  # only zero-popularity experts left (cannot happen with Zipf weights)
        return int(rng.choice(np.flatnonzero(allowed)))
    return int(rng.choice(len(p), p=q / total))


def generate(n_layer, n_expert, n_used, tokens, repeat, zipf, cluster, affinity, seed, model_seed):
    if not (0 < n_used <= n_expert and n_layer > 0 and tokens > 0):
        raise ValueError("need 0 < n_used <= n_expert, n_layer > 0, tokens > 0")
    if not (0 <= repeat <= 1 and 0 <= affinity <= 1 and zipf >= 0 and cluster >= 1):
        raise ValueError("need repeat and affinity in [0, 1], zipf >= 0, cluster >= 1")
    shape = ModelShape(n_layer, n_expert, zipf, cluster, model_seed)
    rng = np.random.default_rng(seed)
    trace = np.empty((tokens, n_layer, n_used), dtype=np.int32)
    for il in range(n_layer):
        p = shape.popularity[il]
        previous: list[int] = []
        for t in range(tokens):
            kept = [e for e in previous if rng.random() < repeat]
            rng.shuffle(kept)
            chosen = list(kept)
            allowed = np.ones(n_expert, dtype=bool)
            allowed[previous] = False  # fresh draws are not repeats
            allowed[chosen] = False
            fresh = []
            while len(chosen) < n_used:
                if not allowed.any():  # tiny expert counts: fall back to any unchosen expert
                    allowed = np.ones(n_expert, dtype=bool)
                    allowed[chosen] = False
                mask = allowed
                if fresh and rng.random() < affinity:
                    group = shape.members[il][shape.cluster_of[il][fresh[rng.integers(len(fresh))]]]
                    in_group = np.zeros(n_expert, dtype=bool)
                    in_group[group] = True
                    if (allowed & in_group).any():
                        mask = allowed & in_group
                e = draw(rng, p, mask)
                chosen.append(e)
                fresh.append(e)
                allowed[e] = False
            trace[t, il] = chosen
            previous = chosen
    return trace, shape


def realised_stats(trace: np.ndarray, shape: ModelShape | None = None) -> dict:
    tokens, n_layer, n_used = trace.shape
    repeats = []
    coverage = []
    top_share = []
    n_expert = int(trace.max()) + 1 if shape is None else len(shape.popularity[0])
    for il in range(n_layer):
        layer = trace[:, il, :]
        for t in range(1, tokens):
            repeats.append(len(set(layer[t]) & set(layer[t - 1])) / n_used)
        counts = np.bincount(layer.ravel(), minlength=n_expert)
        coverage.append(int((counts > 0).sum()))
        top = max(1, n_expert // 10)
        top_share.append(float(np.sort(counts)[::-1][:top].sum() / counts.sum()))
    stats = {
        "repeat_fraction": float(np.mean(repeats)) if repeats else 0.0,
        "coverage_min": min(coverage),
        "coverage_median": float(np.median(coverage)),
        "coverage_max": max(coverage),
        "top10pct_share": float(np.mean(top_share)),
    }
    if shape is not None:  # how often two experts of one token share a cluster
        same = total = 0
        for il in range(n_layer):
            of = shape.cluster_of[il]
            for t in range(tokens):
                g = of[trace[t, il]]
                same += int((g[:, None] == g[None, :]).sum()) - n_used
                total += n_used * (n_used - 1)
        stats["same_cluster_pairs"] = same / total if total else 0.0
    return stats


def write_trace(path: str, trace: np.ndarray, params: dict) -> None:
    tokens, n_layer, n_used = trace.shape
    header = {"format": FORMAT, "version": 1, "n_layer": n_layer, "n_expert": params["n_expert"],
              "n_used": n_used, "tokens": tokens, "params": params}
    temporary = path + ".tmp"
    with open(temporary, "w") as out:
        out.write(json.dumps(header) + "\n")
        for t in range(tokens):
            out.write(" ".join(map(str, trace[t].ravel().tolist())) + "\n")
    os.replace(temporary, path)


def read_trace(path: str) -> tuple[dict, np.ndarray]:
    with open(path) as f:
        header = json.loads(f.readline())
        if header.get("format") != FORMAT:
            raise ValueError(f"{path}: not a routing trace")
        rows = [list(map(int, line.split())) for line in f if line.strip()]
    trace = np.array(rows, dtype=np.int32).reshape(len(rows), header["n_layer"], header["n_used"])
    return header, trace


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--preset", choices=sorted(PRESETS))
    for name in PARAMS:
        ap.add_argument("--" + name.replace("_", "-"), dest=name,
                        type=float if name in ("repeat", "zipf", "affinity") else int)
    ap.add_argument("--seed", type=int, default=1, help="the decode's sampling")
    ap.add_argument("--model-seed", type=int, default=0, help="popularity order and clusters")
    ap.add_argument("-o", "--out", help="trace file to write")
    ap.add_argument("--stats", metavar="TRACE", help="print the realised statistics of a trace")
    args = ap.parse_args()
    if args.stats:
        try:
            header, trace = read_trace(args.stats)
        except (OSError, ValueError, KeyError) as e:
            print(f"error: {e}", file=sys.stderr)
            return 1
        print(json.dumps({"params": header.get("params"), "realised": realised_stats(trace)}))
        return 0
    params = dict(PRESETS[args.preset]) if args.preset else {}
    for name in PARAMS:
        if getattr(args, name) is not None:
            params[name] = getattr(args, name)
    missing = [n for n in PARAMS if n not in params]
    if missing or not args.out:
        ap.error(f"need --preset or all of {', '.join(PARAMS)}; and -o" if missing else "need -o")
    params.update(seed=args.seed, model_seed=args.model_seed, preset=args.preset)
    try:
        trace, shape = generate(**{k: params[k] for k in PARAMS}, seed=args.seed,
                                model_seed=args.model_seed)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    write_trace(args.out, trace, params)
    print(json.dumps({"params": params, "realised": realised_stats(trace, shape)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
