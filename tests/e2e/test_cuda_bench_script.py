"""The plumbing of bench/cuda_vs_llamacpp.py, never its timings (it runs on the GPU machine):
- llama-bench's JSON is read from a sample written by hand from the format of json_printer in
  llama.cpp's tools/llama-bench/llama-bench.cpp (an array, one object per test, fields in
  test::get_fields() order, then samples_ns and samples_ts; samples_ts[i] = 1e9 * (n_prompt +
  n_gen) / samples_ns[i], avg_ts their mean): pp and tg are told apart by n_prompt / n_gen, and
  the median of samples_ts is taken, not avg_ts;
- the whole loop with stand-in binaries that print those formats: alternation, medians over
  rounds, ratios, the --out JSON, and a failing side that gives "failed" cells and exit 1, not
  a traceback; --dry-run prints the commands;
- the roofline's weight bytes per token from the real `sluice inspect --json` of a synthetic
  tiny-llama agree with the same sum taken with the gguf package (SLUICE_BIN; skips otherwise).
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
import cuda_vs_llamacpp as bench  # noqa: E402

SLUICE_BIN = os.environ.get("SLUICE_BIN")
SCRIPT = ROOT / "bench" / "cuda_vs_llamacpp.py"

# `llama-bench -m model.gguf -p 512 -n 128 -r 3 -ngl 999 -fa 1 -o json`, written by hand in
# json_printer's layout. pp: 512 tokens in 100, 110, 125 ms -> 5120, 4654.55, 4096 t/s (median
# 4654.55, mean 4623.5); tg: 128 tokens in 800, 640, 1000 ms -> 160, 200, 128 t/s (median 160,
# mean 162.67).
LLAMA_BENCH_JSON = """[
  {
    "build_commit": "0104b151",
    "build_number": 7000,
    "cpu_info": "Intel(R) Xeon(R) Platinum 8480+",
    "gpu_info": "NVIDIA H200",
    "backends": "CUDA",
    "model_filename": "model.gguf",
    "model_type": "llama 8B Q4_K - Medium",
    "model_size": 4517691392,
    "model_n_params": 8030261248,
    "n_batch": 2048,
    "n_ubatch": 512,
    "n_threads": 16,
    "cpu_mask": "0x0",
    "cpu_strict": false,
    "poll": 50,
    "type_k": "f16",
    "type_v": "f16",
    "n_gpu_layers": 999,
    "n_cpu_moe": 0,
    "split_mode": "layer",
    "main_gpu": 0,
    "no_kv_offload": false,
    "flash_attn": 1,
    "devices": "auto",
    "tensor_split": "0.00",
    "tensor_buft_overrides": "none",
    "load_mode": "mmap",
    "embeddings": false,
    "no_op_offload": 0,
    "no_host": false,
    "fit_target": 0,
    "fit_min_ctx": 0,
    "n_prompt": 512,
    "n_gen": 0,
    "n_depth": 0,
    "test_time": "2026-11-30T10:00:00Z",
    "avg_ns": 111666666,
    "stddev_ns": 12583057,
    "avg_ts": 4623.515152,
    "stddev_ts": 512.134000,
    "samples_ns": [ 100000000, 110000000, 125000000 ],
    "samples_ts": [ 5120, 4654.55, 4096 ]
  },
  {
    "build_commit": "0104b151",
    "build_number": 7000,
    "cpu_info": "Intel(R) Xeon(R) Platinum 8480+",
    "gpu_info": "NVIDIA H200",
    "backends": "CUDA",
    "model_filename": "model.gguf",
    "model_type": "llama 8B Q4_K - Medium",
    "model_size": 4517691392,
    "model_n_params": 8030261248,
    "n_batch": 2048,
    "n_ubatch": 512,
    "n_threads": 16,
    "cpu_mask": "0x0",
    "cpu_strict": false,
    "poll": 50,
    "type_k": "f16",
    "type_v": "f16",
    "n_gpu_layers": 999,
    "n_cpu_moe": 0,
    "split_mode": "layer",
    "main_gpu": 0,
    "no_kv_offload": false,
    "flash_attn": 1,
    "devices": "auto",
    "tensor_split": "0.00",
    "tensor_buft_overrides": "none",
    "load_mode": "mmap",
    "embeddings": false,
    "no_op_offload": 0,
    "no_host": false,
    "fit_target": 0,
    "fit_min_ctx": 0,
    "n_prompt": 0,
    "n_gen": 128,
    "n_depth": 0,
    "test_time": "2026-11-30T10:00:05Z",
    "avg_ns": 813333333,
    "stddev_ns": 180369990,
    "avg_ts": 162.666667,
    "stddev_ts": 36.073998,
    "samples_ns": [ 800000000, 640000000, 1000000000 ],
    "samples_ts": [ 160, 200, 128 ]
  }
]
"""

# What `sluice bench --json` prints (src/cli/bench_command.cpp, report()).
SLUICE_BENCH_JSON = ('{"model": "model.gguf", "architecture": "llama", "threads": 0, "kv": "f16", '
                     '"repetitions": 3, "pp": {"n": 512, "tokens_per_s": [4000.000, 4100.000, '
                     '3900.000], "median": 4000.000, "min": 3900.000, "max": 4100.000}, "tg": '
                     '{"n": 128, "tokens_per_s": [170.000, 180.000, 175.000], "median": 175.000, '
                     '"min": 170.000, "max": 180.000}}\n')


def test_llama_bench_json_gives_the_median_of_each_test():
    got = bench.parse_llama_bench("ggml_cuda_init: found 1 CUDA devices\n" + LLAMA_BENCH_JSON)
    assert got["pp"] == pytest.approx(4654.55)
    assert got["tg"] == pytest.approx(160)
    assert got["pp_avg"] == pytest.approx(4623.515152) and got["tg_avg"] == pytest.approx(162.666667)
    assert got["gpu_info"] == "NVIDIA H200" and got["model_size"] == 4517691392


def test_llama_bench_without_samples_falls_back_to_avg_ts_and_missing_tests_are_errors():
    entries = json.loads(LLAMA_BENCH_JSON)
    for entry in entries:
        del entry["samples_ts"]
    got = bench.parse_llama_bench(json.dumps(entries))
    assert got["pp"] == pytest.approx(4623.515152) and got["tg"] == pytest.approx(162.666667)
    with pytest.raises(ValueError, match="no tg test"):
        bench.parse_llama_bench(json.dumps(entries[:1]))
    with pytest.raises(ValueError, match="no JSON array"):
        bench.parse_llama_bench("error: failed to load model\n")


def test_sluice_bench_json_is_read_past_other_lines():
    got = bench.parse_sluice("cuda: device 0 NVIDIA H200\n" + SLUICE_BENCH_JSON)
    assert got == {"pp": 4000.0, "tg": 175.0}
    with pytest.raises(ValueError):
        bench.parse_sluice("error: no CUDA device\n")


def test_weight_bytes_per_token_counts_one_embedding_row_and_refuses_experts():
    inspect = {"tensors": [
        {"name": "token_embd.weight", "shape": [4096, 1000], "bytes": 1000 * 2304},
        {"name": "output.weight", "shape": [4096, 1000], "bytes": 1000 * 2304},
        {"name": "blk.0.ffn_up.weight", "shape": [4096, 100], "bytes": 100 * 2304},
    ]}
    assert bench.decode_weight_bytes(inspect) == {"weight_bytes_per_token": 1101 * 2304,
                                                  "token_embd_row_bytes": 2304}
    inspect["tensors"].append({"name": "blk.0.ffn_up_exps.weight", "shape": [4096, 8, 4], "bytes": 1})
    with pytest.raises(ValueError, match="_exps"):
        bench.decode_weight_bytes(inspect)


def test_summary_takes_medians_over_the_rounds_that_succeeded():
    rounds = {"sluice": [{"pp": 100, "tg": 10}, None, {"pp": 300, "tg": 30}],
              "llama.cpp": [{"pp": 200, "tg": 20}, {"pp": 200, "tg": 40}, {"pp": 400, "tg": 60}]}
    s = bench.summarize(rounds)
    assert s["median"]["sluice"] == {"pp": 200, "tg": 20}
    assert s["median"]["llama.cpp"] == {"pp": 200, "tg": 40}
    assert s["ratio"] == {"pp": 1.0, "tg": 0.5}
    assert s["rounds_ok"] == {"sluice": 2, "llama.cpp": 3}
    assert bench.summarize({"sluice": [None], "llama.cpp": [None]})["ratio"] == {"pp": None, "tg": None}


def stand_in(path, stdout_file, rc=0, stderr="", log=None):
    """An executable that records its arguments, prints a file and exits with `rc`."""
    record = f'echo "$(basename "$0") $*" >> {log}\n' if log else ""
    path.write_text(f"#!/bin/sh\n{record}cat {stdout_file}\necho '{stderr}' >&2\nexit {rc}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_the_loop_alternates_and_writes_medians_and_ratios(tmp_path):
    (tmp_path / "llama.json").write_text(LLAMA_BENCH_JSON)
    (tmp_path / "sluice.json").write_text(SLUICE_BENCH_JSON)
    log = tmp_path / "calls.log"
    sluice = stand_in(tmp_path / "sluice", tmp_path / "sluice.json", log=log)
    llama = stand_in(tmp_path / "llama-bench", tmp_path / "llama.json", log=log)
    out = tmp_path / "results.json"
    done = subprocess.run([sys.executable, SCRIPT, "--sluice", sluice, "--llama-bench", llama,
                           "--rounds", "2", "--out", out, "--env-lib", str(tmp_path), "m.gguf"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    calls = [line.split()[0] for line in log.read_text().splitlines()]
    assert calls == ["sluice", "llama-bench", "llama-bench", "sluice"]
    assert "bench -m m.gguf --backend cuda --json -p 512 -n 128 -r 3" in log.read_text()
    assert "-m m.gguf -p 512 -n 128 -r 3 -ngl 999 -fa 1 -o json" in log.read_text()
    results = json.loads(out.read_text())
    summary = results["models"]["m.gguf"]["summary"]
    assert summary["median"]["sluice"] == {"pp": 4000.0, "tg": 175.0}
    assert summary["ratio"]["pp"] == pytest.approx(4000 / 4654.55)
    assert summary["ratio"]["tg"] == pytest.approx(175 / 160)
    assert "| m.gguf | 4000.0 | 4654.6 | 0.86 | 175.0 | 160.0 | 1.09 | 2/2 |" in done.stdout


def test_a_failing_side_gives_failed_cells_not_a_traceback(tmp_path):
    (tmp_path / "llama.json").write_text(LLAMA_BENCH_JSON)
    (tmp_path / "empty").write_text("")
    sluice = stand_in(tmp_path / "sluice", tmp_path / "empty", rc=3,
                      stderr="error: --backend cuda: this build has no CUDA backend")
    llama = stand_in(tmp_path / "llama-bench", tmp_path / "llama.json")
    done = subprocess.run([sys.executable, SCRIPT, "--sluice", sluice, "--llama-bench", llama,
                           "--rounds", "1", "m.gguf", "--roofline", "--copy-gbps", "4000"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    # No traceback of the script's own (a torch probe failing on a GPU-less machine may show
    # its child's traceback as a stderr tail, which is intended).
    assert f'{SCRIPT.name}", line' not in done.stderr and "Traceback" not in done.stdout
    assert "this build has no CUDA backend" in done.stderr  # the stderr tail is shown
    assert "| m.gguf | failed | 4654.6 | failed | failed | 160.0 | failed | 0/1 |" in done.stdout
    assert "no weight bytes" in done.stdout  # sluice inspect failed too


def test_dry_run_prints_the_commands_in_order():
    done = subprocess.run([sys.executable, SCRIPT, "--dry-run", "--rounds", "2", "--sluice", "S",
                           "--llama-bench", "L", "a.gguf"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    commands = [line for line in done.stdout.splitlines() if not line.startswith("#")]
    assert commands == ["S bench -m a.gguf --backend cuda --json -p 512 -n 128 -r 3",
                        "L -m a.gguf -p 512 -n 128 -r 3 -ngl 999 -fa 1 -o json",
                        "L -m a.gguf -p 512 -n 128 -r 3 -ngl 999 -fa 1 -o json",
                        "S bench -m a.gguf --backend cuda --json -p 512 -n 128 -r 3"]


@pytest.mark.skipif(not SLUICE_BIN, reason="SLUICE_BIN not set (run through ctest)")
def test_weight_bytes_from_sluice_inspect_match_the_gguf_package(tmp_path):
    gguf = pytest.importorskip("gguf")
    model = tmp_path / "tiny-llama.gguf"
    subprocess.run([SLUICE_BIN, "synth", "--geometry", "tiny-llama", "-o", model, "--seed", "1"],
                   check=True, capture_output=True, timeout=120)
    inspect = subprocess.run([SLUICE_BIN, "inspect", "--json", model], check=True,
                             capture_output=True, text=True, timeout=60)
    got = bench.decode_weight_bytes(json.loads(inspect.stdout))
    reader = gguf.GGUFReader(str(model))
    expected = 0
    for tensor in reader.tensors:
        if tensor.name == "token_embd.weight":
            expected += int(tensor.n_bytes) // int(tensor.shape[1])
        else:
            expected += int(tensor.n_bytes)
    assert got["weight_bytes_per_token"] == expected
