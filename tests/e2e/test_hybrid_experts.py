"""Hybrid placement (`--cpu-moe`, as llama.cpp's): the routed experts computed by a CPU backend of
their own while everything else runs on the model's backend. Here, without a GPU, both are CPU
backends — so the logits and greedy tokens must be bit for bit those of the plain run, which
checks the hybrid path's transfers (rows downloaded, experts computed on the other backend's
scratch, sums uploaded) on the tiny MoE models of ../shared/testdata/llamacpp-tiny whose forward
takes it (llama/Mixtral, qwen3moe, olmoe), resident and streamed."""
import json
import os
import pathlib
import subprocess

import pytest

SLUICE_BIN = os.environ.get("SLUICE_BIN")
TINY = pathlib.Path(os.environ.get("SLUICE_TESTDATA_DIR", "/nonexistent")) / "llamacpp-tiny"
PROMPT = "1,5,9,17,33,64,2,100,7,3,50,27"

if not SLUICE_BIN:
    pytest.skip("SLUICE_BIN is not set (run through ctest)", allow_module_level=True)
FILES = sorted(p for p in TINY.glob("*-moe*.gguf") if p.name.split("-")[0] in ("llama", "qwen3moe", "olmoe"))
if not FILES:
    pytest.skip(f"no tiny MoE models in {TINY} (../shared/testdata not present)", allow_module_level=True)


def evaluate(model, *extra):
    run = subprocess.run([SLUICE_BIN, "eval", "--model", str(model), "--tokens", PROMPT, "--json",
                          "--all-positions", "--greedy", "8", "--backend", "cpu", "--explain", *extra],
                         capture_output=True, timeout=120)
    assert run.returncode == 0, run.stderr.decode(errors="replace")
    return json.loads(run.stdout), run.stderr.decode()


@pytest.mark.parametrize("streamed", [False, True], ids=["resident", "streamed"])
@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_cpu_moe_gives_the_same_numbers(path, streamed):
    extra = ["--stream-experts"] if streamed else []
    plain, _ = evaluate(path, *extra)
    hybrid, explain = evaluate(path, "--cpu-moe", *extra)
    assert "routed experts: computed on the CPU from the host tier (--cpu-moe)" in explain
    assert hybrid == plain
