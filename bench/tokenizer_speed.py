#!/usr/bin/env python3
"""Single-thread tokenization speed, sluice vs Hugging Face `tokenizers`, on the parity corpus
(tools/make_tokenizer_corpus.py). Only encoding is timed: sluice through
<build>/harness/tokenizer_speed_harness (loads once, encodes the corpus PASSES times), HF by
encoding the same strings one by one (no encode_batch) with RAYON_NUM_THREADS=1 and
TOKENIZERS_PARALLELISM=false (and, for reference, encode_batch on that one thread, which saves
the per-call Python overhead). Runs alternate (sluice, HF, sluice, HF, …) so machine noise hits
both; the figure is the median pass. Both sides match added/special tokens in the text.

    .venv/bin/python bench/tokenizer_speed.py --build-dir build [--rounds 5] [--names llama3 qwen3]
"""
import os

os.environ["RAYON_NUM_THREADS"] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"

import argparse  # noqa: E402
import importlib.util  # noqa: E402
import json  # noqa: E402
import lzma  # noqa: E402
import pathlib  # noqa: E402
import platform  # noqa: E402
import shutil  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

import tokenizers  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
NAMES = ["llama2", "llama3", "qwen3", "deepseek_v3", "deepseek_v4", "gptoss", "gemma3"]


def corpus():
    spec = importlib.util.spec_from_file_location("corpus", ROOT / "tools" / "make_tokenizer_corpus.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return [entry["text"] for entry in module.build()]


def tokenizer_json(source, scratch):
    if (source / "tokenizer.json").exists():
        return source / "tokenizer.json"
    target = scratch / source.name
    target.mkdir()
    with lzma.open(source / "tokenizer.json.xz") as packed, open(target / "tokenizer.json", "wb") as plain:
        shutil.copyfileobj(packed, plain)
    shutil.copy(source / "tokenizer_config.json", target / "tokenizer_config.json")
    return target / "tokenizer.json"


def sluice_pass_seconds(harness, path, corpus_file, passes):
    result = subprocess.run([harness, "--tokenizer", path, corpus_file, str(passes)],
                            capture_output=True, check=True, text=True)
    return json.loads(result.stdout)["pass_seconds"]


def hf_pass_seconds(tok, texts, passes):
    times = []
    for _ in range(passes):
        start = time.perf_counter()
        for text in texts:
            tok.encode(text, add_special_tokens=False)
        times.append(time.perf_counter() - start)
    return times


def hf_batch_pass_seconds(tok, texts, passes):
    times = []
    for _ in range(passes):
        start = time.perf_counter()
        tok.encode_batch(texts, add_special_tokens=False)  # one Rayon thread: no Python per string
        times.append(time.perf_counter() - start)
    return times


def cpu_name():
    try:
        for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build-dir", default=ROOT / "build", type=pathlib.Path)
    parser.add_argument("--testdata", default=ROOT.parent / "shared" / "testdata", type=pathlib.Path)
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds per tokenizer")
    parser.add_argument("--passes", type=int, default=2, help="corpus passes per round")
    parser.add_argument("--names", nargs="*", default=NAMES)
    args = parser.parse_args()

    harness = args.build_dir / "harness" / "tokenizer_speed_harness"
    texts = corpus()
    megabytes = sum(len(t.encode()) for t in texts) / 1e6
    print(f"machine: {cpu_name()}, {os.cpu_count()} CPUs; "
          f"tokenizers {tokenizers.__version__}; corpus {len(texts)} strings, {megabytes:.3f} MB")
    print("| tokenizer | sluice MB/s | HF encode() MB/s | HF encode_batch, 1 thread MB/s | sluice / HF encode() |")
    print("|---|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as scratch_name:
        scratch = pathlib.Path(scratch_name)
        corpus_file = scratch / "corpus.jsonl"
        corpus_file.write_text("".join(json.dumps(t) + "\n" for t in texts))
        for name in args.names:
            source = args.testdata / "tokenizers" / name
            if not source.is_dir():
                print(f"| {name} | (absent) | | | |")
                continue
            path = tokenizer_json(source, scratch)
            tok = tokenizers.Tokenizer.from_file(str(path))
            ours, theirs, batched = [], [], []
            for _ in range(args.rounds):
                ours += sluice_pass_seconds(harness, path, corpus_file, args.passes)
                theirs += hf_pass_seconds(tok, texts, args.passes)
                batched += hf_batch_pass_seconds(tok, texts, args.passes)
            ours_rate = megabytes / statistics.median(ours)
            theirs_rate = megabytes / statistics.median(theirs)
            batched_rate = megabytes / statistics.median(batched)
            print(f"| {name} | {ours_rate:.2f} | {theirs_rate:.2f} | {batched_rate:.2f} | "
                  f"{ours_rate / theirs_rate:.2f}× |", flush=True)


if __name__ == "__main__":
    main()
