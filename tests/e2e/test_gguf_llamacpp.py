"""llama.cpp's own GGUF reader (gguf.cpp, from the PyPI build xllamacpp, called through ctypes)
reads the files our writer produces: the fixed file of every metadata type, and a copy of every
tiny llama.cpp model made by reading it with our reader and writing it with our writer. Keys,
value types, tensor names, types, shapes and offsets must equal the original's, and gguf-py must
see the same tensor bytes."""
import ctypes
import importlib.util
import os
import pathlib
import subprocess

import gguf
import numpy as np
import pytest

BUILD_DIR = pathlib.Path(os.environ.get("SLUICE_BUILD_DIR", "build"))
TESTDATA = pathlib.Path(os.environ.get("SLUICE_TESTDATA_DIR", "../shared/testdata"))
TINY = sorted((TESTDATA / "llamacpp-tiny").glob("*.gguf"))


class GgufInitParams(ctypes.Structure):
    _fields_ = [("no_alloc", ctypes.c_bool), ("ctx", ctypes.c_void_p)]


@pytest.fixture(scope="module")
def llama():
    spec = importlib.util.find_spec("xllamacpp")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("xllamacpp (llama.cpp from PyPI) is not installed in the venv")
    lib = ctypes.CDLL(str(pathlib.Path(spec.submodule_search_locations[0]) / "xllamacpp.abi3.so"))
    lib.gguf_init_from_file.restype = ctypes.c_void_p
    lib.gguf_init_from_file.argtypes = [ctypes.c_char_p, GgufInitParams]
    for name, restype in [("gguf_get_n_kv", ctypes.c_int64), ("gguf_get_n_tensors", ctypes.c_int64),
                          ("gguf_get_version", ctypes.c_uint32), ("gguf_get_alignment", ctypes.c_size_t),
                          ("gguf_get_data_offset", ctypes.c_size_t)]:
        getattr(lib, name).restype = restype
        getattr(lib, name).argtypes = [ctypes.c_void_p]
    for name, restype in [("gguf_get_key", ctypes.c_char_p), ("gguf_get_kv_type", ctypes.c_int),
                          ("gguf_get_tensor_name", ctypes.c_char_p), ("gguf_get_tensor_type", ctypes.c_int),
                          ("gguf_get_tensor_offset", ctypes.c_size_t), ("gguf_get_tensor_size", ctypes.c_size_t)]:
        getattr(lib, name).restype = restype
        getattr(lib, name).argtypes = [ctypes.c_void_p, ctypes.c_int64]
    lib.gguf_free.argtypes = [ctypes.c_void_p]
    return lib


def read_with_llama(lib, path):
    handle = lib.gguf_init_from_file(str(path).encode(), GgufInitParams(True, None))
    assert handle, f"llama.cpp's gguf_init_from_file refused {path}"
    try:
        keys = [(lib.gguf_get_key(handle, i).decode(), lib.gguf_get_kv_type(handle, i))
                for i in range(lib.gguf_get_n_kv(handle))]
        tensors = [(lib.gguf_get_tensor_name(handle, i).decode(), lib.gguf_get_tensor_type(handle, i),
                    lib.gguf_get_tensor_offset(handle, i), lib.gguf_get_tensor_size(handle, i))
                   for i in range(lib.gguf_get_n_tensors(handle))]
        return {"version": lib.gguf_get_version(handle), "alignment": lib.gguf_get_alignment(handle),
                "data_offset": lib.gguf_get_data_offset(handle), "keys": keys, "tensors": tensors}
    finally:
        lib.gguf_free(handle)


def harness(name):
    path = BUILD_DIR / "harness" / name
    if not path.exists():
        pytest.skip(f"{path} is not built")
    return path


def test_llama_cpp_reads_every_metadata_type(llama, tmp_path):
    out = tmp_path / "all_types.gguf"
    # "flat": llama.cpp refuses arrays of arrays (gguf.cpp: "invalid GGUF type 9"), so that one
    # key is left out here; gguf-py reads it back in test_inspect_dump.py.
    subprocess.run([harness("gguf_write_harness"), out, "64", "flat"], check=True)
    seen = read_with_llama(llama, out)
    assert seen["version"] == 3 and seen["alignment"] == 64
    reader = gguf.GGUFReader(out)
    expected_keys = [(k, int(f.types[0])) for k, f in reader.fields.items() if not k.startswith("GGUF.")]
    assert seen["keys"] == expected_keys
    assert [t[0] for t in seen["tensors"]] == [t.name for t in reader.tensors]


@pytest.mark.skipif(not TINY, reason=f"no tiny llama.cpp models under {TESTDATA} (../shared absent)")
@pytest.mark.parametrize("source", TINY, ids=[p.name for p in TINY])
def test_llama_cpp_reads_our_copy_of_its_model(llama, tmp_path, source):
    copy = tmp_path / source.name
    subprocess.run([harness("gguf_copy_harness"), source, copy], check=True)
    original, ours = read_with_llama(llama, source), read_with_llama(llama, copy)
    # Our writer always records general.alignment (first), so the header grows by that key.
    without_alignment = [k for k in ours["keys"] if k[0] != "general.alignment"]
    assert without_alignment == original["keys"]
    assert ours["tensors"] == original["tensors"]
    assert (ours["version"], ours["alignment"]) == (original["version"], original["alignment"])
    a, b = gguf.GGUFReader(source), gguf.GGUFReader(copy)
    for ta, tb in zip(a.tensors, b.tensors, strict=True):
        assert np.array_equal(np.asarray(ta.data).view(np.uint8), np.asarray(tb.data).view(np.uint8)), ta.name
