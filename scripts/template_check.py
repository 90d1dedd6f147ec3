#!/usr/bin/env python3
"""Chat templates against the reference server's /apply-template.

For every *.jinja in the given folders: the reference llama-server
(../shared/anchor, --jinja) is started with the template, and each probe
conversation (plain with a system prompt; tools with a call and its result;
a reasoning reply; two calls at once; a continued reply; a system prompt, tools,
reasoning and a call with its result at once) is rendered by it and by
`promptcache serve --chat-template-file` (the same route, so the same
message handling: null contents, arguments as strings). Prints one line per template and
conversation (same / differs / error on either side) and the counts.

  scripts/template_check.py [--anchor DIR] [--model F.gguf] FOLDER...
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request

TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
                                           "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                                          "required": ["city"]}}}]
CALL = {"id": "call00001", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}
CALL2 = {"id": "call00002", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Rome\"}"}}
CONVERSATIONS = {
    "plain": {"messages": [{"role": "system", "content": "You are brief."}, {"role": "user", "content": "Hello!"},
                           {"role": "assistant", "content": "Hi."}, {"role": "user", "content": "What is a cache?"}]},
    "tools": {"messages": [{"role": "system", "content": "Use tools."}, {"role": "user", "content": "Weather in Paris?"},
                           {"role": "assistant", "content": None, "tool_calls": [CALL]},
                           {"role": "tool", "tool_call_id": "call00001", "content": "{\"temp_c\": 21}"},
                           {"role": "user", "content": "And tomorrow?"}], "tools": TOOLS},
    "reasoning": {"messages": [{"role": "user", "content": "2+2?"},
                               {"role": "assistant", "content": "4.", "reasoning_content": "Add them."},
                               {"role": "user", "content": "3+3?"}]},
    "parallel": {"messages": [{"role": "user", "content": "Paris and Rome?"},
                              {"role": "assistant", "content": "", "tool_calls": [CALL, CALL2]},
                              {"role": "tool", "tool_call_id": "call00001", "content": "21"},
                              {"role": "tool", "tool_call_id": "call00002", "content": "25"},
                              {"role": "user", "content": "Thanks."}], "tools": TOOLS},
    # A reply continued (the last message is the assistant's): reasoning
    # models show an empty block first (docs/TEMPLATES.md).
    "continued": {"messages": [{"role": "system", "content": "You are brief."}, {"role": "user", "content": "Hello!"},
                               {"role": "assistant", "content": "Hi, I am"}]},
    # Everything at once: a system prompt, tools, reasoning, a call and its result.
    "agent": {"messages": [{"role": "system", "content": "Use tools."}, {"role": "user", "content": "Weather in Paris?"},
                           {"role": "assistant", "content": "", "reasoning_content": "Call the tool.",
                            "tool_calls": [CALL]},
                           {"role": "tool", "tool_call_id": "call00001", "content": "{\"temp_c\": 21}"}],
              "tools": TOOLS},
}


def render_all(cmd, port, env=None):
    """Starts a server (cmd), renders every conversation with /apply-template, stops it."""
    log = open(f"/tmp/template_check_{port}.log", "w")
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=log, env=env)
    out = {}
    try:
        for name, body in CONVERSATIONS.items():
            for _ in range(300):
                if p.poll() is not None:
                    out[name] = ("error", "the server refused the template")
                    break
                try:
                    r = urllib.request.urlopen(urllib.request.Request(f"http://127.0.0.1:{port}/apply-template",
                                                                      json.dumps(body).encode()), timeout=10)
                    out[name] = ("ok", json.loads(r.read())["prompt"])
                    break
                except urllib.error.HTTPError as e:
                    if e.code == 503:
                        time.sleep(0.1)
                        continue
                    out[name] = ("error", e.read().decode(errors="replace")[:200])
                    break
                except (urllib.error.URLError, ConnectionError):
                    time.sleep(0.1)
            else:
                out[name] = ("error", "no answer")
    finally:
        p.kill()
        p.wait()
    return out


def reference(anchor, model, template, port):
    env = dict(os.environ, LD_LIBRARY_PATH=anchor)
    return render_all([os.path.join(anchor, "llama-server"), "-m", model, "--jinja", "--chat-template-file", template,
                       "--port", str(port), "-c", "2048"], port, env)


def ours(binary, model, template, port):
    return render_all([binary, "serve", "-m", model, "--chat-template-file", template, "--port", str(port), "-c", "2048"], port)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("folders", nargs="+")
    ap.add_argument("--anchor", default="../shared/anchor")
    ap.add_argument("--model", default="../shared/models/stories260K.gguf")
    ap.add_argument("--binary", default="build/promptcache")
    a = ap.parse_args()
    counts = {"same": 0, "differs": 0, "both refuse": 0, "only we refuse": 0, "only the reference refuses": 0}
    port = 18850
    for folder in a.folders:
        for t in sorted(glob.glob(os.path.join(folder, "*.jinja"))):
            port += 1
            ref = reference(a.anchor, a.model, t, port)
            port += 1
            mine = ours(a.binary, a.model, t, port)
            for name in CONVERSATIONS:
                (rk, rv), (mk, mv) = ref[name], mine[name]
                if rk == "ok" and mk == "ok":
                    verdict = "same" if rv == mv else "differs"
                elif rk == mk:
                    verdict = "both refuse"
                else:
                    verdict = "only we refuse" if mk == "error" else "only the reference refuses"
                counts[verdict] += 1
                detail = ""
                if verdict == "differs":
                    k = next((i for i in range(min(len(rv), len(mv))) if rv[i] != mv[i]), min(len(rv), len(mv)))
                    detail = f" at {k}: ours {mv[max(0, k - 20):k + 40]!r} ref {rv[max(0, k - 20):k + 40]!r}"
                elif verdict != "same":
                    detail = f" ({(mv if mk == 'error' else rv)[:120]!r})"
                print(f"{os.path.basename(t):55s} {name:10s} {verdict}{detail}", flush=True)
    print(json.dumps(counts))


if __name__ == "__main__":
    main()
