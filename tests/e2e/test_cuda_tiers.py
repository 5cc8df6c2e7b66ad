"""The CUDA backend's invariants (runs where there is a CUDA device; skips, saying why, elsewhere):
  - the routed experts' device tier never changes the numbers: a synthetic tiny MoE
    (`sluice synth -g tiny-moe`: 4 layers × 16 experts, 4 used) gives bit for bit the same
    logits and greedy tokens with every expert on the GPU, with device slots fewer than the
    experts (4, 9), and with the experts streamed from disk through host slots into device slots;
  - recorded decode steps (CUDA graphs, replayed without re-recording) give what plain launches
    give: `SLUICE_CUDA_GRAPHS=0` against the default, which records or not as measuring says
    (both within 16 greedy steps) — for a dense model, and for the tiny MoE with every expert on
    the GPU, whose decode chooses its experts on the device and so is recorded too;
  - the hybrid placement (--cpu-moe) multiplies a long prefill chunk's experts on the device,
    through device slots: the chunk's logits are the GPU-tiered run's.
"""
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


def evaluate(model, *extra, env=None):
    run = subprocess.run([SLUICE_BIN, "eval", "--model", str(model), "--tokens", PROMPT, "--json",
                          "--greedy", "16", "--backend", "cuda", *extra], capture_output=True,
                         timeout=300, env=env)
    assert run.returncode == 0, run.stderr.decode(errors="replace")
    return json.loads(run.stdout)


@pytest.fixture(scope="module")
def tiny_moe(tmp_path_factory):
    path = tmp_path_factory.mktemp("tiers") / "tiny-moe.gguf"
    made = subprocess.run([SLUICE_BIN, "synth", "-g", "tiny-moe", "-o", str(path)],
                          capture_output=True, timeout=300)
    assert made.returncode == 0, made.stderr.decode(errors="replace")
    probe = subprocess.run([SLUICE_BIN, "eval", "--model", str(path), "--tokens", "1",
                            "--backend", "cuda"], capture_output=True, timeout=300)
    if probe.returncode != 0:
        pytest.skip("no CUDA backend here: " + probe.stderr.decode(errors="replace").strip()[-200:])
    return path


@pytest.mark.parametrize("tier", [["--gpu-expert-cache", "4"], ["--gpu-expert-cache", "9"],
                                  ["--stream-experts", "--ram-budget", "64M",
                                   "--gpu-expert-cache", "9"],
                                  ["--stream-experts", "--ram-budget", "64M",
                                   "--gpu-expert-cache", "9", "--no-prefetch"]],
                         ids=["4-slots", "9-slots", "streamed-9-slots", "streamed-no-prefetch"])
def test_device_slots_do_not_change_the_numbers(tiny_moe, tier):
    assert evaluate(tiny_moe, *tier) == evaluate(tiny_moe)


def test_recorded_decode_steps_equal_plain_ones(tiny_moe):
    model = TINY / "llama-dense.gguf"
    if not model.exists():
        pytest.skip(f"{model} is absent")
    plain = evaluate(model, env=dict(os.environ, SLUICE_CUDA_GRAPHS="0"))
    assert evaluate(model) == plain


def test_recorded_moe_decode_steps_equal_plain_ones(tiny_moe):
    plain = evaluate(tiny_moe, env=dict(os.environ, SLUICE_CUDA_GRAPHS="0"))
    assert evaluate(tiny_moe) == plain


def test_hybrid_runs_long_prefill_chunks_on_the_device(tiny_moe):
    """--cpu-moe: a chunk of 32+ tokens takes its experts through device slots to the GPU
    (experts::kHybridDevicePrefillTokens), so its logits are the GPU-tiered run's bit for bit; the
    decode that follows (experts on the CPU) is not compared."""
    long_prompt = ",".join(str((7 * i + 3) % 99 + 1) for i in range(40))

    def prefill(*extra):
        run = subprocess.run([SLUICE_BIN, "eval", "--model", str(tiny_moe), "--tokens", long_prompt,
                              "--json", "--all-positions", "--backend", "cuda", "--explain",
                              *extra], capture_output=True, timeout=300)
        assert run.returncode == 0, run.stderr.decode(errors="replace")
        return json.loads(run.stdout)["logits"], run.stderr.decode()

    hybrid, explain = prefill("--cpu-moe")
    assert "prefill chunks of 32+ tokens: experts copied to" in explain, explain
    tiered, _ = prefill("--gpu-moe", "--gpu-expert-cache", "9")
    assert hybrid == tiered
