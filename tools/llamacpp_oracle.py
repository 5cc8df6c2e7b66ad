#!/usr/bin/env python3
"""llama.cpp as an oracle, through ctypes: load a GGUF, tokenize, decode a batch and read its
logits, run a greedy loop. The library is the one in the PyPI wheel `xllamacpp==2026.10.11549`
(llama.cpp build b11549), whose extension module exports the whole llama.cpp C API; no
llama.cpp code enters this repository. Used by tools/make_real_model_goldens.py.

The struct layouts below are those of that build, not of any llama.h on the web: the header
changed several times around b11000 (use_mmap/use_mlock/use_direct_io became `load_mode`,
`lazy_mode`, `load_mtp`, `n_outputs_max_per_seq` and `ctx_other` appeared). Offsets, sizes and
default values were read off the machine code of llama_model_default_params /
llama_context_default_params / llama_batch_init in the wheel and matched with the field order of
the llama.h versions of that period; the one field no public header shows was identified by
experiment (see ContextParams). check_layout() re-checks that fingerprint every time the library
is loaded, so a different wheel is refused instead of being fed shifted fields.

  .venv/bin/python tools/llamacpp_oracle.py MODEL.gguf [--text TEXT] [--greedy N]
prints the ids of TEXT, and the greedy continuation of those ids.
"""
from __future__ import annotations

import argparse
import ctypes
import importlib.util
import pathlib
import sys

import numpy as np

XLLAMACPP_VERSION = "2026.10.11549"
GGML_TYPE_F32, GGML_TYPE_F16 = 0, 1
FLASH_ATTN_AUTO, FLASH_ATTN_DISABLED = -1, 0


class ModelParams(ctypes.Structure):
    # struct llama_model_params, 80 bytes.
    _fields_ = [
        ("devices", ctypes.c_void_p),                 # 0x00
        ("tensor_buft_overrides", ctypes.c_void_p),   # 0x08
        ("n_gpu_layers", ctypes.c_int32),             # 0x10  default -1 (all)
        ("split_mode", ctypes.c_int32),               # 0x14  default 1 (LAYER)
        ("load_mode", ctypes.c_int32),                # 0x18  default -1 (AUTO)
        ("lazy_mode", ctypes.c_int32),                # 0x1c  default 1 (AUTO)
        ("main_gpu", ctypes.c_int32),                 # 0x20
        ("tensor_split", ctypes.c_void_p),            # 0x28
        ("progress_callback", ctypes.c_void_p),       # 0x30
        ("progress_callback_user_data", ctypes.c_void_p),  # 0x38
        ("kv_overrides", ctypes.c_void_p),            # 0x40
        ("vocab_only", ctypes.c_bool),                # 0x48
        ("check_tensors", ctypes.c_bool),             # 0x49
        ("use_extra_bufts", ctypes.c_bool),           # 0x4a  default true
        ("no_host", ctypes.c_bool),                   # 0x4b
        ("no_alloc", ctypes.c_bool),                  # 0x4c
        ("load_mtp", ctypes.c_bool),                  # 0x4d
    ]


class ContextParams(ctypes.Structure):
    # struct llama_context_params, 168 bytes.
    _fields_ = [
        ("n_ctx", ctypes.c_uint32),                   # 0x00  default 512
        ("n_batch", ctypes.c_uint32),                 # 0x04  default 2048
        ("n_ubatch", ctypes.c_uint32),                # 0x08  default 512
        ("n_seq_max", ctypes.c_uint32),               # 0x0c  default 1
        ("n_rs_seq", ctypes.c_uint32),                # 0x10
        ("n_outputs_max", ctypes.c_uint32),           # 0x14
        ("n_outputs_max_per_seq", ctypes.c_uint32),   # 0x18  default 1
        ("n_threads", ctypes.c_int32),                # 0x1c  default 4
        ("n_threads_batch", ctypes.c_int32),          # 0x20  default 4
        ("ctx_type", ctypes.c_int32),                 # 0x24
        ("rope_scaling_type", ctypes.c_int32),        # 0x28  default -1
        ("pooling_type", ctypes.c_int32),             # 0x2c  default -1
        ("attention_type", ctypes.c_int32),           # 0x30  default -1
        ("flash_attn_type", ctypes.c_int32),          # 0x34  default -1 (AUTO)
        ("rope_freq_base", ctypes.c_float),           # 0x38
        ("rope_freq_scale", ctypes.c_float),          # 0x3c
        ("yarn_ext_factor", ctypes.c_float),          # 0x40  default -1
        ("yarn_attn_factor", ctypes.c_float),         # 0x44  default -1
        ("yarn_beta_fast", ctypes.c_float),           # 0x48  default -1
        ("yarn_beta_slow", ctypes.c_float),           # 0x4c  default -1
        ("yarn_orig_ctx", ctypes.c_uint32),           # 0x50
        ("defrag_thold", ctypes.c_float),             # 0x54  default -1
        ("cb_eval", ctypes.c_void_p),                 # 0x58
        ("cb_eval_user_data", ctypes.c_void_p),       # 0x60
        ("type_k", ctypes.c_int32),                   # 0x68  default 1 (F16)
        ("type_v", ctypes.c_int32),                   # 0x6c  default 1 (F16)
        # A field no public llama.h shows: the size of an MoE expert cache (the llama_moe_cache
        # constructor takes it as an unsigned long); any non-zero value makes context creation
        # fail on CPU with "MoE cache requires a GPU backend", which is how it was found.
        ("moe_cache_size", ctypes.c_uint64),          # 0x70
        # Checked the same way: a callback put here is called during llama_decode.
        ("abort_callback", ctypes.c_void_p),          # 0x78
        ("abort_callback_data", ctypes.c_void_p),     # 0x80
        ("embeddings", ctypes.c_bool),                # 0x88
        ("offload_kqv", ctypes.c_bool),               # 0x89  default true
        ("no_perf", ctypes.c_bool),                   # 0x8a  default true
        ("op_offload", ctypes.c_bool),                # 0x8b  default true
        ("swa_full", ctypes.c_bool),                  # 0x8c  default true
        ("kv_unified", ctypes.c_bool),                # 0x8d
        ("samplers", ctypes.c_void_p),                # 0x90
        ("n_samplers", ctypes.c_size_t),              # 0x98
        ("ctx_other", ctypes.c_void_p),               # 0xa0
    ]


class Batch(ctypes.Structure):
    # struct llama_batch, 56 bytes (llama_batch_init fills 0x08 token, 0x18 pos, 0x20 n_seq_id,
    # 0x28 seq_id, 0x30 logits).
    _fields_ = [
        ("n_tokens", ctypes.c_int32),
        ("token", ctypes.POINTER(ctypes.c_int32)),
        ("embd", ctypes.POINTER(ctypes.c_float)),
        ("pos", ctypes.POINTER(ctypes.c_int32)),
        ("n_seq_id", ctypes.POINTER(ctypes.c_int32)),
        ("seq_id", ctypes.POINTER(ctypes.POINTER(ctypes.c_int32))),
        ("logits", ctypes.POINTER(ctypes.c_int8)),
    ]


# (struct, size, bytes the default-params function writes, {field: default}) — the fingerprint.
LAYOUT = {
    "llama_model_default_params": (ModelParams, 80, 0x4e, {
        "n_gpu_layers": -1, "split_mode": 1, "load_mode": -1, "lazy_mode": 1, "main_gpu": 0,
        "vocab_only": False, "check_tensors": False, "use_extra_bufts": True, "no_host": False,
        "no_alloc": False, "load_mtp": False}),
    "llama_context_default_params": (ContextParams, 168, 0xa8, {
        "n_ctx": 512, "n_batch": 2048, "n_ubatch": 512, "n_seq_max": 1, "n_rs_seq": 0,
        "n_outputs_max": 0, "n_outputs_max_per_seq": 1, "n_threads": 4, "n_threads_batch": 4,
        "ctx_type": 0, "rope_scaling_type": -1, "pooling_type": -1, "attention_type": -1,
        "flash_attn_type": -1, "rope_freq_base": 0.0, "rope_freq_scale": 0.0,
        "yarn_ext_factor": -1.0, "yarn_attn_factor": -1.0, "yarn_beta_fast": -1.0,
        "yarn_beta_slow": -1.0, "yarn_orig_ctx": 0, "defrag_thold": -1.0, "type_k": 1,
        "type_v": 1, "moe_cache_size": 0, "abort_callback": None,
        "abort_callback_data": None, "embeddings": False, "offload_kqv": True, "no_perf": True,
        "op_offload": True, "swa_full": True, "kv_unified": False, "samplers": None,
        "n_samplers": 0, "ctx_other": None}),
}

LOG_CALLBACK = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p)


def find_library() -> pathlib.Path:
    spec = importlib.util.find_spec("xllamacpp")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(f"xllamacpp=={XLLAMACPP_VERSION} (llama.cpp from PyPI) is not installed")
    return pathlib.Path(spec.submodule_search_locations[0]) / "xllamacpp.abi3.so"


def check_layout(lib) -> None:
    """Calls each default-params function with its hidden result pointer aimed at a buffer
    filled with 0xA5, so the bytes it writes and their values can be checked against LAYOUT."""
    for name, (struct, size, written, defaults) in LAYOUT.items():
        assert ctypes.sizeof(struct) == size, (name, ctypes.sizeof(struct))
        buffer = (ctypes.c_uint8 * 512)(*([0xA5] * 512))
        address = ctypes.cast(getattr(lib, name), ctypes.c_void_p).value
        ctypes.CFUNCTYPE(None, ctypes.c_void_p)(address)(ctypes.addressof(buffer))
        touched = [i for i in range(512) if buffer[i] != 0xA5]
        if touched and max(touched) + 1 != written:
            raise RuntimeError(f"{name} wrote {max(touched) + 1} bytes, the layout expects {written}: "
                               f"not the llama.cpp of xllamacpp=={XLLAMACPP_VERSION}")
        value = struct.from_buffer_copy(bytes(buffer[:size]))
        wrong = {k: getattr(value, k) for k, v in defaults.items() if getattr(value, k) != v}
        if wrong:
            raise RuntimeError(f"{name}: unexpected defaults {wrong}: the struct layout does not "
                               f"match this library")


class Llama:
    """The loaded library: prototypes, the layout check and a log capture."""

    def __init__(self, path: pathlib.Path | None = None, echo_log: bool = False):
        self.path = path or find_library()
        self.lib = ctypes.CDLL(str(self.path))
        self.log: list[str] = []
        self.echo_log = echo_log
        self._declare()
        check_layout(self.lib)
        self._log_callback = LOG_CALLBACK(self._on_log)  # kept alive as long as the library
        self.lib.llama_log_set(self._log_callback, None)
        self.lib.llama_backend_init()

    def _on_log(self, level, text, _user):
        line = text.decode("utf-8", "replace")
        self.log.append(line)
        if self.echo_log:
            sys.stderr.write(line)

    def _declare(self):
        c = ctypes
        vp, i32 = c.c_void_p, c.c_int32
        for name, restype, argtypes in [
            ("llama_backend_init", None, []),
            ("llama_log_set", None, [LOG_CALLBACK, vp]),
            ("llama_version", c.c_char_p, []),
            ("llama_print_system_info", c.c_char_p, []),
            ("ggml_version", c.c_char_p, []),
            ("llama_model_default_params", ModelParams, []),
            ("llama_context_default_params", ContextParams, []),
            ("llama_model_load_from_file", vp, [c.c_char_p, ModelParams]),
            ("llama_model_free", None, [vp]),
            ("llama_init_from_model", vp, [vp, ContextParams]),
            ("llama_free", None, [vp]),
            ("llama_n_ctx", c.c_uint32, [vp]),
            ("llama_model_get_vocab", vp, [vp]),
            ("llama_model_desc", i32, [vp, c.c_char_p, c.c_size_t]),
            ("llama_vocab_n_tokens", i32, [vp]),
            ("llama_vocab_bos", i32, [vp]),
            ("llama_vocab_eos", i32, [vp]),
            ("llama_vocab_get_add_bos", c.c_bool, [vp]),
            ("llama_vocab_is_eog", c.c_bool, [vp, i32]),
            ("llama_vocab_get_text", c.c_char_p, [vp, i32]),
            ("llama_tokenize", i32, [vp, c.c_char_p, i32, c.POINTER(i32), i32, c.c_bool, c.c_bool]),
            ("llama_token_to_piece", i32, [vp, i32, c.c_char_p, i32, i32, c.c_bool]),
            ("llama_batch_init", Batch, [i32, i32, i32]),
            ("llama_batch_free", None, [Batch]),
            ("llama_decode", i32, [vp, Batch]),
            ("llama_get_logits_ith", c.POINTER(c.c_float), [vp, i32]),
        ]:
            function = getattr(self.lib, name)
            function.restype, function.argtypes = restype, argtypes

    def version(self) -> str:
        return (f"llama.cpp b11549 from PyPI xllamacpp=={XLLAMACPP_VERSION} (llama_version() "
                f"{self.lib.llama_version().decode()}, ggml {self.lib.ggml_version().decode()})")

    def system_info(self) -> str:
        return self.lib.llama_print_system_info().decode().strip()

    def same_isa_env(self) -> dict[str, str]:
        """The environment that makes Sluice's CPU kernels take this library's float order: the
        PyPI wheel is built without AVX-512, and on an AVX-512 CPU Sluice would otherwise follow
        ggml's AVX-512 kernels (sums in other orders, so a rare activation rounds to the other
        int8 or f16 neighbour, ~1e-3 .. 3e-2 on the tiny random models' logits)."""
        avx512 = any(field.strip() == "AVX512 = 1" for field in self.system_info().split("|"))
        return {} if avx512 else {"SLUICE_CPU_ISA": "avx2"}

    def load(self, path, vocab_only: bool = False) -> "Model":
        return Model(self, path, vocab_only)


class Model:
    def __init__(self, llama: Llama, path, vocab_only: bool):
        self.llama, self.lib = llama, llama.lib
        params = self.lib.llama_model_default_params()
        params.n_gpu_layers = 0
        # llama.cpp's extra buffer types repack weights for AMX/AVX512 kernels, which crash on
        # this machine's CPU; without them every type runs ggml's plain CPU kernels.
        params.use_extra_bufts = False
        params.vocab_only = vocab_only
        self.handle = self.lib.llama_model_load_from_file(str(path).encode(), params)
        if not self.handle:
            raise RuntimeError(f"llama.cpp could not load {path}")
        self.vocab = self.lib.llama_model_get_vocab(self.handle)
        self.n_vocab = self.lib.llama_vocab_n_tokens(self.vocab)

    def close(self):
        if self.handle:
            self.lib.llama_model_free(self.handle)
            self.handle = None

    def __enter__(self):
        return self

    def __exit__(self, *_):
        self.close()

    def desc(self) -> str:
        buffer = ctypes.create_string_buffer(256)
        self.lib.llama_model_desc(self.handle, buffer, 256)
        return buffer.value.decode()

    def tokenize(self, text: str, add_special: bool, parse_special: bool) -> list[int]:
        data = text.encode("utf-8")
        capacity = len(data) + 16
        ids = (ctypes.c_int32 * capacity)()
        n = self.lib.llama_tokenize(self.vocab, data, len(data), ids, capacity, add_special, parse_special)
        if n < 0:
            raise RuntimeError(f"llama_tokenize failed ({n})")
        return list(ids[:n])

    def piece(self, token: int, special: bool = True) -> bytes:
        buffer = ctypes.create_string_buffer(256)
        n = self.lib.llama_token_to_piece(self.vocab, token, buffer, 256, 0, special)
        return buffer.raw[:max(n, 0)]

    def token_text(self, token: int) -> str:
        return self.lib.llama_vocab_get_text(self.vocab, token).decode("utf-8", "replace")

    def is_eog(self, token: int) -> bool:
        return bool(self.lib.llama_vocab_is_eog(self.vocab, token))

    def context(self, n_ctx: int = 2048, n_threads: int = 2, kv_type: int = GGML_TYPE_F16,
                flash_attn: int = FLASH_ATTN_AUTO) -> "Context":
        return Context(self, n_ctx, n_threads, kv_type, flash_attn)


class Context:
    """One sequence (id 0), positions from 0, decoded in whole batches."""

    def __init__(self, model: Model, n_ctx: int, n_threads: int, kv_type: int, flash_attn: int):
        self.model, self.lib = model, model.lib
        params = self.lib.llama_context_default_params()
        params.n_ctx = n_ctx
        params.n_threads = params.n_threads_batch = n_threads
        params.type_k = params.type_v = kv_type
        params.flash_attn_type = flash_attn
        self.params = params
        log_start = len(model.llama.log)
        self.handle = self.lib.llama_init_from_model(model.handle, params)
        if not self.handle:
            raise RuntimeError("llama_init_from_model failed")
        self.creation_log = model.llama.log[log_start:]
        self.n_past = 0

    def close(self):
        if self.handle:
            self.lib.llama_free(self.handle)
            self.handle = None

    def __enter__(self):
        return self

    def __exit__(self, *_):
        self.close()

    def decode(self, tokens: list[int], all_logits: bool = False) -> np.ndarray:
        """Appends tokens in one llama_decode; returns float32 logits [rows, n_vocab] of every
        position (all_logits) or of the last one only."""
        n = len(tokens)
        batch = self.lib.llama_batch_init(n, 0, 1)
        try:
            for i, token in enumerate(tokens):
                batch.token[i] = token
                batch.pos[i] = self.n_past + i
                batch.n_seq_id[i] = 1
                batch.seq_id[i][0] = 0
                batch.logits[i] = 1 if (all_logits or i == n - 1) else 0
            batch.n_tokens = n
            status = self.lib.llama_decode(self.handle, batch)
            if status != 0:
                raise RuntimeError(f"llama_decode returned {status}")
        finally:
            self.lib.llama_batch_free(batch)
        self.n_past += n
        rows = range(n) if all_logits else [n - 1]
        n_vocab = self.model.n_vocab
        return np.stack([np.ctypeslib.as_array(self.lib.llama_get_logits_ith(self.handle, i),
                                               shape=(n_vocab,)).copy() for i in rows])


def top2_margin(logits: np.ndarray) -> float:
    top = np.partition(logits, -2)[-2:]
    return float(abs(top[1] - top[0]))


def greedy(context: Context, prompt: list[int], n_steps: int, stop_at_eog: bool = True,
           prompt_chunk: int | None = None):
    """Decodes prompt in one batch (or in batches of prompt_chunk tokens), then n_steps argmax
    steps, feeding each token back. Returns (last-prompt-position logits, greedy ids, top-1 minus
    top-2 logit at each step). An end-of-generation token is recorded and ends the loop (it is
    not decoded)."""
    chunk = prompt_chunk or len(prompt)
    for start in range(0, len(prompt), chunk):
        logits = context.decode(prompt[start:start + chunk])[0]
    prompt_logits, ids, margins = logits, [], []
    for _ in range(n_steps):
        token = int(np.argmax(logits))  # lowest id wins a tie, as np.argmax does
        ids.append(token)
        margins.append(top2_margin(logits))
        if stop_at_eog and context.model.is_eog(token):
            break
        if len(ids) == n_steps:
            break
        logits = context.decode([token])[0]
    return prompt_logits, ids, margins


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("--text", default="Hello")
    parser.add_argument("--parse-special", action="store_true")
    parser.add_argument("--add-special", action="store_true")
    parser.add_argument("--greedy", type=int, default=0)
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args()
    llama = Llama(echo_log=args.verbose)
    print(llama.version())
    with llama.load(args.model, vocab_only=args.greedy == 0) as model:
        print(f"{model.desc()}; n_vocab {model.n_vocab}")
        ids = model.tokenize(args.text, args.add_special, args.parse_special)
        print("ids", ids, [model.piece(t) for t in ids])
        if args.greedy:
            with model.context() as context:
                _, out, margins = greedy(context, ids, args.greedy)
                print("greedy", out, b"".join(model.piece(t) for t in out).decode("utf-8", "replace"))
                print("margins", [round(m, 3) for m in margins])
    return 0


if __name__ == "__main__":
    sys.exit(main())
