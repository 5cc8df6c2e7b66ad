#!/usr/bin/env python3
"""Sluice's CUDA backend against llama.cpp's CUDA build, on the same GGUF files, on the same GPU,
in one run (issue 8, "Performance"). Meant for the GPU machine: python3 and the standard library
only (torch, when present, measures the copy bandwidth of --roofline).

For each round (--rounds, default 3) and each model, both sides run once, the side that goes
first swapping every round so drift hits both:

    sluice bench -m F --backend cuda --json -p 512 -n 128 -r 3
    llama-bench  -m F -p 512 -n 128 -r 3 -ngl 999 -fa 1 -o json

Each command is a fresh process (model load untimed by both tools); from each we take its
median over its repetitions (sluice: pp/tg "median"; llama-bench: the median of samples_ts of
its pp and tg tests, avg_ts when samples are absent), then the median over rounds. Reported per
model: prefill (pp) and decode (tg) tokens/s of both and the ratios sluice / llama.cpp, as a
markdown table on stdout and as JSON to --out (rewritten after every command, so a run cut
short keeps what it measured).

--roofline adds, for each dense model (no *_exps tensor), the memory roofline of decode: the
weight bytes one decode step reads (every tensor but token_embd, plus one row of it; the KV
cache, under 1% at this context, is left out), read from `sluice inspect --json`; times the
decode tokens/s that is the achieved GB/s, set against a device-to-device copy of 1 GiB
(torch, bytes read + written per second; --copy-gbps when torch is absent).

A command that fails (missing binary, non-zero exit, timeout, unreadable output) prints its
stderr tail; its cell says "failed"; the exit status is 1 when anything failed.

    python3 bench/cuda_vs_llamacpp.py --sluice build/sluice --llama-bench llama.cpp/llama-bench \\
        [--env-lib DIR] [--rounds 3] [-p 512] [-n 128] [-r 3] [--roofline] [--copy-gbps G] \\
        [--out results.json] [--dry-run] MODEL.gguf [MODEL.gguf …]
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import pathlib
import shlex
import statistics
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from bench_common import machine, parse_sluice_bench  # noqa: E402

SIDES = ("sluice", "llama.cpp")
TESTS = ("pp", "tg")
STDERR_TAIL = 2000


# ----------------------------------------------------------------------------- commands

def sluice_command(args, model: str) -> list[str]:
    return [args.sluice, "bench", "-m", model, "--backend", "cuda", "--json", "-p", str(args.p),
            "-n", str(args.n), "-r", str(args.r), *args.sluice_arg]


def llama_command(args, model: str) -> list[str]:
    return [args.llama_bench, "-m", model, "-p", str(args.p), "-n", str(args.n), "-r", str(args.r),
            "-ngl", "999", "-fa", "1", "-o", "json", *args.llama_arg]


def inspect_command(args, model: str) -> list[str]:
    return [args.sluice, "inspect", "--json", model]


def environment(env_libs: list[str]) -> dict[str, str]:
    """os.environ with the --env-lib folders in front of LD_LIBRARY_PATH."""
    env = dict(os.environ)
    parts = [*env_libs, *filter(None, env.get("LD_LIBRARY_PATH", "").split(":"))]
    if parts:
        env["LD_LIBRARY_PATH"] = ":".join(parts)
    return env


class CommandFailed(Exception):
    """A command that did not give a result; the message is one line, the tail goes to stderr."""


def run_command(command: list[str], env: dict[str, str], timeout: float, label: str = "") -> str:
    """stdout of `command`; CommandFailed (after printing the stderr tail) otherwise. `label`
    names the command in messages instead of its text."""
    shown = label or shlex.join(command)
    try:
        done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=timeout,
                              errors="replace")
    except FileNotFoundError:
        raise CommandFailed(f"not found: {command[0]}")
    except PermissionError:
        raise CommandFailed(f"not executable: {command[0]}")
    except subprocess.TimeoutExpired as e:
        tail = (e.stderr or b"")[-STDERR_TAIL:]
        tail = tail.decode(errors="replace") if isinstance(tail, bytes) else tail
        print(f"  timed out after {timeout:.0f} s: {shown}\n{tail}", file=sys.stderr, flush=True)
        raise CommandFailed(f"timed out after {timeout:.0f} s")
    if done.returncode != 0:
        print(f"  exit {done.returncode}: {shown}\n{done.stderr[-STDERR_TAIL:]}", file=sys.stderr,
              flush=True)
        raise CommandFailed(f"exit status {done.returncode}")
    return done.stdout


# ----------------------------------------------------------------------------- parsing

def parse_llama_bench(stdout: str) -> dict:
    """{"pp": t/s, "tg": t/s, …} from `llama-bench -o json`: a JSON array with one object per
    test (tools/llama-bench/llama-bench.cpp, json_printer): the prompt test has n_prompt > 0 and
    n_gen == 0, the generation test the reverse; samples_ts holds one tokens/s per repetition,
    avg_ts their mean. Takes the median of samples_ts (as sluice bench reports), else avg_ts."""
    start = stdout.find("[")
    if start < 0:
        raise ValueError("no JSON array in llama-bench's output")
    entries = json.loads(stdout[start:])
    out: dict = {}
    for entry in entries:
        n_prompt, n_gen = int(entry.get("n_prompt", 0)), int(entry.get("n_gen", 0))
        if n_prompt > 0 and n_gen == 0:
            test = "pp"
        elif n_gen > 0 and n_prompt == 0:
            test = "tg"
        else:
            continue  # a -pg test or a depth sweep: not what this script asks for
        samples = [float(s) for s in entry.get("samples_ts") or []]
        out[test] = statistics.median(samples) if samples else float(entry["avg_ts"])
        out[test + "_avg"] = float(entry["avg_ts"])
        out.setdefault("build_commit", entry.get("build_commit"))
        out.setdefault("gpu_info", entry.get("gpu_info"))
        out.setdefault("model_size", entry.get("model_size"))
    missing = [t for t in TESTS if t not in out]
    if missing:
        raise ValueError(f"llama-bench's output has no {' and '.join(missing)} test")
    return out


def parse_sluice(stdout: str) -> dict:
    """{"pp": t/s, "tg": t/s} from `sluice bench --json`: its one JSON line (the last line that
    is a JSON object, should anything else reach stdout) with pp/tg "median"."""
    lines = [line for line in stdout.splitlines() if line.lstrip().startswith("{")]
    if not lines:
        raise ValueError("no JSON object in sluice bench's output")
    return parse_sluice_bench(lines[-1])


def parse_side(side: str, stdout: str) -> dict:
    return parse_sluice(stdout) if side == "sluice" else parse_llama_bench(stdout)


def decode_weight_bytes(inspect: dict) -> dict:
    """The bytes of weights one decode step reads, from `sluice inspect --json`: every tensor but
    token_embd, plus one row of token_embd (shape [n_embd, n_vocab], first dimension fastest).
    Dense models only: a model with routed experts (*_exps) reads only the chosen ones."""
    tensors = inspect["tensors"]
    if any("_exps" in t["name"] for t in tensors):
        raise ValueError("routed experts (*_exps): not every weight is read per token")
    total = embedding_row = 0
    for tensor in tensors:
        if tensor["name"] == "token_embd.weight":
            embedding_row = int(tensor["bytes"]) // int(tensor["shape"][1])
        else:
            total += int(tensor["bytes"])
    return {"weight_bytes_per_token": total + embedding_row, "token_embd_row_bytes": embedding_row}


# ----------------------------------------------------------------------------- summary

def median_or_none(values: list) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def summarize(rounds: dict[str, list[dict | None]]) -> dict:
    """{side: {test: median over the rounds that succeeded}} plus sluice / llama.cpp ratios."""
    med = {side: {test: median_or_none([r[test] if r else None for r in rounds.get(side, [])])
                  for test in TESTS} for side in SIDES}
    ratio = {}
    for test in TESTS:
        a, b = med["sluice"][test], med["llama.cpp"][test]
        ratio[test] = a / b if a is not None and b else None
    ok = {side: sum(1 for r in rounds.get(side, []) if r) for side in SIDES}
    return {"median": med, "ratio": ratio, "rounds_ok": ok}


def roofline(weights: dict | None, tg: float | None, copy_gbps: float | None) -> dict | None:
    if not weights or not tg:
        return None
    achieved = weights["weight_bytes_per_token"] * tg / 1e9
    return {"ms_per_token": 1e3 / tg, "achieved_gbps": achieved,
            "fraction_of_copy": achieved / copy_gbps if copy_gbps else None}


def cell(value, fmt: str, missing: str = "failed") -> str:
    return missing if value is None else format(value, fmt)


def markdown(results: dict) -> str:
    lines = ["| model | pp sluice t/s | pp llama.cpp t/s | pp ratio | tg sluice t/s | "
             "tg llama.cpp t/s | tg ratio | rounds ok (sluice/llama.cpp) |",
             "|---|---:|---:|---:|---:|---:|---:|---|"]
    for model, entry in results["models"].items():
        s = entry.get("summary") or summarize(entry["rounds"])
        med, ratio, ok = s["median"], s["ratio"], s["rounds_ok"]
        lines.append(
            f"| {pathlib.Path(model).name} | {cell(med['sluice']['pp'], '.1f')} | "
            f"{cell(med['llama.cpp']['pp'], '.1f')} | {cell(ratio['pp'], '.2f')} | "
            f"{cell(med['sluice']['tg'], '.1f')} | {cell(med['llama.cpp']['tg'], '.1f')} | "
            f"{cell(ratio['tg'], '.2f')} | {ok['sluice']}/{ok['llama.cpp']} |")
    if any("roofline" in e for e in results["models"].values()):
        copy = results.get("copy_bandwidth", {}).get("gbps")
        lines += ["", f"Decode roofline (device-to-device copy: {cell(copy, '.0f', '?')} GB/s, "
                  f"{results.get('copy_bandwidth', {}).get('source', 'unmeasured')})", "",
                  "| model | weight MB/token | side | ms/token | achieved GB/s | of copy |",
                  "|---|---:|---|---:|---:|---:|"]
        for model, entry in results["models"].items():
            roof = entry.get("roofline")
            if roof is None:
                continue
            if "error" in roof:
                lines.append(f"| {pathlib.Path(model).name} | {roof['error']} | | | | |")
                continue
            for side in SIDES:
                r = roof["sides"].get(side)
                lines.append(
                    f"| {pathlib.Path(model).name} | {roof['weight_bytes_per_token'] / 1e6:.1f} | "
                    f"{side} | {cell(r and r['ms_per_token'], '.3f')} | "
                    f"{cell(r and r['achieved_gbps'], '.1f')} | "
                    f"{cell(r and r['fraction_of_copy'], '.1%', 'n/a' if r else 'failed')} |")
    return "\n".join(lines)


# ----------------------------------------------------------------------------- copy bandwidth

COPY_PROBE = r"""
import json, torch
n = 1 << 30
a = torch.empty(n, dtype=torch.uint8, device="cuda")
b = torch.empty_like(a)
a.fill_(1)
for _ in range(3):
    b.copy_(a)
torch.cuda.synchronize()
start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
reps = 20
start.record()
for _ in range(reps):
    b.copy_(a)
stop.record()
torch.cuda.synchronize()
seconds = start.elapsed_time(stop) / 1e3
print(json.dumps({"gbps": 2 * n * reps / seconds / 1e9, "device": torch.cuda.get_device_name()}))
"""


def copy_bandwidth(args, env: dict[str, str]) -> dict:
    """Device-to-device copy bandwidth, bytes read + written per second, in a separate process
    so its CUDA context is gone before the benchmarks run."""
    try:
        if importlib.util.find_spec("torch") is None:
            raise CommandFailed(f"torch is not installed for {sys.executable}")
        out = run_command([sys.executable, "-c", COPY_PROBE], env, args.timeout,
                          label="the torch copy probe")
        measured = json.loads(out.strip().splitlines()[-1])
        return {"gbps": measured["gbps"], "source": f"torch copy of 1 GiB on {measured['device']}"}
    except (CommandFailed, ValueError, KeyError, IndexError) as e:
        if args.copy_gbps:
            return {"gbps": args.copy_gbps, "source": f"--copy-gbps (torch probe failed: {e})"}
        return {"gbps": None, "source": f"unmeasured (torch probe failed: {e}; give --copy-gbps)"}


def gpu_line(env: dict[str, str]) -> str | None:
    try:
        return run_command(["nvidia-smi", "--query-gpu=name,driver_version,memory.total",
                            "--format=csv,noheader"], env, 60).strip()
    except CommandFailed:
        return None


# ----------------------------------------------------------------------------- main

def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="+", help="GGUF files, benchmarked in this order")
    ap.add_argument("--sluice", default=str(ROOT / "build" / "sluice"), help="the sluice binary")
    ap.add_argument("--llama-bench", default="llama-bench", help="llama.cpp's llama-bench")
    ap.add_argument("--rounds", type=int, default=3, help="alternating rounds (default 3)")
    ap.add_argument("-p", type=int, default=512, help="prompt tokens (default 512)")
    ap.add_argument("-n", type=int, default=128, help="generated tokens (default 128)")
    ap.add_argument("-r", type=int, default=3, help="repetitions inside each command (default 3)")
    ap.add_argument("--env-lib", action="append", default=[], metavar="DIR",
                    help="prepended to LD_LIBRARY_PATH for both sides (repeatable)")
    ap.add_argument("--sluice-arg", action="append", default=[], metavar="ARG",
                    help="an extra argument for sluice bench (repeatable)")
    ap.add_argument("--llama-arg", action="append", default=[], metavar="ARG",
                    help="an extra argument for llama-bench (repeatable)")
    ap.add_argument("--roofline", action="store_true",
                    help="decode GB/s against the device-to-device copy bandwidth (dense models)")
    ap.add_argument("--copy-gbps", type=float, help="copy bandwidth to use when torch is absent")
    ap.add_argument("--timeout", type=float, default=300, help="seconds per command (default 300)")
    ap.add_argument("--out", help="write the results as JSON here")
    ap.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")
    args = ap.parse_args(argv)
    if args.rounds < 1 or args.p < 1 or args.n < 1 or args.r < 1:
        ap.error("--rounds, -p, -n and -r must be at least 1")
    return args


def round_order(round_index: int) -> tuple[str, str]:
    return SIDES if round_index % 2 == 0 else SIDES[::-1]


def planned_commands(args) -> list[tuple[int, str, str, list[str]]]:
    """(round, model, side, command) in the order they run."""
    plan = []
    for r in range(args.rounds):
        for model in args.models:
            for side in round_order(r):
                command = sluice_command(args, model) if side == "sluice" else llama_command(args, model)
                plan.append((r, model, side, command))
    return plan


def write_out(args, results: dict) -> None:
    if not args.out:
        return
    path = pathlib.Path(args.out)
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.write_text(json.dumps(results, indent=2) + "\n")
        tmp.replace(path)
    except OSError as e:
        print(f"cannot write {path}: {e}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    env = environment(args.env_lib)
    if args.dry_run:
        if args.env_lib:
            print(f"LD_LIBRARY_PATH={env['LD_LIBRARY_PATH']}")
        if args.roofline:
            print(f"{shlex.join([sys.executable, '-c', '<torch copy probe: 1 GiB, 20 copies>'])}")
            for model in args.models:
                print(shlex.join(inspect_command(args, model)))
        for r, model, side, command in planned_commands(args):
            print(f"# round {r + 1}, {side}\n{shlex.join(command)}")
        return 0

    results: dict = {
        "machine": machine(), "gpu": gpu_line(env), "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "script": shlex.join([sys.argv[0], *(argv if argv is not None else sys.argv[1:])]),
        "commands": {m: {"sluice": shlex.join(sluice_command(args, m)),
                         "llama.cpp": shlex.join(llama_command(args, m))} for m in args.models},
        "models": {m: {"rounds": {side: [] for side in SIDES}} for m in args.models},
    }
    failed = False
    weights: dict[str, dict | None] = {}
    if args.roofline:
        results["copy_bandwidth"] = copy_bandwidth(args, env)
        print(f"copy bandwidth: {cell(results['copy_bandwidth']['gbps'], '.0f', '?')} GB/s "
              f"({results['copy_bandwidth']['source']})", file=sys.stderr, flush=True)
        for model in args.models:
            try:
                weights[model] = decode_weight_bytes(json.loads(
                    run_command(inspect_command(args, model), env, args.timeout)))
            except (CommandFailed, ValueError, KeyError, IndexError, TypeError) as e:
                weights[model] = None
                results["models"][model]["roofline"] = {"error": f"no weight bytes: {e}"}
                if not isinstance(e, ValueError) or "_exps" not in str(e):
                    failed = True

    for r, model, side, command in planned_commands(args):
        print(f"round {r + 1}/{args.rounds} {side}: {pathlib.Path(model).name}", file=sys.stderr,
              flush=True)
        try:
            result = parse_side(side, run_command(command, env, args.timeout))
        except CommandFailed as e:
            result, failed = None, True
            print(f"  failed: {e}", file=sys.stderr, flush=True)
        except (ValueError, KeyError, TypeError) as e:
            result, failed = None, True
            print(f"  failed: unreadable output ({e})", file=sys.stderr, flush=True)
        entry = results["models"][model]
        entry["rounds"][side].append(result)
        entry["summary"] = summarize(entry["rounds"])
        if weights.get(model):
            copy = results["copy_bandwidth"]["gbps"]
            entry["roofline"] = {**weights[model], "sides": {
                s: roofline(weights[model], entry["summary"]["median"][s]["tg"], copy)
                for s in SIDES}}
        write_out(args, results)

    print(f"{results['machine']}; GPU: {results['gpu'] or 'unknown'}")
    print(markdown(results))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
