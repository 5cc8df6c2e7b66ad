"""The plumbing of bench/compare_flyweight.py, never its timings:
- the sluice side reads what the real `sluice bench --json` prints (SLUICE_BIN, a tiny model);
- the flyweight side's answer and error parsing, the greedy agreement wording, argument checks;
- llama.cpp's greedy continuation is taken from a .ref.json only for the prompt it was made with.
Parts that need the testdata or the binary skip visibly when absent.
"""
import json
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
import bench_common  # noqa: E402
import compare_flyweight  # noqa: E402

SLUICE_BIN = os.environ.get("SLUICE_BIN")
TESTDATA = pathlib.Path(os.environ.get("SLUICE_TESTDATA_DIR", ROOT.parent / "shared" / "testdata"))
TINY = TESTDATA / "llamacpp-tiny"
needs_tiny = pytest.mark.skipif(not TINY.is_dir(), reason=f"{TINY} absent")


@needs_tiny
@pytest.mark.skipif(not SLUICE_BIN, reason="SLUICE_BIN not set (run through ctest)")
def test_sluice_bench_json_is_read():
    model = TINY / "qwen35moe-hybrid-q8_0.gguf"
    command = bench_common.sluice_bench_command(pathlib.Path(SLUICE_BIN), model, 8, 2, 1, 7)
    out = subprocess.run(command, capture_output=True, text=True, check=True, timeout=120)
    result = bench_common.parse_sluice_bench(out.stdout)
    assert set(result) == {"pp", "tg"}
    assert result["pp"] > 0 and result["tg"] > 0


def test_flyweight_answer_parsing():
    answer = compare_flyweight.parse_flyweight_answer(
        "[flyweight] banner\n{\"pp\": 1.5, \"tg\": 0.5}\n", "")
    assert answer == {"pp": 1.5, "tg": 0.5}
    crashed = compare_flyweight.parse_flyweight_answer("", "Traceback\nSegmentation fault\n")
    assert crashed == {"error": "Segmentation fault"}
    assert compare_flyweight.parse_flyweight_answer("", "") == {"error": "no answer"}


def test_agreement_wording():
    assert compare_flyweight.agreement([1, 2, 3], [1, 2, 3]) == "identical"
    assert compare_flyweight.agreement([1, 2, 3], [1, 9, 3]) == "first 1 of 3 agree"
    assert compare_flyweight.agreement([5], [6]) == "first 0 of 1 agree"
    assert compare_flyweight.agreement(None, [1]) == "n/a"


def test_bad_arguments_are_refused():
    for argv in (["-p", "0"], ["-n", "0"], ["--rounds", "0"], ["--threads", "0"]):
        with pytest.raises(SystemExit):
            compare_flyweight.parse_args(argv)
    args = compare_flyweight.parse_args(["--greedy-prompt", "3,4", "x.gguf"])
    assert args.greedy_prompt == [3, 4] and args.models == [pathlib.Path("x.gguf")]


@needs_tiny
def test_llama_cpp_greedy_only_for_its_own_prompt():
    model = TINY / "museglimmer-dense-q8_0.gguf"
    ref = json.loads(model.with_suffix(".ref.json").read_text())
    assert compare_flyweight.llama_cpp_greedy(model, ref["prompt_tokens"]) == \
        ref["greedy_continuation"]
    assert compare_flyweight.llama_cpp_greedy(model, [1, 2, 3]) is None
