# The real `sluice inspect` and `sluice dump` on every malformed fixture in
# tests/golden/bad_files/ (and on truncations of the valid bases): exit code 1, exactly one
# line on stderr starting "sluice: error:" that names the file, no signal, nothing on stdout,
# and no output file (final or temporary) left behind by dump --out.
import json
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "golden" / "bad_files"
SLUICE = os.environ.get("SLUICE_BIN", str(ROOT / "build" / "sluice"))
BAD = sorted(json.loads((CORPUS / "expected.json").read_text()))
BASES = ["base_valid.gguf", "base_gguf_writer.gguf", "base_valid.safetensors"]
# A tensor every base has, so dump gets past argument checks and fails on the file itself.
TENSOR = {".gguf": "token_embd.weight", ".safetensors": "embed.weight"}


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([SLUICE, *args], capture_output=True, text=True, errors="replace",
                          timeout=60)


def assert_user_error(result: subprocess.CompletedProcess, file_name: str) -> None:
    assert result.returncode >= 0, f"killed by signal {-result.returncode}: {result.stderr}"
    assert result.returncode == 1, f"exit {result.returncode}: {result.stderr}"
    lines = result.stderr.splitlines()
    assert len(lines) == 1, f"stderr is not one line: {result.stderr!r}"
    assert lines[0].startswith("sluice: error:"), lines[0]
    assert file_name in lines[0], f"error does not name {file_name}: {lines[0]}"
    assert result.stdout == "", f"stdout not empty: {result.stdout[:200]!r}"


@pytest.fixture(scope="module", autouse=True)
def binary_exists():
    if not Path(SLUICE).is_file():
        pytest.fail(f"sluice binary not found at {SLUICE} (set SLUICE_BIN)")


@pytest.mark.parametrize("base", BASES)
def test_bases_inspect_ok(base):
    result = run("inspect", str(CORPUS / base))
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("name", BAD)
@pytest.mark.parametrize("json_flag", [[], ["--json"]], ids=["text", "json"])
def test_inspect_refuses(name, json_flag):
    assert_user_error(run("inspect", str(CORPUS / name), *json_flag), name)


@pytest.mark.parametrize("name", BAD)
def test_dump_refuses_and_leaves_no_file(name, tmp_path):
    out = tmp_path / "tensor.bin"
    path = CORPUS / name
    assert_user_error(run("dump", str(path), TENSOR[path.suffix], "--out", str(out)), name)
    assert list(tmp_path.iterdir()) == [], f"left behind: {list(tmp_path.iterdir())}"


# Bases whose data ends exactly at the end of the file (GGUFWriter pads after the last tensor,
# so a cut in its padding is still a valid file).
@pytest.mark.parametrize("base", ["base_valid.gguf", "base_valid.safetensors"])
def test_truncated_bases_refused(base, tmp_path):
    data = (CORPUS / base).read_bytes()
    # Header offsets densely, then a spread through the rest; never the full file.
    cuts = sorted(set(list(range(0, 40, 3)) + list(range(40, len(data) - 40, 47))
                      + [len(data) - 20, len(data) - 1]))
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    for cut in cuts:
        path = tmp_path / f"cut{cut}_{base}"
        path.write_bytes(data[:cut])
        assert_user_error(run("inspect", str(path)), path.name)
        result = run("dump", str(path), TENSOR[path.suffix], "--out", str(out_dir / "t.bin"))
        assert_user_error(result, path.name)
        assert list(out_dir.iterdir()) == []
