"""`sluice template` against Python jinja2 configured as Hugging Face's apply_chat_template
(tools/render_templates_jinja2.py): every chat template in the test data × a conversation corpus,
with add_generation_prompt on and off, must render byte-identically; where Python raises,
sluice must exit 1 with the same message."""
import json
import os
import pathlib
import subprocess
import sys

import pytest

SLUICE_BIN = os.environ.get("SLUICE_BIN")
TESTDATA = pathlib.Path(os.environ.get("SLUICE_TESTDATA_DIR", "/nonexistent"))
ROOT = pathlib.Path(__file__).resolve().parents[2]
ORACLE = ROOT / "tools" / "render_templates_jinja2.py"
NOW = "2026-01-15T10:00:00"
BOS, EOS = "<s>", "</s>"

if not SLUICE_BIN:
    pytest.skip("SLUICE_BIN is not set (run through ctest)", allow_module_level=True)

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather for a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City name, e.g. Zürich"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "description": "Unit"},
            },
            "required": ["city"],
        },
    },
}
SEARCH_TOOL = {
    "type": "function",
    "function": {
        "name": "search_web",
        "description": "Search the web and return the top results.",
        "parameters": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "What to search for"},
                "max_results": {"type": "integer", "description": "How many results", "default": 5},
                "safe": {"type": "boolean", "description": "Safe search"},
                "filters": {"type": "array", "items": {"type": "string"}, "description": "Site filters"},
            },
            "required": ["query"],
        },
    },
}
TOOLS = [WEATHER_TOOL, SEARCH_TOOL]


def call(name, arguments, call_id):
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


# name → (messages, tools)
CONVERSATIONS = {
    "user_only": ([{"role": "user", "content": "Hello!"}], None),
    "system_user": ([{"role": "system", "content": "You are a helpful assistant."},
                     {"role": "user", "content": "What is the capital of France?"}], None),
    "multi_turn": ([{"role": "system", "content": "Answer briefly."},
                    {"role": "user", "content": "Hi, who are you?"},
                    {"role": "assistant", "content": "I am an assistant."},
                    {"role": "user", "content": "What can you do?\nList two things."},
                    {"role": "assistant", "content": "1. Answer questions\n2. Write code"},
                    {"role": "user", "content": "Thanks!"}], None),
    "unicode_emoji": ([{"role": "user", "content": "Grüße aus Zürich! 你好，世界 🌍👨‍👩‍👧 — «ça va?» Ωμέγα"},
                       {"role": "assistant", "content": "こんにちは! 😀 Привет"},
                       {"role": "user", "content": "  leading and trailing spaces \t\n"}], None),
    "special_chars": ([{"role": "user", "content": "Quotes \"double\" and 'single', back\\slash, {{ braces }} {% tags %} <tag>&amp;"}],
                      None),
    "tools_user": ([{"role": "system", "content": "You can call tools."},
                    {"role": "user", "content": "What's the weather in Paris?"}], TOOLS),
    "tools_no_system": ([{"role": "user", "content": "Search for jinja2 docs."}], TOOLS),
    "tool_call_roundtrip": ([
        {"role": "system", "content": "You can call tools."},
        {"role": "user", "content": "Weather in Paris and Tokyo?"},
        {"role": "assistant", "content": "", "tool_calls": [
            call("get_weather", {"city": "Paris", "unit": "celsius"}, "call_1"),
            call("get_weather", {"city": "Tokyo"}, "call_2")]},
        {"role": "tool", "tool_call_id": "call_1", "name": "get_weather", "content": "{\"temp\": 18.5, \"sky\": \"cloudy\"}"},
        {"role": "tool", "tool_call_id": "call_2", "name": "get_weather", "content": "Sunny, 25°C"},
        {"role": "assistant", "content": "Paris is 18.5°C and cloudy; Tokyo is sunny at 25°C."},
        {"role": "user", "content": "Thanks. Now search for umbrellas."}], TOOLS),
    "tool_call_last": ([
        {"role": "user", "content": "Find news about Rust 2.0"},
        {"role": "assistant", "content": None, "tool_calls": [
            call("search_web", {"query": "Rust 2.0 news", "max_results": 3, "safe": True,
                                "filters": ["blog.rust-lang.org", "lwn.net"]}, "call_9")]},
        {"role": "tool", "tool_call_id": "call_9", "name": "search_web", "content": "[\"Rust 2.0 announced\", \"No, it was not\"]"}],
        TOOLS),
    "reasoning": ([
        {"role": "user", "content": "What is 17 * 23?"},
        {"role": "assistant", "content": "17 × 23 = 391.", "reasoning_content": "17*20=340, 17*3=51, 340+51=391."},
        {"role": "user", "content": "And 391 / 17?"}], None),
    "reasoning_inline_think": ([
        {"role": "user", "content": "Is 91 prime?"},
        {"role": "assistant", "content": "<think>\n91 = 7 * 13.\n</think>\n\nNo, 91 = 7 × 13."},
        {"role": "user", "content": "And 97?"}], None),
    "reasoning_tools": ([
        {"role": "system", "content": "Think before you call tools."},
        {"role": "user", "content": "Is it raining in Oslo?"},
        {"role": "assistant", "content": "", "reasoning_content": "I should check the weather.",
         "tool_calls": [call("get_weather", {"city": "Oslo"}, "call_a")]},
        {"role": "tool", "tool_call_id": "call_a", "name": "get_weather", "content": "Rain, 7°C"},
        {"role": "assistant", "content": "Yes, it is raining in Oslo (7°C).", "reasoning_content": "The tool says rain."}],
        TOOLS),
    "content_parts": ([{"role": "system", "content": [{"type": "text", "text": "You are terse."}]},
                       {"role": "user", "content": [{"type": "text", "text": "Describe this:"},
                                                    {"type": "text", "text": "a red ball ⚽"}]}], None),
    "tool_args_string": ([
        {"role": "user", "content": "Weather in Lyon?"},
        {"role": "assistant", "content": "Checking.", "tool_calls": [
            call("get_weather", "{\"city\": \"Lyon\", \"unit\": \"celsius\"}", "abcDEF123")]},
        {"role": "tool", "tool_call_id": "abcDEF123", "content": "{\"temp\": 21}"}], TOOLS),
    "assistant_last": ([{"role": "system", "content": "Be concise."},
                        {"role": "user", "content": "Say hi."},
                        {"role": "assistant", "content": "Hi."}], None),
}


def template_sources():
    """(name, template text) for every template in the test data."""
    found = []
    for path in sorted((TESTDATA / "chat-templates").glob("*.jinja")):
        found.append((path.name, path.read_text(encoding="utf-8")))
    for config in sorted((TESTDATA / "tokenizers").glob("*/tokenizer_config.json")):
        template = json.loads(config.read_text(encoding="utf-8")).get("chat_template")
        if isinstance(template, str):
            found.append((f"{config.parent.name}/tokenizer_config.json", template))
        elif isinstance(template, list):
            for named in template:
                found.append((f"{config.parent.name}/tokenizer_config.json:{named['name']}", named["template"]))
    for path in sorted((TESTDATA / "tokenizers").glob("*/chat_template.jinja")):
        found.append((f"{path.parent.name}/chat_template.jinja", path.read_text(encoding="utf-8")))
    return found


def sluice_render(tmp, template_text, messages, tools, add_generation_prompt):
    tfile, mfile = tmp / "t.jinja", tmp / "m.json"
    tfile.write_text(template_text, encoding="utf-8")
    mfile.write_text(json.dumps(messages, ensure_ascii=False), encoding="utf-8")
    args = [SLUICE_BIN, "template", "--template", tfile, "--messages", mfile, "--bos", BOS, "--eos", EOS, "--now", NOW]
    if tools is not None:
        (tmp / "tools.json").write_text(json.dumps(tools, ensure_ascii=False), encoding="utf-8")
        args += ["--tools", tmp / "tools.json"]
    if add_generation_prompt:
        args.append("--add-generation-prompt")
    return subprocess.run([str(a) for a in args], capture_output=True, timeout=60)


def check_case(tmp, template_text, messages, tools, add_generation_prompt, expected):
    """None when sluice agrees with the oracle, else a one-line reason."""
    got = sluice_render(tmp, template_text, messages, tools, add_generation_prompt)
    stderr = got.stderr.decode("utf-8", "replace").strip()
    if "error" in expected:
        want = expected["error"].replace("\n", " ").replace("\r", " ")
        if got.returncode != 1:
            return f"python raised {want!r}, sluice exited {got.returncode}"
        if want not in stderr:
            return f"python raised {want!r}, sluice said {stderr!r}"
        return None
    if got.returncode != 0:
        return f"sluice failed: {stderr}"
    text = got.stdout.decode("utf-8", "surrogateescape")
    if text != expected["text"]:
        i = next((k for k in range(min(len(text), len(expected["text"]))) if text[k] != expected["text"][k]),
                 min(len(text), len(expected["text"])))
        return (f"differs at char {i}: python {expected['text'][max(0, i - 30):i + 50]!r} "
                f"sluice {text[max(0, i - 30):i + 50]!r}")
    return None


def test_templates_render_like_jinja2(tmp_path):
    sources = template_sources()
    if not sources:
        pytest.skip(f"no chat templates under {TESTDATA}")
    jobs, cases = [], []
    for name, text in sources:
        for conv_name, (messages, tools) in CONVERSATIONS.items():
            for agp in (False, True):
                jobs.append({"template": text, "messages": messages, "tools": tools, "add_generation_prompt": agp,
                             "bos_token": BOS, "eos_token": EOS, "now": NOW})
                cases.append((name, conv_name, agp))
    (tmp_path / "jobs.json").write_text(json.dumps(jobs, ensure_ascii=False), encoding="utf-8")
    oracle = subprocess.run([sys.executable, ORACLE, "--batch", tmp_path / "jobs.json"], capture_output=True, timeout=600)
    assert oracle.returncode == 0, oracle.stderr.decode()
    expected = json.loads(oracle.stdout)
    failures = []
    n_raise = 0
    for (name, conv_name, agp), job, want in zip(cases, jobs, expected):
        n_raise += "error" in want
        reason = check_case(tmp_path, job["template"], job["messages"], job["tools"], agp, want)
        if reason:
            failures.append(f"{name} × {conv_name} (agp={agp}): {reason}")
    summary = (f"{len(cases)} cases ({len(sources)} templates × {len(CONVERSATIONS)} conversations × 2), "
               f"{len(cases) - len(failures)} match ({n_raise} where Python raises)")
    print(summary)
    (pathlib.Path(os.environ.get("SLUICE_BUILD_DIR", tmp_path)) / "template_parity_failures.txt").write_text(
        summary + "\n" + "\n".join(failures) + "\n", encoding="utf-8")
    assert not failures, summary + "\n" + "\n".join(failures[:40])


def test_feature_snippets_render_like_jinja2(tmp_path):
    """One feature per template (tests/e2e/template_snippets.py), with the same context as above."""
    sys.path.insert(0, str(pathlib.Path(__file__).parent))
    from template_snippets import MESSAGES, SNIPPETS

    jobs = [{"template": t, "messages": MESSAGES, "tools": None, "add_generation_prompt": False,
             "bos_token": BOS, "eos_token": EOS, "now": NOW} for t in SNIPPETS]
    (tmp_path / "jobs.json").write_text(json.dumps(jobs, ensure_ascii=False), encoding="utf-8")
    oracle = subprocess.run([sys.executable, ORACLE, "--batch", tmp_path / "jobs.json"], capture_output=True, timeout=600)
    assert oracle.returncode == 0, oracle.stderr.decode()
    failures = []
    for job, want in zip(jobs, json.loads(oracle.stdout)):
        reason = check_case(tmp_path, job["template"], MESSAGES, None, False, want)
        if reason:
            failures.append(f"{job['template']!r}: {reason}")
    print(f"{len(jobs)} snippets, {len(jobs) - len(failures)} match")
    assert not failures, "\n".join(failures)


def test_model_flag_reads_gguf_template(tmp_path):
    """`--model FILE` renders the GGUF's tokenizer.chat_template with its own BOS/EOS texts."""
    import gguf
    path = TESTDATA / "vocab" / "ggml-vocab-phi-3.gguf"
    if not path.exists():
        pytest.skip(f"{path} is absent")
    reader = gguf.GGUFReader(path)
    field = reader.fields["tokenizer.chat_template"]
    template = bytes(field.parts[field.data[0]]).decode("utf-8")
    tokens = reader.fields["tokenizer.ggml.tokens"]

    def token(key):
        f = reader.fields[key]
        index = int(f.parts[f.data[0]][0])
        return bytes(tokens.parts[tokens.data[index]]).decode("utf-8")

    messages, _ = CONVERSATIONS["multi_turn"]
    (tmp_path / "m.json").write_text(json.dumps(messages), encoding="utf-8")
    sys.path.insert(0, str(ORACLE.parent))
    import render_templates_jinja2 as oracle
    want = oracle.render(template, messages, None, True, token("tokenizer.ggml.bos_token_id"),
                         token("tokenizer.ggml.eos_token_id"), NOW)
    got = subprocess.run([SLUICE_BIN, "template", "--model", str(path), "--messages", str(tmp_path / "m.json"),
                          "--add-generation-prompt", "--now", NOW], capture_output=True, timeout=60)
    assert got.returncode == 0, got.stderr.decode()
    assert got.stdout.decode("utf-8") == want


def test_template_errors_exit_1_with_one_line(tmp_path):
    (tmp_path / "m.json").write_text("[]", encoding="utf-8")
    (tmp_path / "t.jinja").write_text("{{ raise_exception('line one\nline two') }}", encoding="utf-8")
    got = subprocess.run([SLUICE_BIN, "template", "--template", str(tmp_path / "t.jinja"), "--messages",
                          str(tmp_path / "m.json")], capture_output=True, timeout=60)
    assert got.returncode == 1 and got.stdout == b""
    assert got.stderr.decode().strip() == "sluice: error: line one line two"
    (tmp_path / "t.jinja").write_text("{% if x %}", encoding="utf-8")
    got = subprocess.run([SLUICE_BIN, "template", "--template", str(tmp_path / "t.jinja"), "--messages",
                          str(tmp_path / "m.json")], capture_output=True, timeout=60)
    assert got.returncode == 1 and b"Unexpected end of template" in got.stderr
