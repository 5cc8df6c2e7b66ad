#!/usr/bin/env python3
"""MoE bigger than memory: sluice streaming routed experts vs llama.cpp paging the same GGUF in
through mmap page faults, on the same file, machine, threads and memory, in one run, alternating
which side goes first. Both start each round with the page cache dropped.

Memory: --available SIZE makes the machine small: a helper process locks (mlock) all available
memory but SIZE, so the model's file cannot sit in the page cache for either side. Sluice gets
--ram-budget (default: SIZE minus 1 GiB of headroom). llama.cpp loads with its defaults except
use_extra_bufts=False: its CPU repacking copies Q4_K weights into anonymous memory (the whole
model, which cannot fit), so its weights stay mmap'd — the page-fault path users get.

Work per side and round (as compare_llamacpp.py): one untimed warm-up (a prefill of -p ids and
one decode step), then a timed prefill of -p ids in one call (pp), then -n single-token decode
calls after a 1-token prefix (tg). Also reported: sluice's expert telemetry (hit rate, bytes read
per token against the ideal for that hit rate, read bandwidth while reading), llama.cpp's major
page faults and bytes read (/proc/PID/io), and, when fio is installed, the disk's O_DIRECT
random-read bandwidth for expert-sized reads at queue depth 32.

    .venv/bin/python bench/moe_streaming.py MODEL.gguf [--available 6G] [--budget 5G]
        [-p 32] [-n 16] [--rounds 3] [--threads 2] [--json-out FILE] [--no-llama]

Decode-phase figures (the last -n forward calls of the last round): bytes read per token, hit
rate, and the disk-bound ceiling: the tokens/s decode would reach if every byte it read came at
fio's measured bandwidth and nothing else took time. --no-llama runs sluice alone (for models
llama.cpp cannot load, or would page in too slowly to finish in the time at hand).
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "tools"))

LOCKER = r"""
import ctypes, mmap, sys
size = int(sys.argv[1])
buf = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
libc = ctypes.CDLL(None, use_errno=True)
libc.mlock.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
if libc.mlock(ctypes.addressof(ctypes.c_char.from_buffer(buf)), size) != 0:
    sys.exit("mlock failed: errno %d" % ctypes.get_errno())
print("locked", flush=True)
sys.stdin.read()
"""


def parse_size(text: str) -> int:
    m = re.fullmatch(r"([\d.]+)\s*([kmgt]?)i?b?", text.strip().lower())
    if not m:
        raise SystemExit(f"not a size: {text}")
    return int(float(m.group(1)) * 1024 ** "bkmgt".index(m.group(2) or "b"))


def mem_available() -> int:
    for line in open("/proc/meminfo"):
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    raise SystemExit("no MemAvailable in /proc/meminfo")


def drop_caches():
    os.sync()
    try:
        pathlib.Path("/proc/sys/vm/drop_caches").write_text("3\n")
    except OSError as e:
        raise SystemExit(f"cannot drop the page cache ({e}); run as root")


def sluice_round(args, stats_path) -> dict:
    cmd = [str(args.sluice), "bench", "--json", "-r", "1", "-m", str(args.model), "-p", str(args.p),
           "-n", str(args.n), "-t", str(args.threads), "--kv", "f16", "--seed", str(args.seed),
           "--ram-budget", str(args.budget_bytes), "--stats-json", str(stats_path)]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"sluice failed: {out.stderr.strip()}")
    data = json.loads(out.stdout)
    stats = json.loads(pathlib.Path(stats_path).read_text())
    return {"pp": data["pp"]["median"], "tg": data["tg"]["median"], "stats": stats}


def llama_round(args) -> dict:
    cmd = [sys.executable, __file__, "--llama-side", str(args.model), "-p", str(args.p), "-n", str(args.n),
           "-t", str(args.threads), "--seed", str(args.seed)]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"llama.cpp side failed: {out.stderr.strip()[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def llama_side(args) -> int:
    """Runs in a fresh process: llama.cpp through the PyPI wheel's library, weights mmap'd."""
    import compare_llamacpp as cl
    import llamacpp_oracle as oracle
    llama = oracle.Llama()
    side = cl.LlamaSide(llama, args.model, repack=False)
    prompt = cl.token_ids(args.seed, side.n_vocab, args.p)
    prefix = cl.token_ids(args.seed, side.n_vocab, 1, skip=args.p)
    generated = cl.token_ids(args.seed, side.n_vocab, args.n, skip=args.p + 1)
    result = side.round(prompt, prefix, generated, args.threads)
    io = dict(line.split(": ") for line in pathlib.Path("/proc/self/io").read_text().splitlines())
    import resource
    usage = resource.getrusage(resource.RUSAGE_SELF)
    result.update(major_faults=usage.ru_majflt, read_bytes=int(io["read_bytes"]),
                  peak_rss=usage.ru_maxrss * 1024)
    print(json.dumps(result))
    return 0


def fio_bandwidth(model: pathlib.Path, block: int) -> float | None:
    if shutil.which("fio") is None:
        return None
    block = max(4096, (block + 4095) // 4096 * 4096)
    out = subprocess.run(["fio", "--name=experts", f"--filename={model}", "--readonly", "--rw=randread",
                          f"--bs={block}", "--direct=1", "--ioengine=io_uring", "--iodepth=32",
                          "--runtime=10", "--time_based", "--output-format=json"],
                         capture_output=True, text=True)
    if out.returncode != 0:
        return None
    return json.loads(out.stdout)["jobs"][0]["read"]["bw_bytes"] / 1e9


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", type=pathlib.Path)
    parser.add_argument("--sluice", type=pathlib.Path, default=ROOT / "build" / "sluice")
    parser.add_argument("--available", help="memory the machine keeps available, e.g. 6G")
    parser.add_argument("--budget", help="sluice --ram-budget (default: --available minus 1 GiB)")
    parser.add_argument("-p", type=int, default=32)
    parser.add_argument("-n", type=int, default=16)
    parser.add_argument("--threads", "-t", type=int, default=2)
    parser.add_argument("--rounds", "-r", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--json-out", type=pathlib.Path)
    parser.add_argument("--no-llama", action="store_true", help="run sluice alone")
    parser.add_argument("--llama-side", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.llama_side:
        return llama_side(args)

    locker = None
    if args.available:
        keep = parse_size(args.available)
        lock = mem_available() - keep
        if lock > 0:
            locker = subprocess.Popen([sys.executable, "-c", LOCKER, str(lock)], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, text=True)
            if locker.stdout.readline().strip() != "locked":
                raise SystemExit("could not lock memory")
        print(f"locked {lock / 2**30:.1f} GiB: {mem_available() / 2**30:.1f} GiB available", flush=True)
    args.budget_bytes = parse_size(args.budget) if args.budget else (
        parse_size(args.available) - 2**30 if args.available else 0)
    try:
        rounds = []
        with tempfile.TemporaryDirectory() as tmp:
            for r in range(args.rounds):
                sides = ["sluice", "llama.cpp"] if r % 2 == 0 else ["llama.cpp", "sluice"]
                if args.no_llama:
                    sides = ["sluice"]
                row = {}
                for side in sides:
                    drop_caches()
                    start = time.time()
                    row[side] = sluice_round(args, pathlib.Path(tmp) / "s.json") if side == "sluice" \
                        else llama_round(args)
                    row[side]["wall"] = time.time() - start
                llama_text = (f"llama.cpp pp {row['llama.cpp']['pp']:.2f} tg {row['llama.cpp']['tg']:.3f}"
                              if "llama.cpp" in row else "llama.cpp not run")
                print(f"round {r + 1}: sluice pp {row['sluice']['pp']:.2f} tg {row['sluice']['tg']:.3f} | "
                      f"{llama_text} tok/s", flush=True)
                rounds.append(row)
    finally:
        if locker:
            locker.stdin.close()
            locker.wait()

    med = lambda side, key: (statistics.median(r[side][key] for r in rounds)  # noqa: E731
                             if side in rounds[0] else None)
    s = rounds[-1]["sluice"]["stats"]
    acquired = s["hits"] + s["misses"]
    expert_bytes = s["bytes_read"] / max(s["experts_read"], 1)
    # The experts that had to come from disk: demand misses and guesses that were then used.
    ideal = (s["misses"] + s["speculative_used"]) * expert_bytes
    read_gbs = s["bytes_read"] / s["read_seconds"] / 1e9 if s["read_seconds"] else 0.0
    fio = fio_bandwidth(args.model, int(expert_bytes))
    # Decode: the last n forward calls (after the warm-up, the prefill and the 1-token prefix).
    decode_bytes = s["step_bytes_read"][-args.n:]
    decode_hits, decode_misses = sum(s["step_hits"][-args.n:]), sum(s["step_misses"][-args.n:])
    bytes_per_token = statistics.mean(decode_bytes) if decode_bytes else 0.0
    summary = {
        "model": str(args.model), "size_gb": args.model.stat().st_size / 1e9, "threads": args.threads,
        "available": args.available, "budget_bytes": args.budget_bytes, "p": args.p, "n": args.n,
        "sluice_pp": med("sluice", "pp"), "sluice_tg": med("sluice", "tg"),
        "llama_pp": med("llama.cpp", "pp"), "llama_tg": med("llama.cpp", "tg"),
        "hit_rate": s["hits"] / acquired if acquired else 1.0,
        "bytes_read_over_ideal": s["bytes_read"] / ideal if ideal else None,
        "miss_path_gbs": read_gbs, "fio_gbs": fio,
        "decode_bytes_per_token": bytes_per_token,
        "decode_hit_rate": decode_hits / (decode_hits + decode_misses) if decode_hits + decode_misses else 1.0,
        "disk_bound_tg": fio * 1e9 / bytes_per_token if fio and bytes_per_token else None,
        "slot_bytes": s["slot_bytes"], "slots": s["slots"],
        "speculative_reads": s["speculative_reads"], "speculative_used": s["speculative_used"],
        "io_wait_seconds": s["io_wait_seconds"],
        "llama_major_faults": rounds[-1]["llama.cpp"]["major_faults"] if not args.no_llama else None,
        "llama_read_gb": rounds[-1]["llama.cpp"]["read_bytes"] / 1e9 if not args.no_llama else None,
        "sluice_read_gb": s["bytes_read"] / 1e9,
        "rounds": rounds,
    }
    print(json.dumps({k: v for k, v in summary.items() if k != "rounds"}, indent=1))
    if args.no_llama:
        print(f"decode: sluice {summary['sluice_tg']:.3f} tok/s (llama.cpp not run)")
    else:
        print(f"decode: sluice {summary['sluice_tg']:.3f} tok/s, llama.cpp {summary['llama_tg']:.3f} tok/s, "
              f"ratio {summary['sluice_tg'] / summary['llama_tg']:.2f}x; prefill ratio "
              f"{summary['sluice_pp'] / summary['llama_pp']:.2f}x")
    if args.json_out:
        args.json_out.write_text(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
