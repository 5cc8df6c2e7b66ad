#!/usr/bin/env python3
"""Prefill and generation speed, sluice vs llama.cpp, on the same GGUF, threads and KV type, in
one run with the two sides alternating (the side that goes first swaps every round), so machine
noise hits both. Sluice runs as `<build>/sluice bench --json -r 1 …` (a fresh process per round);
llama.cpp runs in this process through tools/llamacpp_oracle.py (the library of the PyPI wheel
xllamacpp), model loaded once, a fresh context per round. Both sides do the same work: one
untimed warm-up, then a prefill of P pseudo-random ids in one call (pp), then, after clearing
the cache and a 1-token prefix, N single-token calls (tg). The ids are the same on both sides
(splitmix64 from --seed, as src/cli/bench_command.cpp draws them). Only the decode/eval calls
are timed; model loading and context creation are not. Reported: the median of the rounds.

llama.cpp's CPU backend here is built with OpenMP, whose threads spin between the many barriers
of a graph. On a machine whose cores are busy with other work that spinning costs whole
scheduler slices (generation can drop 10-50x); --omp-passive sets OMP_WAIT_POLICY=passive
before the library loads so its threads sleep instead, as sluice's pool does (a futex wait).

    .venv/bin/python bench/compare_llamacpp.py [--sluice build/sluice] [-p 512] [-n 128]
        [--threads 2] [--rounds 5] [--no-repack] [--omp-passive] [MODEL.gguf …]
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import pathlib
import shlex
import statistics
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import llamacpp_oracle as oracle  # noqa: E402

sys.path.insert(0, str(ROOT / "bench"))
from bench_common import machine, run_sluice_bench, sluice_bench_command, token_ids  # noqa: E402

DEFAULT_MODELS = [ROOT / ".cache/models/SmolLM2-135M-Instruct.Q4_1.gguf",
                  ROOT / ".cache/models/gemma-3-270m-q4_k_m.gguf"]
class LlamaSide:
    """One model in llama.cpp with the contexts and batches the benchmark needs."""

    def __init__(self, llama: oracle.Llama, path: pathlib.Path, repack: bool):
        self.llama, self.lib = llama, llama.lib
        lib, c = self.lib, ctypes
        lib.llama_get_memory.restype, lib.llama_get_memory.argtypes = c.c_void_p, [c.c_void_p]
        lib.llama_memory_clear.restype = None
        lib.llama_memory_clear.argtypes = [c.c_void_p, c.c_bool]
        lib.llama_synchronize.restype, lib.llama_synchronize.argtypes = None, [c.c_void_p]
        params = lib.llama_model_default_params()
        params.n_gpu_layers = 0
        # llama.cpp's default is to repack Q4_0/Q4_K/IQ4_NL weights into its interleaved CPU
        # layouts (the "extra buffer types"); the oracle turns that off, this benchmark keeps
        # llama.cpp's default unless --no-repack.
        params.use_extra_bufts = repack
        self.handle = lib.llama_model_load_from_file(str(path).encode(), params)
        if not self.handle:
            raise RuntimeError(f"llama.cpp could not load {path}")
        self.n_vocab = lib.llama_vocab_n_tokens(lib.llama_model_get_vocab(self.handle))
        buffer = ctypes.create_string_buffer(256)
        lib.llama_model_desc(self.handle, buffer, 256)
        self.desc = buffer.value.decode()

    def context(self, n_ctx: int, n_batch: int, threads: int):
        params = self.lib.llama_context_default_params()
        params.n_ctx = n_ctx
        params.n_batch = params.n_ubatch = max(n_batch, 1)  # the prompt is one ubatch
        params.n_threads = params.n_threads_batch = threads
        params.type_k = params.type_v = oracle.GGML_TYPE_F16
        params.flash_attn_type = oracle.FLASH_ATTN_AUTO
        handle = self.lib.llama_init_from_model(self.handle, params)
        if not handle:
            raise RuntimeError("llama_init_from_model failed")
        return handle

    def batch(self, ids: list[int], start: int):
        """A batch of ids at positions start…, logits for the last one only."""
        b = self.lib.llama_batch_init(len(ids), 0, 1)
        for i, token in enumerate(ids):
            b.token[i], b.pos[i], b.n_seq_id[i] = token, start + i, 1
            b.seq_id[i][0] = 0
            b.logits[i] = 1 if i == len(ids) - 1 else 0
        b.n_tokens = len(ids)
        return b

    def decode(self, ctx, batch) -> float:
        start = time.perf_counter()
        status = self.lib.llama_decode(ctx, batch)
        self.lib.llama_get_logits_ith(ctx, -1)  # synchronizes, as reading the logits must
        seconds = time.perf_counter() - start
        if status != 0:
            raise RuntimeError(f"llama_decode returned {status}")
        return seconds

    def clear(self, ctx):
        self.lib.llama_memory_clear(self.lib.llama_get_memory(ctx), True)

    def round(self, prompt, prefix, generated, threads) -> dict:
        p, n = len(prompt), len(generated)
        ctx = self.context(p + n + 8, p, threads)
        pp_batch = self.batch(prompt, 0) if p else None
        prefix_batch = self.batch(prefix, 0)
        steps = [self.batch([t], 1 + i) for i, t in enumerate(generated)]
        try:
            if pp_batch:  # warm-up, as `sluice bench` does by default
                self.decode(ctx, pp_batch)
            self.clear(ctx)
            self.decode(ctx, prefix_batch)
            if steps:
                self.decode(ctx, steps[0])
            result = {}
            if pp_batch:
                self.clear(ctx)
                result["pp"] = p / self.decode(ctx, pp_batch)
            if steps:
                self.clear(ctx)
                self.decode(ctx, prefix_batch)
                result["tg"] = n / sum(self.decode(ctx, step) for step in steps)
            return result
        finally:
            for b in [pp_batch, prefix_batch, *steps]:
                if b is not None:
                    self.lib.llama_batch_free(b)
            self.lib.llama_free(ctx)

    def close(self):
        self.lib.llama_model_free(self.handle)


def sluice_command(args, model) -> list[str]:
    return sluice_bench_command(args.sluice, model, args.p, args.n, args.threads, args.seed)


def sluice_round(args, model) -> dict:
    return run_sluice_bench(sluice_command(args, model))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", type=pathlib.Path, default=DEFAULT_MODELS)
    parser.add_argument("--sluice", type=pathlib.Path, default=ROOT / "build" / "sluice")
    parser.add_argument("-p", type=int, default=512, help="prompt tokens (one prefill call)")
    parser.add_argument("-n", type=int, default=128, help="generated tokens (one call each)")
    parser.add_argument("--threads", "-t", type=int, default=2)
    parser.add_argument("--rounds", "-r", type=int, default=5)
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--no-repack", action="store_true",
                        help="llama.cpp without its repacked CPU weight layouts (extra buffer types)")
    parser.add_argument("--omp-passive", action="store_true",
                        help="OMP_WAIT_POLICY=passive for llama.cpp's OpenMP threads (sleep, not spin)")
    parser.add_argument("--json-out", type=pathlib.Path, help="also write every round as JSON")
    args = parser.parse_args()
    if args.p < 1 or args.n < 1 or args.rounds < 1:
        parser.error("-p, -n and --rounds must be at least 1")

    if args.omp_passive:
        os.environ["OMP_WAIT_POLICY"] = "passive"  # read by libgomp when the library loads
    llama = oracle.Llama()
    print(f"command: {shlex.join([sys.executable, *sys.argv])}")
    print(f"machine: {machine()}")
    print(f"llama.cpp: {llama.version()}; repack {'off' if args.no_repack else 'on (default)'}")
    print(f"llama.cpp system_info: {llama.system_info()}")
    print(f"OMP_WAIT_POLICY: {os.environ.get('OMP_WAIT_POLICY', 'unset (libgomp default: spin, then sleep)')}")
    print(f"pp{args.p} / tg{args.n}, {args.threads} threads both sides, F16 KV, "
          f"flash attention llama.cpp default (auto), {args.rounds} rounds alternating\n")
    report = []
    for model in args.models:
        side = LlamaSide(llama, model, repack=not args.no_repack)
        prompt = token_ids(args.seed, side.n_vocab, args.p)
        prefix = token_ids(args.seed, side.n_vocab, 1, skip=args.p)
        generated = token_ids(args.seed, side.n_vocab, args.n, skip=args.p + 1)
        print(f"{model.name} ({side.desc}); sluice: {shlex.join(sluice_command(args, model))}")
        rounds = {"sluice": [], "llama.cpp": []}
        for r in range(args.rounds):
            order = ["sluice", "llama.cpp"] if r % 2 == 0 else ["llama.cpp", "sluice"]
            for name in order:
                result = (sluice_round(args, model) if name == "sluice"
                          else side.round(prompt, prefix, generated, args.threads))
                rounds[name].append(result)
                print(f"  round {r + 1} {name:9s} pp {result['pp']:9.2f} t/s  tg {result['tg']:8.2f} t/s",
                      flush=True)
        side.close()
        medians = {name: {test: statistics.median(x[test] for x in rs) for test in ("pp", "tg")}
                   for name, rs in rounds.items()}
        for test in ("pp", "tg"):
            s, ll = medians["sluice"][test], medians["llama.cpp"][test]
            label = f"{test}{args.p if test == 'pp' else args.n}"
            print(f"  {label:7s} median: sluice {s:9.2f} t/s, llama.cpp {ll:9.2f} t/s, "
                  f"sluice/llama.cpp {s / ll:.2f}")
        print()
        report.append({"model": str(model), "desc": side.desc, "rounds": rounds, "medians": medians})
    print(f"machine at the end: {machine()}")
    if args.json_out:
        args.json_out.write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
