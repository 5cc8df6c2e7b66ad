"""`sluice run`: one answer with -p, and the interactive chat over pipes (commands, multi-line
input, EOF, Ctrl-C). The tiny llama.cpp models (no chat template: the plain-text fallback) drive
the mechanics; the real SmolLM2 (scripts/fetch_default_model.sh; SLUICE_MODELS_DIR overrides
where it is looked for) drives the chat template, determinism, stop strings and Ctrl-C during a
long answer. Token counts are checked through --stats against `sluice tokenize`."""
import json
import os
import pathlib
import re
import signal
import subprocess
import threading
import time

import pytest

SLUICE_BIN = os.environ.get("SLUICE_BIN")
TESTDATA = pathlib.Path(os.environ.get("SLUICE_TESTDATA_DIR", "/nonexistent"))
REPO = pathlib.Path(__file__).resolve().parents[2]
MODELS = pathlib.Path(os.environ.get("SLUICE_MODELS_DIR", REPO / ".cache" / "models"))
TINY = TESTDATA / "llamacpp-tiny" / "llama-dense.gguf"
SMOLLM2 = MODELS / "SmolLM2-135M-Instruct.Q4_1.gguf"

if not SLUICE_BIN:
    pytest.skip("SLUICE_BIN is not set (run through ctest)", allow_module_level=True)

needs_tiny = pytest.mark.skipif(not TINY.exists(), reason=f"{TINY} is absent")
needs_smollm2 = pytest.mark.skipif(
    not SMOLLM2.exists(), reason=f"{SMOLLM2} is absent (scripts/fetch_default_model.sh)")


def sluice(*args, stdin=b"", timeout=180):
    return subprocess.run([SLUICE_BIN, *map(str, args)], input=stdin, capture_output=True,
                          timeout=timeout)


def ok(result):
    assert result.returncode == 0, f"exit {result.returncode}: {result.stderr.decode()}"
    return result


def stats_of(stderr):
    """Each --stats block as {"prompt": n, "reused": n, "generated": n}, in order."""
    text = stderr.decode() if isinstance(stderr, bytes) else stderr
    prompts = re.findall(r"^prompt: +(\d+) tokens, (\d+) reused", text, re.M)
    generated = re.findall(r"^generation: +(\d+) tokens", text, re.M)
    assert len(prompts) == len(generated), text
    return [{"prompt": int(p), "reused": int(r), "generated": int(g)}
            for (p, r), g in zip(prompts, generated)]


def n_tokens(model, text, parse_special=False):
    args = ["tokenize", "--model", model, "--add-special", text]
    if parse_special:
        args.insert(1, "--parse-special")
    return len(json.loads(ok(sluice(*args)).stdout))


def assert_bad_usage(result):
    assert result.returncode == 2, f"exit {result.returncode}: {result.stderr!r}"
    lines = result.stderr.decode().splitlines()
    assert len(lines) == 1 and lines[0].startswith("sluice: error: "), result.stderr


class Chat:
    """A `sluice run` chat over pipes, its stdout and stderr collected as they come."""

    def __init__(self, *args):
        self.proc = subprocess.Popen([SLUICE_BIN, "run", *map(str, args)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.out, self.err = bytearray(), bytearray()
        self.readers = [threading.Thread(target=self._drain, args=(s, b), daemon=True)
                        for s, b in ((self.proc.stdout, self.out), (self.proc.stderr, self.err))]
        for reader in self.readers:
            reader.start()

    @staticmethod
    def _drain(stream, buffer):
        while chunk := stream.read1(4096):
            buffer.extend(chunk)

    def send(self, text):
        self.proc.stdin.write(text.encode())
        self.proc.stdin.flush()

    def wait_for(self, predicate, timeout=120):
        deadline = time.monotonic() + timeout
        while not predicate():
            assert self.proc.poll() is None, f"exited {self.proc.returncode}: {bytes(self.err)!r}"
            assert time.monotonic() < deadline, f"timed out; stderr {bytes(self.err)!r}"
            time.sleep(0.02)

    def finish(self, close_stdin=True, timeout=120):
        if close_stdin:
            self.proc.stdin.close()
        code = self.proc.wait(timeout=timeout)
        for reader in self.readers:
            reader.join(timeout=10)
        return code


# --- one answer (-p) ---------------------------------------------------------------------------

@needs_tiny
def test_plain_text_fallback_warns_once():
    result = ok(sluice("run", TINY, "-p", "hello", "-n", 4))
    lines = result.stderr.decode().splitlines()
    assert len(lines) == 1 and "no chat template" in lines[0], lines
    assert result.stdout.endswith(b"\n")


@needs_tiny
@pytest.mark.parametrize("limit", [1, 5])
def test_n_bounds_the_answer(limit):
    result = ok(sluice("run", TINY, "-p", "hello world", "-n", limit, "--stats"))
    [stats] = stats_of(result.stderr)
    assert 1 <= stats["generated"] <= limit


@needs_tiny
def test_stats_lines():
    err = ok(sluice("run", TINY, "-p", "hello", "-n", 3, "--stats")).stderr.decode()
    for label in ("prompt:", "generation:", "first token:", "peak RSS:"):
        assert re.search(rf"^{label} ", err, re.M), err
    assert re.search(r"^prompt: .*tokens/s$", err, re.M)
    assert re.search(r"^peak RSS: +\d+\.\d MiB$", err, re.M)


@needs_tiny
def test_plain_prompt_is_system_blank_line_user():
    # The prompt as tokens: BOS (the tiny model's add_bos) + "system\n\nuser", nothing else.
    err = ok(sluice("run", TINY, "--system", "be brief", "-p", "hello", "-n", 1, "--stats")).stderr
    assert stats_of(err)[0]["prompt"] == n_tokens(TINY, "be brief\n\nhello")
    err = ok(sluice("run", TINY, "-p", "hello", "-n", 1, "--stats", "--no-template")).stderr
    assert stats_of(err)[0]["prompt"] == n_tokens(TINY, "hello")


@needs_tiny
def test_greedy_is_deterministic_tiny():
    first = ok(sluice("run", TINY, "-p", "abc", "-n", 12))
    second = ok(sluice("run", TINY, "-p", "abc", "-n", 12))
    assert first.stdout == second.stdout


@needs_tiny
@pytest.mark.parametrize("flag", ["-m", "--model"])
def test_model_also_given_as_an_option(flag):
    # llama.cpp users type -m; Ollama users give the model first: both name the same file.
    positional = ok(sluice("run", TINY, "-p", "abc", "-n", 6))
    assert ok(sluice("run", flag, TINY, "-p", "abc", "-n", 6)).stdout == positional.stdout


@needs_tiny
@pytest.mark.parametrize("args", [
    ["--temperature", "-1"], ["--top-p", "2"], ["--kv", "q4"], ["-n", "-5"], ["--ctx", "-1"],
    ["--no-such-flag"], ["--threads", "x"], ["--repeat-penalty", "0"],
], ids=lambda a: a[0])
def test_bad_flags_exit_2(args):
    assert_bad_usage(sluice("run", TINY, "-p", "hi", *args))


def test_missing_model_argument_exits_2():
    assert_bad_usage(sluice("run", "-p", "hi"))


def test_missing_model_file_exits_1(tmp_path):
    result = sluice("run", tmp_path / "absent.gguf", "-p", "hi")
    assert result.returncode == 1
    lines = result.stderr.decode().splitlines()
    assert len(lines) == 1 and "absent.gguf" in lines[0], lines


# --- the chat over pipes ----------------------------------------------------------------------

@needs_tiny
def test_chat_commands_and_bye():
    result = ok(sluice("run", TINY, "-n", 4, "--stats",
                       stdin=b"hi\n/stats\n/clear\nhello\n/bye\nnever answered\n"))
    err = result.stderr.decode()
    assert "(new conversation)" in err
    # --stats after each of the two answers, and /stats repeating the first in between.
    blocks = stats_of(err)
    assert len(blocks) == 3 and blocks[1] == blocks[0]
    assert b"> " not in result.stdout  # no prompt marker when stdin is not a terminal


@needs_tiny
def test_chat_conversation_grows_each_turn():
    err = ok(sluice("run", TINY, "-n", 3, "--stats", stdin=b"one\ntwo\n")).stderr
    first, second = stats_of(err)
    # The second prompt is the whole conversation ("one", the answer, "two"), not just "two".
    assert second["prompt"] >= n_tokens(TINY, "one\n\ntwo") > n_tokens(TINY, "two")


@needs_tiny
def test_eof_exits_cleanly():
    result = ok(sluice("run", TINY, "-n", 4, stdin=b""))
    assert result.stdout == b""


@needs_tiny
def test_last_line_without_newline_is_answered():
    err = ok(sluice("run", TINY, "-n", 2, "--stats", stdin=b"hi")).stderr
    assert len(stats_of(err)) == 1


@needs_tiny
@pytest.mark.parametrize("typed,text", [
    (b"first\\\nsecond\n", "first\nsecond"),
    (b'"""\nfirst\nsecond\n"""\n', "first\nsecond"),
    (b'"""first\nsecond"""\n', "first\nsecond"),
], ids=["backslash", "fence-lines", "fence-inline"])
def test_multiline_input_is_one_turn(typed, text):
    err = ok(sluice("run", TINY, "-n", 1, "--stats", "--no-template", stdin=typed)).stderr
    [stats] = stats_of(err)
    assert stats["prompt"] == n_tokens(TINY, text)


@needs_tiny
def test_chat_survives_a_turn_that_overflows_the_context():
    long_message = " ".join(["word"] * 100)
    result = ok(sluice("run", TINY, "--ctx", 32, "-n", 2, "--stats",
                       stdin=f"{long_message}\n/clear\nhi\n".encode()))
    err = result.stderr.decode()
    assert "context" in err, err
    assert stats_of(err)[-1]["prompt"] == n_tokens(TINY, "hi")


@needs_tiny
def test_unknown_command_and_help():
    result = ok(sluice("run", TINY, "-n", 2, "--stats", stdin=b"/nope\n/help\n/stats\n"))
    err = result.stderr.decode()
    assert "unknown command /nope" in err and "/clear" in err and "(no answer yet)" in err
    assert stats_of(err) == [] and result.stdout == b""


@needs_tiny
def test_ctrl_c_twice_while_idle_exits():
    chat = Chat(TINY, "-n", 2, "--stats")
    chat.send("hi\n")
    chat.wait_for(lambda: b"peak RSS" in chat.err)  # answered: the chat waits for input now
    chat.proc.send_signal(signal.SIGINT)
    chat.wait_for(lambda: b"Ctrl-C again" in chat.err)
    chat.proc.send_signal(signal.SIGINT)
    assert chat.finish(close_stdin=False) == 130


# --- the real model ---------------------------------------------------------------------------

@needs_smollm2
def test_smollm2_answers_deterministically():
    first = ok(sluice("run", SMOLLM2, "-p", "What is the capital of France?", "-n", 24))
    second = ok(sluice("run", SMOLLM2, "-p", "What is the capital of France?", "-n", 24))
    assert first.stdout.strip() and first.stdout == second.stdout
    assert first.stderr == b""  # a template is there: no warning


@needs_smollm2
def test_smollm2_prompt_is_the_rendered_template(tmp_path):
    messages = tmp_path / "messages.json"
    messages.write_text(json.dumps([{"role": "user", "content": "Hi there"}]))
    rendered = ok(sluice("template", "--model", SMOLLM2, "--messages", messages,
                         "--add-generation-prompt")).stdout.decode()
    err = ok(sluice("run", SMOLLM2, "-p", "Hi there", "-n", 1, "--stats")).stderr
    assert stats_of(err)[0]["prompt"] == n_tokens(SMOLLM2, rendered, parse_special=True)


@needs_smollm2
def test_smollm2_seeded_sampling_repeats():
    args = ["-p", "Name a colour.", "-n", 16, "--temperature", "0.9", "--seed", 7]
    assert ok(sluice("run", SMOLLM2, *args)).stdout == ok(sluice("run", SMOLLM2, *args)).stdout


@needs_smollm2
def test_smollm2_stop_string_ends_the_answer():
    full = ok(sluice("run", SMOLLM2, "-p", "Write two sentences about rivers.", "-n", 40))
    answer = full.stdout.decode().rstrip("\n")
    words = answer.split()
    assert len(words) > 6, answer
    stop = words[4]
    cut = ok(sluice("run", SMOLLM2, "-p", "Write two sentences about rivers.", "-n", 40,
                    "--stop", stop)).stdout.decode().rstrip("\n")
    assert cut == answer[:answer.index(stop)]


@needs_smollm2
def test_smollm2_chat_reuses_the_conversation_prefix():
    err = ok(sluice("run", SMOLLM2, "-n", 8, "--stats", stdin=b"hi\nhello\n/bye\n")).stderr
    first, second = stats_of(err)
    assert second["reused"] >= first["prompt"]


@needs_smollm2
def test_smollm2_ctrl_c_cancels_the_answer_then_eof_exits():
    chat = Chat(SMOLLM2, "--stats")
    chat.send("Write a very long story about a dragon and a knight.\n")
    chat.wait_for(lambda: len(chat.out) >= 16)  # the answer is streaming
    chat.proc.send_signal(signal.SIGINT)
    chat.wait_for(lambda: b"(answer cancelled)" in chat.err)
    streamed = len(chat.out)
    chat.send("Say hi.\n")
    assert chat.finish() == 0
    assert len(chat.out) > streamed  # the next turn was answered
    first, second = stats_of(bytes(chat.err))
    # The cancelled exchange is not part of the conversation: only the new question is there.
    assert second["prompt"] < first["prompt"]
