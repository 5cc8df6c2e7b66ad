#!/usr/bin/env python3
# Generates tests/golden/bad_files/: two valid GGUF bases (one written byte by byte here, one by
# gguf-py's GGUFWriter), a valid safetensors base, and small malformed variants of them, plus
# expected.json (file -> substrings its error message must contain). Deterministic: running it
# twice gives the same bytes. Truncations are not stored; the tests cut the bases themselves.
# Usage: .venv/bin/python tools/make_bad_model_files.py [OUT_DIR]
from __future__ import annotations

import json
import struct
import sys
from dataclasses import dataclass, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = ROOT / "tests" / "golden" / "bad_files"

# GGUF value type ids (gguf-py's GGUFValueType).
U8, I8, U16, I16, U32, I32, F32, BOOL, STRING, ARRAY, U64, I64, F64 = range(13)
# GGML tensor type ids used by the bases.
T_F32, T_F16, T_Q8_0 = 0, 1, 8
Q8_0_BLOCK_BYTES = 34  # 32 elements: f16 scale + 32 int8


# ---------------------------------------------------------------------------------------------
# A GGUF file described as data, so each bad variant is the base with one field changed.


@dataclass
class Kv:
    key: bytes
    vtype: int
    payload: bytes  # the encoded value, after the type id


@dataclass
class TensorInfo:
    name: bytes
    dims: list[int]
    ttype: int
    offset: int
    n_dims: int | None = None  # None: len(dims); set to lie about the count


@dataclass
class Gguf:
    kvs: list[Kv]
    tensors: list[TensorInfo]
    data: bytes
    magic: bytes = b"GGUF"
    version: int = 3
    tensor_count: int | None = None  # None: len(tensors)
    kv_count: int | None = None  # None: len(kvs)
    alignment: int = 32  # padding used when laying out the file (not the kv)
    endian: str = "<"


def gstr(text: bytes, endian: str = "<", length: int | None = None) -> bytes:
    return struct.pack(endian + "Q", len(text) if length is None else length) + text


def scalar(vtype: int, value, endian: str = "<") -> bytes:
    fmt = {U8: "B", I8: "b", U16: "H", I16: "h", U32: "I", I32: "i", F32: "f", BOOL: "?",
           U64: "Q", I64: "q", F64: "d"}[vtype]
    return struct.pack(endian + fmt, value)


def kv_scalar(key: str, vtype: int, value, endian: str = "<") -> Kv:
    return Kv(key.encode(), vtype, scalar(vtype, value, endian))


def kv_string(key: str, value: str, endian: str = "<") -> Kv:
    return Kv(key.encode(), STRING, gstr(value.encode(), endian))


def kv_array(key: str, elem_type: int, values: list, endian: str = "<",
             count: int | None = None) -> Kv:
    body = struct.pack(endian + "IQ", elem_type, len(values) if count is None else count)
    for value in values:
        body += gstr(value, endian) if elem_type == STRING else scalar(elem_type, value, endian)
    return Kv(key.encode(), ARRAY, body)


def encode(g: Gguf) -> bytes:
    e = g.endian
    out = bytearray(g.magic)
    out += struct.pack(e + "I", g.version)
    out += struct.pack(e + "Q", len(g.tensors) if g.tensor_count is None else g.tensor_count)
    out += struct.pack(e + "Q", len(g.kvs) if g.kv_count is None else g.kv_count)
    for kv in g.kvs:
        out += gstr(kv.key, e) + struct.pack(e + "I", kv.vtype) + kv.payload
    for t in g.tensors:
        out += gstr(t.name, e)
        out += struct.pack(e + "I", len(t.dims) if t.n_dims is None else t.n_dims)
        for dim in t.dims:
            out += struct.pack(e + "Q", dim)
        out += struct.pack(e + "IQ", t.ttype, t.offset)
    out += bytes(-len(out) % g.alignment)
    out += g.data
    return bytes(out)


def base_gguf(endian: str = "<") -> Gguf:
    """A small valid GGUF v3: every scalar value type, string and numeric arrays, and three
    tensors (F32, Q8_0, F16) laid out with general.alignment = 32 and a gap between tensors."""
    e = endian
    kvs = [
        kv_string("general.architecture", "llama", e),
        kv_string("general.name", "sluice bad-file base", e),
        kv_scalar("general.alignment", U32, 32, e),
        kv_scalar("llama.context_length", U32, 64, e),
        kv_scalar("llama.block_count", U32, 1, e),
        kv_scalar("llama.rope.freq_base", F32, 10000.0, e),
        kv_scalar("test.u8", U8, 200, e),
        kv_scalar("test.i8", I8, -5, e),
        kv_scalar("test.u16", U16, 60000, e),
        kv_scalar("test.i16", I16, -300, e),
        kv_scalar("test.i32", I32, -70000, e),
        kv_scalar("test.bool", BOOL, True, e),
        kv_scalar("test.u64", U64, 1 << 40, e),
        kv_scalar("test.i64", I64, -(1 << 40), e),
        kv_scalar("test.f64", F64, 0.125, e),
        kv_array("tokenizer.ggml.tokens", STRING, [b"<s>", b"a", b"\xc3\xa9"], e),
        kv_array("tokenizer.ggml.scores", F32, [0.0, -1.0, -2.0], e),
        kv_array("tokenizer.ggml.token_type", I32, [3, 1, 1], e),
    ]
    emb = b"".join(struct.pack(e + "f", float(i)) for i in range(12))  # [4, 3] f32: 48 bytes
    q8 = b""
    for block in range(2):  # [32, 2] q8_0: 2 blocks
        q8 += struct.pack(e + "e", 0.5) + bytes((i * 7 + block) % 256 for i in range(32))
    norm = b"".join(struct.pack(e + "e", 1.0) for _ in range(4))  # [4] f16: 8 bytes
    # Offsets: 0 (48 bytes), 64 (68 bytes), 160 (8 bytes); data ends with the last tensor.
    data = emb + bytes(16) + q8 + bytes(160 - 64 - len(q8)) + norm
    tensors = [
        TensorInfo(b"token_embd.weight", [4, 3], T_F32, 0),
        TensorInfo(b"blk.0.attn_q.weight", [32, 2], T_Q8_0, 64),
        TensorInfo(b"output_norm.weight", [4], T_F16, 160),
    ]
    return Gguf(kvs, tensors, data, endian=endian)


def find_kv(g: Gguf, key: str) -> int:
    return next(i for i, kv in enumerate(g.kvs) if kv.key == key.encode())


def with_kv(g: Gguf, key: str, new: Kv) -> Gguf:
    kvs = list(g.kvs)
    kvs[find_kv(g, key)] = new
    return replace(g, kvs=kvs)


def with_tensor(g: Gguf, index: int, **changes) -> Gguf:
    tensors = list(g.tensors)
    tensors[index] = replace(tensors[index], **changes)
    return replace(g, tensors=tensors)


def gguf_variants() -> dict[str, tuple[bytes, list[str]]]:
    """name -> (file bytes, substrings the error must contain)."""
    b = base_gguf()
    big = 1 << 63
    v: dict[str, tuple[bytes, list[str]]] = {}

    def add(name: str, data: bytes | Gguf, *expect: str) -> None:
        v[name] = (encode(data) if isinstance(data, Gguf) else data, list(expect))

    # Header.
    add("gguf_empty", b"", "magic")
    add("gguf_magic_only", b"GGUF", "version")
    add("gguf_bad_magic", replace(b, magic=b"GGUX"), "magic")
    add("gguf_lowercase_magic", replace(b, magic=b"gguf"), "magic")
    add("gguf_version_1", replace(b, version=1), "version")
    add("gguf_version_4", replace(b, version=4), "version")
    add("gguf_version_0", replace(b, version=0), "version")
    add("gguf_big_endian", base_gguf(">"), "endian")
    add("gguf_tensor_count_huge", replace(b, tensor_count=big), "tensor")
    add("gguf_tensor_count_max", replace(b, tensor_count=(1 << 64) - 1), "tensor")
    # One count too many: the reader parses padding or data as one more record; the message
    # depends on what it finds there, so only the file name is required.
    add("gguf_tensor_count_plus_one", replace(b, tensor_count=4))
    add("gguf_kv_count_huge", replace(b, kv_count=big), "kv")
    add("gguf_kv_count_plus_one", replace(b, kv_count=len(b.kvs) + 1))

    # Keys and values.
    name_kv = find_kv(b, "general.name")
    kvs = list(b.kvs)
    kvs[name_kv] = Kv(b"general.name", STRING, gstr(b"x", length=big))
    add("gguf_string_len_huge", replace(b, kvs=kvs), "general.name")
    kvs[name_kv] = Kv(b"general.name", STRING, gstr(b"x", length=100000))
    add("gguf_string_len_past_eof", replace(b, kvs=kvs), "general.name")
    raw = encode(b)
    key_at = raw.index(b"general.name") - 8  # the key's own length field
    add("gguf_key_len_huge", raw[:key_at] + struct.pack("<Q", big) + raw[key_at + 8:], "key")
    add("gguf_key_len_past_eof", raw[:key_at] + struct.pack("<Q", 100000) + raw[key_at + 8:],
        "key")
    add("gguf_array_len_huge", with_kv(b, "tokenizer.ggml.tokens", kv_array(
        "tokenizer.ggml.tokens", STRING, [b"<s>"], count=big)), "tokenizer.ggml.tokens")
    add("gguf_array_len_past_eof", with_kv(b, "tokenizer.ggml.scores", kv_array(
        "tokenizer.ggml.scores", F32, [0.0], count=1 << 40)), "tokenizer.ggml.scores")
    add("gguf_array_u64_len_overflow", with_kv(b, "tokenizer.ggml.scores", kv_array(
        "tokenizer.ggml.scores", U64, [0], count=(1 << 61) + 1)), "tokenizer.ggml.scores")
    add("gguf_array_elem_string_len_huge", with_kv(b, "tokenizer.ggml.tokens", Kv(
        b"tokenizer.ggml.tokens", ARRAY, struct.pack("<IQ", STRING, 2) + gstr(b"a")
        + gstr(b"b", length=big))), "tokenizer.ggml.tokens")
    add("gguf_value_type_13", with_kv(b, "llama.context_length", Kv(
        b"llama.context_length", 13, struct.pack("<I", 64))), "llama.context_length")
    add("gguf_value_type_max", with_kv(b, "llama.context_length", Kv(
        b"llama.context_length", 0xFFFFFFFF, struct.pack("<I", 64))), "llama.context_length")
    add("gguf_array_elem_type_13", with_kv(b, "tokenizer.ggml.scores", kv_array(
        "tokenizer.ggml.scores", 13, [], count=3)), "tokenizer.ggml.scores")
    # Arrays of arrays are legal GGUF; a bad element type inside one is not.
    add("gguf_nested_array_bad_type", with_kv(b, "tokenizer.ggml.scores", Kv(
        b"tokenizer.ggml.scores", ARRAY, struct.pack("<IQ", ARRAY, 1)
        + struct.pack("<IQ", 13, 1) + b"\x01")), "tokenizer.ggml.scores")
    dup = replace(b, kvs=b.kvs + [kv_scalar("llama.context_length", U32, 128)])
    add("gguf_duplicate_key", dup, "llama.context_length")
    add("gguf_key_invalid_utf8", replace(b, kvs=b.kvs + [
        Kv(b"test.bad\xff\xfekey", U32, scalar(U32, 1))]), "UTF-8")
    add("gguf_key_overlong_utf8", replace(b, kvs=b.kvs + [
        Kv(b"test.\xc0\xafkey", U32, scalar(U32, 1))]), "UTF-8")
    add("gguf_alignment_zero", with_kv(b, "general.alignment",
                                       kv_scalar("general.alignment", U32, 0)), "alignment")
    add("gguf_alignment_3", with_kv(b, "general.alignment",
                                    kv_scalar("general.alignment", U32, 3)), "alignment")
    add("gguf_alignment_string", with_kv(b, "general.alignment",
                                         kv_string("general.alignment", "32")), "alignment")
    add("gguf_alignment_f32", with_kv(b, "general.alignment",
                                      kv_scalar("general.alignment", F32, 32.0)), "alignment")

    # Tensor infos.
    for type_id in (4, 5, 31, 32, 33, 36, 37, 38, 42, 1000, 0xFFFFFFFF):
        add(f"gguf_tensor_type_{type_id}", with_tensor(b, 2, ttype=type_id),
            "output_norm.weight", "type")
    add("gguf_n_dims_0", with_tensor(b, 2, dims=[], n_dims=0), "output_norm.weight")
    add("gguf_n_dims_5", with_tensor(b, 2, dims=[4, 1, 1, 1, 1]), "output_norm.weight")
    add("gguf_n_dims_huge", with_tensor(b, 2, dims=[4], n_dims=0xFFFFFFFF), "output_norm.weight")
    add("gguf_dim_negative", with_tensor(b, 0, dims=[4, (1 << 64) - 3]), "token_embd.weight")
    add("gguf_dims_overflow", with_tensor(b, 0, dims=[1 << 32, 1 << 32]), "token_embd.weight")
    add("gguf_dims_bytes_overflow", with_tensor(b, 0, dims=[1 << 31, 1 << 31]),
        "token_embd.weight")
    add("gguf_ne0_not_block_multiple", with_tensor(b, 1, dims=[33, 2]), "blk.0.attn_q.weight")
    add("gguf_offset_misaligned", with_tensor(b, 2, offset=161), "output_norm.weight")
    add("gguf_offset_past_eof", with_tensor(b, 2, offset=4096), "output_norm.weight")
    add("gguf_offset_overflow", with_tensor(b, 2, offset=(1 << 64) - 32), "output_norm.weight")
    add("gguf_tensor_past_eof", with_tensor(b, 0, dims=[4, 300]), "token_embd.weight")
    add("gguf_tensors_overlap", with_tensor(b, 1, offset=32), "blk.0.attn_q.weight")
    add("gguf_duplicate_tensor_name", with_tensor(b, 2, name=b"token_embd.weight"),
        "token_embd.weight")
    add("gguf_tensor_name_invalid_utf8", with_tensor(b, 2, name=b"output_\xffnorm.weight"),
        "UTF-8")
    add("gguf_tensor_name_len_huge", (lambda raw: raw[:raw.index(b"output_norm.weight") - 8]
                                      + struct.pack("<Q", big)
                                      + raw[raw.index(b"output_norm.weight"):])(encode(b)),
        "tensor")
    return v


def gguf_writer_base(path: Path) -> None:
    """The same kind of file written by gguf-py, the reference writer."""
    import numpy as np
    import gguf

    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name("sluice bad-file base (GGUFWriter)")
    writer.add_context_length(64)
    writer.add_block_count(1)
    writer.add_token_list(["<s>", "a", "b"])
    writer.add_tensor("token_embd.weight", np.arange(12, dtype=np.float32).reshape(3, 4))
    q8 = np.zeros((2, Q8_0_BLOCK_BYTES), dtype=np.uint8)
    writer.add_tensor("blk.0.attn_q.weight", q8,
                      raw_dtype=gguf.GGMLQuantizationType.Q8_0)
    writer.add_tensor("output_norm.weight", np.ones(8, dtype=np.float16))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


# ---------------------------------------------------------------------------------------------
# safetensors: u64 header length, a JSON object header, then the data buffer.


def st_file(header: dict | str | bytes, data: bytes, header_len: int | None = None) -> bytes:
    if isinstance(header, dict):
        header = json.dumps(header, separators=(",", ":"))
    if isinstance(header, str):
        header = header.encode()
    return struct.pack("<Q", len(header) if header_len is None else header_len) + header + data


def st_base_header() -> dict:
    return {
        "__metadata__": {"format": "pt"},
        "embed.weight": {"dtype": "F32", "shape": [3, 4], "data_offsets": [0, 48]},
        "norm.weight": {"dtype": "BF16", "shape": [4], "data_offsets": [48, 56]},
        "mask": {"dtype": "BOOL", "shape": [2, 2], "data_offsets": [56, 60]},
    }


ST_DATA = bytes(range(60))


def st_with(tensor: str, **changes) -> bytes:
    header = st_base_header()
    header[tensor] = dict(header[tensor], **changes)
    return st_file(header, ST_DATA)


def safetensors_variants() -> dict[str, tuple[bytes, list[str]]]:
    v: dict[str, tuple[bytes, list[str]]] = {}
    header_bytes = json.dumps(st_base_header(), separators=(",", ":")).encode()

    def add(name: str, data: bytes, *expect: str) -> None:
        v[name] = (data, list(expect))

    add("st_empty", b"", "header")
    add("st_short", b"\x10\x00\x00\x00", "header")
    add("st_header_len_zero", st_file(b"", ST_DATA), "header")
    add("st_header_len_past_eof", st_file(header_bytes, ST_DATA, len(header_bytes) + 200),
        "header")
    add("st_header_len_huge", st_file(header_bytes, ST_DATA, 1 << 63), "header")
    add("st_header_not_json", st_file(b"this is not json at all", b""), "header")
    add("st_header_brace_not_json", st_file(b"{this is not json}", b""), "JSON")
    add("st_header_truncated_json", st_file(header_bytes[:40], ST_DATA), "JSON")
    add("st_header_array", st_file(b"[1, 2, 3]", b""), "header")
    add("st_header_string", st_file(b"\"hello\"", b""), "header")
    add("st_header_deep_json", st_file(b"{\"a\":" * 100 + b"1" + b"}" * 100, b""), "deep")
    add("st_header_invalid_utf8", st_file(b'{"emb\xff": {"dtype": "F32", "shape": [1], '
                                          b'"data_offsets": [0, 4]}}', bytes(4)), "JSON")
    add("st_tensor_not_object", st_file({"embed.weight": 5}, b""), "embed.weight")
    add("st_bad_dtype", st_with("embed.weight", dtype="F33"), "embed.weight", "F33")
    add("st_dtype_not_string", st_with("embed.weight", dtype=32), "embed.weight", "dtype")
    add("st_dtype_gguf_only", st_with("embed.weight", dtype="Q4_K"), "embed.weight")
    header = st_base_header()
    del header["embed.weight"]["dtype"]
    add("st_missing_dtype", st_file(header, ST_DATA), "embed.weight", "dtype")
    header = st_base_header()
    del header["embed.weight"]["shape"]
    add("st_missing_shape", st_file(header, ST_DATA), "embed.weight", "shape")
    header = st_base_header()
    del header["embed.weight"]["data_offsets"]
    add("st_missing_offsets", st_file(header, ST_DATA), "embed.weight", "data_offsets")
    add("st_shape_not_array", st_with("embed.weight", shape=12), "embed.weight", "shape")
    add("st_shape_negative", st_with("embed.weight", shape=[-3, -4]), "embed.weight", "shape")
    add("st_shape_float", st_with("embed.weight", shape=[3.0, 4.5]), "embed.weight", "shape")
    add("st_shape_five_dims", st_with("embed.weight", shape=[1, 1, 1, 3, 4]), "embed.weight")
    add("st_shape_overflow", st_with("embed.weight", shape=[1 << 62, 1 << 62]), "embed.weight")
    add("st_shape_bytes_overflow", st_with("embed.weight", shape=[1 << 31, 1 << 31]),
        "embed.weight")
    add("st_shape_length_mismatch", st_with("embed.weight", shape=[3, 3]), "embed.weight")
    add("st_offsets_reversed", st_with("embed.weight", data_offsets=[48, 0]), "embed.weight")
    add("st_offsets_three", st_with("embed.weight", data_offsets=[0, 24, 48]), "embed.weight")
    add("st_offsets_not_numbers", st_with("embed.weight", data_offsets=["0", "48"]),
        "embed.weight")
    add("st_offsets_negative", st_with("embed.weight", data_offsets=[-48, 0]), "embed.weight")
    add("st_offsets_past_end", st_with("mask", data_offsets=[56, 64], shape=[2, 4]), "mask")
    add("st_offsets_huge", st_with("mask", data_offsets=[(1 << 64) - 4, (1 << 64) - 0]),
        "mask")
    add("st_offsets_gap", st_file(dict(st_base_header(), mask={
        "dtype": "BOOL", "shape": [2, 2], "data_offsets": [60, 64]}), ST_DATA + bytes(4)), "mask")
    add("st_offsets_overlap", st_with("norm.weight", data_offsets=[40, 48]), "norm.weight")
    add("st_metadata_not_object", st_file(dict(st_base_header(), __metadata__=[1]), ST_DATA),
        "__metadata__")
    add("st_metadata_value_not_string", st_file(dict(st_base_header(), __metadata__={"a": 1}),
                                                ST_DATA), "__metadata__")
    add("st_duplicate_tensor_name", st_file(
        b'{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},'
        b'"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}', bytes(8)), "duplicate")
    return v


# ---------------------------------------------------------------------------------------------


def main() -> int:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_OUT
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("*"):
        if old.suffix in (".gguf", ".safetensors") or old.name == "expected.json":
            old.unlink()

    (out / "base_valid.gguf").write_bytes(encode(base_gguf()))
    gguf_writer_base(out / "base_gguf_writer.gguf")
    (out / "base_valid.safetensors").write_bytes(st_file(st_base_header(), ST_DATA))

    expected: dict[str, list[str]] = {}
    for name, (data, expect) in sorted(gguf_variants().items()):
        (out / f"{name}.gguf").write_bytes(data)
        expected[f"{name}.gguf"] = expect
    for name, (data, expect) in sorted(safetensors_variants().items()):
        (out / f"{name}.safetensors").write_bytes(data)
        expected[f"{name}.safetensors"] = expect
    (out / "expected.json").write_text(json.dumps(expected, indent=1, sort_keys=True) + "\n")

    total = sum(p.stat().st_size for p in out.iterdir())
    print(f"{len(expected)} bad files + 3 bases in {out} ({total} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
