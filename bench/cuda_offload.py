#!/usr/bin/env python3
"""A MoE whose routed experts exceed the GPU's budget many times over, in both of Sluice's
placements and against llama.cpp's `-ot exps=CPU`, with the PCIe bound of the GPU-tiered decode
(issue 8, "Performance", "Out of GPU memory"). Meant for the GPU machine: python3 and the
standard library only (torch, when present, measures the host-to-device bandwidth).

Once per run: `sluice inspect --json F` (the experts' bytes and count: how many times they
exceed --vram-budget and the device slots), the H2D probe (torch: 1 GiB pinned host tensor
copied to the device 10 times, CUDA events; pageable too, for reference) and, unless
--no-auto-plan, one short `sluice bench … --vram-budget B -p 0 -n 1 -r 1 --explain` with no
forced placement, with SLUICE_CALIBRATION_FILE pointing into --stats-dir: it shows which
placement sluice's planner picks and measures sluice's own H2D rate in this run
(src/runtime/calibration.cpp: {"entries": [{"device", "threads", "expert_type",
"h2d_bytes_per_s", "cpu_bytes_per_s"}]}; the default file, ~/.cache/sluice/calibration.json, is
reported too when it holds the device).

Then, in alternating rounds (--rounds, default 3; the order reverses every round), each command
a fresh process:

    GPU-tiered prefill  sluice bench -m F --backend cuda --gpu-moe --vram-budget B
                            -p P -n 0 -r R --json
    GPU-tiered decode   sluice bench -m F --backend cuda --gpu-moe --vram-budget B
                            -p 0 -n T -r R --json --stats-json S
    hybrid              sluice bench -m F --backend cuda --cpu-moe --vram-budget B
                            -p P -n T -r R --json
    llama.cpp           llama-bench -m F -ngl 999 -ot exps=CPU -fa 1 -p P -n T -r R -o json

(--gpu-expert-cache N joins both GPU-tiered commands; -fa 1 as in bench/cuda_vs_llamacpp.py.)

Decode misses apart from prefill, exactly: the device counters of --stats-json (device_misses,
device_bytes_copied) are totals over the whole process, and a prefill's misses cannot be told
apart from a decode step's afterwards (there is no per-step device history). So the decode
command runs with -p 0: `sluice bench` then evaluates only one-token steps — the warm-up's
1-token prefix and first generated token, then per repetition the 1-token prefix and T tokens
(src/cli/bench_command.cpp) — and ExpertStats closes one step per eval (`steps` =
2 + R × (1 + T), checked). device_bytes_copied / steps is then the mean host-to-device bytes
of one decode token over every step of that process (the timed R × T among them; the cold
fill of the empty slots is included, as it would be in any decode from a cold start), and its
tokens/s is the decode figure set against the bound. Prefill speed comes from the -n 0 command.

Miss bytes: the bytes of the experts a decode token needed that were not on the device — its
demand misses and the next-layer guesses that were then used (device_misses +
device_prefetch_used copies of device_bytes_copied / (device_misses + device_prefetched)); a
guess never acquired (device_prefetched - device_prefetch_used) crossed the bus for nothing and
is no miss. The bound: bound_tg = h2d_bytes_per_s / miss_bytes_per_decode_token, the tokens/s
the copies of the misses alone would allow; the issue's goal is achieved tg >= 70% of it. The
bound of every copied byte (wrong guesses too, copied_bound_tg) is reported beside it. H2D: the
torch probe's pinned rate, else --h2d-gbps, else sluice's rate from the auto-plan run (pinned
256 MiB, best of 3).

Output: a markdown table on stdout (placement, pp t/s, tg t/s, miss MiB/token, bound t/s, % of
bound, sluice / llama.cpp) and JSON to --out, rewritten after every command. Medians: each
command's own over its repetitions (sluice "median"; llama-bench the median of samples_ts),
then over rounds. A failed command prints its stderr tail and gives "failed" cells; the exit
status is then 1.

    python3 bench/cuda_offload.py --sluice build-cuda/sluice --llama-bench llama-bench \\
        [--vram-budget 3G] [--gpu-expert-cache N] [--rounds 3] [-p 512] [-n 128] [-r 3] \\
        [--h2d-gbps G] [--no-torch-probe] [--no-auto-plan] [--env-lib DIR] [--stats-dir DIR] \\
        [--sluice-arg ARG] [--llama-arg ARG] [--out offload.json] [--dry-run] MODEL.gguf
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import pathlib
import re
import shlex
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from bench_common import machine  # noqa: E402
from cuda_vs_llamacpp import (  # noqa: E402
    STDERR_TAIL, CommandFailed, cell, environment, gpu_line, median_or_none, parse_llama_bench,
    parse_sluice, run_command, write_out)

# The commands of one round, in the order of even rounds (odd rounds run them reversed).
RUNS = ("tiered-prefill", "tiered-decode", "hybrid", "llama.cpp")
MIB = 1 << 20


# ----------------------------------------------------------------------------- commands

def sluice_common(args) -> list[str]:
    return [args.sluice, "bench", "-m", args.model, "--backend", "cuda"]


def stats_path(args, round_index: int) -> str:
    return str(pathlib.Path(args.stats_dir) / f"tiered-decode.round{round_index + 1}.json")


def run_command_line(args, run: str, round_index: int) -> list[str]:
    budget = ["--vram-budget", args.vram_budget]
    slots = ["--gpu-expert-cache", str(args.gpu_expert_cache)] if args.gpu_expert_cache else []
    repeat = ["-r", str(args.r), "--json"]
    if run == "tiered-prefill":
        return [*sluice_common(args), "--gpu-moe", *budget, *slots, "-p", str(args.p), "-n", "0",
                *repeat, *args.sluice_arg]
    if run == "tiered-decode":
        return [*sluice_common(args), "--gpu-moe", *budget, *slots, "-p", "0", "-n", str(args.n),
                *repeat, "--stats-json", stats_path(args, round_index), *args.sluice_arg]
    if run == "hybrid":
        return [*sluice_common(args), "--cpu-moe", *budget, "-p", str(args.p), "-n", str(args.n),
                *repeat, *args.sluice_arg]
    return [args.llama_bench, "-m", args.model, "-ngl", "999", "-ot", "exps=CPU", "-fa", "1",
            "-p", str(args.p), "-n", str(args.n), "-r", str(args.r), "-o", "json", *args.llama_arg]


def auto_plan_command(args) -> list[str]:
    return [*sluice_common(args), "--vram-budget", args.vram_budget, "-p", "0", "-n", "1", "-r",
            "1", "--no-warmup", "--explain", "--json", *args.sluice_arg]


def inspect_command(args) -> list[str]:
    return [args.sluice, "inspect", "--json", args.model]


def round_order(round_index: int) -> tuple[str, ...]:
    return RUNS if round_index % 2 == 0 else RUNS[::-1]


def planned_commands(args) -> list[tuple[int, str, list[str]]]:
    """(round, run, command) in the order they run."""
    return [(r, run, run_command_line(args, run, r)) for r in range(args.rounds)
            for run in round_order(r)]


def run_with_stderr(command: list[str], env: dict[str, str], timeout: float) -> tuple[str, str]:
    """(stdout, stderr) of a command that succeeded; CommandFailed as run_command otherwise."""
    try:
        done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=timeout,
                              errors="replace")
    except FileNotFoundError:
        raise CommandFailed(f"not found: {command[0]}")
    except PermissionError:
        raise CommandFailed(f"not executable: {command[0]}")
    except subprocess.TimeoutExpired:
        raise CommandFailed(f"timed out after {timeout:.0f} s")
    if done.returncode != 0:
        print(f"  exit {done.returncode}: {shlex.join(command)}\n{done.stderr[-STDERR_TAIL:]}",
              file=sys.stderr, flush=True)
        raise CommandFailed(f"exit status {done.returncode}")
    return done.stdout, done.stderr


# ----------------------------------------------------------------------------- parsing

def parse_size(text: str) -> int:
    """Bytes of a size as sluice reads it (src/cli/engine_options.cpp, parse_byte_size):
    K/M/G/T with or without B or iB are powers of 1024."""
    found = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([a-zA-Z]*)\s*", text)
    scales = {"": 1, "b": 1, "k": 1 << 10, "kb": 1 << 10, "kib": 1 << 10, "m": 1 << 20,
              "mb": 1 << 20, "mib": 1 << 20, "g": 1 << 30, "gb": 1 << 30, "gib": 1 << 30,
              "t": 1 << 40, "tb": 1 << 40, "tib": 1 << 40}
    if not found or found.group(2).lower() not in scales or float(found.group(1)) <= 0:
        raise ValueError(f"'{text}' is not a size (examples: 3G, 512MiB, 1073741824)")
    return int(float(found.group(1)) * scales[found.group(2).lower()])


def expert_geometry(inspect: dict) -> dict:
    """{"expert_bytes", "n_experts"} from `sluice inspect --json`: the bytes of every routed-expert
    tensor (*_exps) and the experts over all layers (per layer the last dimension of its *_exps
    tensors, [n_embd, n_ff, n_expert] with the first dimension fastest)."""
    expert_bytes, per_layer = 0, {}
    for tensor in inspect["tensors"]:
        if "_exps" not in tensor["name"]:
            continue
        expert_bytes += int(tensor["bytes"])
        layer = tensor["name"].split(".")[1] if tensor["name"].startswith("blk.") else "?"
        per_layer[layer] = max(per_layer.get(layer, 0), int(tensor["shape"][-1]))
    if not expert_bytes:
        raise ValueError("no routed experts (*_exps tensors): not a MoE model")
    return {"expert_bytes": expert_bytes, "n_experts": sum(per_layer.values())}


def decode_steps_expected(n_gen: int, repetitions: int, warmup: bool = True) -> int:
    """One-token steps of `sluice bench -p 0 -n T -r R`: the warm-up's prefix and first token,
    then per repetition the 1-token prefix and T generated tokens."""
    return (2 if warmup else 0) + repetitions * (1 + n_gen)


def decode_misses(stats: dict, steps_expected: int | None = None) -> dict:
    """Per decode token, from the --stats-json of a `-p 0` run (every step a one-token step):
    device misses, bytes copied host to device, the device hit rate and slots."""
    steps, slots = int(stats["steps"]), int(stats["device_slots"])
    if slots == 0:
        raise ValueError("no device expert slots in --stats-json (every expert fit on the device,"
                         " or the experts ran on the CPU): nothing streamed to the GPU")
    if steps == 0:
        raise ValueError("--stats-json counted no steps")
    hits, misses = int(stats["device_hits"]), int(stats["device_misses"])
    # Older builds have no guess counters: every copied byte counts as a miss's.
    guessed = int(stats.get("device_prefetched", 0))
    used = int(stats.get("device_prefetch_used", 0))
    copied = int(stats["device_bytes_copied"])
    copies = misses + guessed
    needed = copied * (misses + used) / copies if copies else copied
    out = {"steps": steps, "device_slots": slots,
           "misses_per_token": misses / steps,
           "guesses_per_token": guessed / steps,
           "guesses_used_per_token": used / steps,
           "miss_bytes_per_token": needed / steps,
           "copied_bytes_per_token": copied / steps,
           "device_hit_rate": hits / (hits + misses) if hits + misses else None}
    if steps_expected is not None:
        out["steps_expected"] = steps_expected
    return out


def pcie_bound(h2d_bytes_per_s: float | None, miss_bytes_per_token: float | None,
               tg: float | None) -> dict:
    """bound_tg: the decode tokens/s host-to-device copies alone allow; fraction: tg / bound."""
    if not h2d_bytes_per_s or miss_bytes_per_token is None:
        return {"bound_tg": None, "fraction_of_bound": None}
    if miss_bytes_per_token == 0:  # every expert a device hit: no copy bound at all
        return {"bound_tg": None, "fraction_of_bound": None, "note": "no misses"}
    bound = h2d_bytes_per_s / miss_bytes_per_token
    return {"bound_tg": bound, "fraction_of_bound": tg / bound if tg is not None else None}


def sluice_device(stdout: str) -> str | None:
    """The "device" of `sluice bench --json` (its last JSON line), the calibration file's key."""
    lines = [line for line in stdout.splitlines() if line.lstrip().startswith("{")]
    return json.loads(lines[-1]).get("device") if lines else None


def parse_explain(stderr: str) -> dict:
    """Which placement sluice's planner chose (--explain's "placement:" lines on stderr)."""
    lines = [line[len("placement: "):] for line in stderr.splitlines()
             if line.startswith("placement: ")]
    chosen, reason = "unknown", None
    for line in lines:
        if line.startswith("routed experts: computed on the CPU"):
            chosen, reason = "hybrid", line
        elif line.startswith("device: every routed expert resident"):
            chosen, reason = "all on the device", line
        elif re.match(r"device: \d+ expert slots", line):
            chosen, reason = "gpu-tiered", line
    return {"chosen": chosen, "reason": reason, "lines": lines}


def calibration_entry(path: str | pathlib.Path, device: str | None) -> dict | None:
    """The last entry of a sluice calibration file for `device` (any device when None)."""
    try:
        entries = json.loads(pathlib.Path(path).read_text()).get("entries", [])
    except (OSError, ValueError, AttributeError):
        return None
    found = [e for e in entries if isinstance(e, dict) and e.get("h2d_bytes_per_s", 0) > 0 and
             (device is None or e.get("device") == device)]
    return found[-1] if found else None


def default_calibration_file() -> str:
    """src/runtime/calibration.cpp, calibration_file_path()."""
    if os.environ.get("SLUICE_CALIBRATION_FILE"):
        return os.environ["SLUICE_CALIBRATION_FILE"]
    if os.environ.get("XDG_CACHE_HOME"):
        return os.environ["XDG_CACHE_HOME"] + "/sluice/calibration.json"
    return (os.environ.get("HOME") or "/tmp") + "/.cache/sluice/calibration.json"


# ----------------------------------------------------------------------------- H2D probe

H2D_PROBE = r"""
import json, torch
n = 1 << 30
device = torch.empty(n, dtype=torch.uint8, device="cuda")
def rate(host, reps):
    for _ in range(2):
        device.copy_(host, non_blocking=True)
    torch.cuda.synchronize()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        device.copy_(host, non_blocking=True)
    stop.record()
    torch.cuda.synchronize()
    return n * reps / (start.elapsed_time(stop) / 1e3)
pinned = rate(torch.ones(n, dtype=torch.uint8).pin_memory(), 10)
pageable = rate(torch.ones(n, dtype=torch.uint8), 3)
print(json.dumps({"pinned_bytes_per_s": pinned, "pageable_bytes_per_s": pageable,
                  "device": torch.cuda.get_device_name()}))
"""


def h2d_probe(args, env: dict[str, str]) -> dict:
    """The torch probe's rates (a separate process: its CUDA context is gone before the runs)."""
    try:
        if args.no_torch_probe:
            raise CommandFailed("skipped (--no-torch-probe)")
        if importlib.util.find_spec("torch") is None:
            raise CommandFailed(f"torch is not installed for {sys.executable}")
        out = run_command([sys.executable, "-c", H2D_PROBE], env, args.timeout,
                          label="the torch H2D probe")
        measured = json.loads(out.strip().splitlines()[-1])
        return {**measured, "source": f"torch, 1 GiB pinned host tensor to {measured['device']}"}
    except (CommandFailed, ValueError, KeyError, IndexError) as e:
        return {"error": str(e)}


def choose_h2d(args, probe: dict, sluice_rate: dict | None) -> dict:
    """The H2D rate the bound uses: the probe's pinned rate, else --h2d-gbps, else sluice's."""
    if probe.get("pinned_bytes_per_s"):
        return {"bytes_per_s": probe["pinned_bytes_per_s"], "source": probe["source"]}
    if args.h2d_gbps:
        return {"bytes_per_s": args.h2d_gbps * 1e9,
                "source": f"--h2d-gbps (torch probe: {probe.get('error', 'no rate')})"}
    if sluice_rate and sluice_rate.get("h2d_bytes_per_s"):
        return {"bytes_per_s": sluice_rate["h2d_bytes_per_s"],
                "source": f"sluice's calibration, {sluice_rate['file']} (torch probe: "
                          f"{probe.get('error', 'no rate')})"}
    return {"bytes_per_s": None, "source": f"unmeasured (torch probe: {probe.get('error')}; "
                                           "give --h2d-gbps)"}


# ----------------------------------------------------------------------------- summary

def summarize(rounds: list[dict], h2d_bytes_per_s: float | None) -> dict:
    """Medians over the rounds that succeeded, the bound of the GPU-tiered decode, and each
    sluice placement against llama.cpp."""
    def med(run: str, key: str):
        return median_or_none([(r.get(run) or {}).get(key) for r in rounds])

    def ok(run: str) -> int:
        return sum(1 for r in rounds if r.get(run))

    tiered = {"pp": med("tiered-prefill", "pp"), "tg": med("tiered-decode", "tg")}
    for key in ("miss_bytes_per_token", "copied_bytes_per_token", "misses_per_token",
                "guesses_per_token", "guesses_used_per_token", "device_hit_rate", "device_slots"):
        tiered[key] = med("tiered-decode", key)
    tiered.update(pcie_bound(h2d_bytes_per_s, tiered["miss_bytes_per_token"], tiered["tg"]))
    copied = pcie_bound(h2d_bytes_per_s, tiered["copied_bytes_per_token"], tiered["tg"])
    tiered["copied_bound_tg"] = copied["bound_tg"]
    tiered["fraction_of_copied_bound"] = copied["fraction_of_bound"]
    tiered["rounds_ok"] = {"pp": ok("tiered-prefill"), "tg": ok("tiered-decode")}
    out = {"gpu-tiered": tiered}
    for run in ("hybrid", "llama.cpp"):
        out[run] = {"pp": med(run, "pp"), "tg": med(run, "tg"),
                    "rounds_ok": {"pp": ok(run), "tg": ok(run)}}
    for run in ("gpu-tiered", "hybrid", "llama.cpp"):
        out[run]["vs_llama.cpp"] = {
            test: (out[run][test] / out["llama.cpp"][test]
                   if out[run][test] is not None and out["llama.cpp"][test] else None)
            for test in ("pp", "tg")}
    return out


def oversubscription(geometry: dict | None, budget_bytes: int, slots: float | None) -> dict:
    if not geometry:
        return {}
    out = {"experts_over_budget": geometry["expert_bytes"] / budget_bytes}
    if slots:
        out["experts_over_slots"] = geometry["n_experts"] / slots
    return out


def markdown(results: dict) -> str:
    s, args = results["summary"], results["settings"]
    lines = []
    geometry, over = results.get("experts") or {}, results.get("oversubscription") or {}
    if "error" in geometry:
        lines.append(f"Routed experts: unknown ({geometry['error']}).")
    elif geometry:
        slots = s["gpu-tiered"]["device_slots"]
        lines.append(
            f"Routed experts: {geometry['expert_bytes'] / (1 << 30):.2f} GiB in "
            f"{geometry['n_experts']} experts, {over['experts_over_budget']:.3g}x the "
            f"--vram-budget of {args['vram_budget']}" +
            (f"; {slots:.0f} device slots hold 1 in {over['experts_over_slots']:.1f}"
             if slots else "") + ".")
    h2d = results.get("h2d", {})
    gbps = h2d.get("bytes_per_s") and h2d["bytes_per_s"] / 1e9
    lines.append(f"H2D bandwidth: {cell(gbps, '.1f', '?')} GB/s "
                 f"({h2d.get('source', 'unmeasured')}).")
    own = results.get("sluice_calibration") or {}
    for name, entry in own.items():
        if entry:
            lines.append(f"sluice's calibrated H2D ({name}, {entry['file']}): "
                         f"{entry['h2d_bytes_per_s'] / 1e9:.1f} GB/s; CPU expert matvec "
                         f"{entry.get('cpu_bytes_per_s', 0) / 1e9:.1f} GB/s.")
    plan = results.get("auto_plan")
    if plan:
        lines.append(f"sluice's own choice at this budget: {plan.get('chosen', 'failed')}"
                     + (f" ({plan['reason']})" if plan.get("reason") else "") + ".")
    p, n = args["p"], args["n"]
    lines += ["", f"| placement | pp{p} t/s | tg{n} t/s | miss MiB/token | PCIe bound t/s | "
              "% of bound | pp vs llama.cpp | tg vs llama.cpp | rounds ok (pp/tg) |",
              "|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    names = {"gpu-tiered": f"sluice GPU-tiered (--gpu-moe, --vram-budget {args['vram_budget']})",
             "hybrid": "sluice hybrid (--cpu-moe)",
             "llama.cpp": "llama.cpp -ngl 999 -ot exps=CPU"}
    for run, name in names.items():
        e = s[run]
        tiered = run == "gpu-tiered"
        miss = e.get("miss_bytes_per_token")
        lines.append(
            f"| {name} | {cell(e['pp'], '.1f')} | {cell(e['tg'], '.2f')} | "
            f"{cell(miss and miss / MIB, '.1f') if tiered else '—'} | "
            f"{cell(e.get('bound_tg'), '.1f', 'n/a') if tiered else '—'} | "
            f"{cell(e.get('fraction_of_bound'), '.0%', 'n/a') if tiered else '—'} | "
            f"{cell(e['vs_llama.cpp']['pp'], '.2f')} | {cell(e['vs_llama.cpp']['tg'], '.2f')} | "
            f"{e['rounds_ok']['pp']}/{e['rounds_ok']['tg']} of {args['rounds']} |")
    t = s["gpu-tiered"]
    if t.get("copied_bytes_per_token") is not None:
        lines += ["", f"GPU-tiered decode per token: {cell(t['misses_per_token'], '.1f')} demand "
                  f"misses, {cell(t.get('guesses_per_token'), '.1f')} next-layer guesses copied "
                  f"({cell(t.get('guesses_used_per_token'), '.1f')} of them used); every copied "
                  f"byte {cell(t['copied_bytes_per_token'] / MIB, '.1f')} MiB/token, bound "
                  f"{cell(t.get('copied_bound_tg'), '.1f', 'n/a')} t/s, of which tg is "
                  f"{cell(t.get('fraction_of_copied_bound'), '.0%', 'n/a')}."]
    return "\n".join(lines)


# ----------------------------------------------------------------------------- main

def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", help="the MoE GGUF (e.g. `sluice synth -g qwen3-30b-a3b`)")
    ap.add_argument("--sluice", default=str(ROOT / "build" / "sluice"), help="the sluice binary")
    ap.add_argument("--llama-bench", default="llama-bench", help="llama.cpp's llama-bench")
    ap.add_argument("--vram-budget", default="3G",
                    help="sluice's --vram-budget for every placement (default 3G)")
    ap.add_argument("--gpu-expert-cache", type=int, default=0, metavar="N",
                    help="device expert slots for the GPU-tiered runs (default: what fits)")
    ap.add_argument("--rounds", type=int, default=3, help="alternating rounds (default 3)")
    ap.add_argument("-p", type=int, default=512, help="prompt tokens (default 512)")
    ap.add_argument("-n", type=int, default=128, help="generated tokens (default 128)")
    ap.add_argument("-r", type=int, default=3, help="repetitions inside each command (default 3)")
    ap.add_argument("--h2d-gbps", type=float, help="host-to-device GB/s when torch is absent")
    ap.add_argument("--no-torch-probe", action="store_true",
                    help="skip the torch H2D probe (then --h2d-gbps or sluice's own rate)")
    ap.add_argument("--no-auto-plan", action="store_true",
                    help="skip the run that shows sluice's own choice and calibrates H2D")
    ap.add_argument("--env-lib", action="append", default=[], metavar="DIR",
                    help="prepended to LD_LIBRARY_PATH for every command (repeatable)")
    ap.add_argument("--sluice-arg", action="append", default=[], metavar="ARG",
                    help="an extra argument for every sluice bench (repeatable)")
    ap.add_argument("--llama-arg", action="append", default=[], metavar="ARG",
                    help="an extra argument for llama-bench (repeatable)")
    ap.add_argument("--stats-dir", help="where --stats-json and the calibration file go "
                    "(default: a new folder under the system's temporary folder)")
    ap.add_argument("--timeout", type=float, default=600, help="seconds per command (default 600)")
    ap.add_argument("--out", help="write the results as JSON here")
    ap.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")
    args = ap.parse_args(argv)
    if args.rounds < 1 or args.p < 1 or args.n < 1 or args.r < 1 or args.gpu_expert_cache < 0:
        ap.error("--rounds, -p, -n and -r must be at least 1, --gpu-expert-cache at least 0")
    try:
        args.budget_bytes = parse_size(args.vram_budget)
    except ValueError as e:
        ap.error(f"--vram-budget: {e}")
    if not args.stats_dir:
        args.stats_dir = (str(pathlib.Path(tempfile.gettempdir()) / "sluice-offload-XXXXXXXX")
                          if args.dry_run else tempfile.mkdtemp(prefix="sluice-offload-"))
    return args


def print_dry_run(args, env: dict[str, str]) -> None:
    if args.env_lib:
        print(f"LD_LIBRARY_PATH={env['LD_LIBRARY_PATH']}")
    print(shlex.join(inspect_command(args)))
    if not args.no_torch_probe:
        print(shlex.join([sys.executable, "-c", "<torch H2D probe: 1 GiB pinned, 10 copies>"]))
    if not args.no_auto_plan:
        calibration = pathlib.Path(args.stats_dir) / "calibration.json"
        print(f"# sluice's own choice\nSLUICE_CALIBRATION_FILE={shlex.quote(str(calibration))} "
              f"{shlex.join(auto_plan_command(args))}")
    for r, run, command in planned_commands(args):
        print(f"# round {r + 1}, {run}\n{shlex.join(command)}")


def run_once(args, env: dict[str, str], results: dict) -> bool:
    """inspect, the H2D probe and the auto-plan run; False when one of them failed."""
    ok = True
    try:
        results["experts"] = expert_geometry(json.loads(
            run_command(inspect_command(args), env, args.timeout)))
    except (CommandFailed, ValueError, KeyError, IndexError, TypeError) as e:
        results["experts"], ok = {"error": str(e)}, False
    results["h2d_probe"] = h2d_probe(args, env)
    if not args.no_auto_plan:
        calibration = pathlib.Path(args.stats_dir) / "calibration.json"
        calibration.unlink(missing_ok=True)  # measured in this run, not read from an old one
        try:
            out, err = run_with_stderr(auto_plan_command(args),
                                       {**env, "SLUICE_CALIBRATION_FILE": str(calibration)},
                                       args.timeout)
            results["auto_plan"] = parse_explain(err)
            results["device"] = sluice_device(out)
        except (CommandFailed, ValueError, KeyError, IndexError) as e:
            results["auto_plan"], ok = {"chosen": f"failed ({e})"}, False
        entry = calibration_entry(calibration, None)
        results["sluice_calibration"]["this run"] = entry and {**entry, "file": str(calibration)}
    print(f"experts: {results['experts']}\nH2D probe: {results['h2d_probe']}", file=sys.stderr,
          flush=True)
    return ok


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    env = environment(args.env_lib)
    if args.dry_run:
        print_dry_run(args, env)
        return 0
    results: dict = {
        "machine": machine(), "gpu": gpu_line(env), "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "script": shlex.join([sys.argv[0], *(argv if argv is not None else sys.argv[1:])]),
        "settings": {"model": args.model, "vram_budget": args.vram_budget,
                     "vram_budget_bytes": args.budget_bytes,
                     "gpu_expert_cache": args.gpu_expert_cache, "rounds": args.rounds,
                     "p": args.p, "n": args.n, "r": args.r},
        "commands": {run: shlex.join(run_command_line(args, run, 0)) for run in RUNS},
        "sluice_calibration": {}, "rounds": [],
    }
    pathlib.Path(args.stats_dir).mkdir(parents=True, exist_ok=True)
    failed = not run_once(args, env, results)
    cached = calibration_entry(default_calibration_file(), results.get("device"))
    results["sluice_calibration"]["cached"] = cached and {**cached,
                                                          "file": default_calibration_file()}
    sluice_rate = results["sluice_calibration"].get("this run") or cached
    results["h2d"] = choose_h2d(args, results["h2d_probe"], sluice_rate)
    geometry = results["experts"] if "error" not in results["experts"] else None
    expected = decode_steps_expected(args.n, args.r, "--no-warmup" not in args.sluice_arg)

    for r, run, command in planned_commands(args):
        if r == len(results["rounds"]):
            results["rounds"].append({})
        print(f"round {r + 1}/{args.rounds} {run}", file=sys.stderr, flush=True)
        if run == "tiered-decode":  # never read a file an earlier run left there
            pathlib.Path(stats_path(args, r)).unlink(missing_ok=True)
        try:
            stdout = run_command(command, env, args.timeout)
            result = parse_llama_bench(stdout) if run == "llama.cpp" else parse_sluice(stdout)
            if run == "tiered-prefill":
                del result["tg"]  # -n 0: no decode
            if run == "tiered-decode":
                del result["pp"]  # -p 0: no prefill
                stats = json.loads(pathlib.Path(stats_path(args, r)).read_text())
                result.update(decode_misses(stats, expected))
                if result["steps"] != expected:
                    print(f"  warning: {result['steps']} steps counted, {expected} expected",
                          file=sys.stderr, flush=True)
        except CommandFailed as e:
            result, failed = None, True
            print(f"  failed: {e}", file=sys.stderr, flush=True)
        except (OSError, ValueError, KeyError, TypeError) as e:
            result, failed = None, True
            print(f"  failed: unreadable output ({e})", file=sys.stderr, flush=True)
        results["rounds"][r][run] = result
        results["summary"] = summarize(results["rounds"], results["h2d"]["bytes_per_s"])
        results["oversubscription"] = oversubscription(
            geometry, args.budget_bytes, results["summary"]["gpu-tiered"]["device_slots"])
        write_out(args, results)

    print(f"{results['machine']}; GPU: {results['gpu'] or 'unknown'}; model {args.model}")
    print(markdown(results))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
