#!/usr/bin/env python3
"""Load on `sluice serve`: N concurrent clients, each sending R streamed OpenAI chat requests one
after another (short varied prompts, max_tokens tokens each), through the official openai SDK.
Reported: errors, time to first token (p50/p95, from sending the request to the first content
chunk), request latency, tokens generated (the usage of each stream) and aggregate tokens/s over
the wall time of the whole run. At the end /metrics must show no active or queued requests (no
leaked slots), and the server must exit 0 on SIGTERM.

--compare-llamacpp: the same load at 1, 4 and 16 clients against sluice and against llama.cpp's
own server (the one embedded in the xllamacpp wheel, run in a child process), on the same GGUF
with the same threads, parallel slots and per-slot context, alternating which side goes first in
each round; the end-of-generation token is banned on both sides (logit_bias) so that every
request generates exactly max_tokens tokens. Prints per-round numbers and the medians.

    .venv/bin/python bench/server_load.py --model MODEL.gguf [--clients 32] [--requests 10]
        [--max-tokens 32] [--parallel 4] [--threads N] [--sluice-bin build/sluice] [--json OUT]
    .venv/bin/python bench/server_load.py --model MODEL.gguf --compare-llamacpp [--requests 4]
        [--rounds 3] [--json OUT]
"""
from __future__ import annotations

import argparse
import json
import math
import os
import pathlib
import re
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

ROOT = pathlib.Path(__file__).resolve().parents[1]

PROMPTS = [
    "Name three fruits.", "What is the capital of Italy?", "Write a haiku about rain.",
    "Why is the sky blue?", "Give me a word that rhymes with cat.", "What is 12 times 7?",
    "Describe a cat in one sentence.", "Suggest a name for a dog.", "What do bees make?",
    "Tell me a fun fact about octopuses.", "How many legs does a spider have?",
    "Translate 'good morning' into French.", "What is the opposite of hot?",
    "List two primary colors.", "Who wrote Romeo and Juliet?",
    "What is the boiling point of water?",
    "Give me a tip for better sleep.", "What is a synonym for happy?", "Name a planet.",
    "What season comes after winter?", "Explain what a noun is.", "What is the largest ocean?",
    "Write one sentence about the moon.", "Say hello in Spanish.",
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url: str, timeout: float = 5) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as reply:
            return reply.status, reply.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace")


def wait_ready(url: str, proc: subprocess.Popen, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            raise SystemExit(f"the server at {url} exited {proc.returncode} while loading")
        try:
            if get(url + "/health", timeout=2)[0] == 200:
                return
        except (ConnectionError, urllib.error.URLError, socket.timeout):
            pass
        if time.monotonic() > deadline:
            raise SystemExit(f"the server at {url} was not ready after {timeout} s")
        time.sleep(0.1)


class ServerProcess:
    """A server child process on a free loopback port: ready on entry, SIGTERM on exit."""

    def __init__(self, name: str, command_for_port):
        self.name = name
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.command = command_for_port(self.port)
        self.log = open(os.devnull, "wb")
        self.proc = None
        self.exit_code = None

    def __enter__(self):
        self.proc = subprocess.Popen(self.command, stdin=subprocess.DEVNULL, stdout=self.log,
                                     stderr=self.log)
        try:
            wait_ready(self.url, self.proc)
        except BaseException:
            self.proc.kill()
            self.proc.wait()
            raise
        status, body = get(self.url + "/v1/models")
        self.model = json.loads(body)["data"][0]["id"] if status == 200 else "model"
        return self

    def __exit__(self, *exc):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            self.exit_code = self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.exit_code = self.proc.wait()
        self.log.close()
        return False


def sluice_server(args) -> ServerProcess:
    def command(port):
        return [str(args.sluice_bin), "serve", str(args.model), "--port", str(port),
                "--parallel", str(args.parallel), "--max-queue", str(max(64, args.max_clients)),
                "-t", str(args.threads), "--ctx", str(args.ctx), "--no-access-log"]
    return ServerProcess("sluice", command)


def llama_server(args) -> ServerProcess:
    def command(port):
        return [sys.executable, __file__, "--llama-server", "--model", str(args.model),
                "--port", str(port), "--threads", str(args.threads),
                "--parallel", str(args.parallel), "--ctx", str(args.ctx)]
    return ServerProcess("llama.cpp", command)


def llama_server_main(args) -> int:
    """Runs in the child: llama.cpp's server from the xllamacpp wheel until SIGTERM."""
    import xllamacpp
    params = xllamacpp.CommonParams()
    params.model.path = str(args.model)
    params.port = args.port
    params.n_parallel = args.parallel
    params.n_ctx = args.ctx * args.parallel  # llama.cpp splits n_ctx among its slots
    params.cpuparams.n_threads = args.threads
    params.cpuparams_batch.n_threads = args.threads
    params.endpoint_metrics = True
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    server = xllamacpp.Server(params)
    print(f"llama.cpp server listening on {server.listening_address}", file=sys.stderr, flush=True)
    while not stop.wait(0.5):
        pass
    del server
    return 0


def eos_bias(model: pathlib.Path) -> dict[str, int]:
    """logit_bias banning the model's end-of-generation tokens (from its GGUF metadata)."""
    import gguf
    reader = gguf.GGUFReader(str(model))
    ids = set()
    for key in ("tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id",
                "tokenizer.ggml.eom_token_id"):
        field = reader.fields.get(key)
        if field is not None:
            ids.add(int(field.parts[field.data[0]][0]))
    return {str(i): -100 for i in sorted(ids)}


def one_request(client, model: str, prompt: str, max_tokens: int, bias: dict) -> dict:
    start = time.perf_counter()
    ttft, tokens, text = None, 0, []
    try:
        extra = {"logit_bias": bias} if bias else {}
        stream = client.chat.completions.create(
            model=model, messages=[{"role": "user", "content": prompt}], max_tokens=max_tokens,
            temperature=0, stream=True, stream_options={"include_usage": True}, **extra)
        for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                if ttft is None:
                    ttft = time.perf_counter() - start
                text.append(chunk.choices[0].delta.content)
            if chunk.usage is not None:
                tokens = chunk.usage.completion_tokens
        error = None if tokens > 0 else "no usage in the stream, or no tokens"
    except Exception as e:  # noqa: BLE001 -- every failure is counted and reported
        error = f"{type(e).__name__}: {e}"
    return {"ttft": ttft, "tokens": tokens, "seconds": time.perf_counter() - start,
            "error": error, "chars": sum(map(len, text))}


def percentile(values: list[float], q: float) -> float | None:
    """Nearest-rank percentile (q in [0, 100])."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def run_load(url: str, model: str, clients: int, requests: int, max_tokens: int,
             bias: dict) -> dict:
    import openai
    results: list[dict] = []
    lock = threading.Lock()
    start_gate = threading.Barrier(clients + 1)

    def client_loop(index: int):
        client = openai.OpenAI(base_url=url + "/v1", api_key="x", max_retries=0, timeout=600)
        start_gate.wait()
        for r in range(requests):
            prompt = PROMPTS[(index * requests + r) % len(PROMPTS)]
            result = one_request(client, model, prompt, max_tokens, bias)
            with lock:
                results.append(result)

    threads = [threading.Thread(target=client_loop, args=(i,), daemon=True) for i in range(clients)]
    for t in threads:
        t.start()
    start_gate.wait()
    start = time.perf_counter()
    for t in threads:
        t.join()
    wall = time.perf_counter() - start
    ok = [r for r in results if r["error"] is None]
    ttfts = [r["ttft"] for r in ok if r["ttft"] is not None]
    latencies = [r["seconds"] for r in ok]
    tokens = sum(r["tokens"] for r in ok)
    errors = [r["error"] for r in results if r["error"] is not None]
    return {
        "clients": clients, "requests": len(results), "errors": len(errors),
        "error_samples": sorted(set(errors))[:5], "tokens": tokens, "wall_seconds": wall,
        "tokens_per_second": tokens / wall if wall > 0 else 0.0,
        "ttft_p50_ms": 1e3 * percentile(ttfts, 50) if ttfts else None,
        "ttft_p95_ms": 1e3 * percentile(ttfts, 95) if ttfts else None,
        "latency_p50_ms": 1e3 * percentile(latencies, 50) if latencies else None,
        "latency_p95_ms": 1e3 * percentile(latencies, 95) if latencies else None,
    }


def metric(text: str, name: str) -> float | None:
    m = re.search(rf"^{name} (\S+)$", text, re.M)
    return float(m.group(1)) if m else None


def leaked_requests(url: str, timeout: float = 10) -> dict:
    """sluice's active and queued requests once the load is over (polled: the engine thread
    retires a finished request a moment after its client got the last byte)."""
    deadline = time.monotonic() + timeout
    while True:
        text = get(url + "/metrics")[1]
        counts = {"active": metric(text, "sluice_active_requests"),
                  "queued": metric(text, "sluice_queue_depth")}
        if counts["active"] == 0 and counts["queued"] == 0 or time.monotonic() > deadline:
            return counts
        time.sleep(0.1)


def fmt(value, spec=".0f") -> str:
    return "-" if value is None else format(value, spec)


def print_summary(name: str, s: dict) -> None:
    print(f"{name}: {s['clients']} clients, {s['requests']} requests in {s['wall_seconds']:.1f} s, "
          f"{s['errors']} errors; "
          f"TTFT p50 {fmt(s['ttft_p50_ms'])} ms p95 {fmt(s['ttft_p95_ms'])} ms; "
          f"latency p50 {fmt(s['latency_p50_ms'])} ms p95 {fmt(s['latency_p95_ms'])} ms; "
          f"{s['tokens']} tokens, {s['tokens_per_second']:.1f} tokens/s", flush=True)
    for sample in s["error_samples"]:
        print(f"  error: {sample}", flush=True)


def load_mode(args) -> dict:
    bias = eos_bias(args.model) if args.ignore_eos else {}
    with sluice_server(args) as server:
        one_request(__import__("openai").OpenAI(base_url=server.url + "/v1", api_key="x"),
                    server.model, PROMPTS[0], 4, {})  # warm-up, not counted
        summary = run_load(server.url, server.model, args.clients, args.requests,
                           args.max_tokens, bias)
        summary["leaked"] = leaked_requests(server.url)
        summary["server_metrics"] = {
            k: metric(get(server.url + "/metrics")[1], k)
            for k in ("sluice_generated_tokens_total", "sluice_generate_tokens_per_second")}
    summary["exit_code"] = server.exit_code
    print_summary("sluice", summary)
    leaked = summary["leaked"]
    verdict = "ok" if leaked["active"] == 0 and leaked["queued"] == 0 else "LEAKED SLOTS"
    print(f"after the load: {fmt(leaked['active'])} active, {fmt(leaked['queued'])} queued "
          f"requests ({verdict}); "
          f"server exit code {server.exit_code}", flush=True)
    return summary


def compare_mode(args) -> dict:
    bias = eos_bias(args.model)
    client_counts = [1, 4, 16]
    rounds: dict[int, list[dict]] = {n: [] for n in client_counts}
    with sluice_server(args) as sluice, llama_server(args) as llama:
        sides = {"sluice": sluice, "llama.cpp": llama}
        import openai
        for side in sides.values():  # warm-up, not counted
            one_request(openai.OpenAI(base_url=side.url + "/v1", api_key="x"), side.model,
                        PROMPTS[0], 4, bias)
        for n in client_counts:
            for r in range(args.rounds):
                order = ["sluice", "llama.cpp"] if r % 2 == 0 else ["llama.cpp", "sluice"]
                row = {}
                for name in order:
                    row[name] = run_load(sides[name].url, sides[name].model, n, args.requests,
                                         args.max_tokens, bias)
                rounds[n].append(row)
                print(f"{n:>2} clients, round {r + 1}: " + " | ".join(
                    f"{name} {row[name]['tokens_per_second']:.1f} tok/s "
                    f"(TTFT p50 {fmt(row[name]['ttft_p50_ms'])} ms, {row[name]['errors']} errors)"
                    for name in ("sluice", "llama.cpp")), flush=True)
        leaked = leaked_requests(sluice.url)
    print(f"sluice after the load: {fmt(leaked['active'])} active, {fmt(leaked['queued'])} queued; "
          f"exit codes: sluice {sluice.exit_code}, llama.cpp {llama.exit_code}")
    table = []
    print(f"\nmedians over {args.rounds} rounds ({args.requests} requests per client, "
          f"{args.max_tokens} tokens each, {args.threads} threads, {args.parallel} slots):")
    print(f"{'clients':>7} {'sluice tok/s':>13} {'llama.cpp tok/s':>16} {'ratio':>6} "
          f"{'sluice TTFT p50':>16} {'llama.cpp TTFT p50':>19}")
    for n in client_counts:
        med = {name: statistics.median(row[name]["tokens_per_second"] for row in rounds[n])
               for name in ("sluice", "llama.cpp")}
        ttft = {name: statistics.median(row[name]["ttft_p50_ms"] or 0 for row in rounds[n])
                for name in ("sluice", "llama.cpp")}
        ratio = med["sluice"] / med["llama.cpp"] if med["llama.cpp"] else float("nan")
        table.append({"clients": n, "sluice_tps": med["sluice"], "llama_tps": med["llama.cpp"],
                      "ratio": ratio, "sluice_ttft_p50_ms": ttft["sluice"],
                      "llama_ttft_p50_ms": ttft["llama.cpp"]})
        print(f"{n:>7} {med['sluice']:>13.1f} {med['llama.cpp']:>16.1f} {ratio:>5.2f}x "
              f"{ttft['sluice']:>13.0f} ms {ttft['llama.cpp']:>16.0f} ms")
    errors = sum(row[name]["errors"] for rows in rounds.values() for row in rows for name in row)
    return {"medians": table, "errors": errors,
            "rounds": {str(n): rows for n, rows in rounds.items()},
            "sluice_leaked": leaked, "sluice_exit_code": sluice.exit_code,
            "llama_exit_code": llama.exit_code}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=pathlib.Path, required=True, help="GGUF file")
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--requests", type=int, default=None,
                        help="requests per client (default 10; 4 with --compare-llamacpp)")
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--parallel", type=int, default=4, help="generation slots of each server")
    parser.add_argument("--threads", "-t", type=int, default=len(os.sched_getaffinity(0)))
    parser.add_argument("--ctx", type=int, default=4096, help="context per slot")
    parser.add_argument("--sluice-bin", type=pathlib.Path, default=ROOT / "build" / "sluice")
    parser.add_argument("--ignore-eos", action="store_true",
                        help="ban the end-of-generation tokens (always on with --compare-llamacpp)")
    parser.add_argument("--compare-llamacpp", action="store_true")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per client count (compare)")
    parser.add_argument("--json", type=pathlib.Path, help="write the results here")
    parser.add_argument("--llama-server", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.llama_server:
        return llama_server_main(args)
    if not args.model.exists():
        raise SystemExit(f"no model at {args.model}")
    if not args.sluice_bin.exists():
        raise SystemExit(f"no sluice binary at {args.sluice_bin} (build it, or --sluice-bin)")
    if args.requests is None:
        args.requests = 4 if args.compare_llamacpp else 10
    args.max_clients = 16 if args.compare_llamacpp else args.clients
    config = {k: str(v) for k, v in vars(args).items() if k not in ("llama_server", "port")}
    result = compare_mode(args) if args.compare_llamacpp else load_mode(args)
    if args.json:
        args.json.write_text(json.dumps({"config": config, **result}, indent=1))
    failed = result.get("errors", 0) or result.get("exit_code", result.get("sluice_exit_code")) != 0
    leaked = result.get("leaked", result.get("sluice_leaked"))
    return 1 if failed or leaked["active"] != 0 or leaked["queued"] != 0 else 0


if __name__ == "__main__":
    sys.exit(main())
