#!/usr/bin/env python3
"""Reference renderer for chat templates: Python jinja2 configured as Hugging Face transformers'
apply_chat_template does (utils/chat_template_utils.py: _compile_jinja_template, render_jinja_template).

It mirrors that setup rather than importing transformers, so tests need only jinja2:
ImmutableSandboxedEnvironment(trim_blocks, lstrip_blocks, loopcontrols + the `generation` tag),
`tojson` = json.dumps(ensure_ascii=False, indent, separators, sort_keys=False), `raise_exception`,
`strftime_now`, and the variables messages, tools (None when absent), documents=None,
add_generation_prompt, bos_token, eos_token plus any extra keyword arguments.

Single case (same flags as `sluice template`):
  render_templates_jinja2.py --template T.jinja --messages M.json [--tools T.json]
      [--add-generation-prompt] [--bos TEXT] [--eos TEXT] [--now 2026-01-15T10:00:00]
Batch (what tests/e2e/test_template_parity.py uses): --batch JOBS.json, a list of
  {template, messages, tools?, add_generation_prompt, bos_token?, eos_token?, now?, extra?};
  prints a JSON list of {"text": ...} or {"error": message}.
"""
import argparse
import json
import sys
from datetime import datetime

import jinja2
import jinja2.ext
import jinja2.nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment


class GenerationTag(jinja2.ext.Extension):
    # transformers' AssistantTracker: `{% generation %}…{% endgeneration %}` renders its body
    # unchanged (it only records offsets when an assistant mask is requested).
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_generation_support"), [], [], body).set_lineno(lineno)

    def _generation_support(self, caller):
        return caller()


def make_environment(now):
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(format):
        return (now or datetime.now()).strftime(format)

    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[GenerationTag, jinja2.ext.loopcontrols]
    )
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def render(template, messages, tools=None, add_generation_prompt=False, bos_token=None, eos_token=None,
           now=None, extra=None):
    env = make_environment(datetime.fromisoformat(now) if now else None)
    kwargs = dict(extra or {})
    if bos_token is not None:
        kwargs["bos_token"] = bos_token
    if eos_token is not None:
        kwargs["eos_token"] = eos_token
    compiled = env.from_string(template)
    return compiled.render(messages=messages, tools=tools, documents=None,
                           add_generation_prompt=add_generation_prompt, **kwargs)


def render_job(job):
    try:
        text = render(job["template"], job["messages"], job.get("tools"), job.get("add_generation_prompt", False),
                      job.get("bos_token"), job.get("eos_token"), job.get("now"), job.get("extra"))
        return {"text": text}
    except Exception as e:  # the message is what parity compares
        return {"error": str(e), "type": type(e).__name__}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batch")
    p.add_argument("--template")
    p.add_argument("--messages")
    p.add_argument("--tools")
    p.add_argument("--add-generation-prompt", action="store_true")
    p.add_argument("--bos")
    p.add_argument("--eos")
    p.add_argument("--now")
    a = p.parse_args()
    if a.batch:
        with open(a.batch, encoding="utf-8") as f:
            jobs = json.load(f)
        json.dump([render_job(j) for j in jobs], sys.stdout, ensure_ascii=False)
        return 0
    with open(a.template, encoding="utf-8") as f:
        template = f.read()
    with open(a.messages, encoding="utf-8") as f:
        messages = json.load(f)
    tools = None
    if a.tools:
        with open(a.tools, encoding="utf-8") as f:
            tools = json.load(f)
    result = render_job({"template": template, "messages": messages, "tools": tools,
                         "add_generation_prompt": a.add_generation_prompt, "bos_token": a.bos,
                         "eos_token": a.eos, "now": a.now})
    if "error" in result:
        print(result["error"].replace("\n", " "), file=sys.stderr)
        return 1
    sys.stdout.write(result["text"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
