"""The plumbing of bench/cuda_offload.py, never its timings (it runs on the GPU machine):
- --dry-run lists the three placements' commands with their flags (GPU-tiered prefill with
  -n 0, GPU-tiered decode with -p 0 and --stats-json, hybrid with --cpu-moe, llama-bench with
  -ngl 999 -ot exps=CPU), the order reversing every round;
- the parsers on samples written by hand from the real formats: `sluice bench --json`
  (src/cli/bench_command.cpp, report()), `--stats-json` (src/cli/engine_options.cpp,
  write_expert_outputs: nlohmann's dump(1), keys sorted), `llama-bench -o json`
  (tools/llama-bench/llama-bench.cpp, json_printer, with this version's fields) and the
  --explain lines; the miss bytes per decode token and the PCIe bound worked out by hand;
- the whole loop with stand-in binaries: medians, the bound, ratios, the --out JSON, and a
  failing placement that gives "failed" cells and exit 1, not a traceback;
- with the real binary (SLUICE_BIN; skips otherwise), on the CPU: a `-p 0` bench closes exactly
  2 + R × (1 + T) expert steps, each one token's (hits + misses = steps × MoE layers × experts
  used), which is what makes device_bytes_copied / steps the per-decode-token figure; and the
  experts' bytes and count from `sluice inspect --json` agree with the gguf package.
"""
import json
import os
import pathlib
import stat
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
import cuda_offload as offload  # noqa: E402

SLUICE_BIN = os.environ.get("SLUICE_BIN")
SCRIPT = ROOT / "bench" / "cuda_offload.py"

# Qwen3-30B-A3B's expert in Q4_K: gate and up [2048, 768], down [768, 2048]; 144 bytes per 256
# weights: 3 × 2048 × 768 / 256 × 144 = 2 654 208 bytes.
EXPERT_BYTES = 2654208
# `sluice bench -p 0 -n 128 -r 3`: 2 + 3 × 129 = 389 one-token steps; 48 layers × 8 experts =
# 384 acquired per step, 346 of them device misses.
STEPS, MISSES_PER_TOKEN = 389, 346
STATS_JSON = json.dumps({
    "bytes_read": 0, "device_bytes_copied": STEPS * MISSES_PER_TOKEN * EXPERT_BYTES,
    "device_hits": STEPS * (384 - MISSES_PER_TOKEN), "device_misses": STEPS * MISSES_PER_TOKEN,
    "device_slots": 614, "direct_io": True, "evictions": 0, "experts_read": 0,
    "hits": STEPS * 384, "io_engine": "", "io_wait_seconds": 0.0, "layer_hits": [3112] * 48,
    "layer_misses": [0] * 48, "misses": 0, "read_seconds": 0.0, "slot_bytes": 0, "slots": 0,
    "speculative_reads": 0, "speculative_used": 0, "speculative_wasted": 0,
    "step_bytes_read": [0] * STEPS, "step_hits": [384] * STEPS,
    "step_io_wait_seconds": [0.0] * STEPS, "step_misses": [0] * STEPS, "steps": STEPS,
    "streaming": False}, indent=1)


def sluice_json(pp_n, pp, tg_n, tg):
    """`sluice bench --json` as report() writes it; a skipped test (-p 0 / -n 0) reads 0."""
    def series(n, rates):
        rates = rates or [0.0]
        s = sorted(rates)
        return (f'{{"n": {n}, "tokens_per_s": [{", ".join(f"{r:.3f}" for r in rates)}], '
                f'"median": {s[len(s) // 2]:.3f}, "min": {s[0]:.3f}, "max": {s[-1]:.3f}}}')
    return ('{"model": "q30.gguf", "architecture": "qwen3moe", "backend": "cuda", "device": '
            '"NVIDIA H200 (sm_90)", "threads": 0, "kv": "f16", "repetitions": 3, '
            f'"pp": {series(pp_n, pp)}, "tg": {series(tg_n, tg)}}}\n')


SLUICE_PREFILL = sluice_json(512, [900.0, 1000.0, 950.0], 0, None)
SLUICE_DECODE = sluice_json(0, None, 128, [19.0, 20.0, 21.0])
SLUICE_HYBRID = sluice_json(512, [1500.0, 1600.0, 1400.0], 128, [30.0, 28.0, 29.0])

# `llama-bench -m q30.gguf -ngl 999 -ot exps=CPU -fa 1 -p 512 -n 128 -r 3 -o json`, in
# json_printer's layout. pp: 512 tokens in 400, 500, 640 ms -> 1280, 1024, 800 t/s (median
# 1024); tg: 128 tokens in 4.0, 3.2, 5.12 s -> 32, 40, 25 t/s (median 32, mean 32.33).
def llama_entry(n_prompt, n_gen, samples_ns, samples_ts, avg_ts):
    return {
        "build_commit": "0c1e570", "build_number": 7100, "cpu_info": "Intel(R) Xeon(R)",
        "gpu_info": "NVIDIA H200", "backends": "CUDA", "model_filename": "q30.gguf",
        "model_type": "qwen3moe 30B.A3B Q4_K - Medium", "model_size": 17179869184,
        "model_n_params": 30532122624, "n_batch": 2048, "n_ubatch": 512, "n_threads": 16,
        "cpu_mask": "0x0", "cpu_strict": False, "poll": 50, "type_k": "f16", "type_v": "f16",
        "n_gpu_layers": 999, "n_cpu_moe": 0, "split_mode": "layer", "main_gpu": 0,
        "no_kv_offload": False, "flash_attn": 1, "devices": "auto", "tensor_split": "0.00",
        "tensor_buft_overrides": "exps=CPU", "load_mode": "mmap", "lazy_mode": "auto",
        "embeddings": False, "no_op_offload": 0, "no_host": False, "repack": True,
        "fit_target": 0, "fit_min_ctx": 0, "n_prompt": n_prompt, "n_gen": n_gen, "n_depth": 0,
        "test_time": "2026-11-30T10:00:00Z", "avg_ns": int(sum(samples_ns) / 3),
        "stddev_ns": 0, "avg_ts": avg_ts, "stddev_ts": 0.0, "samples_ns": samples_ns,
        "samples_ts": samples_ts}


LLAMA_BENCH_JSON = json.dumps([
    llama_entry(512, 0, [400000000, 500000000, 640000000], [1280, 1024, 800], 1034.666667),
    llama_entry(0, 128, [4000000000, 3200000000, 5120000000], [32, 40, 25], 32.333333),
], indent=2)

# `--explain` on stderr (src/runtime/loaded_model.cpp: the backend line first, then the RAM
# planner's lines of src/experts/planner.cpp, the expert layout, the device planner's of
# src/experts/device_planner.cpp), one line each as the engine prints them.
EXPLAIN = "".join("placement: " + line + "\n" for line in [
    "backend: cuda on NVIDIA H200 (sm_90) (weights, activations and KV cache in "
    "device memory)",
    "budget 115.20 GiB (available memory minus max(10%, 2 GiB))",
    "resident: 0.98 GiB of weights (all but the routed experts) + 384.0 MiB KV cache + "
    "364.0 MiB scratch = 1.71 GiB",
    "routed experts: 48 layers, 15.19 GiB in all, 2.5 MiB per expert",
    "everything fits: routed experts stay resident (mapped from the file)",
    "expert layout: the model file's (one read per part; `sluice repack` makes one read per "
    "expert)",
    "routed experts: computed on the CPU from the host tier (hybrid), faster than the device "
    "tier by the measured rates; per token: device tier 67.74 ms (542 MB of copies at 8.0 GB/s "
    "host to device = 67.74 ms, 47% expected slot hits with 45% of a token's experts repeating "
    "the previous token's, overlapped layer by layer with 1.35 ms of device compute at "
    "1360.0 GB/s) against hybrid 10.19 ms (9.59 ms of expert matvecs on the CPU at 106.3 GB/s "
    "after 0.60 ms of the rest on the device, not overlapped)",
    "rates: measured now, kept in /tmp/x/calibration.json"])


def test_dry_run_lists_every_placement_with_its_flags():
    done = subprocess.run([sys.executable, SCRIPT, "--dry-run", "--rounds", "2", "--sluice", "S",
                           "--llama-bench", "L", "--gpu-expert-cache", "512", "--stats-dir", "D",
                           "q30.gguf"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    commands = [line for line in done.stdout.splitlines() if not line.startswith("#")]
    tiered = "S bench -m q30.gguf --backend cuda --gpu-moe --vram-budget 3G --gpu-expert-cache 512"
    prefill = f"{tiered} -p 512 -n 0 -r 3 --json"
    decode = f"{tiered} -p 0 -n 128 -r 3 --json --stats-json D/tiered-decode.round"
    hybrid = ("S bench -m q30.gguf --backend cuda --cpu-moe --vram-budget 3G -p 512 -n 128 -r 3 "
              "--json")
    llama = "L -m q30.gguf -ngl 999 -ot exps=CPU -fa 1 -p 512 -n 128 -r 3 -o json"
    assert commands[0] == "S inspect --json q30.gguf"
    assert commands[2] == ("SLUICE_CALIBRATION_FILE=D/calibration.json S bench -m q30.gguf "
                           "--backend cuda --vram-budget 3G -p 0 -n 1 -r 1 --no-warmup --explain "
                           "--json")
    assert commands[3:] == [prefill, decode + "1.json", hybrid, llama,
                            llama, hybrid, decode + "2.json", prefill]


def test_bad_arguments_are_one_line_usage_errors():
    done = subprocess.run([sys.executable, SCRIPT, "--dry-run", "--vram-budget", "lots", "m.gguf"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "--vram-budget: 'lots' is not a size" in done.stderr
    assert "Traceback" not in done.stderr


def test_sizes_are_read_as_sluice_reads_them():
    assert offload.parse_size("3G") == 3 << 30
    assert offload.parse_size("1.5GiB") == 3 << 29
    assert offload.parse_size("512MiB") == 512 << 20
    assert offload.parse_size("1073741824") == 1 << 30
    for bad in ("3X", "", "-1G", "G"):
        with pytest.raises(ValueError):
            offload.parse_size(bad)


def test_decode_misses_and_the_pcie_bound_by_hand():
    assert offload.decode_steps_expected(128, 3) == STEPS
    got = offload.decode_misses(json.loads(STATS_JSON), STEPS)
    assert got["steps"] == STEPS and got["device_slots"] == 614
    assert got["misses_per_token"] == pytest.approx(346)
    assert got["miss_bytes_per_token"] == pytest.approx(346 * EXPERT_BYTES)  # 875.8 MiB
    assert got["device_hit_rate"] == pytest.approx(38 / 384)
    # 55 GB/s over 918 355 968 bytes per token: 59.89 tokens/s; 20 t/s is 33.4% of it.
    bound = offload.pcie_bound(55e9, got["miss_bytes_per_token"], 20.0)
    assert bound["bound_tg"] == pytest.approx(55e9 / 918355968)
    assert bound["bound_tg"] == pytest.approx(59.889, abs=1e-3)
    assert bound["fraction_of_bound"] == pytest.approx(20.0 / 59.889, rel=1e-4)
    assert offload.pcie_bound(None, 1.0, 20.0)["bound_tg"] is None
    assert offload.pcie_bound(55e9, 0.0, 20.0)["note"] == "no misses"


def test_wrong_guesses_are_copied_bytes_but_not_miss_bytes():
    # Per token: 100 demand misses and 200 guesses copied, 150 of the guesses then acquired:
    # 300 experts crossed the bus, 250 of them were needed.
    stats = json.loads(STATS_JSON)
    stats.update({"device_misses": STEPS * 100, "device_prefetched": STEPS * 200,
                  "device_prefetch_used": STEPS * 150,
                  "device_bytes_copied": STEPS * 300 * EXPERT_BYTES})
    got = offload.decode_misses(stats)
    assert got["misses_per_token"] == pytest.approx(100)
    assert got["guesses_per_token"] == pytest.approx(200)
    assert got["guesses_used_per_token"] == pytest.approx(150)
    assert got["copied_bytes_per_token"] == pytest.approx(300 * EXPERT_BYTES)
    assert got["miss_bytes_per_token"] == pytest.approx(250 * EXPERT_BYTES)
    # 55 GB/s over 250 experts of 2 654 208 bytes: 82.89 tokens/s.
    assert offload.pcie_bound(55e9, got["miss_bytes_per_token"], 50.0)["bound_tg"] == \
        pytest.approx(82.887, abs=1e-3)


def test_decode_misses_refuse_a_run_without_a_device_tier():
    stats = json.loads(STATS_JSON)
    stats["device_slots"] = 0
    with pytest.raises(ValueError, match="no device expert slots"):
        offload.decode_misses(stats)


def test_parsers_read_the_real_formats():
    llama = offload.parse_llama_bench("ggml_cuda_init: found 1 CUDA devices\n" + LLAMA_BENCH_JSON)
    assert llama["pp"] == pytest.approx(1024) and llama["tg"] == pytest.approx(32)
    assert offload.parse_sluice(SLUICE_DECODE)["tg"] == pytest.approx(20.0)
    assert offload.sluice_device(SLUICE_DECODE) == "NVIDIA H200 (sm_90)"
    plan = offload.parse_explain(EXPLAIN)
    assert plan["chosen"] == "hybrid" and "faster than the device tier" in plan["reason"]
    assert len(plan["lines"]) == 8
    tiered = offload.parse_explain("placement: device: 614 expert slots of 2.53 MiB (1.52 GiB) "
                                   "in front of the host tier, 6144 experts in all (15.18 GiB)\n")
    assert tiered["chosen"] == "gpu-tiered"


def test_expert_geometry_and_oversubscription():
    inspect = {"tensors": [
        {"name": "token_embd.weight", "shape": [2048, 151936], "bytes": 100},
        *({"name": f"blk.{i}.ffn_{part}_exps.weight", "shape": [2048, 768, 128],
           "bytes": 128 * EXPERT_BYTES // 3}
          for i in range(48) for part in ("gate", "up", "down"))]}
    geometry = offload.expert_geometry(inspect)
    assert geometry == {"expert_bytes": 6144 * EXPERT_BYTES, "n_experts": 6144}
    over = offload.oversubscription(geometry, 3 << 30, 614)
    assert over["experts_over_budget"] == pytest.approx(6144 * EXPERT_BYTES / (3 << 30))  # 5.06
    assert over["experts_over_slots"] == pytest.approx(6144 / 614)
    with pytest.raises(ValueError, match="not a MoE"):
        offload.expert_geometry({"tensors": inspect["tensors"][:1]})


def test_calibration_entries_and_the_h2d_fallbacks(tmp_path):
    path = tmp_path / "calibration.json"
    path.write_text(json.dumps({"entries": [
        {"device": "other", "threads": 16, "expert_type": "Q4_K", "h2d_bytes_per_s": 1e9,
         "cpu_bytes_per_s": 1e9},
        {"device": "H200", "threads": 16, "expert_type": "Q4_K", "h2d_bytes_per_s": 5.3e10,
         "cpu_bytes_per_s": 1e11}]}))
    entry = offload.calibration_entry(path, "H200")
    assert entry["h2d_bytes_per_s"] == 5.3e10
    assert offload.calibration_entry(path, "absent") is None
    assert offload.calibration_entry(tmp_path / "missing.json", None) is None
    args = offload.parse_args(["--dry-run", "m.gguf"])
    probe = {"error": "torch is not installed"}
    sluice = {**entry, "file": str(path)}
    assert offload.choose_h2d(args, {"pinned_bytes_per_s": 5.5e10, "source": "torch"},
                              sluice)["bytes_per_s"] == 5.5e10
    assert offload.choose_h2d(args, probe, sluice)["bytes_per_s"] == 5.3e10
    args.h2d_gbps = 50
    assert offload.choose_h2d(args, probe, sluice)["bytes_per_s"] == 50e9
    args.h2d_gbps = None
    assert offload.choose_h2d(args, probe, None)["bytes_per_s"] is None


# A stand-in `sluice`: inspect prints a Qwen3-30B-A3B-shaped catalogue; bench prints the JSON of
# the placement its flags name (and --explain's lines, a calibration file, --stats-json).
STAND_IN_SLUICE = r'''#!{python}
import json, os, pathlib, sys
argv = sys.argv[1:]
data = pathlib.Path({data!r})
with open(data / "calls.log", "a") as log:
    log.write("sluice " + " ".join(argv) + "\n")
if argv[0] == "inspect":
    print((data / "inspect.json").read_text())
    sys.exit(0)
if os.environ.get("FAIL_HYBRID") and "--cpu-moe" in argv:
    print("error: backend cuda: no CUDA device found", file=sys.stderr)
    sys.exit(1)
if "--explain" in argv:
    sys.stderr.write((data / "explain.txt").read_text())
    calibration = pathlib.Path(os.environ["SLUICE_CALIBRATION_FILE"])
    calibration.write_text((data / "calib.json").read_text())
    print((data / "decode.json").read_text())
    sys.exit(0)
if "--stats-json" in argv:
    stats = pathlib.Path(argv[argv.index("--stats-json") + 1])
    stats.write_text((data / "stats.json").read_text())
if "--cpu-moe" in argv:
    name = "hybrid"
else:
    name = "prefill" if argv[argv.index("-n") + 1] == "0" else "decode"
print((data / (name + ".json")).read_text())
'''


def stand_ins(tmp_path):
    (tmp_path / "inspect.json").write_text(json.dumps({"tensors": [
        {"name": f"blk.{i}.ffn_{p}_exps.weight", "shape": [2048, 768, 128],
         "bytes": 128 * EXPERT_BYTES // 3} for i in range(48) for p in ("gate", "up", "down")]}))
    (tmp_path / "explain.txt").write_text(EXPLAIN)
    (tmp_path / "calib.json").write_text(json.dumps({"entries": [
        {"device": "NVIDIA H200 (sm_90)", "threads": 16, "expert_type": "Q4_K",
         "h2d_bytes_per_s": 5.3e10, "cpu_bytes_per_s": 1.04e11}]}))
    (tmp_path / "stats.json").write_text(STATS_JSON)
    (tmp_path / "prefill.json").write_text(SLUICE_PREFILL)
    (tmp_path / "decode.json").write_text(SLUICE_DECODE)
    (tmp_path / "hybrid.json").write_text(SLUICE_HYBRID)
    (tmp_path / "llama.json").write_text(LLAMA_BENCH_JSON)
    sluice = tmp_path / "sluice"
    sluice.write_text(STAND_IN_SLUICE.format(python=sys.executable, data=str(tmp_path)))
    llama = tmp_path / "llama-bench"
    llama.write_text(f'#!/bin/sh\necho "llama-bench $*" >> {tmp_path}/calls.log\n'
                     f'cat {tmp_path}/llama.json\n')
    for tool in (sluice, llama):
        tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
    return sluice, llama


def run_script(tmp_path, *extra, env=None):
    sluice, llama = stand_ins(tmp_path)
    return subprocess.run([sys.executable, SCRIPT, "--sluice", sluice, "--llama-bench", llama,
                           "--rounds", "2", "--stats-dir", tmp_path / "stats", "--no-torch-probe",
                           *extra, "q30.gguf"],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "HOME": str(tmp_path), **(env or {})})


def test_the_loop_gives_medians_the_bound_and_ratios(tmp_path):
    out = tmp_path / "offload.json"
    done = run_script(tmp_path, "--h2d-gbps", "55", "--out", out)
    assert done.returncode == 0, done.stderr
    calls = [line.split()[0] + (" " + line.split()[1] if line.startswith("sluice bench") else "")
             for line in (tmp_path / "calls.log").read_text().splitlines()]
    assert calls[:2] == ["sluice", "sluice bench"]  # inspect, the auto plan
    assert len(calls) == 2 + 2 * 4 and calls[5] == "llama-bench" and calls[6] == "llama-bench"
    results = json.loads(out.read_text())
    s = results["summary"]
    assert s["gpu-tiered"]["pp"] == pytest.approx(950)
    assert s["gpu-tiered"]["tg"] == pytest.approx(20)
    assert s["gpu-tiered"]["miss_bytes_per_token"] == pytest.approx(346 * EXPERT_BYTES)
    assert s["gpu-tiered"]["bound_tg"] == pytest.approx(55e9 / (346 * EXPERT_BYTES))
    assert s["gpu-tiered"]["fraction_of_bound"] == pytest.approx(20 * 346 * EXPERT_BYTES / 55e9)
    assert s["hybrid"]["vs_llama.cpp"]["pp"] == pytest.approx(1500 / 1024)
    assert s["hybrid"]["vs_llama.cpp"]["tg"] == pytest.approx(29 / 32)
    assert results["rounds"][0]["tiered-decode"]["steps_expected"] == STEPS
    assert results["auto_plan"]["chosen"] == "hybrid"
    assert results["sluice_calibration"]["this run"]["h2d_bytes_per_s"] == 5.3e10
    assert results["h2d"]["bytes_per_s"] == 55e9
    assert results["oversubscription"]["experts_over_budget"] == pytest.approx(5.06, abs=0.01)
    assert ("| sluice GPU-tiered (--gpu-moe, --vram-budget 3G) | 950.0 | 20.00 | 875.8 | 59.9 | "
            "33% | 0.93 | 0.62 | 2/2 of 2 |") in done.stdout
    assert ("| sluice hybrid (--cpu-moe) | 1500.0 | 29.00 | — | — | — | 1.46 | 0.91 | "
            "2/2 of 2 |") in done.stdout
    assert ("| llama.cpp -ngl 999 -ot exps=CPU | 1024.0 | 32.00 | — | — | — | 1.00 | 1.00 |"
            in done.stdout)
    assert "5.06x the --vram-budget of 3G; 614 device slots hold 1 in 10.0" in done.stdout
    assert "sluice's own choice at this budget: hybrid" in done.stdout


def test_without_torch_or_h2d_gbps_the_bound_uses_sluices_calibration(tmp_path):
    done = run_script(tmp_path, "--rounds", "1")
    assert done.returncode == 0, done.stderr
    assert "H2D bandwidth: 53.0 GB/s (sluice's calibration" in done.stdout
    assert "torch probe: skipped (--no-torch-probe)" in done.stdout
    assert "| 950.0 | 20.00 | 875.8 | 57.7 | 35% |" in done.stdout


def test_a_failing_placement_gives_failed_cells_not_a_traceback(tmp_path):
    done = run_script(tmp_path, "--h2d-gbps", "55", env={"FAIL_HYBRID": "1"})
    assert done.returncode == 1
    assert "Traceback" not in done.stderr and "no CUDA device found" in done.stderr
    assert ("| sluice hybrid (--cpu-moe) | failed | failed | — | — | — | failed | failed | "
            "0/0 of 2 |") in done.stdout
    assert "| 950.0 | 20.00 | 875.8 | 59.9 | 33% |" in done.stdout  # the rest still measured


@pytest.mark.skipif(not SLUICE_BIN, reason="SLUICE_BIN not set (run through ctest)")
def test_a_decode_only_bench_counts_one_token_steps_and_inspect_counts_experts(tmp_path):
    gguf = pytest.importorskip("gguf")
    model = tmp_path / "tiny-moe.gguf"
    subprocess.run([SLUICE_BIN, "synth", "-g", "tiny-moe", "-o", model, "--seed", "1"],
                   check=True, capture_output=True, timeout=120)
    stats = tmp_path / "stats.json"
    subprocess.run([SLUICE_BIN, "bench", "-m", model, "--backend", "cpu", "--stream-experts",
                    "-p", "0", "-n", "5", "-r", "2", "--json", "--stats-json", stats],
                   check=True, capture_output=True, timeout=120)
    counters = json.loads(stats.read_text())
    reader = gguf.GGUFReader(str(model))
    used = int(reader.get_field("qwen3moe.expert_used_count").contents())
    exps = [t for t in reader.tensors if "_exps" in t.name]
    moe_layers = len({t.name.split(".")[1] for t in exps})
    assert counters["steps"] == offload.decode_steps_expected(5, 2) == 14
    assert counters["hits"] + counters["misses"] == counters["steps"] * moe_layers * used

    inspect = subprocess.run([SLUICE_BIN, "inspect", "--json", model], check=True,
                             capture_output=True, text=True, timeout=60)
    geometry = offload.expert_geometry(json.loads(inspect.stdout))
    assert geometry["expert_bytes"] == sum(int(t.n_bytes) for t in exps)
    n_expert = int(reader.get_field("qwen3moe.expert_count").contents())
    assert geometry["n_experts"] == moe_layers * n_expert
