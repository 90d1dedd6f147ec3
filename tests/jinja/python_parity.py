#!/usr/bin/env python3
"""Our Jinja interpreter against Python's Jinja (Debian's python3-jinja2), the
engine chat templates are written for, on every shared chat template.

Random conversations (system or not, tool calls and results, reasoning,
content parts, empty and multi-line texts; a fixed seed) are rendered by
Python's Jinja set up as Hugging Face renders chat templates (trim_blocks,
lstrip_blocks, loop controls, its tojson, raise_exception, strftime_now) and
by `promptcache template --jsonl`, with the same variables passed to both.
Every conversation Python renders must come out byte for byte the same;
those it refuses (a template's raise_exception, or Python's own type
errors) are counted, not compared.

  python_parity.py PROMPTCACHE_BINARY SHARED_DIR [CONVERSATIONS=40]

Exit 0: all equal; 1: a difference (the first ones printed); 77: skipped
(no ../shared, or no python3-jinja2, unless PROMPTCACHE_REQUIRE_SHARED=1).
"""
import datetime
import glob
import json
import os
import random
import subprocess
import sys

REQUIRE = os.environ.get("PROMPTCACHE_REQUIRE_SHARED") == "1"


def skip(why):
    print(("FAIL: " if REQUIRE else "SKIP: ") + why)
    sys.exit(1 if REQUIRE else 77)


try:
    import jinja2
    import jinja2.ext
    from jinja2.sandbox import ImmutableSandboxedEnvironment
except ImportError:
    skip("python3-jinja2 is not installed (scripts/install-deps.sh installs it)")

NOW = datetime.datetime(2026, 11, 30, 12)  # promptcache template --date 2026-11-30 pins noon


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(value, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def environment():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = NOW.strftime
    return env


TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "City"},
                                                    "days": {"type": "integer"}}, "required": ["city"]}}}]
TEXTS = ["Hello!", "  spaced  ", "line1\nline2", "ünïcødé ✓", "", "{json: 1}", "a<b>&c"]


def conversation(rng):
    """One request body: messages, add_generation_prompt, the variables."""
    msgs = []
    if rng.random() < 0.5:
        msgs.append({"role": "system", "content": rng.choice(TEXTS[:4])})
    turns = rng.randint(1, 3)
    for t in range(turns):
        content = rng.choice(TEXTS)
        if rng.random() < 0.2:
            content = [{"type": "text", "text": content or "x"}]
        msgs.append({"role": "user", "content": content})
        if t == turns - 1:
            break
        if rng.random() < 0.3:
            call = {"id": f"call{t:05d}", "type": "function",
                    "function": {"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}}
            msgs.append({"role": "assistant", "content": None if rng.random() < 0.5 else "", "tool_calls": [call]})
            msgs.append({"role": "tool", "tool_call_id": call["id"], "content": rng.choice(["21", "{\"t\": 21}", "ok"])})
        reply = {"role": "assistant", "content": rng.choice(TEXTS[:4]) or "ok"}
        if rng.random() < 0.3:
            reply["reasoning_content"] = f"think {t}"
        msgs.append(reply)
    body = {"messages": msgs, "add_generation_prompt": rng.random() < 0.8,
            "enable_thinking": rng.random() < 0.7, "date_string": "30 Nov 2026"}
    if rng.random() < 0.4:
        body["tools"] = TOOLS
    return body


def python_render(template, body):
    variables = {k: v for k, v in body.items() if k != "messages"}
    try:
        text = template.render(messages=body["messages"], bos_token="<s>", eos_token="</s>", **variables)
    except Exception:  # the template's raise_exception, or Python refusing an operation
        return None
    return text[len("<s>"):] if text.startswith("<s>") else text  # the tokenizer adds BOS, not the render


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    binary, shared = sys.argv[1], sys.argv[2]
    count = int(sys.argv[3]) if len(sys.argv) > 3 else 40
    paths = sorted(glob.glob(os.path.join(shared, "templates", "*.jinja")))
    if not paths:
        skip(f"no templates under {shared}/templates")
    env = environment()
    compared = refused = 0
    failures = []
    for path in paths:
        rng = random.Random(20261204)
        bodies = [conversation(rng) for _ in range(count)]
        template = env.from_string(open(path, encoding="utf-8").read())
        expected = [python_render(template, b) for b in bodies]
        run = subprocess.run([binary, "template", "--template-file", path, "--bos-token", "<s>", "--eos-token", "</s>",
                              "--date", "2026-11-30", "--jsonl"],
                             input="".join(json.dumps(b) + "\n" for b in bodies), capture_output=True, text=True)
        ours = [json.loads(line) for line in run.stdout.splitlines()]
        if run.returncode != 0 or len(ours) != len(bodies):
            failures.append(f"{path}: promptcache template exited {run.returncode}: {run.stderr[:300]}")
            continue
        for body, want, got in zip(bodies, expected, ours):
            if want is None:
                refused += 1
                continue
            compared += 1
            text = got.get("prompt")
            if text != want:
                k = 0
                while text is not None and k < min(len(text), len(want)) and text[k] == want[k]:
                    k += 1
                shown = repr(text[max(0, k - 60):k + 60]) if text is not None else "error: " + str(got.get("error"))
                failures.append(f"{os.path.basename(path)}: differs at byte {k}\n  ours:   {shown}\n"
                                f"  python: {want[max(0, k - 60):k + 60]!r}\n  body: {json.dumps(body)[:400]}")
    print(f"{len(paths)} templates, {compared} renders compared with Python's Jinja, {refused} refused by it, "
          f"{len(failures)} differences")
    for f in failures[:5]:
        print(f)
    if compared == 0:
        print("nothing was compared")
        return 1
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
