#!/usr/bin/env python3
"""An agent conversation replayed against one OpenAI-compatible server (ours
or the reference), for scripts/agent_trace.sh.

The trace: a system prompt of about --system-tokens tokens (a policy text),
ten tools with JSON-Schema parameters, and --turns turns. Each turn sends the
conversation so far plus a user message (streamed /v1/chat/completions,
tools, tool_choice auto, temperature 0, --max-tokens tokens); the reply is
then replaced by a scripted assistant turn (one call to the turn's tool,
arguments as a JSON string, as clients send them) and a tool result, so every
server sees the same prompts whatever its model writes. Each prompt extends
the previous one: a prompt cache should serve all but the new messages.

Per turn: TTFT (request sent to the first chunk that carries a token: not
the role announcement), prompt tokens and cached tokens (ours:
usage.prompt_tokens_details.cached_tokens; the reference: timings.cache_n and
prompt_n). One JSON line per turn on stdout, then a summary line.
"""
import argparse
import http.client
import json
import random
import statistics
import time
import urllib.parse

TOOLS = [
    ("search_docs", "Search the product documentation.", {"query": {"type": "string"}, "top_k": {"type": "integer", "minimum": 1, "maximum": 20}}, ["query"]),
    ("get_order", "Look up an order by id.", {"order_id": {"type": "string", "pattern": "^ORD-[0-9]{6}$"}}, ["order_id"]),
    ("list_orders", "List a customer's recent orders.", {"customer_id": {"type": "string"}, "limit": {"type": "integer", "minimum": 1, "maximum": 50}}, ["customer_id"]),
    ("refund", "Refund an order, in part or in full.", {"order_id": {"type": "string"}, "amount_cents": {"type": "integer", "minimum": 1}, "reason": {"type": "string", "enum": ["damaged", "late", "wrong_item", "other"]}}, ["order_id", "reason"]),
    ("get_weather", "Weather at a shipping address.", {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1, "maximum": 7}}, ["city"]),
    ("create_ticket", "Open a support ticket.", {"title": {"type": "string", "maxLength": 80}, "priority": {"type": "string", "enum": ["low", "normal", "high"]}, "tags": {"type": "array", "items": {"type": "string"}}}, ["title", "priority"]),
    ("update_address", "Change a customer's shipping address.", {"customer_id": {"type": "string"}, "street": {"type": "string"}, "city": {"type": "string"}, "postcode": {"type": "string"}}, ["customer_id", "street", "city"]),
    ("track_parcel", "Where a parcel is now.", {"tracking_number": {"type": "string"}}, ["tracking_number"]),
    ("send_email", "Email the customer.", {"to": {"type": "string", "format": "email"}, "subject": {"type": "string"}, "body": {"type": "string"}}, ["to", "subject", "body"]),
    ("escalate", "Hand the conversation to a human.", {"team": {"type": "string", "enum": ["billing", "logistics", "tech"]}, "note": {"type": "string"}}, ["team"]),
]

POLICY = [
    "You are the support agent of a mail-order shop.",
    "Answer in short sentences and never invent order data: look it up with a tool.",
    "Refunds above fifty euros need a reason from the list and a note in a ticket.",
    "Addresses change only before the parcel leaves the warehouse; check tracking first.",
    "Escalate to billing for disputes, to logistics for lost parcels, to tech for account problems.",
    "Quote prices with their currency, dates as day, month and year, and times with their zone.",
    "When a tool fails, say so plainly and offer the next step.",
    "Keep personal data out of replies unless the customer gave it in this conversation.",
]

USER = [
    "Where is my order ORD-{n:06d}?", "Can you refund order ORD-{n:06d}? It arrived damaged.",
    "Please change my address to {n} Garden Street, Leeds.", "What is the weather in Lyon for the delivery day?",
    "Open a ticket: the invoice for ORD-{n:06d} is wrong.", "Email me the summary at customer{n}@example.com.",
    "List my last five orders, customer C{n}.", "Track parcel TRK{n}X.", "I want to talk to a human about billing.",
    "Search the docs for the return policy on shoes.",
]


def tools_json():
    return [{"type": "function", "function": {"name": n, "description": d,
                                              "parameters": {"type": "object", "properties": p, "required": r}}}
            for n, d, p, r in TOOLS]


def value(schema, turn):
    if "enum" in schema:
        return schema["enum"][0]
    if schema.get("type") == "integer":
        return 3
    if schema.get("type") == "array":
        return ["a"]
    return f"value {turn}"


def post(url, path, body, timeout=600):
    u = urllib.parse.urlparse(url)
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)
    c.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
    return c, c.getresponse()


def count_tokens(url, text):
    c, r = post(url, "/tokenize", {"content": text})
    out = json.loads(r.read())
    c.close()
    return len(out.get("tokens", []))


def system_prompt(url, target):
    rng = random.Random(7)
    parts, n = [], 0
    while n < target:
        parts.append(" ".join(rng.choice(POLICY) for _ in range(6)))
        n = count_tokens(url, "\n".join(parts))
    return "\n".join(parts)


def stream_turn(url, messages, max_tokens):
    body = {"messages": messages, "tools": tools_json(), "tool_choice": "auto", "max_tokens": max_tokens,
            "temperature": 0, "stream": True, "stream_options": {"include_usage": True}}
    t0 = time.perf_counter()
    c, r = post(url, "/v1/chat/completions", body)
    if r.status != 200:
        raise SystemExit(f"HTTP {r.status}: {r.read()[:300]!r}")
    ttft = None
    prompt = cached = None
    buf = b""
    while True:
        chunk = r.read1(65536) if hasattr(r, "read1") else r.read(65536)
        if not chunk:
            break
        buf += chunk
        while b"\n\n" in buf:
            event, buf = buf.split(b"\n\n", 1)
            line = event.decode(errors="replace").strip()
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            j = json.loads(line[6:])
            for ch in j.get("choices", []):
                d = ch.get("delta", {})
                role_only = "role" in d and not d.get("content") and not d.get("tool_calls") and not d.get("reasoning_content")
                if ttft is None and not role_only:
                    ttft = time.perf_counter() - t0
            if j.get("usage"):
                prompt = j["usage"].get("prompt_tokens")
                cached = (j["usage"].get("prompt_tokens_details") or {}).get("cached_tokens", cached)
            t = j.get("timings") or {}
            if "cache_n" in t and "prompt_n" in t:  # the reference's timings
                cached = t["cache_n"]
                prompt = t["cache_n"] + t["prompt_n"]
            elif "cached_tokens" in t and cached is None:
                cached, prompt = t["cached_tokens"], t.get("prompt_tokens", prompt)
    c.close()
    return ttft, prompt, cached


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--turns", type=int, default=20)
    ap.add_argument("--system-tokens", type=int, default=1500)
    ap.add_argument("--max-tokens", type=int, default=8)
    ap.add_argument("--label", default="server")
    a = ap.parse_args()
    system = system_prompt(a.url, a.system_tokens)
    messages = [{"role": "system", "content": system}]
    rows = []
    for turn in range(a.turns):
        messages.append({"role": "user", "content": USER[turn % len(USER)].format(n=100000 + 37 * turn)})
        ttft, prompt, cached = stream_turn(a.url, messages, a.max_tokens)
        row = {"label": a.label, "turn": turn + 1, "ttft_ms": round(ttft * 1e3, 2), "prompt_tokens": prompt,
               "cached_tokens": cached, "cached_share": round(cached / prompt, 4) if prompt and cached is not None else None}
        rows.append(row)
        print(json.dumps(row), flush=True)
        name, _, props, req = TOOLS[turn % len(TOOLS)]
        args = {k: value(v, turn) for k, v in props.items() if k in req}
        call_id = "".join(random.Random(turn).choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(9))
        messages.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}]})
        result = {"ok": True, "tool": name, "turn": turn + 1, "data": [f"record {turn}-{k}: status shipped, 2 items" for k in range(4)]}
        messages.append({"role": "tool", "tool_call_id": call_id, "content": json.dumps(result)})
    later = [r for r in rows if r["turn"] >= 2]
    summary = {"label": a.label, "turns": len(rows), "system_tokens_target": a.system_tokens,
               "first_prompt_tokens": rows[0]["prompt_tokens"], "last_prompt_tokens": rows[-1]["prompt_tokens"],
               "ttft_ms_p50_turn2on": round(statistics.median(r["ttft_ms"] for r in later), 2),
               "ttft_ms_turn1": rows[0]["ttft_ms"],
               "min_cached_share_turn2on": min((r["cached_share"] or 0) for r in later)}
    print(json.dumps({"summary": summary}), flush=True)


if __name__ == "__main__":
    main()
