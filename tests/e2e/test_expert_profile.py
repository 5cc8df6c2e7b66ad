"""Expert profiles (issue 9): a run records which experts its router chose (--expert-profile-out),
a later run sizes per-layer cache pools from it (--expert-pools profile) and pre-warms the cache
(--expert-prewarm), and `sluice repack --order coactivation --profile` stores experts chosen
together side by side. None of it may change a number: logits stay bit-identical to the resident
model (tiny-moe, random weights, Q4_K experts). Bad or mismatched profiles are one-line errors."""
import json
import os
import pathlib
import subprocess

import pytest

SLUICE_BIN = os.environ.get("SLUICE_BIN")
PROMPT = [1, 5, 9, 17, 33, 64, 2, 100, 7, 3, 50, 27, 200, 301, 44, 18, 99, 123, 7, 250]

if not SLUICE_BIN:
    pytest.skip("SLUICE_BIN is not set (run through ctest)", allow_module_level=True)


def run(args, expect=0):
    done = subprocess.run([SLUICE_BIN] + [str(a) for a in args], capture_output=True, timeout=300)
    assert done.returncode == expect, done.stderr.decode(errors="replace")
    return done


def evaluate(model, tmp_path, extra, tag):
    logits = tmp_path / f"{tag}.bin"
    out = run(["eval", "--model", model, "--tokens", ",".join(map(str, PROMPT)), "--all-positions",
               "--logits-out", logits, "--greedy", "12"] + extra)
    return logits.read_bytes(), out.stdout.decode().strip().splitlines()[-1], out.stderr.decode()


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """tiny-moe, its resident logits, and a profile recorded while streaming it."""
    tmp = tmp_path_factory.mktemp("profile")
    model = tmp / "model.gguf"
    run(["synth", "--geometry", "tiny-moe", "-o", model, "--seed", "7"])
    resident = evaluate(model, tmp, [], "resident")
    profile = tmp / "profile.json"
    streamed = evaluate(model, tmp, ["--stream-experts", "--expert-cache", "8",
                                     "--expert-profile-out", profile], "recording")
    assert streamed[:2] == resident[:2]
    return model, resident, profile


def test_profile_counts_what_the_router_chose(recorded):
    _, _, profile = recorded
    p = json.loads(profile.read_text())
    assert p["format"] == "sluice expert profile" and p["n_layer"] == 4 and p["n_expert_used"] == 4
    # Decode steps: 12 greedy tokens, the first from the prefill's logits, so 11 one-token steps.
    assert p["tokens"] == 11
    for layer in p["layers"]:
        assert len(layer["uses"]) == 16
        # Every decode step uses 4 experts; the prefill chunk at least 4 (the union of 20 tokens').
        assert sum(layer["uses"]) >= 11 * 4 + 4
        pairs = sum(c for _, _, c in layer["together"])
        assert pairs == 11 * 6  # 4 experts a step: 6 pairs
    assert not (pathlib.Path(str(profile) + ".tmp")).exists()


def test_profile_pools_and_prewarm_keep_logits_identical(recorded, tmp_path):
    model, resident, profile = recorded
    for tag, extra in [("pools", ["--expert-pools", "profile"]),
                       ("prewarm", ["--expert-prewarm"]),
                       ("both", ["--expert-pools", "profile", "--expert-prewarm"])]:
        logits, greedy, err = evaluate(model, tmp_path, ["--stream-experts", "--expert-cache", "24",
                                                         "--expert-profile", profile, "--explain"]
                                       + extra, tag)
        assert (logits, greedy) == resident[:2], tag
        if "--expert-prewarm" in extra:
            assert "pre-warmed" in err, err


def test_coactivation_sidecar_keeps_logits_identical(recorded, tmp_path):
    model, resident, profile = recorded
    local = tmp_path / "model.gguf"
    local.write_bytes(model.read_bytes())
    run(["repack", local, "--order", "coactivation", "--profile", profile])
    sidecar = tmp_path / "model.gguf.experts"
    header_length = int.from_bytes(sidecar.read_bytes()[8:16], "little")
    header = json.loads(sidecar.read_bytes()[16:16 + header_length])
    orders = [layer["order"] for layer in header["layers"]]
    assert all(sorted(o) == list(range(16)) for o in orders)
    assert any(o != list(range(16)) for o in orders)  # the profile did reorder something
    for tag, extra in [("floor", ["--expert-cache", "4"]), ("8", ["--expert-cache", "8"]),
                       ("pread", ["--expert-cache", "8", "--io-engine", "pread"]),
                       ("buffered", ["--expert-cache", "8", "--buffered-io"])]:
        logits, greedy, _ = evaluate(local, tmp_path, ["--stream-experts"] + extra, tag)
        assert (logits, greedy) == resident[:2], tag
    assert evaluate(local, tmp_path, [], "resident-sidecar")[:2] == resident[:2]


def one_line_error(done):
    err = done.stderr.decode().strip()
    assert err and "\n" not in err, err
    return err


def test_bad_and_mismatched_profiles_are_one_line_errors(recorded, tmp_path):
    model, _, profile = recorded
    garbage = tmp_path / "garbage.json"
    garbage.write_text("not a profile")
    base = ["eval", "--model", model, "--tokens", "1", "--stream-experts"]
    err = one_line_error(run(base + ["--expert-profile", garbage, "--expert-prewarm"], expect=1))
    assert "garbage.json" in err
    other = json.loads(profile.read_text())
    other["n_layer"] = 7
    mismatched = tmp_path / "other.json"
    mismatched.write_text(json.dumps(other))
    err = one_line_error(run(base + ["--expert-profile", mismatched, "--expert-pools", "profile"],
                             expect=1))
    assert "another model" in err
    assert "--expert-profile" in one_line_error(run(base + ["--expert-prewarm"], expect=1))
    one_line_error(run(["repack", model, "--order", "coactivation", "-o", tmp_path / "x"], expect=1))
    one_line_error(run(["repack", model, "--order", "coactivation", "--profile", mismatched,
                        "-o", tmp_path / "x"], expect=1))
    assert not (tmp_path / "x").exists()
