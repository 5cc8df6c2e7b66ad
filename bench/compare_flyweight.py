#!/usr/bin/env python3
"""Prefill and generation speed and greedy agreement, sluice vs flyweight-llm, on the same GGUF
and thread count, in one run with the two sides alternating (the side that goes first swaps
every round), so machine noise hits both.

flyweight-llm (PyPI) is a C++ runtime with a Python front end; it lives in its own venv
(--flyweight-python, default .cache/fw/venv/bin/python), never in the project's. Its side runs as
`<that python> bench/flyweight_side.py` with a JSON request, a fresh process per round; sluice
runs as `sluice bench --json -r 1 …`, also a fresh process per round. Both do the same work on
the same ids (splitmix64 from --seed, as `sluice bench` draws them): an untimed warm-up, a
prefill of P ids in one call (pp), then after a reset and a 1-token prefix, N single-token calls
(tg). Only those calls are timed, not loading. Reported: the median of the rounds and the
sluice/flyweight ratio. Each side reads the model through the page cache; --cold drops the cache
(`sync; echo 3 > /proc/sys/vm/drop_caches`, needs root) before every side of every round.

Every model is first asked for a greedy continuation of --greedy-prompt on both sides (`sluice
eval --greedy`, flyweight's generate at temperature 0); a model flyweight refuses is reported
with its error text and skipped for timing. Where a tiny llama.cpp model's `.ref.json` sits beside
the GGUF, llama.cpp's own greedy continuation is shown too.

--ram-budget B adds a third side, sluice under that RAM budget (experts streamed from disk).
flyweight has no RAM limit of its own (its routed experts stay in host RAM, mapped from the
GGUF), so it only runs resident.

    .venv/bin/python bench/compare_flyweight.py [--sluice build/sluice] [-p 64] [-n 16]
        [--threads 2] [--rounds 5] [--ram-budget 2G] [--cold] [--json-out F] [MODEL.gguf …]
"""
from __future__ import annotations

import argparse
import json
import pathlib
import shlex
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
import bench_common as common  # noqa: E402

TINY = ROOT.parent / "shared" / "testdata" / "llamacpp-tiny"
DEFAULT_MODELS = [ROOT / ".cache/models/SmolLM2-135M-Instruct.Q4_1.gguf",
                  ROOT / ".cache/models/gemma-3-270m-q4_k_m.gguf",
                  ROOT / ".cache/synth/qwen3-30b-a3b-8l.gguf",
                  ROOT / ".cache/synth/qwen3.5-35b-a3b-4l.gguf",
                  *[TINY / f"{name}.gguf" for name in (
                      "qwen35-hybrid-q8_0", "qwen35moe-hybrid-q8_0", "museglimmer-dense-q8_0",
                      "gemma4-moe-q8_0", "gemma4-dense-q8_0", "laguna-moe-q8_0",
                      "deepseek4-moe-q8_0", "glmdsa-moe-q8_0", "qwen3next-hybrid-q8_0",
                      "kimilinear-hybrid-q8_0")]]
# The prompt of the tiny llama.cpp models' .ref.json files (their README).
REF_PROMPT = [1, 5, 9, 17, 33, 64, 2, 100, 7, 3, 50, 27]


def n_vocab(model: pathlib.Path) -> int:
    """The vocabulary size from the GGUF's token list, read with the gguf package."""
    import gguf
    reader = gguf.GGUFReader(model)
    return len(reader.fields["tokenizer.ggml.tokens"].data)


def flyweight_call(python: pathlib.Path, request: dict, timeout: float) -> dict:
    """One flyweight_side.py process: the JSON answer, or {"error": …}."""
    try:
        out = subprocess.run([str(python), str(ROOT / "bench/flyweight_side.py")],
                             input=json.dumps(request), capture_output=True, text=True,
                             timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    return parse_flyweight_answer(out.stdout, out.stderr)


def parse_flyweight_answer(stdout: str, stderr: str) -> dict:
    """The last JSON line flyweight_side.py printed; a crash without one becomes an error."""
    for line in reversed(stdout.strip().splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    tail = stderr.strip().splitlines()
    return {"error": tail[-1] if tail else "no answer"}


def sluice_greedy(args, model: pathlib.Path, extra: list[str]) -> dict:
    command = [str(args.sluice), "eval", "-m", str(model), "--tokens",
               ",".join(map(str, args.greedy_prompt)), "--greedy", str(args.greedy_n), "--json",
               "-t", str(args.threads), "-c", "256", *extra]
    out = subprocess.run(command, capture_output=True, text=True)
    if out.returncode != 0:
        return {"error": (out.stderr.strip().splitlines() or ["failed"])[-1]}
    return {"greedy": json.loads(out.stdout)["greedy_tokens"]}


def llama_cpp_greedy(model: pathlib.Path, prompt: list[int]) -> list[int] | None:
    ref = model.with_suffix(".ref.json")
    if not ref.is_file():
        return None
    data = json.loads(ref.read_text())
    return data["greedy_continuation"] if data.get("prompt_tokens") == prompt else None


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", type=pathlib.Path, default=DEFAULT_MODELS)
    parser.add_argument("--sluice", type=pathlib.Path, default=ROOT / "build" / "sluice")
    parser.add_argument("--flyweight-python", type=pathlib.Path,
                        default=ROOT / ".cache/fw/venv/bin/python",
                        help="the python of the venv flyweight-llm is installed in")
    parser.add_argument("-p", type=int, default=64, help="prompt tokens (one prefill call)")
    parser.add_argument("-n", type=int, default=16, help="generated tokens (one call each)")
    parser.add_argument("--threads", "-t", type=int, default=2)
    parser.add_argument("--rounds", "-r", type=int, default=5)
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--ram-budget", help="also time sluice under this RAM budget, e.g. 2G")
    parser.add_argument("--cold", action="store_true",
                        help="drop the page cache before every side of every round (root)")
    parser.add_argument("--greedy-prompt", type=lambda s: [int(x) for x in s.split(",")],
                        default=REF_PROMPT, help="ids for the greedy agreement check")
    parser.add_argument("--greedy-n", type=int, default=8)
    parser.add_argument("--timeout", type=float, default=1800,
                        help="seconds one flyweight process may take")
    parser.add_argument("--json-out", type=pathlib.Path, help="also write every result as JSON")
    args = parser.parse_args(argv)
    if args.p < 1 or args.n < 1 or args.rounds < 1 or args.threads < 1 or args.greedy_n < 1:
        parser.error("-p, -n, --threads, --rounds and --greedy-n must be at least 1")
    return args


def agreement(a: list[int] | None, b: list[int] | None) -> str:
    if a is None or b is None:
        return "n/a"
    same = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    return "identical" if a == b else f"first {same} of {min(len(a), len(b))} agree"


def compare_model(args, model: pathlib.Path) -> dict:
    entry: dict = {"model": str(model)}
    if not model.is_file():
        print(f"{model}: missing, skipped\n")
        entry["error"] = "file missing"
        return entry
    vocab = n_vocab(model)
    greedy_prompt = [t % vocab for t in args.greedy_prompt]
    fw = flyweight_call(args.flyweight_python, {
        "model": str(model), "threads": args.threads, "context": 256,
        "greedy_prompt": greedy_prompt, "greedy_n": args.greedy_n}, args.timeout)
    sl = sluice_greedy(args, model, [])
    ref = llama_cpp_greedy(model, greedy_prompt)
    entry.update(flyweight_greedy=fw.get("greedy"), sluice_greedy=sl.get("greedy"),
                 llama_cpp_greedy=ref, flyweight_error=fw.get("error"),
                 sluice_error=sl.get("error"), architecture=fw.get("architecture"))
    print(f"{model.name}: greedy over {greedy_prompt}")
    for name, result in (("sluice", sl), ("flyweight", fw)):
        print(f"  {name:9s} {result.get('greedy') or 'ERROR: ' + result.get('error', '?')}")
    if ref is not None:
        print(f"  llama.cpp {ref} (.ref.json)")
        print(f"  sluice vs llama.cpp: {agreement(sl.get('greedy'), ref)}; "
              f"flyweight vs llama.cpp: {agreement(fw.get('greedy'), ref)}")
    print(f"  sluice vs flyweight: {agreement(sl.get('greedy'), fw.get('greedy'))}")
    if "error" in fw or "error" in sl:
        print()
        return entry

    prompt, prefix, generated = common.bench_workload(args.seed, vocab, args.p, args.n)
    request = {"model": str(model), "threads": args.threads, "context": args.p + args.n + 8,
               "prompt": prompt, "prefix": prefix, "generated": generated}
    sides = {"sluice": common.sluice_bench_command(args.sluice, model, args.p, args.n,
                                                   args.threads, args.seed)}
    if args.ram_budget:
        sides["sluice-budget"] = common.sluice_bench_command(
            args.sluice, model, args.p, args.n, args.threads, args.seed,
            ["--ram-budget", args.ram_budget])
    for name, command in sides.items():
        print(f"  {name}: {shlex.join(command)}")
    rounds: dict[str, list[dict]] = {name: [] for name in [*sides, "flyweight"]}
    names = list(rounds)
    for r in range(args.rounds):
        order = names if r % 2 == 0 else names[::-1]
        for name in order:
            if args.cold:
                common.drop_page_cache()
            if name == "flyweight":
                result = flyweight_call(args.flyweight_python, request, args.timeout)
                if "error" in result:
                    raise RuntimeError(f"flyweight failed in round {r + 1}: {result['error']}")
                result = {"pp": result["pp"], "tg": result["tg"]}
            else:
                result = common.run_sluice_bench(sides[name])
            rounds[name].append(result)
            print(f"  round {r + 1} {name:13s} pp {result['pp']:9.2f} t/s  tg {result['tg']:8.2f} t/s",
                  flush=True)
    med = common.medians(rounds)
    for test in ("pp", "tg"):
        label = f"{test}{args.p if test == 'pp' else args.n}"
        fw_value = med["flyweight"][test]
        for name in sides:
            print(f"  {label:6s} median: {name} {med[name][test]:9.2f} t/s, flyweight "
                  f"{fw_value:9.2f} t/s, {name}/flyweight {med[name][test] / fw_value:.2f}")
    print()
    entry.update(rounds=rounds, medians=med)
    return entry


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    version = subprocess.run([str(args.flyweight_python), "-c",
                              "import importlib.metadata as m; print(m.version('flyweight-llm'))"],
                             capture_output=True, text=True).stdout.strip() or "not installed"
    print(f"command: {shlex.join([sys.executable, *sys.argv])}")
    print(f"machine: {common.machine()}")
    print(f"flyweight-llm {version} ({args.flyweight_python}), CPU backend, experts on the host, "
          f"F16 KV; sluice {args.sluice}, F16 KV")
    print(f"pp{args.p} / tg{args.n}, {args.threads} threads both sides, {args.rounds} rounds "
          f"alternating, page cache {'dropped before each side' if args.cold else 'warm'}\n")
    report = [compare_model(args, model) for model in args.models]
    print(f"machine at the end: {common.machine()}")
    if args.json_out:
        args.json_out.write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
