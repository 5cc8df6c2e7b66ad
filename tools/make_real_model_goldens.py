#!/usr/bin/env python3
"""Writes tests/golden/llamacpp_real/<model>.json: what llama.cpp (tools/llamacpp_oracle.py, the
PyPI build b11549) computes for eight chat prompts on two real quantized models, SmolLM2-135M-
Instruct Q4_1 and Gemma 3 270M Q4_K_M (scripts/fetch_test_models.sh puts both in .cache/models).

Per prompt: the messages; the text rendered by the model's chat template with Python jinja2 set up
as Hugging Face's apply_chat_template (tools/render_templates_jinja2.py, add_generation_prompt on,
bos_token/eos_token = the texts of the GGUF's BOS/EOS ids); the ids llama.cpp's tokenizer gives
that text (parse_special on; add_special only when the template does not itself emit BOS); one
llama_decode of the whole prompt; a greedy continuation of up to 64 tokens (argmax, each token fed
back, ended by an end-of-generation token, which is recorded); the top-1 minus top-2 logit at each
step; and the logits of the last prompt position as the top 64 (id, logit) pairs plus the
logsumexp over the whole vocabulary. The same again with an F32 KV cache and flash attention off
goes under "kv_f32". Under "sensitivity", how far llama.cpp moves from itself when only the order
of its arithmetic changes (that kv_f32 run; the default run with the prompt fed token by token):
the parity test (tests/e2e/test_real_weights_parity.py) derives its tolerances from it.
For SmolLM2 the full last-position logits of the first two prompts also go to <model>.npy
(float32, [2, n_vocab]).

The Gemma 3 270M GGUF (a conversion of the pretrained google/gemma-3-270m) carries no
tokenizer.chat_template, so its template is the official Gemma 3 one, taken from
../shared/testdata/tokenizers/gemma3/tokenizer_config.json, and stored in the golden.

Run once, by hand, whenever the prompts or the oracle change (some minutes on 2 cores):
  scripts/fetch_test_models.sh && .venv/bin/python tools/make_real_model_goldens.py
"""
from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import pathlib
import sys

import gguf
import numpy as np

TOOLS = pathlib.Path(__file__).resolve().parent
ROOT = TOOLS.parent
sys.path.insert(0, str(TOOLS))
import llamacpp_oracle as oracle  # noqa: E402
import render_templates_jinja2 as jinja  # noqa: E402

OUT = ROOT / "tests" / "golden" / "llamacpp_real"
MODELS_DIR = ROOT / ".cache" / "models"
TESTDATA = pathlib.Path(os.environ.get("SLUICE_TESTDATA_DIR", ROOT.parent / "shared" / "testdata"))
N_CTX, N_THREADS, N_GREEDY, TOP_K, N_FULL_LOGITS = 2048, 2, 64, 64, 2

MODELS = [
    {"name": "smollm2-135m-instruct-q4_1", "file": "SmolLM2-135M-Instruct.Q4_1.gguf",
     "template": "gguf", "full_logits": True},
    {"name": "gemma-3-270m-q4_k_m", "file": "gemma-3-270m-q4_k_m.gguf",
     "template": "tokenizers/gemma3/tokenizer_config.json", "full_logits": False},
]

LONG_PASSAGE = (
    "The printing press, developed by Johannes Gutenberg in Mainz around 1440, combined several "
    "older ideas into one practical system. Movable metal type, cast from a hand mould in an alloy "
    "of lead, tin and antimony, could be set into lines, inked with an oil-based ink and pressed "
    "onto paper by a screw press adapted from those used for wine and olive oil. A skilled team "
    "could print several thousand pages a day, where a scribe might copy a few pages. Within fifty "
    "years presses were at work in more than two hundred European towns, and by 1500 perhaps "
    "twenty million volumes had been printed. Books became cheaper and more uniform; errors could "
    "be corrected in a later edition instead of multiplying with every copy. Scholars could cite "
    "the same page of the same text, which helped the growth of science, while pamphlets spread "
    "the arguments of the Reformation faster than any authority could answer them. Vernacular "
    "languages gained standard spellings, and literacy slowly rose as reading material became "
    "part of ordinary life. Historians still debate how quickly these changes happened and how "
    "much credit belongs to the press itself rather than to paper making, trade networks and "
    "growing cities, but few doubt that it changed how knowledge was stored and shared."
)

# name → messages. Varied on purpose: plain question, code, a non-English language, arithmetic,
# a system message with several turns, emoji (ZWJ sequences, variation selectors), a long prompt
# (about 300 tokens) and a single word.
PROMPTS = [
    ("english_question", [{"role": "user", "content": "What is the capital of France, and why is it famous?"}]),
    ("code_request", [{"role": "user", "content":
                       "Write a Python function `is_palindrome(s)` that ignores case and punctuation."}]),
    ("french", [{"role": "user", "content":
                 "Bonjour ! Peux-tu m'expliquer pourquoi le ciel est bleu ? Réponds en français, s'il te plaît."}]),
    ("math", [{"role": "user", "content":
               "A train travels 120 km in 1.5 hours. What is its average speed in km/h? Then compute 17 × 23."}]),
    ("multi_turn_system", [
        {"role": "system", "content": "You are a concise assistant. Answer in one sentence."},
        {"role": "user", "content": "Name a planet with rings."},
        {"role": "assistant", "content": "Saturn has the most famous rings in the solar system."},
        {"role": "user", "content": "Which other planets have rings?"}]),
    ("emoji", [{"role": "user", "content":
                "What do these mean together: 🌍🔥 👨‍👩‍👧‍👦 ❤️ 🚀✨? Reply with emoji too 😊"}]),
    ("long_summary", [{"role": "user", "content": LONG_PASSAGE + "\n\nSummarize the passage above in two sentences."}]),
    ("one_word", [{"role": "user", "content": "Hello"}]),
]


def sha256(path: pathlib.Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def f32(x) -> float:
    # The shortest decimal that reads back as the same float32.
    return float(repr(np.float32(x)).removeprefix("np.float32(").removesuffix(")"))


def logsumexp(logits: np.ndarray) -> float:
    x = logits.astype(np.float64)
    m = x.max()
    return float(m + np.log(np.exp(x - m).sum()))


def top_pairs(logits: np.ndarray, k: int) -> list[list]:
    # Highest first; equal logits by lower id first, so the order is reproducible.
    order = np.lexsort((np.arange(logits.size), -logits.astype(np.float64)))[:k]
    return [[int(i), f32(logits[i])] for i in order]


def template_of(model: dict, reader: gguf.GGUFReader) -> tuple[str, str]:
    if model["template"] == "gguf":
        return reader.fields["tokenizer.chat_template"].contents(), "tokenizer.chat_template of the GGUF"
    path = TESTDATA / model["template"]
    with path.open(encoding="utf-8") as f:
        config = json.load(f)
    return config["chat_template"], f"chat_template of ../shared/testdata/{model['template']} (the GGUF has none)"


def run_prompt(model: oracle.Model, ids: list[int], kv_type: int, flash_attn: int, chunk: int | None = None):
    with model.context(N_CTX, N_THREADS, kv_type, flash_attn) as context:
        logits, greedy, margins = oracle.greedy(context, ids, N_GREEDY, prompt_chunk=chunk)
        settings_log = [line.strip() for line in context.creation_log if "Flash Attention" in line]
    return logits, greedy, margins, settings_log


def kl_from_top(reference_top, reference_lse, ours: np.ndarray) -> float:
    ids = [i for i, _ in reference_top]
    p = np.exp(np.array([v for _, v in reference_top]) - reference_lse)
    q = np.exp(ours[ids].astype(np.float64) - logsumexp(ours))
    kl = float(np.sum(p * (np.log(p) - np.log(q))))
    p_tail, q_tail = max(1.0 - p.sum(), 0.0), max(1.0 - q.sum(), 1e-300)
    return kl + (p_tail * math.log(p_tail / q_tail) if p_tail > 0 else 0.0)


def sensitivity(logits, greedy, margins, other_logits, other_greedy, top, lse) -> dict:
    top_ids = [i for i, _ in top]
    prefix = next((i for i, (a, b) in enumerate(zip(greedy, other_greedy)) if a != b), None)
    return {"max_abs_top64": f32(np.abs(logits[top_ids] - other_logits[top_ids]).max()),
            "kl": kl_from_top(top, lse, other_logits),
            # the step where the two greedy runs part (null: they agree), and the golden's
            # top-2 margin there
            "greedy_diverges_at": prefix,
            "margin_at_divergence": None if prefix is None else f32(margins[prefix])}


def prompt_entry(model: oracle.Model, template: str, bos_text: str, eos_text: str, eog_ids: list[int],
                 name: str, messages: list[dict], check_determinism: bool) -> tuple[dict, np.ndarray, list[str]]:
    """One prompt: render, tokenize, then the default run, the kv_f32 run and the token-by-token
    run. Returns the golden entry, the default run's last-position logits and the log lines
    that say how flash attention was resolved."""
    rendered = jinja.render(template, messages, None, True, bos_text, eos_text)
    # Gemma's template writes <bos> itself; adding another would double it (llama.cpp's server
    # makes the same check). SmolLM2's GGUF asks for no BOS either way.
    add_special = not rendered.startswith(bos_text)
    ids = model.tokenize(rendered, add_special=add_special, parse_special=True)
    logits, greedy, margins, fa_log = run_prompt(model, ids, oracle.GGML_TYPE_F16, oracle.FLASH_ATTN_AUTO)
    if check_determinism:  # a golden means nothing unless llama.cpp repeats itself bit for bit
        again = run_prompt(model, ids, oracle.GGML_TYPE_F16, oracle.FLASH_ATTN_AUTO)
        assert np.array_equal(again[0], logits) and again[1] == greedy, "llama.cpp is not deterministic"
    logits32, greedy32, margins32, _ = run_prompt(model, ids, oracle.GGML_TYPE_F32, oracle.FLASH_ATTN_DISABLED)
    logits_tok, greedy_tok, _, _ = run_prompt(model, ids, oracle.GGML_TYPE_F16, oracle.FLASH_ATTN_AUTO, chunk=1)
    top, lse = top_pairs(logits, TOP_K), logsumexp(logits)
    entry = {
        "name": name, "messages": messages, "rendered": rendered, "add_special": add_special,
        "prompt_ids": ids, "greedy_ids": greedy, "greedy_top2_margins": [f32(m) for m in margins],
        "stopped_at_eog": bool(greedy) and greedy[-1] in eog_ids,
        "last_logits_top": top, "last_logits_logsumexp": lse,
        "kv_f32": {"greedy_ids": greedy32, "greedy_top2_margins": [f32(m) for m in margins32],
                   "last_logits_top": top_pairs(logits32, TOP_K), "last_logits_logsumexp": logsumexp(logits32)},
        # How far llama.cpp moves from itself when only the order of its arithmetic changes:
        # "kv_f32" (its other attention path) and "token_by_token" (default settings, the prompt
        # fed one token a call). The parity test derives its tolerances from these.
        "sensitivity": {"kv_f32": sensitivity(logits, greedy, margins, logits32, greedy32, top, lse),
                        "token_by_token": sensitivity(logits, greedy, margins, logits_tok, greedy_tok, top, lse)},
    }
    print(f"  {name}: {len(ids)} prompt ids, {len(greedy)} greedy (min margin {min(margins):.4f}); "
          + "; ".join(f"{k} max|d| {v['max_abs_top64']:.4f} kl {v['kl']:.2e} diverges at "
                      f"{v['greedy_diverges_at']} (margin {v['margin_at_divergence']})"
                      for k, v in entry["sensitivity"].items()), file=sys.stderr)
    return entry, logits, fa_log


def make(llama: oracle.Llama, spec: dict) -> tuple[dict, np.ndarray | None]:
    path = MODELS_DIR / spec["file"]
    template, template_source = template_of(spec, gguf.GGUFReader(path))
    model = llama.load(path)
    try:
        bos_text = model.token_text(model.lib.llama_vocab_bos(model.vocab))
        eos_text = model.token_text(model.lib.llama_vocab_eos(model.vocab))
        eog_ids = [t for t in range(model.n_vocab) if model.is_eog(t)]
        prompts, full_rows = [], []
        for index, (name, messages) in enumerate(PROMPTS):
            entry, logits, fa_log = prompt_entry(model, template, bos_text, eos_text, eog_ids, name, messages,
                                                 check_determinism=index == 0)
            if spec["full_logits"] and index < N_FULL_LOGITS:
                entry["full_logits_row"] = index
                full_rows.append(logits.astype(np.float32))
            prompts.append(entry)
        golden = {
            "generator": "tools/make_real_model_goldens.py (llama.cpp through tools/llamacpp_oracle.py)",
            "llama_cpp_version": llama.version(),
            "llama_cpp_system_info": llama.system_info(),
            "model": {"file": spec["file"], "sha256": sha256(path), "bytes": path.stat().st_size,
                      "desc": model.desc(), "n_vocab": model.n_vocab, "fetch": "scripts/fetch_test_models.sh"},
            "settings": {
                "n_ctx": N_CTX, "n_threads": N_THREADS, "n_threads_batch": N_THREADS,
                "n_gpu_layers": 0, "use_extra_bufts": False, "prompt_in_one_batch": True,
                "type_k": "f16", "type_v": "f16", "flash_attn_type": "auto", "flash_attn_resolved": fa_log,
                "other_context_params": "llama_context_default_params() (n_batch 2048, n_ubatch 512, swa_full true)",
                "greedy": f"argmax (lowest id on a tie), up to {N_GREEDY} tokens, stop after an EOG token",
                "kv_f32": {"type_k": "f32", "type_v": "f32", "flash_attn_type": "disabled"},
            },
            "template": {"source": template_source, "text": template if spec["template"] != "gguf" else None,
                         "bos_token": bos_text, "eos_token": eos_text, "add_generation_prompt": True,
                         "renderer": "tools/render_templates_jinja2.py (jinja2 as transformers sets it up)"},
            "tokenize": {"parse_special": True,
                         "add_special": "only when the rendered text does not start with bos_token"},
            "eog_ids": eog_ids,
            "top_k": TOP_K,
            "full_logits_npy": f"{spec['name']}.npy" if full_rows else None,
            "prompts": prompts,
        }
        return golden, (np.stack(full_rows) if full_rows else None)
    finally:
        model.close()


def write(path: pathlib.Path, data: bytes) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_bytes(data)
    tmp.replace(path)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="one model name")
    args = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    llama = oracle.Llama()
    for spec in MODELS:
        if args.only and spec["name"] != args.only:
            continue
        print(spec["name"], file=sys.stderr)
        golden, full = make(llama, spec)
        write(OUT / f"{spec['name']}.json",
              (json.dumps(golden, ensure_ascii=False, indent=1) + "\n").encode("utf-8"))
        if full is not None:
            tmp = OUT / f"{spec['name']}.npy.tmp"
            with tmp.open("wb") as f:
                np.save(f, full)
            tmp.replace(OUT / f"{spec['name']}.npy")
    return 0


if __name__ == "__main__":
    sys.exit(main())
