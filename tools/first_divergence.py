#!/usr/bin/env python3
"""Locates the first intermediate tensor where Sluice departs from llama.cpp.

Runs the same token ids through llama.cpp (the library inside the PyPI wheel xllamacpp, via
tools/llamacpp_oracle.py, with an eval callback that copies every F32 tensor of the graph) and
through `sluice eval --dump-activations DIR`, then walks llama.cpp's tensors in graph order and
prints, for each name both sides have (attn_norm-0, Qcur-0, kqv_out-0, ffn_out-0, l_out-0, …,
result_norm, result_output), the max abs difference relative to the tensor's scale.

    .venv/bin/python tools/first_divergence.py MODEL.gguf --tokens 1,5,9 [--kv f32]
"""
import argparse
import ctypes
import pathlib
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import llamacpp_oracle as oracle  # noqa: E402

EVAL_CALLBACK = ctypes.CFUNCTYPE(ctypes.c_bool, ctypes.c_void_p, ctypes.c_bool, ctypes.c_void_p)
GGML_TYPE_F32 = 0


def llama_cpp_tensors(model_path, tokens, kv_f32):
    llama = oracle.Llama()
    lib = llama.lib
    lib.ggml_get_name.restype, lib.ggml_get_name.argtypes = ctypes.c_char_p, [ctypes.c_void_p]
    lib.ggml_nbytes.restype, lib.ggml_nbytes.argtypes = ctypes.c_size_t, [ctypes.c_void_p]
    lib.ggml_backend_tensor_get.restype = None
    lib.ggml_backend_tensor_get.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t,
                                            ctypes.c_size_t]
    seen = {}

    def on_tensor(tensor, ask, _user):
        if ask:
            return True
        kind = ctypes.c_int32.from_address(tensor).value
        if kind != GGML_TYPE_F32:
            return True
        ne = (ctypes.c_int64 * 4).from_address(tensor + 16)
        nb = (ctypes.c_size_t * 4).from_address(tensor + 48)
        # Empty tensors (hybrid graphs have some) and non-contiguous views (reading their bytes
        # as one block would mix in other rows) cannot be compared element by element.
        contiguous = nb[0] == 4 and all(nb[i + 1] == nb[i] * ne[i] for i in range(3))
        if ne[0] * ne[1] * ne[2] * ne[3] == 0 or not contiguous:
            return True
        name = lib.ggml_get_name(tensor).decode()
        data = np.empty(ne[0] * ne[1] * ne[2] * ne[3], dtype=np.float32)
        lib.ggml_backend_tensor_get(tensor, data.ctypes.data, 0, data.nbytes)
        # ggml's fastest dimension is the row; the last dimension is the token.
        n_tokens = ne[3] if ne[3] > 1 else (ne[2] if ne[2] > 1 else ne[1])
        seen.pop(name, None)  # keep graph order of the last write
        seen[name] = data.reshape(n_tokens, -1) if data.size % n_tokens == 0 else data
        return True

    callback = EVAL_CALLBACK(on_tensor)
    with llama.load(model_path) as model:
        context = oracle.Context.__new__(oracle.Context)
        params = lib.llama_context_default_params()
        params.n_ctx = max(64, len(tokens) + 8)
        params.n_threads = params.n_threads_batch = 1
        if kv_f32:
            params.type_k = params.type_v = GGML_TYPE_F32
            params.flash_attn_type = 0
        params.cb_eval = ctypes.cast(callback, ctypes.c_void_p)
        context.model, context.lib, context.params, context.n_past = model, lib, params, 0
        context.handle = lib.llama_init_from_model(model.handle, params)
        if not context.handle:
            raise SystemExit("llama.cpp could not create a context")
        with context:
            context.decode(tokens, all_logits=True)
    return seen


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", type=pathlib.Path)
    parser.add_argument("--tokens", required=True)
    parser.add_argument("--kv", choices=["f16", "f32"], default="f32")
    parser.add_argument("--sluice", default="build/sluice")
    parser.add_argument("--threshold", type=float, default=1e-3,
                        help="relative difference that counts as a divergence")
    args = parser.parse_args()
    tokens = [int(t) for t in args.tokens.split(",")]
    reference = llama_cpp_tensors(args.model, tokens, args.kv == "f32")
    with tempfile.TemporaryDirectory() as folder:
        subprocess.run([args.sluice, "eval", "-m", str(args.model), "--tokens", args.tokens,
                        "--kv", args.kv, "--all-positions", "--dump-activations", folder],
                       check=True, stdout=subprocess.DEVNULL)
        ours = {p.stem.replace("-out", ""): np.load(p) for p in pathlib.Path(folder).glob("*.npy")}
    first = None
    for name, theirs in reference.items():
        mine = ours.get(name)
        if mine is None or mine.shape != getattr(theirs, "shape", None):
            continue
        scale = float(np.abs(theirs).max()) or 1.0
        diff = float(np.abs(mine - theirs).max())
        flag = diff / scale > args.threshold
        if flag and first is None:
            first = name
        print(f"{name:24s} max|d| {diff:.3e}  scale {scale:.3e}  rel {diff / scale:.2e}"
              f"{'  <-- first divergence' if flag and first == name else ''}")
    print(f"first divergence: {first or 'none'} (threshold {args.threshold})")


if __name__ == "__main__":
    main()
