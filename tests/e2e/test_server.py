"""`sluice serve`: the OpenAI, Ollama and Anthropic HTTP APIs driven through their official Python
SDKs (openai, ollama, anthropic) against a real server on the SmolLM2 model (scripts/
fetch_default_model.sh; SLUICE_MODELS_DIR overrides where it is looked for), plus curl for the
raw protocol (SSE ending in [DONE], NDJSON lines, /metrics, /health, /api/capabilities).

One server, started once for the module, answers most tests: plain and streamed answers
(streams concatenate to the greedy whole answer), completions from text and token ids, seeds,
stop strings, logprobs, the errors each SDK maps to its exception types, prefix reuse between
turns and four concurrent streams. Tests that need their own flags start a short-lived server:
an API key (401 without it, 200 with Bearer or x-api-key), a tiny --max-body (413), one slot
and no queue (429 with Retry-After), a client that hangs up mid-stream (the slot comes back
at once), SIGTERM during a stream (the stream completes, exit 0, later requests refused), and
a Hermes-style --chat-template (Qwen2.5's, from SLUICE_TESTDATA_DIR) for tool-call history and
tool calls parsed out of the output in all three APIs, streamed and whole."""
import contextlib
import http.client
import json
import os
import pathlib
import re
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request

import pytest

SLUICE_BIN = os.environ.get("SLUICE_BIN")
TESTDATA = pathlib.Path(os.environ.get("SLUICE_TESTDATA_DIR", "/nonexistent"))
REPO = pathlib.Path(__file__).resolve().parents[2]
MODELS = pathlib.Path(os.environ.get("SLUICE_MODELS_DIR", REPO / ".cache" / "models"))
SMOLLM2 = MODELS / "SmolLM2-135M-Instruct.Q4_1.gguf"
HERMES_TEMPLATE = TESTDATA / "chat-templates" / "Qwen-Qwen2.5-7B-Instruct.jinja"
NAME = SMOLLM2.stem  # the served name: the file name without .gguf
EOS_IDS = (0, 2)  # SmolLM2's <|endoftext|> and <|im_end|>: banned where a long answer is the point

if not SLUICE_BIN:
    pytest.skip("SLUICE_BIN is not set (run through ctest)", allow_module_level=True)
if not SMOLLM2.exists():
    pytest.skip(f"{SMOLLM2} is absent (scripts/fetch_default_model.sh)", allow_module_level=True)

openai = pytest.importorskip("openai")
anthropic = pytest.importorskip("anthropic")
ollama = pytest.importorskip("ollama")

needs_hermes = pytest.mark.skipif(not HERMES_TEMPLATE.exists(),
                                  reason=f"{HERMES_TEMPLATE} is absent (set SLUICE_TESTDATA_DIR)")


# --- servers -----------------------------------------------------------------------------------

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """One `sluice serve` on a free loopback port; stderr (the access log) collected as it comes."""

    def __init__(self, *flags, headers=None, ready_timeout=60):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc = subprocess.Popen(
            [SLUICE_BIN, "serve", str(SMOLLM2), "--port", str(self.port), *map(str, flags)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self.err = bytearray()
        self.reader = threading.Thread(target=self._drain, daemon=True)
        self.reader.start()
        self.health_before_ready = []
        try:
            self._wait_ready(headers or {}, ready_timeout)
        except BaseException:
            self.kill()
            raise

    def _drain(self):
        while chunk := self.proc.stderr.read1(4096):
            self.err.extend(chunk)

    def log(self):
        return bytes(self.err).decode(errors="replace")

    def _wait_ready(self, headers, timeout):
        deadline = time.monotonic() + timeout
        while True:
            assert self.proc.poll() is None, f"exited {self.proc.returncode}: {self.log()}"
            assert time.monotonic() < deadline, f"not ready after {timeout} s: {self.log()}"
            try:
                with urllib.request.urlopen(urllib.request.Request(self.url + "/health",
                                                                   headers=headers),
                                            timeout=2) as reply:
                    assert json.loads(reply.read()) == {"status": "ok"}
                    break
            except urllib.error.HTTPError as e:
                self.health_before_ready.append((e.code, json.loads(e.read())))
            except (ConnectionError, urllib.error.URLError, socket.timeout):
                pass
            time.sleep(0.05)
        self.wait_for_log(re.escape(f"sluice: ready: {NAME}"))

    def wait_for_log(self, pattern, timeout=10):
        deadline = time.monotonic() + timeout
        while not (found := re.search(pattern, self.log(), re.M)):
            assert time.monotonic() < deadline, f"no /{pattern}/ in stderr: {self.log()}"
            time.sleep(0.02)
        return found

    def stop(self, timeout=30):
        """SIGTERM, then the exit code (the process is killed if it outlives `timeout`)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            pytest.fail(f"still running {timeout} s after SIGTERM: {self.log()}")
        self.reader.join(timeout=10)
        return code

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)


@contextlib.contextmanager
def serving(*flags, **kwargs):
    """A short-lived server for one test; it must exit 0 on SIGTERM at the end."""
    server = Server(*flags, **kwargs)
    try:
        yield server
    except BaseException:
        server.stop()
        raise
    code = server.stop()
    assert code == 0, f"exit {code}: {server.log()}"


@pytest.fixture(scope="module")
def server():
    server = Server()
    try:
        yield server
    finally:
        code = server.stop(timeout=30)
    assert code == 0, f"exit {code}: {server.log()}"


@pytest.fixture(scope="module")
def url(server):
    return server.url


@pytest.fixture(scope="module")
def hermes():
    if not HERMES_TEMPLATE.exists():
        pytest.skip(f"{HERMES_TEMPLATE} is absent (set SLUICE_TESTDATA_DIR)")
    server = Server("--chat-template", HERMES_TEMPLATE)
    try:
        yield server
    finally:
        code = server.stop(timeout=30)
    assert code == 0, f"exit {code}: {server.log()}"


def openai_client(url, key="x"):
    return openai.OpenAI(base_url=url + "/v1", api_key=key, timeout=60, max_retries=0)


def anthropic_client(url, key="x"):
    return anthropic.Anthropic(base_url=url, api_key=key, timeout=60, max_retries=0)


def ollama_client(url, **kwargs):
    return ollama.Client(host=url, timeout=60, **kwargs)


# --- raw HTTP ----------------------------------------------------------------------------------

class Reply:
    def __init__(self, status, headers, body):
        self.status, self.headers, self.body = status, headers, body

    def json(self):
        return json.loads(self.body)


def curl(url, path, body=None, headers=(), method=None, timeout=60):
    """One request through curl: status, headers (lower-case names) and body as text."""
    args = ["curl", "-sS", "-N", "-i", "--max-time", str(timeout), "-H", "Expect:"]
    for header in headers:
        args += ["-H", header]
    if body is not None:
        data = body if isinstance(body, (str, bytes)) else json.dumps(body)
        args += ["-H", "Content-Type: application/json", "--data-binary", "@-"]
    else:
        data = None
    if method:
        args += ["-X", method]
    if isinstance(data, str):
        data = data.encode()
    result = subprocess.run([*args, url + path], input=data, capture_output=True,
                            timeout=timeout + 10)
    assert result.returncode == 0, f"curl exit {result.returncode}: {result.stderr!r}"
    head, _, rest = result.stdout.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return Reply(status, headers, rest.decode(errors="replace"))


def metrics(url):
    reply = curl(url, "/metrics")
    assert reply.status == 200 and reply.headers["content-type"].startswith("text/plain")
    return reply.body


def metric(text, name, **labels):
    """The sum of the samples of `name` whose labels include `labels`."""
    total, found = 0.0, False
    for m in re.finditer(rf"^{name}(?:{{([^}}]*)}})? (\S+)$", text, re.M):
        have = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1) or ""))
        if all(have.get(k) == str(v) for k, v in labels.items()):
            total, found = total + float(m.group(2)), True
    assert found, f"no {name}{labels} in {text}"
    return total


def open_stream(url, path, body, headers=None):
    """A streaming POST on a plain http.client connection: (connection, response)."""
    conn = http.client.HTTPConnection("127.0.0.1", int(url.rsplit(":", 1)[1]), timeout=60)
    conn.request("POST", path, json.dumps(body),
                 {"Content-Type": "application/json", **(headers or {})})
    return conn, conn.getresponse()


def read_sse_data(response):
    """The next `data:` line of a server-sent-event stream (None at the end)."""
    while line := response.fp.readline():
        text = line.decode().strip()
        if text.startswith("data: "):
            return text[len("data: "):]
    return None


def long_chat(max_tokens, prompt="Tell me a long story about a dragon."):
    """A streamed chat body that runs to max_tokens: the end-of-turn tokens are banned."""
    return {"model": NAME, "messages": [{"role": "user", "content": prompt}], "stream": True,
            "max_tokens": max_tokens, "temperature": 0,
            "logit_bias": {str(i): -100 for i in EOS_IDS}}


def pick_stop(text):
    """A word of `text` (not at its start, not seen earlier in it) and where it begins."""
    for m in re.finditer(r"[A-Za-z]{4,}", text):
        if m.start() >= 3 and text.find(m.group()) == m.start():
            return m.group(), m.start()
    pytest.fail(f"no stop word to pick in {text!r}")


def sluice_tokenize(text):
    result = subprocess.run([SLUICE_BIN, "tokenize", "--model", str(SMOLLM2), "--add-special",
                             text], capture_output=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def user(text):
    return [{"role": "user", "content": text}]


def finish_reasons(chunks):
    """The finish reasons an OpenAI stream's chunks carry, in order."""
    return [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]


# --- startup, operational endpoints (curl) -----------------------------------------------------

def test_health_and_readiness(server, url):
    for status, body in server.health_before_ready:  # before the model was loaded
        assert (status, body) == (503, {"status": "loading"})
    reply = curl(url, "/health")
    assert reply.status == 200 and reply.json() == {"status": "ok"}
    assert "sluice: ready: " + NAME in server.log()


def test_capabilities(url):
    reply = curl(url, "/api/capabilities")
    assert reply.status == 200
    [model] = reply.json()["models"]
    assert model["name"] == NAME
    assert model["architecture"] == "llama"
    assert model["context_length"] == 4096  # the --ctx default
    assert model["parallel"] == 4
    assert model["chat_template"] is True
    # The backend the forwards run on (auto: CUDA with a device, else the CPU), not the option.
    assert model["backend"] in ("cpu", "cuda")


def test_sse_stream_ends_with_done(url):
    reply = curl(url, "/v1/chat/completions", {
        "model": NAME, "messages": user("Say hi."), "max_tokens": 6, "temperature": 0,
        "stream": True})
    assert reply.status == 200 and reply.headers["content-type"].startswith("text/event-stream")
    # Comment lines (": keep-alive") come when a second passes without a token: a busy machine.
    lines = [line for line in reply.body.split("\n") if line and not line.startswith(":")]
    assert all(line.startswith("data: ") for line in lines), lines
    assert lines[-1] == "data: [DONE]"
    chunks = [json.loads(line[len("data: "):]) for line in lines[:-1]]
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert len({c["id"] for c in chunks}) == 1
    assert chunks[-1]["choices"][0]["finish_reason"] in ("stop", "length")
    assert "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks)


def test_ollama_ndjson_lines(url):
    reply = curl(url, "/api/chat", {"model": NAME, "messages": user("Say hi."),
                                    "options": {"temperature": 0, "num_predict": 6}})
    assert reply.status == 200 and reply.headers["content-type"].startswith("application/x-ndjson")
    lines = reply.body.strip("\n").split("\n")
    parts = [json.loads(line) for line in lines]  # every line is one JSON object
    assert all(p["done"] is False for p in parts[:-1]) and parts[-1]["done"] is True
    assert parts[-1]["done_reason"] in ("stop", "length")
    assert "".join(p["message"]["content"] for p in parts)


def test_metrics_count_requests_and_tokens(url):
    before = metrics(url)
    assert "# TYPE sluice_requests_total counter" in before
    ok_before = metric(before, "sluice_requests_total", api="openai", status=200) \
        if 'api="openai",status="200"' in before else 0
    tokens_before = metric(before, "sluice_generated_tokens_total")
    answer = openai_client(url).chat.completions.create(
        model=NAME, messages=user("Count to three."), max_tokens=5, temperature=0)
    n = answer.usage.completion_tokens
    assert n > 0
    deadline = time.monotonic() + 10  # the engine thread adds a request's tokens as it retires it
    while metric(after := metrics(url), "sluice_generated_tokens_total") < tokens_before + n:
        assert time.monotonic() < deadline, after
        time.sleep(0.02)
    assert metric(after, "sluice_generated_tokens_total") == tokens_before + n
    assert metric(after, "sluice_requests_total", api="openai", status=200) == ok_before + 1
    assert metric(after, "sluice_active_requests") == 0
    assert metric(after, "sluice_queue_depth") == 0


def test_access_log_line(server, url):
    openai_client(url).chat.completions.create(model=NAME, messages=user("Hello there, log."),
                                               max_tokens=3, temperature=0)
    server.wait_for_log(r'^sluice: access api=openai route="POST /v1/chat/completions" '
                        rf"model={re.escape(NAME)} status=200 prompt_tokens=\d+ "
                        r"completion_tokens=[1-3] seconds=[\d.]+ outcome=\w+$")


# --- OpenAI SDK --------------------------------------------------------------------------------

def test_openai_chat(url):
    answer = openai_client(url).chat.completions.create(
        model=NAME, messages=user("Name three fruits."), max_tokens=8, temperature=0)
    assert answer.object == "chat.completion" and answer.model == NAME
    [choice] = answer.choices
    assert choice.message.role == "assistant"
    assert isinstance(choice.message.content, str) and choice.message.content.strip()
    assert choice.finish_reason in ("stop", "length")
    usage = answer.usage
    assert usage.prompt_tokens > 0
    if choice.finish_reason == "length":
        assert usage.completion_tokens == 8
    else:
        assert 0 < usage.completion_tokens <= 8
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens


def test_openai_stream_matches_whole_answer(url):
    client = openai_client(url)
    request = dict(model=NAME, messages=user("What is the color of the sky?"), max_tokens=20,
                   temperature=0)
    whole = client.chat.completions.create(**request)
    chunks = list(client.chat.completions.create(**request, stream=True,
                                                 stream_options={"include_usage": True}))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text and text == whole.choices[0].message.content
    assert chunks[0].choices[0].delta.role == "assistant"
    assert finish_reasons(chunks) == [whole.choices[0].finish_reason]
    last = chunks[-1]  # include_usage: one more chunk, no choices, the usage
    assert last.choices == []
    assert last.usage.completion_tokens == whole.usage.completion_tokens
    assert last.usage.prompt_tokens == whole.usage.prompt_tokens
    assert all(c.usage is None for c in chunks[:-1])


def test_openai_completions_text_and_token_ids(url):
    client = openai_client(url)
    prompt = "The capital of France is"
    ids = sluice_tokenize(prompt)
    from_text = client.completions.create(model=NAME, prompt=prompt, max_tokens=8, temperature=0)
    from_ids = client.completions.create(model=NAME, prompt=ids, max_tokens=8, temperature=0)
    assert from_text.object == "text_completion"
    assert from_text.choices[0].text.strip()
    assert from_ids.choices[0].text == from_text.choices[0].text
    assert from_text.usage.prompt_tokens == from_ids.usage.prompt_tokens == len(ids)
    assert from_text.choices[0].finish_reason in ("stop", "length")


def test_openai_models(url):
    client = openai_client(url)
    assert NAME in [m.id for m in client.models.list()]
    assert client.models.retrieve(NAME).id == NAME


def test_openai_seed_determinism(url):
    client = openai_client(url)
    request = dict(model=NAME, messages=user("Write a short poem about the sea."), max_tokens=16,
                   temperature=1.0)
    first = client.chat.completions.create(**request, seed=1234).choices[0].message.content
    again = client.chat.completions.create(**request, seed=1234).choices[0].message.content
    other = client.chat.completions.create(**request, seed=98765).choices[0].message.content
    assert first and first == again
    assert other  # another seed usually differs; not asserted (it may not)


def test_openai_stop_string(url):
    client = openai_client(url)
    request = dict(model=NAME, messages=user("Describe the ocean in two sentences."),
                   max_tokens=24, temperature=0)
    text = client.chat.completions.create(**request).choices[0].message.content
    stop, at = pick_stop(text)
    answer = client.chat.completions.create(**request, stop=[stop, "@@never@@"])
    assert answer.choices[0].finish_reason == "stop"
    assert answer.choices[0].message.content == text[:at]
    # Streamed, no piece of the stop string leaks out before the server knows it matched.
    chunks = list(client.chat.completions.create(**request, stop=stop, stream=True))
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == text[:at]
    assert chunks[-1].choices[0].finish_reason == "stop"


def test_openai_logprobs(url):
    answer = openai_client(url).chat.completions.create(
        model=NAME, messages=user("Tell me about the moon."), max_tokens=8, temperature=0,
        logprobs=True, top_logprobs=3)
    content = answer.choices[0].logprobs.content
    assert len(content) == answer.usage.completion_tokens == 8
    for entry in content:
        assert isinstance(entry.logprob, float) and entry.logprob <= 0
        assert len(entry.top_logprobs) == 3
        values = [t.logprob for t in entry.top_logprobs]
        assert values == sorted(values, reverse=True) and all(v <= 0 for v in values)
        # greedy: the chosen token is the most likely one
        assert entry.token == entry.top_logprobs[0].token
        assert entry.logprob == pytest.approx(entry.top_logprobs[0].logprob, abs=1e-6)
        assert entry.bytes == list(entry.token.encode())
    assert "".join(e.token for e in content) == answer.choices[0].message.content


def test_openai_logprobs_cover_the_content_only(url):
    # An answer that ends by itself: the end-of-turn token is not content, so it has no entry.
    client = openai_client(url)
    request = dict(model=NAME, messages=user("What is 2+2?"), max_tokens=24, temperature=0)
    answer = client.chat.completions.create(**request, logprobs=True)
    assert answer.choices[0].finish_reason == "stop", answer
    tokens = [e.token for e in answer.choices[0].logprobs.content]
    assert "".join(tokens) == answer.choices[0].message.content, tokens


@pytest.mark.parametrize("change, error, names", [
    ({"model": "no-such-model"}, "NotFoundError", "no-such-model"),
    ({"messages": [{"role": "wizard", "content": "hi"}]}, "BadRequestError", "messages[0].role"),
    ({"n": 2}, "BadRequestError", "'n'"),
    ({"response_format": {"type": "json_object"}}, "BadRequestError", "response_format"),
    ({"tool_choice": "required", "tools": [{"type": "function", "function": {"name": "f"}}]},
     "BadRequestError", "tool_choice"),
    ({"temperature": 3}, "BadRequestError", "temperature"),
], ids=["unknown-model", "bad-role", "n=2", "json-object", "tool-choice-required", "temperature"])
def test_openai_errors(url, change, error, names):
    request = dict(model=NAME, messages=user("hi"), max_tokens=4)
    request.update(change)
    with pytest.raises(getattr(openai, error)) as caught:
        openai_client(url).chat.completions.create(**request)
    assert names in caught.value.message
    assert caught.value.body["message"] and caught.value.body["type"]


# --- Ollama SDK --------------------------------------------------------------------------------

def test_ollama_chat_stream_matches_whole_answer(url):
    client = ollama_client(url)
    request = dict(model=NAME, messages=user("Why do cats purr?"),
                   options={"temperature": 0, "num_predict": 16})
    whole = client.chat(**request)
    assert whole.message.role == "assistant" and whole.message.content.strip()
    assert whole.done and whole.done_reason in ("stop", "length")
    assert whole.eval_count == 16 if whole.done_reason == "length" else 0 < whole.eval_count < 16
    assert whole.model == NAME
    parts = list(client.chat(**request, stream=True))
    assert "".join(p.message.content for p in parts) == whole.message.content
    assert all(not p.done for p in parts[:-1])
    last = parts[-1]
    assert last.done and last.done_reason == whole.done_reason
    assert last.eval_count == whole.eval_count
    assert last.total_duration > 0


def test_ollama_generate_with_context(url):
    client = ollama_client(url)
    options = {"temperature": 0, "num_predict": 12}
    first = client.generate(model=NAME, prompt="Why is the sky blue?", options=options)
    assert first.response.strip() and first.done
    context = first.context
    assert context and all(isinstance(i, int) for i in context)
    assert len(context) > first.eval_count
    second = client.generate(model=NAME, prompt="Say it in one sentence.", context=context,
                             options=options)
    assert second.response.strip() and second.done
    assert second.context[:len(context)] == context  # the conversation goes on from the first


def test_ollama_list_show_ps_version(url):
    client = ollama_client(url)
    [listed] = [m for m in client.list().models if m.model == NAME]
    assert listed.size == SMOLLM2.stat().st_size
    assert listed.details.format == "gguf"
    shown = client.show(NAME)
    assert shown.modelinfo["general.architecture"] == "llama"
    assert "completion" in shown.capabilities
    assert "<|im_start|>" in shown.template
    [running] = client.ps().models
    assert running.model == NAME and running.context_length == 4096
    reply = curl(url, "/api/version")  # the Python SDK has no version call
    assert reply.status == 200
    version = reply.json()["version"]
    assert isinstance(version, str) and version


def test_ollama_seed_determinism(url):
    client = ollama_client(url)
    request = dict(model=NAME, messages=user("Invent a name for a cat."))
    first = client.chat(**request, options={"seed": 42, "temperature": 1.0, "num_predict": 12})
    again = client.chat(**request, options={"seed": 42, "temperature": 1.0, "num_predict": 12})
    assert first.message.content and first.message.content == again.message.content


def test_ollama_stop(url):
    client = ollama_client(url)
    request = dict(model=NAME, messages=user("Describe a forest in two sentences."))
    text = client.chat(**request, options={"temperature": 0, "num_predict": 24}).message.content
    stop, at = pick_stop(text)
    options = {"temperature": 0, "num_predict": 24, "stop": [stop]}
    answer = client.chat(**request, options=options)
    assert answer.done_reason == "stop"
    assert answer.message.content == text[:at]
    parts = list(client.chat(**request, options=options, stream=True))
    assert "".join(p.message.content for p in parts) == text[:at]
    assert parts[-1].done_reason == "stop"


@pytest.mark.parametrize("change, status", [
    ({"format": "json"}, 400),
    ({"model": "no-such-model"}, 404),
], ids=["format-json", "unknown-model"])
def test_ollama_errors(url, change, status):
    request = dict(model=NAME, messages=user("hi"), options={"num_predict": 4})
    request.update(change)
    with pytest.raises(ollama.ResponseError) as caught:
        ollama_client(url).chat(**request)
    assert caught.value.status_code == status
    assert caught.value.error


# --- Anthropic SDK -----------------------------------------------------------------------------

def test_anthropic_messages(url):
    message = anthropic_client(url).messages.create(
        model=NAME, max_tokens=12, messages=user("What is a rainbow?"), temperature=0)
    assert message.type == "message" and message.role == "assistant" and message.model == NAME
    assert message.content[0].type == "text" and message.content[0].text.strip()
    assert message.stop_reason in ("end_turn", "max_tokens")
    assert message.usage.input_tokens > 0
    if message.stop_reason == "max_tokens":
        assert message.usage.output_tokens == 12
    assert message.stop_sequence is None


def test_anthropic_stream_matches_whole_answer(url):
    client = anthropic_client(url)
    request = dict(model=NAME, max_tokens=16, messages=user("Why is grass green?"), temperature=0)
    whole = client.messages.create(**request)
    with client.messages.stream(**request) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text and text == whole.content[0].text
    assert final.content[0].text == text
    assert final.stop_reason == whole.stop_reason
    assert final.usage.output_tokens == whole.usage.output_tokens
    assert final.usage.input_tokens == whole.usage.input_tokens


def test_anthropic_stop_sequences(url):
    client = anthropic_client(url)
    request = dict(model=NAME, max_tokens=24, messages=user("Describe a desert in two sentences."),
                   temperature=0)
    text = client.messages.create(**request).content[0].text
    stop, at = pick_stop(text)
    message = client.messages.create(**request, stop_sequences=[stop])
    assert message.stop_reason == "stop_sequence"
    assert message.stop_sequence == stop
    assert message.content[0].text == text[:at]
    with client.messages.stream(**request, stop_sequences=[stop]) as stream:
        streamed = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert streamed == text[:at]
    assert (final.stop_reason, final.stop_sequence) == ("stop_sequence", stop)


def test_anthropic_system_prompt(url):
    system = "You are a pirate. You always answer like a pirate would, with lots of arr."
    with_system = anthropic_client(url).messages.create(
        model=NAME, max_tokens=8, system=system, messages=user("Hello!"), temperature=0)
    without = anthropic_client(url).messages.create(
        model=NAME, max_tokens=8, messages=user("Hello!"), temperature=0)
    # The same conversation through OpenAI's API renders the same prompt.
    same = openai_client(url).chat.completions.create(
        model=NAME, max_tokens=8, temperature=0,
        messages=[{"role": "system", "content": system}, *user("Hello!")])
    assert with_system.usage.input_tokens == same.usage.prompt_tokens
    assert with_system.content[0].text == same.choices[0].message.content
    assert with_system.usage.input_tokens != without.usage.input_tokens


def test_anthropic_count_tokens(url):
    client = anthropic_client(url)
    request = dict(model=NAME, messages=user("How many tokens is this?"), system="Be brief.")
    counted = client.messages.count_tokens(**request)
    message = client.messages.create(**request, max_tokens=2, temperature=0)
    assert counted.input_tokens == message.usage.input_tokens > 0


@pytest.mark.parametrize("change, error", [
    ({"model": "no-such-model"}, "NotFoundError"),
    ({"messages": [{"role": "system", "content": "hi"}]}, "BadRequestError"),
    ({"temperature": 1.5}, "BadRequestError"),
], ids=["unknown-model", "bad-role", "temperature"])
def test_anthropic_errors(url, change, error):
    request = dict(model=NAME, max_tokens=4, messages=user("hi"))
    request.update(change)
    with pytest.raises(getattr(anthropic, error)) as caught:
        anthropic_client(url).messages.create(**request)
    assert caught.value.body["type"] == "error"
    assert caught.value.body["error"]["message"]


# --- malformed requests ------------------------------------------------------------------------

@pytest.mark.parametrize("path", ["/v1/chat/completions", "/api/chat", "/v1/messages"])
def test_malformed_json_is_400_in_the_api_shape(url, path):
    reply = curl(url, path, '{"model": "' + NAME + '", "messages": [')
    assert reply.status == 400
    body = reply.json()
    if path.startswith("/v1/chat"):
        assert body["error"]["message"] and body["error"]["type"] == "invalid_request_error"
    elif path.startswith("/api/"):
        assert isinstance(body["error"], str) and body["error"]
    else:
        assert body["type"] == "error" and body["error"]["type"] == "invalid_request_error"
        assert body["error"]["message"]


@pytest.mark.parametrize("path, check", [
    ("/v1/no-such-route", lambda body: body["error"]["type"] == "not_found_error"),
    ("/api/no-such-route", lambda body: isinstance(body["error"], str)),
])
def test_unknown_route_is_404_in_the_api_shape(url, path, check):
    reply = curl(url, path)
    assert reply.status == 404 and check(reply.json()), reply.body


# --- sessions and concurrency ------------------------------------------------------------------

def test_session_reuse_between_turns(url):
    client = openai_client(url)
    turn = user("My name is Ada and I like green tea. Please remember both.")
    first = client.chat.completions.create(model=NAME, messages=turn, max_tokens=16, temperature=0)
    conversation = turn + [{"role": "assistant", "content": first.choices[0].message.content},
                           *user("What is my name?")]
    second = client.chat.completions.create(model=NAME, messages=conversation, max_tokens=8,
                                            temperature=0)
    cached = second.usage.prompt_tokens_details.cached_tokens
    # The whole first prompt (a prefix of the second) came from the cache.
    assert first.usage.prompt_tokens <= cached < second.usage.prompt_tokens


def test_concurrent_streams_match_sequential(url):
    client = openai_client(url)
    prompts = ["Name a planet.", "Name a river.", "Name a mountain.", "Name a composer."]
    results, errors = {}, []

    def stream(prompt):
        try:
            chunks = client.chat.completions.create(model=NAME, messages=user(prompt),
                                                    max_tokens=16, temperature=0, stream=True)
            results[prompt] = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        except Exception as e:  # noqa: BLE001 -- reported below
            errors.append(e)

    threads = [threading.Thread(target=stream, args=(p,)) for p in prompts]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors and not any(t.is_alive() for t in threads)
    for prompt in prompts:
        alone = client.chat.completions.create(model=NAME, messages=user(prompt), max_tokens=16,
                                               temperature=0).choices[0].message.content
        assert results[prompt] and results[prompt] == alone, prompt


# --- tool calls (Hermes-style template) --------------------------------------------------------

# Keys in the order the Ollama SDK sends them, so that all three APIs render the same prompt.
WEATHER = {"type": "object", "required": ["city"], "properties": {"city": {"type": "string"}}}
OPENAI_TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Get the current weather in a city",
    "parameters": WEATHER}}]
ANTHROPIC_TOOLS = [{"name": "get_weather", "description": "Get the current weather in a city",
                    "input_schema": WEATHER}]


def openai_call(city, i):
    return {"role": "assistant", "content": None, "tool_calls": [{
        "id": f"call_{i}", "type": "function",
        "function": {"name": "get_weather", "arguments": json.dumps({"city": city})}}]}


def ollama_call(city):
    return {"role": "assistant", "content": "",
            "tool_calls": [{"function": {"name": "get_weather", "arguments": {"city": city}}}]}


def anthropic_call(city, i):
    return {"role": "assistant", "content": [{"type": "tool_use", "id": f"toolu_{i}",
                                              "name": "get_weather", "input": {"city": city}}]}


@needs_hermes
def test_tool_history_is_rendered(hermes):
    """A conversation holding a tool call and its result: the template renders both."""
    question = user("What is the weather in Berlin?")
    follow_up = user("Thanks. Should I take an umbrella?")
    oa = openai_client(hermes.url).chat.completions.create(
        model=NAME, tools=OPENAI_TOOLS, max_tokens=16, temperature=0,
        messages=question + [openai_call("Berlin", 1),
                             {"role": "tool", "tool_call_id": "call_1", "content": "12 C, rain"}]
        + follow_up)
    bare = openai_client(hermes.url).chat.completions.create(
        model=NAME, tools=OPENAI_TOOLS, max_tokens=1, temperature=0, messages=question + follow_up)
    assert oa.choices[0].finish_reason in ("stop", "length", "tool_calls")
    assert oa.choices[0].message.content or oa.choices[0].message.tool_calls
    assert oa.usage.prompt_tokens > bare.usage.prompt_tokens + 20  # the call and the result
    an = anthropic_client(hermes.url).messages.create(
        model=NAME, tools=ANTHROPIC_TOOLS, max_tokens=16, temperature=0,
        messages=question + [anthropic_call("Berlin", 1),
                             {"role": "user", "content": [{"type": "tool_result",
                                                           "tool_use_id": "toolu_1",
                                                           "content": "12 C, rain"}]}]
        + follow_up)
    assert an.usage.input_tokens == oa.usage.prompt_tokens  # the same rendered prompt
    assert an.content
    ol = ollama_client(hermes.url).chat(
        model=NAME, tools=OPENAI_TOOLS,
        options={"temperature": 0, "repeat_penalty": 1.0, "num_predict": 16},
        messages=question + [ollama_call("Berlin"),
                             {"role": "tool", "content": "12 C, rain", "tool_name": "get_weather"}]
        + follow_up)
    assert ol.done and (ol.message.content or ol.message.tool_calls)
    # Ollama reports the prompt tokens it evaluated: all but the last came from the cache of the
    # same conversation rendered for OpenAI and Anthropic above.
    assert ol.prompt_eval_count <= 2


# Greedy SmolLM2 under the Hermes template answers the third question of this pattern with a
# <tool_call> block (its first token '<' at logprob -0.03, the next best at -5.6), so the output
# parsing can be checked end to end on a real model.
def few_shot(call, question):
    return [*user("What is the weather in Berlin?"), call("Berlin", 1),
            *user("What is the weather in Rome?"), call("Rome", 2), *user(question)]


@needs_hermes
def test_tool_call_parsed_openai(hermes):
    client = openai_client(hermes.url)
    request = dict(model=NAME, tools=OPENAI_TOOLS, max_tokens=40, temperature=0,
                   messages=few_shot(openai_call, "What is the weather in Paris?"))
    answer = client.chat.completions.create(**request)
    choice = answer.choices[0]
    assert choice.finish_reason == "tool_calls", choice
    assert not choice.message.content
    [call] = choice.message.tool_calls
    assert call.type == "function" and call.id
    assert call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == {"city": "Paris"}

    chunks = list(client.chat.completions.create(**request, stream=True))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert "<tool_call>" not in text and not text.strip()
    deltas = [tc for c in chunks if c.choices for tc in (c.choices[0].delta.tool_calls or [])]
    assert deltas and deltas[0].function.name == "get_weather" and deltas[0].index == 0
    assert json.loads("".join(d.function.arguments or "" for d in deltas)) == {"city": "Paris"}
    assert finish_reasons(chunks) == ["tool_calls"]


@needs_hermes
def test_tool_call_parsed_ollama(hermes):
    client = ollama_client(hermes.url)
    # Ollama's default repeat_penalty (1.1) would steer the model off the pattern it repeats.
    request = dict(model=NAME, tools=OPENAI_TOOLS,
                   options={"temperature": 0, "repeat_penalty": 1.0, "num_predict": 40},
                   messages=few_shot(lambda city, _: ollama_call(city),
                                     "What is the weather in Paris?"))
    answer = client.chat(**request)
    [call] = answer.message.tool_calls
    assert call.function.name == "get_weather"
    assert dict(call.function.arguments) == {"city": "Paris"}
    assert not answer.message.content

    parts = list(client.chat(**request, stream=True))
    calls = [c for p in parts for c in (p.message.tool_calls or [])]
    assert [(c.function.name, dict(c.function.arguments)) for c in calls] == \
        [("get_weather", {"city": "Paris"})]
    assert "<tool_call>" not in "".join(p.message.content or "" for p in parts)
    assert parts[-1].done


@needs_hermes
def test_tool_call_parsed_anthropic(hermes):
    client = anthropic_client(hermes.url)
    request = dict(model=NAME, tools=ANTHROPIC_TOOLS, max_tokens=40, temperature=0,
                   messages=few_shot(anthropic_call, "What is the weather in Paris?"))
    message = client.messages.create(**request)
    assert message.stop_reason == "tool_use", message
    [use] = [b for b in message.content if b.type == "tool_use"]
    assert use.name == "get_weather" and use.input == {"city": "Paris"} and use.id
    assert all(b.text == "" for b in message.content if b.type == "text")

    with client.messages.stream(**request) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert "<tool_call>" not in text
    assert final.stop_reason == "tool_use"
    [use] = [b for b in final.content if b.type == "tool_use"]
    assert use.name == "get_weather" and use.input == {"city": "Paris"}


# --- safety: API key, body size, queue ---------------------------------------------------------

def test_api_key():
    with serving("--api-key", "sekret", headers={"Authorization": "Bearer sekret"}) as s:
        # No key: 401 in each API's error shape.
        reply = curl(s.url, "/v1/models")
        assert reply.status == 401 and reply.json()["error"]["type"] == "authentication_error"
        reply = curl(s.url, "/api/tags")
        assert reply.status == 401 and isinstance(reply.json()["error"], str)
        reply = curl(s.url, "/v1/messages",
                     {"model": NAME, "max_tokens": 4, "messages": user("hi")})
        assert reply.status == 401 and reply.json()["error"]["type"] == "authentication_error"
        # A wrong key through the SDKs.
        with pytest.raises(openai.AuthenticationError):
            openai_client(s.url, key="wrong").chat.completions.create(
                model=NAME, messages=user("hi"), max_tokens=4)
        with pytest.raises(anthropic.AuthenticationError):
            anthropic_client(s.url, key="wrong").messages.create(
                model=NAME, max_tokens=4, messages=user("hi"))
        with pytest.raises(ollama.ResponseError) as caught:
            ollama_client(s.url).list()
        assert caught.value.status_code == 401
        # The right key: Bearer (OpenAI SDK, curl), x-api-key (Anthropic SDK, curl).
        answer = openai_client(s.url, key="sekret").chat.completions.create(
            model=NAME, messages=user("hi"), max_tokens=4, temperature=0)
        assert answer.choices[0].message.content
        message = anthropic_client(s.url, key="sekret").messages.create(
            model=NAME, max_tokens=4, messages=user("hi"), temperature=0)
        assert message.content[0].text
        assert [m.model for m in ollama_client(
            s.url, headers={"Authorization": "Bearer sekret"}).list().models] == [NAME]
        assert curl(s.url, "/api/tags", headers=["Authorization: Bearer sekret"]).status == 200
        assert curl(s.url, "/api/tags", headers=["x-api-key: sekret"]).status == 200
        assert curl(s.url, "/api/tags", headers=["Authorization: Bearer sekret2"]).status == 401
        assert re.search(r'route="GET /api/tags" .*status=401', s.log())


def test_max_body():
    with serving("--max-body", "1KiB") as s:
        big = {"model": NAME, "max_tokens": 4, "messages": user("x " * 2048)}  # about 4 KiB
        assert len(json.dumps(big)) >= 4096
        reply = curl(s.url, "/v1/chat/completions", big)
        assert reply.status == 413
        assert "1024" in reply.json()["error"]["message"]
        reply = curl(s.url, "/api/chat", big)
        assert reply.status == 413 and isinstance(reply.json()["error"], str)
        reply = curl(s.url, "/v1/messages", big)
        assert reply.status == 413 and reply.json()["type"] == "error"
        # A small request still works.
        reply = curl(s.url, "/v1/chat/completions",
                     {"model": NAME, "max_tokens": 2, "messages": user("hi")})
        assert reply.status == 200, reply.body


def test_bad_max_body_names_the_flag():
    result = subprocess.run([SLUICE_BIN, "serve", str(SMOLLM2), "--port", str(free_port()),
                             "--max-body", "lots"], capture_output=True, timeout=60)
    assert result.returncode != 0
    err = result.stderr.decode()
    assert "--max-body" in err and "--ram-budget" not in err, err


@pytest.mark.parametrize("max_queue", [0, 1])
def test_queue_full_is_429(max_queue):
    """--parallel 1: one request generates, --max-queue more wait, the next one gets 429."""
    with serving("--parallel", "1", "--max-queue", max_queue) as s:
        streams = []
        try:
            for _ in range(1 + max_queue):
                conn, stream = open_stream(s.url, "/v1/chat/completions", long_chat(200))
                streams.append(conn)
                assert stream.status == 200, stream.read()
            reply = curl(s.url, "/v1/chat/completions",
                         {"model": NAME, "max_tokens": 2, "messages": user("hi")})
            assert reply.status == 429, reply.body
            assert reply.json()["error"]["type"] == "rate_limit_error"
            assert int(reply.headers["retry-after"]) >= 0
            reply = curl(s.url, "/api/chat", {"model": NAME, "messages": user("hi")})
            assert reply.status == 429 and "retry-after" in reply.headers
            reply = curl(s.url, "/v1/messages",
                         {"model": NAME, "max_tokens": 2, "messages": user("hi")})
            assert reply.status == 429 and reply.json()["error"]["type"] == "rate_limit_error"
        finally:
            for conn in streams:
                conn.close()


# --- disconnects and shutdown ------------------------------------------------------------------

def test_disconnect_frees_the_slot():
    with serving("--parallel", "1") as s:
        # About 2000 tokens: many seconds of work if the server went on with it.
        conn, stream = open_stream(s.url, "/v1/chat/completions", long_chat(2000))
        assert stream.status == 200
        for _ in range(4):
            assert read_sse_data(stream) is not None
        stream.close()
        conn.close()
        hung_up = time.monotonic()
        s.wait_for_log(r'route="POST /v1/chat/completions" .* outcome=(disconnected|cancelled)$',
                       timeout=10)
        answer = openai_client(s.url).chat.completions.create(
            model=NAME, messages=user("hi"), max_tokens=4, temperature=0)
        assert answer.choices[0].message.content
        assert time.monotonic() - hung_up < 8
        assert metric(metrics(s.url), "sluice_active_requests") == 0


def test_sigterm_finishes_the_stream():
    s = Server("--grace", "30")
    try:
        conn, stream = open_stream(s.url, "/v1/chat/completions", long_chat(60))
        assert stream.status == 200
        data = [read_sse_data(stream)]
        s.proc.send_signal(signal.SIGTERM)
        s.wait_for_log(r"^sluice: SIGTERM: finishing requests in flight")
        # New requests are refused while the stream goes on.
        with pytest.raises((ConnectionError, urllib.error.URLError)) as refused:
            urllib.request.urlopen(s.url + "/v1/models", timeout=5)
        if isinstance(refused.value, urllib.error.HTTPError):
            assert refused.value.code == 503
        while (line := read_sse_data(stream)) is not None:
            data.append(line)
        conn.close()
        assert data[-1] == "[DONE]"
        chunks = [json.loads(d) for d in data[:-1]]
        assert chunks[-1]["choices"][0]["finish_reason"] == "length"
        text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks)
        assert len(text) > 60  # all 60 tokens came
        code = s.stop(timeout=30)
        assert code == 0, s.log()
        assert re.search(r"outcome=length", s.log())
        assert "sluice: stopped" in s.log()
    finally:
        s.kill()


# --- keep-alives -----------------------------------------------------------------------------

@pytest.mark.parametrize("path, body, keep_alive", [
    ("/v1/chat/completions", {"stream": True, "max_tokens": 3}, b": keep-alive\n\n"),
    ("/v1/messages", {"stream": True, "max_tokens": 3}, b"event: ping\n"),
    ("/api/chat", {"options": {"num_predict": 3}}, b" "),
])
def test_waiting_stream_gets_keep_alives(path, body, keep_alive):
    """--parallel 1: a stream queued behind a long one receives its API's keep-alive every quiet
    second (a lone space for NDJSON), and its client still parses the answer."""
    with serving("--parallel", "1") as s:
        conn, busy = open_stream(s.url, "/v1/chat/completions", long_chat(400))
        assert busy.status == 200 and read_sse_data(busy) is not None
        waiting_conn, waiting = open_stream(s.url, path,
                                            {"model": NAME, "messages": user("hi"), **body})
        assert waiting.status == 200
        head = waiting.read(len(keep_alive))  # chunked encoding decoded
        assert head == keep_alive, head
        conn.close()  # the long stream goes away; the waiting one is served next
        rest = waiting.read()
        waiting_conn.close()
        if path == "/api/chat":
            lines = (head + rest).split(b"\n")
            parsed = [json.loads(line) for line in lines if line.strip()]
            assert parsed[-1]["done"] is True
        else:
            assert b"data:" in rest
    if path != "/api/chat":
        return
    # The Ollama SDK itself reads a stream whose lines carry the spaces.
    with serving("--parallel", "1") as s:
        conn, busy = open_stream(s.url, "/v1/chat/completions", long_chat(250))
        assert busy.status == 200 and read_sse_data(busy) is not None
        parts = list(ollama_client(s.url).chat(model=NAME, messages=user("hi"), stream=True,
                                               options={"num_predict": 3}))
        conn.close()
        assert parts[-1].done


def test_disconnect_frees_the_slot_without_streaming():
    """A non-streamed answer that takes long is sent chunked with a space every quiet second; a
    client that hangs up is noticed by the next one and its request cancelled."""
    with serving("--parallel", "1") as s:
        body = dict(long_chat(2000))
        body["stream"] = False
        conn, reply = open_stream(s.url, "/v1/chat/completions", body)
        assert reply.status == 200
        assert reply.read(1) == b" "  # the first keep-alive, after a second of work
        conn.close()
        hung_up = time.monotonic()
        s.wait_for_log(r'route="POST /v1/chat/completions" .* outcome=disconnected$', timeout=10)
        answer = openai_client(s.url).chat.completions.create(
            model=NAME, messages=user("hi"), max_tokens=4, temperature=0)
        assert answer.choices[0].message.content
        assert time.monotonic() - hung_up < 8


def test_slow_whole_answer_parses_in_every_sdk():
    """Whole answers that outlast the first second arrive with leading spaces; the SDKs parse them."""
    with serving("--parallel", "1") as s:
        conn, busy = open_stream(s.url, "/v1/chat/completions", long_chat(250))
        assert busy.status == 200 and read_sse_data(busy) is not None
        results = {}

        def ask(name, call):
            results[name] = call()

        calls = {
            "openai": lambda: openai_client(s.url).chat.completions.create(
                model=NAME, messages=user("hi"), max_tokens=3).choices[0].message.content,
            "ollama": lambda: ollama_client(s.url).chat(
                model=NAME, messages=user("hi"), options={"num_predict": 3}).message.content,
            "anthropic": lambda: anthropic_client(s.url).messages.create(
                model=NAME, messages=user("hi"), max_tokens=3).content[0].text,
        }
        threads = [threading.Thread(target=ask, args=item) for item in calls.items()]
        for thread in threads:
            thread.start()
        time.sleep(1.5)  # all three wait behind the long stream past their first second
        conn.close()
        for thread in threads:
            thread.join(timeout=60)
        assert set(results) == set(calls) and all(results.values()), results


# --- CORS and hostile input ----------------------------------------------------------------------

def test_cors_only_when_asked(url):
    reply = curl(url, "/v1/models", headers=["Origin: https://example.com"])
    assert reply.status == 200 and "access-control-allow-origin" not in reply.headers
    with serving("--cors", "https://app.example") as s:
        reply = curl(s.url, "/v1/models", headers=["Origin: https://app.example"])
        assert reply.headers["access-control-allow-origin"] == "https://app.example"
        preflight = curl(s.url, "/v1/chat/completions", method="OPTIONS",
                         headers=["Origin: https://app.example",
                                  "Access-Control-Request-Method: POST"])
        assert preflight.status == 204
        assert "POST" in preflight.headers["access-control-allow-methods"]
        assert "authorization" in preflight.headers["access-control-allow-headers"].lower()


VALID = {
    "/v1/chat/completions": {"model": NAME, "max_tokens": 2, "messages": [
        {"role": "user", "content": "hi"}]},
    "/v1/completions": {"model": NAME, "max_tokens": 2, "prompt": "hi"},
    "/v1/messages": {"model": NAME, "max_tokens": 2, "messages": [
        {"role": "user", "content": "hi"}]},
    "/api/chat": {"model": NAME, "stream": False, "options": {"num_predict": 2},
                  "messages": [{"role": "user", "content": "hi"}]},
    "/api/generate": {"model": NAME, "stream": False, "prompt": "hi",
                      "options": {"num_predict": 2}},
    "/api/show": {"model": NAME},
}
ODD_VALUES = [None, True, -1, 0, 1.5, 1e308, -1e308, "", "\u0000\udcff", "x" * 5000, [], [1, "a"],
              {}, {"a": {"b": [None]}}]


def mutations(body):
    """Every top-level field (and each field of nested objects and list items) replaced by each
    odd value in turn, plus the field removed, plus unknown fields added."""
    def walk(value, path):
        if isinstance(value, dict):
            for key in value:
                yield from walk(value[key], path + [key])
                yield ("drop", path + [key], None)
        elif isinstance(value, list):
            for i, item in enumerate(value):
                yield from walk(item, path + [i])
        for odd in ODD_VALUES:
            yield ("set", path, odd)

    for op, path, odd in walk(body, []):
        mutated = json.loads(json.dumps(body))
        if not path:
            yield odd
            continue
        parent = mutated
        for step in path[:-1]:
            parent = parent[step]
        if op == "drop":
            del parent[path[-1]]
        else:
            parent[path[-1]] = odd
        yield mutated
    yield {**body, "unknown_field": {"x": 1}, "stream_options": "bad"}


def test_hostile_bodies_never_break_the_server():
    """Type-mutated bodies on every endpoint: answered with a status below 500 (or a plain 200
    where the mutation is harmless), never a crash or a hang; the server still answers after.
    A 64-token context bounds the answers whose token limit a mutation removed."""
    with serving("--ctx", "64") as s:
        hostile_bodies(s.url)


def hostile_bodies(url):
    seen = 0
    for path, body in VALID.items():
        for mutated in mutations(body):
            data = json.dumps(mutated, allow_nan=False).encode("utf-8", "surrogatepass")
            reply = curl(url, path, data, timeout=60)
            assert reply.status < 500, (path, mutated, reply.status, reply.body[:300])
            if reply.status >= 400:
                assert "error" in reply.json(), reply.body
            seen += 1
    for raw in [b"", b"null", b"[]", b'"text"', b"{", b'{"model": ' + b"[" * 10000,
                b"\xff\xfe\x00", b'{"model": "' + NAME.encode() + b'", "messages": 1e999}']:
        for path in VALID:
            reply = curl(url, path, raw)
            assert 400 <= reply.status < 500, (path, raw[:40], reply.status, reply.body[:200])
    assert seen > 300
    assert curl(url, "/health").json() == {"status": "ok"}
    assert metric(metrics(url), "sluice_active_requests") == 0


def test_port_in_use_is_a_clear_error(server):
    """A second server on a port in use must refuse, not share the port (SO_REUSEPORT)."""
    result = subprocess.run([SLUICE_BIN, "serve", str(SMOLLM2), "--port", str(server.port)],
                            capture_output=True, timeout=60)
    assert result.returncode == 1, result.stderr
    assert f"cannot listen on 127.0.0.1:{server.port}" in result.stderr.decode()
