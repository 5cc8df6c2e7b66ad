"""The flyweight-llm side of bench/compare_flyweight.py, run by the Python of flyweight's own venv
(flyweight must not be installed into the project venv). Reads one JSON request on stdin, prints
one JSON answer on stdout, exits; a fresh process per round, as `sluice bench` is.

Request: {"model", "threads", "context", "greedy_prompt", "greedy_n"} and, for a timed round,
{"prompt", "prefix", "generated"}. The model loads through flyweight's Python API (V2Model →
native_runtime on the CPU backend, routed experts on the host, F16 KV); loading and prepare() are
not timed. Then, like `sluice bench`: one untimed warm-up (the prompt, then one step), pp = the
prompt in one generate call that returns a single token (the prompt's forward plus its first
sample), and tg = after a reset and the 1-token prefix, one decode() call per id of `generated`
(each call feeds the given id, as `sluice bench` does, and returns flyweight's greedy pick).
reset() between phases clears the slot, so nothing is reused from an earlier phase; the answer
carries flyweight's prefix-cache counters to show it. Errors are one JSON line {"error": text}.
"""
from __future__ import annotations

import json
import sys
import time


def run(request: dict) -> dict:
    from flyweight.v2 import V2Model  # the flyweight venv only

    V2Model.select_backend("cpu")
    answer: dict = {}
    with V2Model(request["model"]) as model:
        answer["architecture"] = str(model.config.get("architecture", "?"))
        options = {"expert_mode": "cpu", "cpu_threads": int(request["threads"]),
                   "context_limit": int(request["context"]), "context_explicit": True,
                   "cache_type_k": "f16", "cache_type_v": "f16"}
        with model.native_runtime(**options) as runtime:
            runtime.prepare()
            if request.get("greedy_prompt"):
                runtime.reset()
                tokens: list[int] = []
                runtime.generate(list(request["greedy_prompt"]), int(request["greedy_n"]),
                                 tokens.append)
                answer["greedy"] = tokens
            if request.get("prompt"):
                prompt, prefix, generated = request["prompt"], request["prefix"], request["generated"]
                runtime.reset()  # warm-up
                runtime.generate(prompt, 1, lambda _t: None)
                runtime.decode(generated[0])
                runtime.reset()
                start = time.perf_counter()
                runtime.generate(prompt, 1, lambda _t: None)
                answer["pp"] = len(prompt) / (time.perf_counter() - start)
                runtime.reset()
                runtime.generate(prefix, 1, lambda _t: None)
                start = time.perf_counter()
                for token in generated:
                    runtime.decode(token)
                answer["tg"] = len(generated) / (time.perf_counter() - start)
            info = runtime.info
            answer["counters"] = {k: info.get(k) for k in (
                "prefix_cache_hits", "prefix_cache_last_reused_tokens", "static_tensor_bytes",
                "expert_tensor_bytes", "expert_mode", "host_available_bytes")}
    return answer


def main() -> int:
    try:
        answer = run(json.loads(sys.stdin.read()))
    except Exception as error:  # noqa: BLE001 - every refusal becomes one line for the report
        print(json.dumps({"error": str(error).strip().splitlines()[-1] if str(error).strip()
                          else type(error).__name__}))
        return 1
    print(json.dumps(answer))
    return 0


if __name__ == "__main__":
    sys.exit(main())
