"""Tokenizer parity: `sluice tokenize`/`detokenize` against Hugging Face `tokenizers` (the
oracle) on every tokenizer in testdata/tokenizers, over the generated corpus
(tools/make_tokenizer_corpus.py, ≥ 2,000 strings), plus GGUF-source == tokenizer.json-source for
the tokenizer that has both (llama-spm GGUF / llama2), and raw invalid UTF-8 on stdin.

How the special-token switches map: HF `encode(text, add_special_tokens=False)` always matches
added tokens in the text, special or not, so it is compared with `--parse-special`; HF with
`encode_special_tokens = True` matches only the non-special added tokens, which is what sluice
does without `--parse-special` (llama.cpp's rule); `add_special_tokens=True` is `--add-special`.

Ids and decoded text must be identical for every tokenizer, with no allowance; the only excused
difference is a round trip that is lossy in Hugging Face too. llama2's legacy `normalized: true`
special tokens and tokenizers' added-token rules (leftmost-longest matching, lstrip/rstrip,
normalized tokens) are checked on the corpus and on variants with extra added tokens. The
counts are written to $SLUICE_BUILD_DIR/tokenizer_parity.json and shown with `pytest -s`."""
import copy
import importlib.util
import json
import lzma
import os
import pathlib
import shutil
import subprocess
import unicodedata

import pytest

tokenizers = pytest.importorskip("tokenizers")

SLUICE_BIN = os.environ.get("SLUICE_BIN")
BUILD_DIR = pathlib.Path(os.environ.get("SLUICE_BUILD_DIR", "/tmp"))
TESTDATA = pathlib.Path(os.environ.get("SLUICE_TESTDATA_DIR", "/nonexistent"))
ROOT = pathlib.Path(__file__).resolve().parents[2]
NAMES = ["llama2", "llama3", "qwen3", "deepseek_v3", "deepseek_v4", "gptoss", "gemma3"]
REPORT = {}

if not SLUICE_BIN:
    pytest.skip("SLUICE_BIN is not set (run through ctest)", allow_module_level=True)
if not (TESTDATA / "tokenizers").is_dir():
    pytest.skip(f"no tokenizer test data under {TESTDATA}/tokenizers", allow_module_level=True)


def load_corpus():
    spec = importlib.util.spec_from_file_location("corpus", ROOT / "tools" / "make_tokenizer_corpus.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.build()


CORPUS = load_corpus()
TEXTS = [entry["text"] for entry in CORPUS]


@pytest.fixture(scope="module")
def tokenizer_dirs(tmp_path_factory):
    """name -> directory holding tokenizer.json (unpacked from .xz when needed) and its config."""
    out = {}
    for name in NAMES:
        source = TESTDATA / "tokenizers" / name
        if not source.is_dir():
            continue
        target = tmp_path_factory.mktemp(name)
        if (source / "tokenizer.json").exists():
            (target / "tokenizer.json").symlink_to(source / "tokenizer.json")
        else:
            with lzma.open(source / "tokenizer.json.xz") as packed, open(target / "tokenizer.json", "wb") as plain:
                shutil.copyfileobj(packed, plain)
        for extra in ("tokenizer_config.json", "chat_template.jinja"):
            if (source / extra).exists():
                shutil.copy(source / extra, target / extra)
        out[name] = target
    return out


def directory(tokenizer_dirs, name):
    if name not in tokenizer_dirs:
        pytest.skip(f"{TESTDATA}/tokenizers/{name} is absent")
    return tokenizer_dirs[name]


def sluice_lines(args, lines):
    """Runs a --jsonl subcommand; one JSON value per output line."""
    result = subprocess.run([SLUICE_BIN, *map(str, args), "--jsonl"], capture_output=True, timeout=900,
                            input="".join(json.dumps(line) + "\n" for line in lines).encode())
    assert result.returncode == 0, result.stderr.decode(errors="replace")
    # Split on \n only: decoded text may hold U+2028 and friends, which splitlines() breaks on.
    out = result.stdout.decode().split("\n")
    assert out[-1] == "" and len(out) - 1 == len(lines)
    return [json.loads(line) for line in out[:-1]]


def hf_tokenizer(path, encode_special_tokens=False):
    tok = tokenizers.Tokenizer.from_file(str(path / "tokenizer.json"))
    tok.encode_special_tokens = encode_special_tokens
    return tok


def config(path):
    file = path / "tokenizer_config.json"
    return json.loads(file.read_text()) if file.exists() else {}


def transformers_cleanup(text):
    """transformers' clean_up_tokenization, applied by its decode when the config asks."""
    for before, after in [(" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"), (" n't", "n't"),
                          (" 'm", "'m"), (" 's", "'s"), (" 've", "'ve"), (" 're", "'re")]:
        text = text.replace(before, after)
    return text


def normalizer_types(path):
    def walk(node):
        if not node:
            return []
        if node["type"] == "Sequence":
            return [t for child in node["normalizers"] for t in walk(child)]
        return [node["type"]]
    return walk(json.loads((path / "tokenizer.json").read_text()).get("normalizer"))


def record(name, check, total, causes, unexplained):
    entry = {"strings": total, "mismatches": sum(causes.values()) + len(unexplained),
             "explained": causes, "unexplained": len(unexplained)}
    REPORT.setdefault(name, {})[check] = entry
    report = BUILD_DIR / "tokenizer_parity.json"
    try:
        previous = json.loads(report.read_text()) if report.exists() else {}
        previous.setdefault(name, {})[check] = entry
        report.write_text(json.dumps(previous, indent=1, sort_keys=True) + "\n")
    except OSError:
        pass
    print(f"{name} {check}: {entry}")
    shown = "\n".join(f"  {t[:80]!r}\n    hf   {h[:16]}\n    ours {o[:16]}" for t, h, o in unexplained[:5])
    assert not unexplained, f"{name} {check}: {len(unexplained)} unexplained mismatches of {total}\n{shown}"


# --- encode ---------------------------------------------------------------------------------

@pytest.mark.parametrize("parse_special", [True, False], ids=["parse_special", "no_parse_special"])
@pytest.mark.parametrize("name", NAMES)
def test_encode_matches_hf(tokenizer_dirs, name, parse_special):
    path = directory(tokenizer_dirs, name)
    flags = ["--parse-special"] if parse_special else []
    args = ["tokenize", "--tokenizer", path / "tokenizer.json", *flags]
    ours = sluice_lines(args, TEXTS)
    hf = hf_tokenizer(path, encode_special_tokens=not parse_special)
    expected = [e.ids for e in hf.encode_batch(TEXTS, add_special_tokens=False)]
    mismatches = [(t, h, o) for t, h, o in zip(TEXTS, expected, ours) if h != o]
    record(name, "encode " + ("parse_special" if parse_special else "no_parse_special"), len(TEXTS), {}, mismatches)


@pytest.mark.parametrize("name", NAMES)
def test_add_special_matches_hf(tokenizer_dirs, name):
    path = directory(tokenizer_dirs, name)
    subset = TEXTS[::10]
    args = ["tokenize", "--tokenizer", path / "tokenizer.json", "--parse-special", "--add-special"]
    ours = sluice_lines(args, subset)
    expected = [e.ids for e in hf_tokenizer(path).encode_batch(subset, add_special_tokens=True)]
    mismatches = [(t, h, o) for t, h, o in zip(subset, expected, ours) if h != o]
    record(name, "encode add_special", len(subset), {}, mismatches)


@pytest.mark.parametrize("name", NAMES)
def test_unicode_normalizer_matches_hf(tokenizer_dirs, name):
    """A tokenizer.json Unicode normalizer (qwen3: NFC) is applied: decomposed text, and the
    same text around an added token, must give exactly HF's ids (no known cause excuses it)."""
    path = directory(tokenizer_dirs, name)
    forms = set(normalizer_types(path)) & {"NFC", "NFD", "NFKC", "NFKD"}
    if not forms:
        pytest.skip(f"{name} has no Unicode normalizer")
    base = ["café crème brûlée", "한국어 텍스트", "ﬁnancial ﬂow", "Ångström ñandú", "x\u0301\u0323y"]
    texts = [unicodedata.normalize(form, t) for t in base for form in ("NFC", "NFD", "NFKC", "NFKD")]
    specials = [t["content"] for t in json.loads((path / "tokenizer.json").read_text())["added_tokens"]]
    texts += [t + specials[0] + unicodedata.normalize("NFD", t) for t in base]
    args = ["tokenize", "--tokenizer", path / "tokenizer.json", "--parse-special"]
    ours = sluice_lines(args, texts)
    expected = [e.ids for e in hf_tokenizer(path).encode_batch(texts, add_special_tokens=False)]
    unexplained = [(t, h, o) for t, h, o in zip(texts, expected, ours) if h != o]
    record(name, "unicode normalizer", len(texts), {}, unexplained)


def added_token(content, special, normalized, lstrip=False, rstrip=False):
    return {"content": content, "single_word": False, "lstrip": lstrip, "rstrip": rstrip,
            "normalized": normalized, "special": special}


# Extra added tokens exercising tokenizers' AddedVocabulary: overlaps decided leftmost-longest
# ("qq1" vs "1qqqq"), a special token whose span is consumed even when it is not matched ("|a"
# inside "<|a|>"), lstrip/rstrip over Unicode whitespace, and normalized tokens (matched after
# the others, in the normalized text: "|b" wins inside "<|b|>", "x y" is "▁x▁y" under llama2).
EXTRA_ADDED = [added_token("hello world", False, True), added_token("<|a|>", True, False),
               added_token("|a", False, False), added_token("qq1", False, False),
               added_token("1qqqq", False, False), added_token("<L>", True, False, lstrip=True),
               added_token("<R>", True, False, rstrip=True),
               added_token("<N>", True, True, lstrip=True, rstrip=True),
               added_token("x y", True, True), added_token("<|b|>", True, True),
               added_token("|b", False, False)]
ADDED_TEXTS = ["<s>", "a<s>b", "a <s> b", " <s>", "<s><s>", "hello</s>", "hello </s>", "a\t<s>",
               "\n<s>", "▁<s>", "a▁<s>", "x</s></s>", " </s> ", "<s> </s> <unk>", "say hello world",
               "xhello world", "qq1qqqq", "qq1qqqqqq1qqqq", "<|a|>", "<|a|>|a", "<|b|>|b", "|b<|b|>",
               "x <L> y", "x\u3000 <L> y", "<R>  \t z", "<R>\u00a0z", "a <N> b", "a<N>b", "x y", "ax y",
               "a x y", "<s> <L>", "<L><L>", "  <L>", "<R>", "é <s>", "e\u0301<|a|>", "", " ", "▁"]


@pytest.mark.parametrize("name", ["llama2", "llama3", "qwen3"])
def test_added_token_rules_match_hf(tokenizer_dirs, name, tmp_path):
    """The file's own added tokens plus EXTRA_ADDED, on texts built around them: ids with and
    without parse_special and add_special, and decode keeping and skipping special tokens."""
    path = directory(tokenizer_dirs, name)
    data = json.loads((path / "tokenizer.json").read_text())
    data = copy.deepcopy(data)
    next_id = max([*data["model"]["vocab"].values(), *(t["id"] for t in data["added_tokens"])]) + 1
    for offset, token in enumerate(EXTRA_ADDED):
        assert token["content"] not in data["model"]["vocab"]
        data["added_tokens"].append({"id": next_id + offset, **token})
    (tmp_path / "tokenizer.json").write_text(json.dumps(data, ensure_ascii=False))
    mismatches = []
    for parse_special in (True, False):
        for add_special in (False, True):
            hf = hf_tokenizer(tmp_path, encode_special_tokens=not parse_special)
            expected = [e.ids for e in hf.encode_batch(ADDED_TEXTS, add_special_tokens=add_special)]
            flags = ["--parse-special"] * parse_special + ["--add-special"] * add_special
            ours = sluice_lines(["tokenize", "--tokenizer", tmp_path / "tokenizer.json", *flags], ADDED_TEXTS)
            mismatches += [(f"{flags} {t}", h, o) for t, h, o in zip(ADDED_TEXTS, expected, ours) if h != o]
    hf = hf_tokenizer(tmp_path)
    ids = [e.ids for e in hf.encode_batch(ADDED_TEXTS, add_special_tokens=True)]
    for skip_special in (False, True):
        flags = ["--skip-special"] if skip_special else []
        ours = sluice_lines(["detokenize", "--tokenizer", tmp_path / "tokenizer.json", *flags], ids)
        want = [hf.decode(row, skip_special_tokens=skip_special) for row in ids]
        mismatches += [(f"decode {flags} {t}", [w], [o]) for t, w, o in zip(ADDED_TEXTS, want, ours) if w != o]
    record(name, "added-token rules", 6 * len(ADDED_TEXTS), {}, mismatches)


# --- decode ---------------------------------------------------------------------------------

@pytest.mark.parametrize("skip_special", [False, True], ids=["keep_special", "skip_special"])
@pytest.mark.parametrize("name", NAMES)
def test_decode_matches_hf(tokenizer_dirs, name, skip_special):
    path = directory(tokenizer_dirs, name)
    hf = hf_tokenizer(path)
    ids = [e.ids for e in hf.encode_batch(TEXTS, add_special_tokens=True)]
    flags = ["--skip-special"] if skip_special else []
    ours = sluice_lines(["detokenize", "--tokenizer", path / "tokenizer.json", *flags], ids)
    cleanup = config(path).get("clean_up_tokenization_spaces", False)
    mismatches = []
    for text, row, got in zip(TEXTS, ids, ours):
        want = hf.decode(row, skip_special_tokens=skip_special)
        want = transformers_cleanup(want) if cleanup else want
        if want != got:
            mismatches.append((text, [want], [got]))
    record(name, "decode " + ("skip_special" if skip_special else "keep_special"), len(TEXTS), {}, mismatches)


@pytest.mark.parametrize("name", NAMES)
def test_round_trip(tokenizer_dirs, name):
    """decode(encode(text)) gives the text back, except where the tokenizer itself is lossy —
    and then exactly where Hugging Face's round trip is lossy too."""
    path = directory(tokenizer_dirs, name)
    ids = sluice_lines(["tokenize", "--tokenizer", path / "tokenizer.json"], TEXTS)
    back = sluice_lines(["detokenize", "--tokenizer", path / "tokenizer.json"], ids)
    hf = hf_tokenizer(path, encode_special_tokens=True)
    cleanup = config(path).get("clean_up_tokenization_spaces", False)
    lossy = []
    for text, got in zip(TEXTS, back):
        if got == text:
            continue
        want = hf.decode(hf.encode(text, add_special_tokens=False).ids, skip_special_tokens=False)
        want = transformers_cleanup(want) if cleanup else want
        if want == got:
            lossy.append(text)
    unexplained = [(t, [], [g]) for t, g in zip(TEXTS, back) if g != t and t not in lossy]
    record(name, "round trip", len(TEXTS), {"lossy in HF too": len(lossy)} if lossy else {}, unexplained)


# --- raw invalid UTF-8 ----------------------------------------------------------------------

def repair_per_byte(raw):
    """llama.cpp's input repair: each byte that does not start a well-formed sequence becomes
    one U+FFFD. (llama.cpp itself lets overlong forms and surrogates through; sluice and this
    reference count them as invalid.)"""
    out, i = [], 0
    while i < len(raw):
        for length in (1, 2, 3, 4):
            try:
                out.append(raw[i:i + length].decode("utf-8"))
                i += length
                break
            except UnicodeDecodeError:
                continue
        else:
            out.append("\ufffd")
            i += 1
    return "".join(out)


INVALID = [b"\xff", b"abc\x80def", b"\xe4\xbd", b"\xe4\xbd world", b"\xc0\xaf", b"\xed\xa0\x80",
           b"\xf4\x90\x80\x80", b"\xf8\x88\x80\x80\x80", b"ok\xc3", b"\xc3\x28", b"\xe2\x28\xa1",
           b"\xf0\x9f\x98", b"\xf0\x9f\x98\x80\xf0\x9f", b"\x00\xff\x00", b"<|im_end|>\xff"]


@pytest.mark.parametrize("name", NAMES)
def test_raw_invalid_utf8(tokenizer_dirs, name):
    """Never refused, never a crash. Byte-level BPE follows llama.cpp's BPE: each invalid byte
    is read as U+FFFD (so the ids equal Hugging Face's on the repaired text). SentencePiece
    follows llama.cpp's SPM, which never decodes: invalid bytes become <0xNN> byte-fallback
    tokens, so the bytes come back from detokenize — except that llama.cpp's SPM takes a lead
    byte's sequence length on trust, so a truncated sequence swallows the first byte of the
    next U+2581 and that space comes back as "▁" (sluice reproduces this)."""
    path = directory(tokenizer_dirs, name)
    hf = hf_tokenizer(path, encode_special_tokens=True)
    byte_fallback = json.loads((path / "tokenizer.json").read_text())["model"].get("byte_fallback")
    for raw in INVALID:
        result = subprocess.run([SLUICE_BIN, "tokenize", "--tokenizer", path / "tokenizer.json"],
                                input=raw, capture_output=True, timeout=300)
        assert result.returncode == 0, (raw, result.stderr.decode(errors="replace"))
        ours = json.loads(result.stdout)
        if byte_fallback:
            back = subprocess.run([SLUICE_BIN, "detokenize", "-t", path / "tokenizer.json", *map(str, ours)],
                                  capture_output=True, timeout=300)
            assert back.returncode == 0, back.stderr
            assert back.stdout.replace("▁".encode(), b" ") == raw, (raw, ours, back.stdout)
        else:
            assert ours == hf.encode(repair_per_byte(raw), add_special_tokens=False).ids, raw


# --- GGUF source == tokenizer.json source ---------------------------------------------------

def test_gguf_source_matches_tokenizer_json(tokenizer_dirs):
    gguf = pytest.importorskip("gguf")
    gguf_path = TESTDATA / "vocab" / "ggml-vocab-llama-spm.gguf"
    if not gguf_path.exists():
        pytest.skip(f"{gguf_path} is absent")
    path = directory(tokenizer_dirs, "llama2")
    reader = gguf.GGUFReader(gguf_path)
    field = reader.fields["tokenizer.ggml.tokens"]
    gguf_tokens = [bytes(field.parts[i]).decode() for i in field.data]
    vocab = json.loads((path / "tokenizer.json").read_text())["model"]["vocab"]
    hf_tokens = sorted(vocab, key=vocab.get)
    assert gguf_tokens == hf_tokens, "the llama-spm GGUF is not the llama2 vocabulary"
    for flags in (["--add-special"], []):
        from_gguf = sluice_lines(["tokenize", "--model", gguf_path, *flags], TEXTS)
        from_json = sluice_lines(["tokenize", "--tokenizer", path / "tokenizer.json", *flags], TEXTS)
        unexplained = [(t, j, g) for t, j, g in zip(TEXTS, from_json, from_gguf) if j != g]
        record("llama2", "gguf==json " + (" ".join(flags) or "plain"), len(TEXTS), {}, unexplained)


# --- CLI forms ------------------------------------------------------------------------------

def test_cli_forms(tokenizer_dirs):
    path = directory(tokenizer_dirs, "qwen3") / "tokenizer.json"
    text = "Hello world, 你好 🌍"
    one = subprocess.run([SLUICE_BIN, "tokenize", "--tokenizer", path, text], capture_output=True)
    assert one.returncode == 0 and one.stdout.endswith(b"]\n")
    ids = json.loads(one.stdout)
    assert ids == [9707, 1879, 11, 220, 108386, 11162, 234, 235]
    back = subprocess.run([SLUICE_BIN, "detokenize", "--tokenizer", path, *map(str, ids)], capture_output=True)
    assert back.returncode == 0 and back.stdout == text.encode()  # exactly, no newline added
    # A slice that ends inside a character: the bytes come out as they are.
    part = subprocess.run([SLUICE_BIN, "detokenize", "-t", path, "11162"], capture_output=True)
    assert part.returncode == 0 and part.stdout == b" " + "🌍".encode()[:2]
    usage = subprocess.run([SLUICE_BIN, "tokenize", "hi"], capture_output=True)
    assert usage.returncode == 2 and usage.stderr.count(b"\n") == 1
    bad_id = subprocess.run([SLUICE_BIN, "detokenize", "-t", path, "99999999"], capture_output=True)
    assert bad_id.returncode == 1 and b"outside the vocabulary" in bad_id.stderr
    bad_line = subprocess.run([SLUICE_BIN, "tokenize", "-t", path, "--jsonl"], input=b'"ok"\n42\n',
                              capture_output=True)
    assert bad_line.returncode == 1 and b"line 2" in bad_line.stderr
    missing = subprocess.run([SLUICE_BIN, "tokenize", "-t", "/nonexistent/tokenizer.json", "x"], capture_output=True)
    assert missing.returncode == 1 and missing.stderr.count(b"\n") == 1
