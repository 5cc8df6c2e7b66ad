"""`sluice inspect` and `sluice dump` against independent implementations: gguf-py's reader for
headers, gguf-py's numpy dequantizers for tensor values (bit for bit), gguf-py reading files our
writer made, numpy-built safetensors files, and the CLI's exit codes and one-line errors."""
import json
import os
import pathlib
import struct
import subprocess

import gguf
import numpy as np
import pytest
from gguf import GGMLQuantizationType as QT

SLUICE_BIN = os.environ.get("SLUICE_BIN")
BUILD_DIR = os.environ.get("SLUICE_BUILD_DIR", "")
TESTDATA = pathlib.Path(os.environ.get("SLUICE_TESTDATA_DIR", "/nonexistent"))

if not SLUICE_BIN:
    pytest.skip("SLUICE_BIN is not set (run through ctest)", allow_module_level=True)


def sluice(*args):
    return subprocess.run([SLUICE_BIN, *map(str, args)], capture_output=True, timeout=120)


def inspect_json(path):
    result = sluice("inspect", "--json", path)
    assert result.returncode == 0, result.stderr.decode()
    return json.loads(result.stdout)


def dump(path, tensor, out):
    result = sluice("dump", path, tensor, "--out", out)
    assert result.returncode == 0, result.stderr.decode()
    return np.fromfile(out, dtype="<f4")


def gguf_files_under():
    files = sorted(TESTDATA.glob("vocab/*.gguf")) + sorted(TESTDATA.glob("llamacpp-tiny/*.gguf"))
    return files or [pytest.param(None, marks=pytest.mark.skip(reason=f"no GGUF files under {TESTDATA}"))]


# (a) Every test-data GGUF inspects, and the tensor table is what gguf-py reads.
@pytest.mark.parametrize("path", gguf_files_under(), ids=lambda p: p.name if p else "none")
def test_inspect_matches_gguf_reader(path):
    ours = inspect_json(path)
    reader = gguf.GGUFReader(path)
    expected = [{"name": t.name, "type": t.tensor_type.name, "shape": [int(d) for d in t.shape],
                 "offset": int(t.data_offset), "bytes": int(t.n_bytes)} for t in reader.tensors]
    got = [{k: t[k] for k in ("name", "type", "shape", "offset", "bytes")} for t in ours["tensors"]]
    assert got == expected
    assert ours["data_offset"] == reader.data_offset
    assert ours["file_size"] == path.stat().st_size
    keys = [k for k in reader.fields if not k.startswith("GGUF.")]
    assert [m["key"] for m in ours["metadata"]] == keys
    for entry in ours["metadata"]:
        check_metadata_entry(entry, reader.fields[entry["key"]])


TYPE_NAMES = {gguf.GGUFValueType.UINT8: "u8", gguf.GGUFValueType.INT8: "i8", gguf.GGUFValueType.UINT16: "u16",
              gguf.GGUFValueType.INT16: "i16", gguf.GGUFValueType.UINT32: "u32", gguf.GGUFValueType.INT32: "i32",
              gguf.GGUFValueType.FLOAT32: "f32", gguf.GGUFValueType.BOOL: "bool", gguf.GGUFValueType.STRING: "string",
              gguf.GGUFValueType.ARRAY: "array", gguf.GGUFValueType.UINT64: "u64", gguf.GGUFValueType.INT64: "i64",
              gguf.GGUFValueType.FLOAT64: "f64"}


def same_value(ours, theirs, value_type):
    if value_type == "f32":
        return ours is None and not np.isfinite(theirs) or np.float32(ours) == np.float32(theirs)
    return ours == theirs


def check_metadata_entry(entry, field):
    assert entry["type"] == TYPE_NAMES[field.types[0]], entry["key"]
    if entry["type"] != "array":
        try:
            expected = field.contents()
        except UnicodeDecodeError:
            return  # partial UTF-8 (vocabulary bytes): shown with U+FFFD, nothing to compare
        assert same_value(entry["value"], expected, entry["type"]), entry["key"]
        return
    assert entry["length"] == len(field.data), entry["key"]
    if len(field.types) > 1:
        assert entry["element_type"] == TYPE_NAMES[field.types[1]], entry["key"]
    if entry["element_type"] in ("array", "string"):
        return
    expected = field.contents()[:len(entry["value"])]
    assert all(same_value(a, b, entry["element_type"]) for a, b in zip(entry["value"], expected)), entry["key"]


# (b) Every tensor type gguf-py writes and dequantizes: random blocks (scales forced finite),
# dumped by us, equal to gguf.quants.dequantize bit for bit (Q1_0, which gguf-py 0.19 sizes but
# cannot dequantize, against ggml's definition in numpy).
HALF_SCALE_OFFSETS = {  # byte offsets of the f16 scale fields inside one block
    QT.Q4_0: [0], QT.Q4_1: [0, 2], QT.Q5_0: [0], QT.Q5_1: [0, 2], QT.Q8_0: [0],
    QT.Q2_K: [80, 82], QT.Q3_K: [108], QT.Q4_K: [0, 2], QT.Q5_K: [0, 2], QT.Q6_K: [208],
    QT.IQ2_XXS: [0], QT.IQ2_XS: [0], QT.IQ3_XXS: [0], QT.IQ1_S: [0], QT.IQ4_NL: [0], QT.IQ3_S: [0],
    QT.IQ2_S: [0], QT.IQ4_XS: [0], QT.TQ1_0: [52], QT.TQ2_0: [64], QT.Q1_0: [0],
}
PLAIN = {QT.F32: np.float32, QT.F16: np.float16, QT.F64: np.float64, QT.I8: np.int8,
         QT.I16: np.int16, QT.I32: np.int32, QT.I64: np.int64}


def random_blocks(qtype, rows, rng):
    block_size, block_bytes = gguf.GGML_QUANT_SIZES[qtype]
    cols = block_size * (2 if block_size > 1 else 40)
    data = rng.integers(0, 256, size=(rows, cols // block_size, block_bytes), dtype=np.uint8)
    for offset in HALF_SCALE_OFFSETS.get(qtype, []):
        scales = rng.uniform(-2.0, 2.0, size=data.shape[:2]).astype(np.float16)
        data[:, :, offset:offset + 2] = scales.view(np.uint8).reshape(*data.shape[:2], 2)
    if qtype == QT.IQ1_M:  # the f16 scale's exponent top bit is bit 6 of byte 55: clear it
        data[:, :, 55] &= 0xBF
    if qtype == QT.MXFP4:  # E8M0 exponent byte: keep the scale near 1
        data[:, :, 0] = rng.integers(118, 136, size=data.shape[:2], dtype=np.uint8)
    if qtype == QT.BF16:  # a finite bfloat16 is the top half of a finite float32
        floats = rng.standard_normal((rows, cols)).astype(np.float32)
        data = (floats.view(np.uint32) >> 16).astype(np.uint16).view(np.uint8).reshape(rows, cols, 2)
    return data.reshape(rows, -1), cols


def dequantize_reference(data, qtype):
    if qtype == QT.Q1_0:  # ggml's dequantize_row_q1_0: bit j % 8 of byte j / 8 set gives d, clear -d
        blocks = data.reshape(-1, gguf.GGML_QUANT_SIZES[qtype][1])
        d = blocks[:, 0:2].copy().view(np.float16).astype(np.float32)
        bits = np.unpackbits(blocks[:, 2:], axis=-1, bitorder="little").astype(bool)
        return np.where(bits, d, -d).reshape(data.shape[0], -1)
    return gguf.quants.dequantize(data, qtype)


def writable_types():
    params = []
    for qtype in QT:
        if qtype in PLAIN or qtype in HALF_SCALE_OFFSETS or qtype in (QT.IQ1_M, QT.MXFP4, QT.NVFP4, QT.BF16):
            params.append(qtype)
    return params


@pytest.mark.parametrize("qtype", writable_types(), ids=lambda q: q.name)
def test_dump_matches_gguf_dequantize(qtype, tmp_path):
    rng = np.random.default_rng(int(qtype))
    rows = 3
    writer = gguf.GGUFWriter(tmp_path / "t.gguf", "llama")
    if qtype in PLAIN:
        info = np.iinfo(PLAIN[qtype]) if np.issubdtype(PLAIN[qtype], np.integer) else None
        values = (rng.integers(max(info.min, -2**40), min(info.max, 2**40), size=(rows, 40), dtype=PLAIN[qtype])
                  if info else rng.standard_normal((rows, 40)).astype(PLAIN[qtype]))
        writer.add_tensor("w", values)
        expected = values.astype(np.float32)
    else:
        data, cols = random_blocks(qtype, rows, rng)
        writer.add_tensor("w", data, raw_dtype=qtype)
        expected = dequantize_reference(data, qtype).astype(np.float32)
        assert expected.shape == (rows, cols)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    got = dump(tmp_path / "t.gguf", "w", tmp_path / "w.f32")
    assert got.size == expected.size
    np.testing.assert_array_equal(got.view(np.uint32), expected.reshape(-1).view(np.uint32))


TINY_DUMPS = [("llama-dense.gguf", "F32"), ("llama-dense-f16.gguf", "F16"), ("llama-dense-q8_0.gguf", "Q8_0"),
              ("gptoss-moe-mxfp4.gguf", "MXFP4"), ("deepseek4-moe256-iq2_xxs.gguf", "IQ2_XXS")]


@pytest.mark.parametrize("file_name,type_name", TINY_DUMPS)
def test_dump_testdata_tensors(file_name, type_name, tmp_path):
    path = TESTDATA / "llamacpp-tiny" / file_name
    if not path.exists():
        pytest.skip(f"{path} is absent")
    reader = gguf.GGUFReader(path)
    tensor = next(t for t in reader.tensors if t.tensor_type.name == type_name)
    if tensor.tensor_type in (QT.F32, QT.F16):
        expected = np.asarray(tensor.data).astype(np.float32)
    else:
        expected = gguf.quants.dequantize(np.asarray(tensor.data), tensor.tensor_type)
    got = dump(path, tensor.name, tmp_path / "out.f32")
    np.testing.assert_array_equal(got.view(np.uint32), expected.reshape(-1).view(np.uint32))
    stdout = sluice("dump", path, tensor.name)
    assert stdout.returncode == 0 and stdout.stdout == got.tobytes()


# (c) Our writer's output, read by gguf-py.
def test_writer_output_reads_back_in_gguf_py(tmp_path):
    harness = pathlib.Path(BUILD_DIR) / "harness" / "gguf_write_harness"
    if not harness.exists():
        pytest.skip(f"{harness} is not built")
    for alignment in ("32", "64"):
        path = tmp_path / f"w{alignment}.gguf"
        subprocess.run([harness, path, alignment], check=True)
        reader = gguf.GGUFReader(path)
        fields = {k: f for k, f in reader.fields.items() if not k.startswith("GGUF.")}
        assert fields["general.alignment"].contents() == int(alignment)
        expected = {
            "general.architecture": "llama", "test.u8": 200, "test.i8": -100, "test.u16": 60000,
            "test.i16": -30000, "test.u32": 4000000000, "test.i32": -2000000000,
            "test.u64": 18446744073709551615, "test.i64": -9223372036854775807,
            "test.f32": float(np.float32(0.1)), "test.f64": 0.1, "test.bool": True, "test.string": "héllo",
            "test.array.u8": [1, 2, 255], "test.array.i16": [-1, 32767], "test.array.i32": [-7, 8, 9],
            "test.array.u64": [1, 2], "test.array.f32": [0.5, -2.0], "test.array.f64": [1.25],
            "test.array.bool": [True, False], "test.array.string": ["a", "", "ü"], "test.array.empty": [],
        }
        for key, value in expected.items():
            assert fields[key].contents() == value, key
        nested = fields["test.array.nested"]
        assert [t.name for t in nested.types] == ["ARRAY", "ARRAY", "INT32"]
        assert [int(nested.parts[i][0]) for i in nested.data] == [1, 2, 3]
        tensors = {t.name: t for t in reader.tensors}
        assert list(tensors) == ["t.f32", "t.f16", "t.i32", "t.q8_0"]
        np.testing.assert_array_equal(tensors["t.f32"].data.reshape(-1), np.array([1.0, -2.0, 3.5, 0.0, 1e-3, 7.0], np.float32))
        assert [int(d) for d in tensors["t.q8_0"].shape] == [32, 2]
        assert tensors["t.q8_0"].tensor_type == QT.Q8_0
        # llama.cpp's rule (gguf.cpp): each offset equals the padded sizes of the tensors before it.
        expected_offset = 0
        for t in reader.tensors:
            assert t.data_offset - reader.data_offset == expected_offset, t.name
            expected_offset += -(-int(t.n_bytes) // int(alignment)) * int(alignment)
        ours = inspect_json(path)
        assert [t["offset"] for t in ours["tensors"]] == [int(t.data_offset) for t in reader.tensors]


# (d) Safetensors written with numpy and json: single file and a sharded snapshot.
def write_safetensors(path, tensors, metadata=None):
    header, blobs, offset = {}, [], 0
    if metadata:
        header["__metadata__"] = metadata
    for name, (dtype, array) in tensors.items():
        blob = array.tobytes()
        header[name] = {"dtype": dtype, "shape": list(array.shape), "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    path.write_bytes(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def safetensors_tensors(rng):
    f32 = rng.standard_normal((3, 5)).astype(np.float32)
    bf16_source = rng.standard_normal((2, 4)).astype(np.float32)
    bf16 = (bf16_source.view(np.uint32) >> 16).astype(np.uint16)
    return {
        "model.embed.weight": ("F32", f32, f32),
        "model.norm.weight": ("F16", f32[0].astype(np.float16), f32[0].astype(np.float16).astype(np.float32)),
        "model.proj.weight": ("BF16", bf16, (bf16.astype(np.uint32) << 16).view(np.float32)),
        "model.ids": ("I64", np.arange(-3, 3, dtype=np.int64).reshape(2, 3), np.arange(-3, 3).astype(np.float32)),
        "model.mask": ("BOOL", np.array([True, False, True]), np.array([1, 0, 1], np.float32)),
        "model.bytes": ("U8", np.array([0, 7, 255], np.uint8), np.array([0, 7, 255], np.float32)),
    }


def check_safetensors(path, tensors, tmp_path):
    ours = inspect_json(path)
    assert ours["format"] == "safetensors"
    by_name = {t["name"]: t for t in ours["tensors"]}
    assert set(by_name) == set(tensors)
    for name, (dtype, array, expected) in tensors.items():
        assert by_name[name]["type"] == dtype
        assert by_name[name]["shape"] == list(reversed(array.shape))
        got = dump(path, name, tmp_path / "st.f32")
        np.testing.assert_array_equal(got.view(np.uint32), expected.astype(np.float32).reshape(-1).view(np.uint32))
    return ours


def test_safetensors_single_file(tmp_path):
    tensors = safetensors_tensors(np.random.default_rng(7))
    path = tmp_path / "model.safetensors"
    write_safetensors(path, {k: (d, a) for k, (d, a, _) in tensors.items()}, {"format": "pt"})
    ours = check_safetensors(path, tensors, tmp_path)
    assert ours["metadata"] == [{"key": "format", "type": "string", "value": "pt"}]
    assert check_safetensors(tmp_path, tensors, tmp_path)["files"] == [str(path)]


def test_safetensors_sharded_directory(tmp_path):
    tensors = safetensors_tensors(np.random.default_rng(8))
    names = list(tensors)
    shards = {"model-00001-of-00002.safetensors": names[:3], "model-00002-of-00002.safetensors": names[3:]}
    weight_map = {}
    for shard, members in shards.items():
        write_safetensors(tmp_path / shard, {n: tensors[n][:2] for n in members}, {"format": "pt"})
        weight_map.update({n: shard for n in members})
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": 1}, "weight_map": weight_map}))
    ours = check_safetensors(tmp_path, tensors, tmp_path)
    assert len(ours["files"]) == 2
    assert {t["name"]: t["file_index"] for t in ours["tensors"]} == {n: int(n in shards["model-00002-of-00002.safetensors"]) for n in names}


# (e) Exit codes and one-line messages.
def assert_one_line_error(result, code, *fragments):
    stderr = result.stderr.decode()
    assert result.returncode == code, stderr
    assert stderr.startswith("sluice: error: ") and stderr.count("\n") == 1, stderr
    for fragment in fragments:
        assert fragment in stderr, stderr


def test_exit_codes(tmp_path):
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF\x01\x00\x00\x00" + b"\x00" * 16)
    assert_one_line_error(sluice("inspect", bad), 1, f"gguf: {bad}: GGUF v1 is not supported")
    assert_one_line_error(sluice("inspect", tmp_path / "missing.gguf"), 1, "missing.gguf")
    truncated = tmp_path / "cut.gguf"
    truncated.write_bytes(b"GGUF\x03\x00\x00\x00\x01")
    assert_one_line_error(sluice("inspect", truncated), 1, "file ends inside the header")
    good = tmp_path / "good.gguf"
    writer = gguf.GGUFWriter(good, "llama")
    writer.add_tensor("w", np.zeros(4, np.float32))
    writer.write_header_to_file(), writer.write_kv_data_to_file(), writer.write_tensors_to_file(), writer.close()
    assert_one_line_error(sluice("dump", good, "nope", "--out", tmp_path / "x"), 1, "no such tensor (tensor: nope)")
    assert not list(tmp_path.glob("x*")), "a failed dump left a file behind"
    assert_one_line_error(sluice("inspect"), 2)
    assert_one_line_error(sluice("inspect", good, "--bogus"), 2)
    assert_one_line_error(sluice("frobnicate"), 2)
    assert_one_line_error(sluice(), 2)
    version = sluice("--version")
    assert version.returncode == 0 and version.stdout.decode().startswith("sluice ")
