#include "server/chat_template.h"

#include <algorithm>

#include "server/reasoning_block.h"

namespace pc {
namespace {

// Our own templates for models without one. The message loop treats
// "developer" as "system".
constexpr std::pair<const char*, const char*> kBuiltins[] = {
    {"chatml",
     "{%- for m in messages -%}<|im_start|>{{ 'system' if m.role == 'developer' else m.role }}\n{{ m.content }}<|im_end|>\n"
     "{% endfor -%}{%- if add_generation_prompt -%}<|im_start|>assistant\n{% endif -%}"},
    {"llama3",
     "{%- for m in messages -%}<|start_header_id|>{{ 'system' if m.role == 'developer' else m.role }}<|end_header_id|>\n\n"
     "{{ m.content }}<|eot_id|>{% endfor -%}"
     "{%- if add_generation_prompt -%}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif -%}"},
    {"llama2",
     "{%- set ns = namespace(sys='', first=true) -%}"
     "{%- for m in messages -%}"
     "{%- if m.role in ['system', 'developer'] -%}{%- set ns.sys = m.content -%}"
     "{%- elif m.role == 'user' -%}"
     "{%- if not ns.first -%}<s>{%- endif -%}[INST] "
     "{% if ns.sys %}<<SYS>>\n{{ ns.sys }}\n<</SYS>>\n\n{% set ns.sys = '' %}{% endif %}"
     "{{ m.content }} [/INST]{%- set ns.first = false -%}"
     "{%- else %} {{ m.content }}</s>{%- endif -%}{%- endfor -%}"},
    {"mistral",
     "{%- set ns = namespace(sys='', first=true) -%}"
     "{%- for m in messages -%}"
     "{%- if m.role in ['system', 'developer'] -%}{%- set ns.sys = m.content -%}"
     "{%- elif m.role == 'user' -%}"
     "{%- if not ns.first -%}<s>{%- endif -%}[INST] {% if ns.sys %}{{ ns.sys }}\n\n{% set ns.sys = '' %}{% endif %}"
     "{{ m.content }} [/INST]{%- set ns.first = false -%}"
     "{%- else -%}{{ m.content }}</s>{%- endif -%}{%- endfor -%}"},
    {"zephyr",
     "{%- for m in messages -%}<|{{ 'system' if m.role == 'developer' else m.role }}|>\n{{ m.content }}</s>\n{% endfor -%}"
     "{%- if add_generation_prompt -%}<|assistant|>\n{% endif -%}"},
};

constexpr char kBreak[] = "\xee\x80\x80";  // U+E000, private use

// Inserts a break after the first byte of every special-token text in s.
std::string BreakSpecials(const std::string& s, const Tokenizer& tok) {
  std::string out;
  size_t pos = 0;
  for (const auto& [at, len] : tok.FindSpecialTokens(s)) {
    out.append(s, pos, at + 1 - pos);
    out += kBreak;
    pos = at + 1;
    (void)len;
  }
  out.append(s, pos, std::string::npos);
  return out;
}

// k is where two renders part. When k falls inside a marker such as
// `<|CHATBOT_TOKEN|>` (the renders share its first bytes), moves it back to
// that marker's start, and then over the markers written right before it,
// so that the text from k starts a turn.
size_t MarkerStart(std::string_view s, size_t k) {
  const size_t lt = s.substr(0, k).rfind('<');
  // Two shared bytes ("<|") at least: `</s>` against `<|assistant|>` share
  // only "<", and the reference renders keep that split (Phi-3.5).
  if (lt == std::string_view::npos || k - lt < 2 || k - lt > 32 ||
      s.substr(lt, k - lt).find('>') != std::string_view::npos) {
    return k;
  }
  k = lt;
  while (k > 0 && s[k - 1] == '>') {
    const size_t prev = s.substr(0, k - 1).rfind('<');
    if (prev == std::string_view::npos || k - prev > 32 || s.substr(prev, k - 1 - prev).find('>') != std::string_view::npos) break;
    k = prev;
  }
  return k;
}

// Tool results as a template that reads `tool_responses` expects them: each
// run of `tool` messages right after an assistant turn with calls goes into
// that turn as {name: the call's name at the same position (else the
// message's `name`), response: the content parsed as JSON, else the text},
// as the reference engine folds them. Other tool messages stay as they are.
nlohmann::ordered_json FoldToolResults(const nlohmann::ordered_json& msgs) {
  using ojson = nlohmann::ordered_json;
  ojson out = ojson::array();
  size_t owner = 0, k = 0;
  bool open = false;
  for (const ojson& m : msgs) {
    const bool is_tool = m.is_object() && m.value("role", "") == "tool";
    if (is_tool && open) {
      ojson& a = out[owner];
      ojson r = ojson::object();
      const ojson& calls = a["tool_calls"];
      const ojson* f = k < calls.size() && calls[k].is_object() ? &calls[k] : nullptr;
      if (f != nullptr && f->contains("function") && (*f)["function"].is_object()) f = &(*f)["function"];
      if (f != nullptr && f->contains("name") && (*f)["name"].is_string()) {
        r["name"] = (*f)["name"];
      } else if (m.contains("name") && m["name"].is_string()) {
        r["name"] = m["name"];
      }
      const ojson content = m.value("content", ojson());
      ojson parsed = content.is_string() ? ojson::parse(content.get<std::string>(), nullptr, false) : content;
      r["response"] = parsed.is_discarded() ? content : std::move(parsed);
      a["tool_responses"].push_back(std::move(r));
      ++k;
      continue;
    }
    out.push_back(m);
    open = m.is_object() && m.value("role", "") == "assistant" && m.contains("tool_calls") && m["tool_calls"].is_array() &&
           !m["tool_calls"].empty() && !m.contains("tool_responses");
    owner = out.size() - 1;
    k = 0;
  }
  return out;
}

}  // namespace

Result<ChatTemplate> ChatTemplate::FromSource(std::string_view source, std::string name) {
  Result<jinja::Template> t = jinja::Template::Parse(source);
  if (!t.ok()) return Errorf("chat template '{}': {}", name, t.status().message());
  ChatTemplate c;
  c.name_ = std::move(name);
  c.tmpl_ = std::move(*t);
  c.thinking_by_default_ = source.find("Deliberation: ") == std::string_view::npos;

  // A template that renders a system message without its text (it reads
  // only user and assistant turns) gets the message in the first user turn,
  // as one that refuses it does; the reference engine probes the same way.
  // The probes below stop at the first that runs out of steps: each later
  // one would run to the budget as well, and a hostile template would cost
  // its load a dozen budgets. What they would have read stays unknown.
  bool spent = false;
  const TemplateRender render = [&c, &spent](const nlohmann::ordered_json& m, bool agp, const nlohmann::ordered_json& x) {
    if (spent) return Result<std::string>(Status::Error("not probed: an earlier probe ran out of steps"));
    Result<std::string> r = c.RenderText(m, agp, x);
    spent = jinja::IsStepLimit(r.status());
    return r;
  };
  const nlohmann::ordered_json probe = {{{"role", "system"}, {"content", "PCSYSPROBE"}}, {{"role", "user"}, {"content", "U"}}};
  if (Result<std::string> r = render(probe, true, nlohmann::ordered_json::object()); r.ok())
    c.drops_system_ = r->find("PCSYSPROBE") == std::string::npos;
  c.folds_tool_results_ = source.find("tool_responses") != std::string_view::npos && !c.HandlesToolRole(render);
  c.reasoning_ = DeriveReasoningStyle(source, render);
  return c;
}

// Whether the template treats a `tool` message otherwise than a message of
// a role it does not know (which it renders generically or refuses).
// (Arguments as an object and as a string: templates take one or the other.)
bool ChatTemplate::HandlesToolRole(const TemplateRender& render) const {
  for (const bool args_object : {true, false}) {
    auto probe = [&](const char* role) {
      const nlohmann::ordered_json args = args_object ? nlohmann::ordered_json::object() : nlohmann::ordered_json("{}");
      const nlohmann::ordered_json msgs = {
          {{"role", "user"}, {"content", "U"}},
          {{"role", "assistant"},
           {"content", ""},
           {"tool_calls", {{{"id", "call00001"}, {"type", "function"}, {"function", {{"name", "f"}, {"arguments", args}}}}}}},
          {{"role", role}, {"tool_call_id", "call00001"}, {"content", "PCTOOLRESULT"}}};
      return render(msgs, false, nlohmann::ordered_json::object());
    };
    Result<std::string> tool = probe("tool"), other = probe("pcotherrole");
    if (!tool.ok() && !other.ok()) continue;
    if (tool.ok() != other.ok()) return true;
    std::string as_tool = *other;
    for (size_t at; (at = as_tool.find("pcotherrole")) != std::string::npos;) as_tool.replace(at, 11, "tool");
    return as_tool != *tool;
  }
  return false;
}

Result<ChatTemplate> ChatTemplate::Builtin(std::string_view name) {
  for (const auto& [n, src] : kBuiltins) {
    if (name == n) return FromSource(src, n);
  }
  return Errorf("unknown chat template '{}' (built-in: chatml, llama2, llama3, mistral, zephyr)", name);
}

std::vector<std::string> ChatTemplate::BuiltinNames() {
  std::vector<std::string> v;
  for (const auto& [n, src] : kBuiltins) v.emplace_back(n);
  return v;
}

Result<std::string> ChatTemplate::RenderText(const nlohmann::ordered_json& given, bool add_generation_prompt,
                                             const nlohmann::ordered_json& extra) const {
  const nlohmann::ordered_json folded = folds_tool_results_ ? FoldToolResults(given) : nlohmann::ordered_json();
  const nlohmann::ordered_json& messages = folds_tool_results_ ? folded : given;
  jinja::Value ctx = jinja::Value::MakeObject();
  std::tm now{};
  if (date_) {
    now = *date_;
  } else {
    const std::time_t t = std::time(nullptr);
    localtime_r(&t, &now);
  }
  char date[64], datetime[64];
  std::strftime(date, sizeof date, "%d %b %Y", &now);
  std::strftime(datetime, sizeof datetime, "%b %d %Y", &now);
  // Defaults as the reference engine sets them (templates read them when
  // present): thinking on except for Apertus, whose template leaves it off
  // when undefined and whose renders show it off; today's date for templates
  // that print one (Llama 3.x reads date_string, FireFunction v2 datetime).
  ctx.object().Set("enable_thinking", jinja::Value(thinking_by_default_));
  ctx.object().Set("date_string", jinja::Value(std::string(date)));
  ctx.object().Set("datetime", jinja::Value(std::string(datetime)));
  if (extra.is_object()) {
    for (const auto& [k, v] : extra.items()) ctx.object().Set(k, jinja::Value::FromJson(v));
  }
  ctx.object().Set("messages", jinja::Value::FromJson(messages));
  ctx.object().Set("add_generation_prompt", jinja::Value(add_generation_prompt));
  ctx.object().Set("bos_token", jinja::Value(bos_));
  ctx.object().Set("eos_token", jinja::Value(eos_));
  jinja::RenderOptions opt;
  opt.now = date_;
  Result<std::string> text = drops_system_ ? Status::Error("drops the system message") : tmpl_.Render(ctx, opt);
  if (jinja::IsStepLimit(text.status())) return text;  // a retry would run out of steps as well
  // A template that refuses a system message (Gemma's "System role not
  // supported") or drops it gets it as the first lines of the first user
  // message.
  if (!text.ok() && messages.size() >= 2 && messages[0].value("role", "") == "system" &&
      messages[1].value("role", "") == "user" && messages[0]["content"].is_string() && messages[1]["content"].is_string()) {
    nlohmann::ordered_json merged = nlohmann::ordered_json::array();
    merged.push_back(messages[1]);
    merged[0]["content"] = messages[0]["content"].get<std::string>() + "\n" + messages[1]["content"].get<std::string>();
    for (size_t i = 2; i < messages.size(); ++i) merged.push_back(messages[i]);
    ctx.object().Set("messages", jinja::Value::FromJson(merged));
    if (Result<std::string> retry = tmpl_.Render(ctx, opt); retry.ok()) return retry;
  }
  if (!text.ok() && drops_system_) return tmpl_.Render(ctx, opt);
  return text;
}

// The last assistant message is continued, not closed. The render of the
// conversation without it (no generation prompt) is kept as it is, and what
// the full render adds after it is appended, cut right after that message's
// content. "What it adds" is the full render past their common prefix (moved
// back to the start of any turn markers it splits, as `<|START_OF_TURN_TOKEN|>
// <|SYSTEM_TOKEN|>` against `...<|CHATBOT_TOKEN|>`), less any text the shorter
// render already ends with (templates that place the system text in the last
// user turn render that turn in both). A template that does not render the
// message at all gets its generation prompt and the content. The result ends
// with the content.
Result<std::string> ChatTemplate::ContinueFinal(const nlohmann::ordered_json& msgs, const nlohmann::ordered_json& extra) const {
  nlohmann::ordered_json head = msgs;
  head.erase(head.end() - 1);
  const std::string content = msgs.back()["content"].get<std::string>();
  PC_ASSIGN_OR_RETURN(std::string prefix, RenderText(head, false, extra));
  PC_ASSIGN_OR_RETURN(std::string full, RenderText(msgs, false, extra));
  size_t k = 0;
  while (k < prefix.size() && k < full.size() && prefix[k] == full[k]) ++k;
  k = MarkerStart(full, k);
  std::string_view added = std::string_view(full).substr(k);
  const size_t at = content.empty() ? std::string_view::npos : added.rfind(content);
  if (at == std::string_view::npos) {
    PC_ASSIGN_OR_RETURN(std::string text, RenderText(head, true, extra));
    return text + content;
  }
  added = added.substr(0, at + content.size());
  const std::string_view rest = std::string_view(prefix).substr(k);
  size_t overlap = std::min(rest.size(), at);
  while (overlap > 0 && rest.substr(rest.size() - overlap) != added.substr(0, overlap)) --overlap;
  return prefix + std::string(added.substr(overlap));
}

Result<ChatPrompt> ChatTemplate::Render(const nlohmann::ordered_json& messages, bool add_generation_prompt,
                                        const nlohmann::ordered_json& extra) const {
  if (!messages.is_array()) return Status::Error("'messages' must be an array");
  nlohmann::ordered_json msgs = messages;
  // A template that reads reasoning from `thinking` (gpt-oss) gets the
  // clients' `reasoning_content` there.
  if (reasoning_.via_thinking_field) {
    for (nlohmann::ordered_json& m : msgs) {
      if (m.is_object() && m.contains("reasoning_content") && m["reasoning_content"].is_string() && !m.contains("thinking"))
        m["thinking"] = m["reasoning_content"];
    }
  }
  if (tok_ != nullptr) {
    for (nlohmann::ordered_json& m : msgs) {
      if (!m.is_object() || (m.contains("role") && m["role"] == "assistant")) continue;
      if (m.contains("content") && m["content"].is_string()) {
        m["content"] = BreakSpecials(m["content"].get<std::string>(), *tok_);
      }
    }
  }
  std::string text;
  const bool continue_final = !add_generation_prompt && !msgs.empty() && msgs.back().is_object() &&
                              msgs.back().value("role", "") == "assistant" && msgs.back().contains("content") &&
                              msgs.back()["content"].is_string();
  if (continue_final) {
    const std::string content = msgs.back()["content"].get<std::string>();
    const bool close_reasoning = !reasoning_.open.empty() && !BringsOwnReasoning(msgs.back(), reasoning_);
    if (close_reasoning && reasoning_.rendered) {
      nlohmann::ordered_json probe = msgs;
      probe.back()[reasoning_.via_thinking_field ? "thinking" : "reasoning_content"] = std::string(kReasoningProbe);
      if (Result<std::string> p = ContinueFinal(probe, extra); p.ok()) text = EraseReasoningProbe(std::move(*p), reasoning_);
    }
    if (text.empty()) {
      PC_ASSIGN_OR_RETURN(text, ContinueFinal(msgs, extra));
      if (close_reasoning && text.size() >= content.size()) {
        text.resize(text.size() - content.size());
        text = CloseReasoningBlock(std::move(text), reasoning_) + content;
      }
    }
  } else {
    PC_ASSIGN_OR_RETURN(text, RenderText(msgs, add_generation_prompt, extra));
  }
  if (!bos_.empty() && text.rfind(bos_, 0) == 0) text.erase(0, bos_.size());
  ChatPrompt p;
  p.text.reserve(text.size());
  for (size_t pos = 0;;) {
    const size_t hit = text.find(kBreak, pos);
    p.text.append(text, pos, hit == std::string::npos ? std::string::npos : hit - pos);
    if (hit == std::string::npos) break;
    p.breaks.push_back(p.text.size());
    pos = hit + sizeof(kBreak) - 1;
  }
  return p;
}

Result<ChatTemplate> ChatTemplateForModel(const GgufFile& gguf, const Tokenizer& tok) {
  Result<ChatTemplate> t = Status::Error("");
  if (Result<std::string> src = gguf.GetString("tokenizer.chat_template"); src.ok() && !src->empty()) {
    t = ChatTemplate::FromSource(*src, "the model's");
  } else {
    t = ChatTemplate::Builtin("chatml");
  }
  if (!t.ok()) return t.status();
  const Vocab& v = tok.vocab();
  if (v.bos >= 0 && v.bos < v.size()) t->set_bos_token(v.text[v.bos]);
  if (v.eos >= 0 && v.eos < v.size()) t->set_eos_token(v.text[v.eos]);
  t->set_tokenizer(&tok);
  return t;
}

}  // namespace pc
