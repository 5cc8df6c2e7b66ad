"""Pieces the side-by-side comparison scripts share: the token ids `sluice bench` draws, how a
sluice round is run and read, the machine line, the page-cache drop and the median summary.
"""
from __future__ import annotations

import json
import os
import pathlib
import platform
import statistics
import subprocess

MASK64 = (1 << 64) - 1


def token_ids(seed: int, n_vocab: int, n: int, skip: int = 0) -> list[int]:
    """splitmix64, the generator of `sluice bench`: ids number skip … skip+n-1 of the stream."""
    state, out = seed, []
    for i in range(skip + n):
        state = (state + 0x9E3779B97F4A7C15) & MASK64
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
        if i >= skip:
            out.append((z ^ (z >> 31)) % n_vocab)
    return out


def bench_workload(seed: int, n_vocab: int, p: int, n: int) -> tuple[list[int], list[int], list[int]]:
    """The prompt, the 1-token prefix and the generated ids of one `sluice bench` run."""
    return (token_ids(seed, n_vocab, p), token_ids(seed, n_vocab, 1, skip=p),
            token_ids(seed, n_vocab, n, skip=p + 1))


def sluice_bench_command(sluice: pathlib.Path, model: pathlib.Path, p: int, n: int, threads: int,
                         seed: int, extra: list[str] | None = None) -> list[str]:
    """One `sluice bench` round in a fresh process: warm-up, pp, tg, as JSON."""
    return [str(sluice), "bench", "--json", "-r", "1", "-m", str(model), "-p", str(p), "-n", str(n),
            "-t", str(threads), "--kv", "f16", "--seed", str(seed), *(extra or [])]


def parse_sluice_bench(stdout: str) -> dict:
    """{"pp": t/s, "tg": t/s} from `sluice bench --json` output."""
    data = json.loads(stdout)
    return {"pp": data["pp"]["median"], "tg": data["tg"]["median"]}


def run_sluice_bench(command: list[str]) -> dict:
    out = subprocess.run(command, capture_output=True, text=True, check=True)
    return parse_sluice_bench(out.stdout)


def drop_page_cache() -> bool:
    """sync; echo 3 > /proc/sys/vm/drop_caches. False (and nothing dropped) when not permitted."""
    os.sync()
    try:
        pathlib.Path("/proc/sys/vm/drop_caches").write_text("3\n")
        return True
    except OSError:
        return False


def medians(rounds: dict[str, list[dict]], tests=("pp", "tg")) -> dict[str, dict[str, float]]:
    """{side: {test: median over the rounds}} for the sides that have results."""
    return {name: {test: statistics.median(r[test] for r in rs) for test in tests}
            for name, rs in rounds.items() if rs}


def machine() -> str:
    model_name = platform.processor() or "?"
    try:
        for line in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines():
            if line.startswith("Model name:"):
                model_name = line.split(":", 1)[1].strip()
    except OSError:
        pass
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    return f"{model_name}, {os.cpu_count()} logical CPUs, load average {load}"
