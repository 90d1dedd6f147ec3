#include "server/openai_api.h"

#include <fmt/format.h>

#include <cmath>
#include <random>
#include <tuple>

#include "server/json_body.h"
#include "structured/schema_cache.h"
#include "structured/sequence.h"

namespace pc {

using nlohmann::json;

json ApiError::ToJson() const {
  return {{"error", {{"message", message}, {"type", type}, {"param", param.empty() ? json(nullptr) : json(param)},
                     {"code", status == 429 ? json("rate_limit_exceeded") : json(nullptr)}}}};
}

std::string ApiFinishReason(FinishReason r) { return r == FinishReason::kLength ? "length" : "stop"; }

namespace {

// Reads typed fields from a request object, keeping the first error.
class Fields {
 public:
  Fields(const json& obj, ApiError* err) : obj_(obj), err_(err) {}
  // The body's text (it must outlive this), for ordered().
  void SetOrdered(std::string_view text) { text_ = text; }
  // The body with its objects' keys in the order written (what templates
  // see), read once on first use (chat requests only); without the text,
  // the keys come sorted.
  const nlohmann::ordered_json& ordered() const {
    if (!ordered_) {
      nlohmann::ordered_json o(nlohmann::ordered_json::value_t::discarded);
      if (!text_.empty()) o = nlohmann::ordered_json::parse(text_, nullptr, false);
      ordered_ = !o.is_discarded() && o.is_object() ? std::move(o) : nlohmann::ordered_json(obj_);
    }
    return *ordered_;
  }
  bool ok() const { return ok_; }
  bool Has(const char* k) const { return obj_.contains(k) && !obj_[k].is_null(); }
  const json& operator[](const char* k) const { return obj_[k]; }
  const json& body() const { return obj_; }

  void Fail(const char* k, std::string msg) {
    if (!ok_) return;
    ok_ = false;
    err_->message = std::move(msg);
    err_->param = k;
  }
  void Bool(const char* k, bool* out) {
    if (!Has(k)) return;
    if (!obj_[k].is_boolean()) return Fail(k, fmt::format("'{}' must be a boolean", k));
    *out = obj_[k].get<bool>();
  }
  void Int(const char* k, int64_t lo, int64_t hi, int64_t* out) {
    if (!Has(k)) return;
    const json& v = obj_[k];
    const bool integral = v.is_number_integer() || (v.is_number_float() && std::isfinite(v.get<double>()) &&
                                                    v.get<double>() == std::floor(v.get<double>()));
    if (!integral) return Fail(k, fmt::format("'{}' must be an integer", k));
    const double d = v.get<double>();
    if (d < static_cast<double>(lo) || d > static_cast<double>(hi)) {
      return Fail(k, fmt::format("'{}' must be between {} and {}", k, lo, hi));
    }
    *out = v.is_number_unsigned() ? static_cast<int64_t>(v.get<uint64_t>()) : v.is_number_integer() ? v.get<int64_t>()
                                                                                                       : static_cast<int64_t>(d);
  }
  void Num(const char* k, double lo, double hi, double* out) {
    if (!Has(k)) return;
    const json& v = obj_[k];
    if (!v.is_number() || !std::isfinite(v.get<double>())) return Fail(k, fmt::format("'{}' must be a number", k));
    const double d = v.get<double>();
    if (d < lo || d > hi) return Fail(k, fmt::format("'{}' must be between {} and {}", k, lo, hi));
    *out = d;
  }
  void Str(const char* k, std::string* out) {
    if (!Has(k)) return;
    if (!obj_[k].is_string()) return Fail(k, fmt::format("'{}' must be a string", k));
    *out = obj_[k].get<std::string>();
  }

 private:
  const json& obj_;
  ApiError* err_;
  std::string_view text_;
  mutable std::optional<nlohmann::ordered_json> ordered_;
  bool ok_ = true;
};

constexpr size_t kMaxStops = 16;
constexpr size_t kMaxStopBytes = 1024;

// Refuses a prompt text that cannot fit the context whatever it tokenizes
// to, before paying for tokenization (a 15 MB prompt took 12 s).
bool PromptTextFits(Fields& f, const char* field, const std::string& text, const ParseContext& ctx) {
  const size_t limit = ctx.n_ctx * ctx.tok->max_token_bytes();
  if (text.size() <= limit) return true;
  f.Fail(field, fmt::format("the prompt is {} bytes: more than this model's context of {} tokens can hold", text.size(),
                            ctx.n_ctx));
  return false;
}

void ParseStop(Fields& f, std::vector<std::string>* stops) {
  if (!f.Has("stop")) return;
  const json& s = f["stop"];
  auto add = [&](const json& e) {
    if (!e.is_string()) return f.Fail("stop", "'stop' must contain only strings");
    if (e.get_ref<const std::string&>().size() > kMaxStopBytes) {
      return f.Fail("stop", fmt::format("a stop string may have at most {} bytes", kMaxStopBytes));
    }
    stops->push_back(e.get<std::string>());
  };
  if (s.is_string()) return add(s);
  if (!s.is_array() || s.size() > kMaxStops) return f.Fail("stop", fmt::format("'stop' must be a string or an array of up to {} strings", kMaxStops));
  for (const json& e : s) {
    add(e);
    if (!f.ok()) return;
  }
}

void ParseTokenArray(Fields& f, const json& a, const ParseContext& ctx, std::vector<int32_t>* out) {
  const Tokenizer& tok = *ctx.tok;
  if (a.size() > ctx.n_ctx) {
    return f.Fail("prompt", fmt::format("the prompt has {} tokens; this model's maximum context length is {} tokens",
                                        a.size(), ctx.n_ctx));
  }
  for (const json& e : a) {
    if (!e.is_number_integer()) return f.Fail("prompt", "a token-id prompt must contain only integers");
    const int64_t id = e.get<int64_t>();
    if (id < 0 || id >= tok.n_vocab()) return f.Fail("prompt", fmt::format("token id {} is outside the vocabulary (0..{})", id, tok.n_vocab() - 1));
    out->push_back(static_cast<int32_t>(id));
  }
}

// prompt: a string, an array of token ids, or a one-element array of either.
void ParsePrompt(Fields& f, const ParseContext& ctx, ApiRequest* r, std::string* prompt_text) {
  const Tokenizer& tok = *ctx.tok;
  if (!f.Has("prompt")) return f.Fail("prompt", "'prompt' is required");
  const json* pp = &f["prompt"];
  if (pp->is_array() && pp->size() == 1 && ((*pp)[0].is_string() || (*pp)[0].is_array())) pp = &(*pp)[0];
  const json& p = *pp;
  if (p.is_string()) {
    *prompt_text = p.get<std::string>();
    if (!PromptTextFits(f, "prompt", *prompt_text, ctx)) return;
    r->engine.prompt = tok.Encode(*prompt_text);
  } else if (p.is_array() && !p.empty() && !p[0].is_array() && !p[0].is_string()) {
    ParseTokenArray(f, p, ctx, &r->engine.prompt);  // its text only if echoed (the end of ParseApiRequest)
  } else if (p.is_array() && p.size() > 1) {
    return f.Fail("prompt", "only one prompt per request is supported");
  } else {
    return f.Fail("prompt", "'prompt' must be a string or an array of token ids");
  }
  if (f.ok() && r->engine.prompt.empty()) f.Fail("prompt", "the prompt is empty");
}

std::string ContentText(Fields& f, const json& c) {
  if (c.is_string()) return c.get<std::string>();
  std::string text;
  if (!c.is_array()) {
    f.Fail("messages", "message content must be a string or an array of text parts");
    return text;
  }
  for (const json& part : c) {
    if (!part.is_object() || !part.contains("type") || part["type"] != "text" || !part.contains("text") ||
        !part["text"].is_string()) {
      f.Fail("messages", "only text content parts ({\"type\": \"text\", \"text\": ...}) are supported");
      return text;
    }
    text += part["text"].get<std::string>();
  }
  return text;
}

// messages, add_generation_prompt, continue_final_message and
// chat_template_kwargs: the prompt text as the template renders it and its
// tokens. A final assistant message is continued (its turn left open) unless
// add_generation_prompt is true, as llama.cpp's server does; vLLM's
// continue_final_message asks for the same explicitly.
void RenderChat(Fields& f, const ParseContext& ctx, ChatPromptTokens* out) {
  if (!f.Has("messages") || !f["messages"].is_array() || f["messages"].empty()) {
    return f.Fail("messages", "'messages' must be a non-empty array");
  }
  // The messages as the template sees them: every field the client sent,
  // content parts joined into one string.
  nlohmann::ordered_json msgs = nlohmann::ordered_json::array();
  const nlohmann::ordered_json& ordered_msgs = f.ordered()["messages"];
  for (size_t i = 0; i < f["messages"].size(); ++i) {
    const json& m = f["messages"][i];
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string()) return f.Fail("messages", "each message needs a string 'role'");
    const std::string role = m["role"].get<std::string>();
    if (role != "system" && role != "developer" && role != "user" && role != "assistant" && role != "tool") {
      return f.Fail("messages", fmt::format("unsupported message role '{}'", role));
    }
    nlohmann::ordered_json copy = ordered_msgs.is_array() && i < ordered_msgs.size() ? ordered_msgs[i] : nlohmann::ordered_json(m);
    if (!m.contains("content") || m["content"].is_null()) {
      if (role != "assistant") return f.Fail("messages", "each message needs 'content'");
      copy["content"] = "";
    } else {
      copy["content"] = ContentText(f, m["content"]);
      if (!f.ok()) return;
    }
    msgs.push_back(std::move(copy));
  }
  const bool last_is_assistant = msgs.back()["role"] == "assistant";
  bool add_generation_prompt = !last_is_assistant, continue_final = false;
  f.Bool("add_generation_prompt", &add_generation_prompt);
  f.Bool("continue_final_message", &continue_final);
  if (continue_final && (add_generation_prompt || !last_is_assistant)) {
    return f.Fail("continue_final_message",
                  "'continue_final_message' needs a final assistant message and 'add_generation_prompt': false");
  }
  nlohmann::ordered_json kwargs = nlohmann::ordered_json::object();
  if (f.Has("chat_template_kwargs")) {
    if (!f["chat_template_kwargs"].is_object()) return f.Fail("chat_template_kwargs", "'chat_template_kwargs' must be an object");
    kwargs = f.ordered()["chat_template_kwargs"];
  }
  // Tools go to the template (also with tool_choice "none": the prompt, and
  // so its cached prefix, stays the same whatever the choice).
  std::string tool_param, tool_error;
  out->tools = ParseToolFields(f.body(), &tool_param, &tool_error);
  if (!tool_error.empty()) return f.Fail(tool_param == "tools" ? "tools" : tool_param == "tool_choice" ? "tool_choice" : "parallel_tool_calls", tool_error);
  if (out->tools) kwargs["tools"] = f.ordered()["tools"];  // as written (checked above)
  NormalizeToolCalls(&msgs, ctx.tool_syntax == nullptr || ctx.tool_syntax->args_as_object());
  if (!f.ok()) return;
  if (ctx.chat_template == nullptr) return f.Fail("messages", "this server has no chat template");
  Result<ChatPrompt> prompt = ctx.chat_template->Render(msgs, add_generation_prompt, kwargs);
  if (!prompt.ok()) return f.Fail("messages", "the chat template failed: " + prompt.status().message());
  if (!PromptTextFits(f, "messages", prompt->text, ctx)) return;
  // The template's own markers are special tokens; text from the messages
  // never is (chat_template.h).
  EncodeOptions eo;
  eo.parse_special = true;
  eo.no_special_across = prompt->breaks;
  out->ids = ctx.tok->Encode(prompt->text, eo);
  out->text = std::move(prompt->text);
  if (out->ids.empty()) f.Fail("messages", "the rendered prompt is empty");
}

// Tools in play: the reply is parsed for calls; "required" or a named
// function forces a call through the grammar, "auto" arms a grammar that
// wakes at the call marker (when every tool's parameters can be enforced).
void ParseToolChoice(Fields& f, const ParseContext& ctx, const ToolRequest& tools, bool thinking_off, ApiRequest* r) {
  const bool forced = tools.choice == ToolRequest::Choice::kRequired || tools.choice == ToolRequest::Choice::kNamed;
  const ToolSyntax* syn = ctx.tool_syntax;
  if (syn == nullptr || !syn->supported()) {
    if (forced) {
      return f.Fail("tool_choice", "this model's chat template has no tool-call syntax to force a call with" +
                                       (syn ? ": " + syn->reason() : std::string()));
    }
    return;  // auto: replies stay content
  }
  r->tool_syntax = syn;
  r->tools = tools.tools;
  // Call ids are text the model writes where its template has them
  // (Mistral's), so a request with a seed gets ids from it: the same
  // request, the same reply. Otherwise they are random.
  const json& body = f.body();
  const bool seeded = body.contains("seed") && body["seed"].is_number_integer();
  r->tool_call_ids = MakeToolCallIds(seeded ? body["seed"].get<uint64_t>() * 0x9E3779B97F4A7C15ull + 0x1D
                                            : std::random_device{}() * 0x100000001ull + std::random_device{}(), 16);
  r->engine.control_text = true;
  if (r->engine.grammar) {  // response_format holds the grammar
    if (forced) f.Fail("tool_choice", "'tool_choice' \"required\" or a named function cannot be combined with a JSON response_format");
    return;
  }
  ToolReasoning reasoning;
  if (!thinking_off) reasoning = {r->reasoning_open, r->reasoning_close, r->reasoning_starts_inside};
  auto g = syn->Grammar(tools.tools, tools.named, tools.parallel, r->tool_call_ids, reasoning);
  if (!g.ok()) {
    if (forced) f.Fail("tool_choice", g.status().message());
    return;
  }
  r->engine.grammar = *g;
  if (!forced) r->engine.grammar_trigger = syn->trigger();
}

bool HasControlToken(const Tokenizer& tok, const std::string& text) {
  EncodeOptions eo;
  eo.add_special = false;
  eo.parse_special = true;
  for (int32_t id : tok.Encode(text, eo))
    if (tok.vocab().IsControl(id)) return true;
  return false;
}

void ParseMessages(Fields& f, const ParseContext& ctx, ApiRequest* r) {
  ChatPromptTokens p;
  RenderChat(f, ctx, &p);
  // Reasoning apart (reasoning_content) unless the client asks for the raw
  // text: llama.cpp's reasoning_format "none", or vLLM's
  // include_reasoning: false... which drops it; both are honoured as raw.
  std::string format = "auto";
  f.Str("reasoning_format", &format);
  if (format != "auto" && format != "none" && format != "deepseek" && format != "parsed")
    return f.Fail("reasoning_format", "'reasoning_format' must be \"auto\", \"deepseek\", \"parsed\" or \"none\"");
  bool include = true;
  f.Bool("include_reasoning", &include);
  if (!f.ok() || ctx.chat_template == nullptr) return;
  const ReasoningStyle& style = ctx.chat_template->reasoning();
  bool closed_in_prompt = false;
  // Markers that are control tokens (gpt-oss's channels) go out as their
  // text, for the split and in the raw reply alike.
  if (HasControlToken(*ctx.tok, style.open + style.split_close + style.trail + style.direct)) r->engine.control_text = true;
  if (format != "none" && include) {
    r->reasoning_open = style.open;
    r->reasoning_close = style.split_close;
    r->reasoning_trail = style.trail;
    r->reasoning_direct = style.direct;
  }
  if (!r->reasoning_open.empty()) {  // split, and the template has a block
    std::string_view t = p.text;
    while (!t.empty() && (t.back() == '\n' || t.back() == ' ' || t.back() == '\r' || t.back() == '\t')) t.remove_suffix(1);
    const size_t open = t.rfind(style.open);
    r->reasoning_starts_inside = open != std::string_view::npos && t.find(style.close, open) == std::string_view::npos &&
                                 t.size() - open - style.open.size() == 0;
    // A prompt that ends with a closed (empty) block has thinking off.
    closed_in_prompt = t.ends_with(style.close);
  }
  r->engine.prompt = std::move(p.ids);
  if (p.tools && p.tools->choice != ToolRequest::Choice::kNone) ParseToolChoice(f, ctx, *p.tools, closed_in_prompt, r);
}

// Fields we do not implement: refused by name rather than silently ignored.
void RefuseUnsupported(Fields& f) {
  for (const char* k : {"functions", "function_call", "guided_regex",
                        "guided_choice", "guided_grammar", "guided_decoding_backend", "logits_processors"}) {
    if (f.Has(k)) {
      if (std::string(k) == "functions" && f[k].is_array() && f[k].empty()) continue;
      return f.Fail(k, fmt::format("'{}' is not supported by this server", k));
    }
  }
}

// Structured output, under each server's spelling: OpenAI's response_format
// (json_object, json_schema), llama.cpp's json_schema, vLLM's guided_json and
// structured_outputs.json. One schema per request; one we cannot enforce is
// a 400 naming its keyword, never unconstrained output.
void ParseStructured(Fields& f, ApiRequest* r) {
  const json any_object = {{"type", "object"}};
  const json* schema = nullptr;
  const char* param = nullptr;
  auto take = [&](const char* k, const json* s) {
    if (schema) return f.Fail(k, fmt::format("'{}' beside '{}': give one schema", k, param));
    schema = s;
    param = k;
  };
  if (f.Has("response_format")) {
    const json& rf = f["response_format"];
    const std::string type = rf.is_object() && rf.contains("type") && rf["type"].is_string() ? rf["type"].get<std::string>() : "";
    if (type == "json_object") {
      take("response_format", &any_object);
    } else if (type == "json_schema") {
      if (!rf.contains("json_schema")) return f.Fail("response_format", "'response_format.json_schema' is missing");
      const json& js = rf["json_schema"];
      if (!js.is_object() || !js.contains("schema") || !(js["schema"].is_object() || js["schema"].is_boolean()))
        return f.Fail("response_format", "'response_format.json_schema.schema' must be a JSON Schema object");
      if (js.contains("strict") && !js["strict"].is_boolean() && !js["strict"].is_null())
        return f.Fail("response_format", "'response_format.json_schema.strict' must be a boolean");
      take("response_format", &js["schema"]);
    } else if (type != "text") {
      return f.Fail("response_format", "'response_format.type' must be \"text\", \"json_object\" or \"json_schema\"");
    }
  }
  for (const char* k : {"json_schema", "guided_json"}) {
    if (!f.Has(k)) continue;
    if (!f[k].is_object() && !f[k].is_boolean() && !f[k].is_string()) return f.Fail(k, fmt::format("'{}' must be a JSON Schema", k));
    take(k, &f[k]);
  }
  if (f.Has("structured_outputs")) {
    const json& so = f["structured_outputs"];
    if (!so.is_object()) return f.Fail("structured_outputs", "'structured_outputs' must be an object");
    for (auto& [k, v] : so.items()) {
      if (k == "json" && !v.is_null()) take("structured_outputs", &v);
      else if (!v.is_null() && k != "disable_any_whitespace" && k != "disable_additional_properties")
        return f.Fail("structured_outputs", fmt::format("'structured_outputs.{}' is not supported by this server", k));
    }
  }
  // llama.cpp's GBNF grammar ("" is what some clients send for none).
  if (f.Has("grammar") && !(f["grammar"].is_string() && f["grammar"].get<std::string>().empty())) {
    if (!f["grammar"].is_string()) return f.Fail("grammar", "'grammar' must be GBNF text");
    if (schema) return f.Fail("grammar", fmt::format("give one of 'grammar' and '{}'", param));
    auto g = structured::CompileGbnf(f["grammar"].get<std::string>());
    if (!g.ok()) return f.Fail("grammar", "the grammar cannot be enforced: " + g.status().message());
    auto seq = std::make_shared<structured::SeqGrammar>();
    seq->Gbnf(structured::SeqGrammar::kStart, structured::SeqGrammar::kAccept, *g);
    r->engine.grammar = std::move(seq);
    return;
  }
  if (!f.ok() || !schema) return;
  nlohmann::ordered_json ordered;
  if (schema->is_string()) {  // vLLM accepts the schema as JSON text
    ordered = nlohmann::ordered_json::parse(schema->get<std::string>(), nullptr, false);
    if (ordered.is_discarded()) return f.Fail(param, fmt::format("'{}' is not valid JSON", param));
  } else {
    ordered = nlohmann::ordered_json::parse(schema->dump());
  }
  auto compiled = structured::SchemaCache::Global().Get(ordered);
  if (!compiled.ok()) return f.Fail(param, fmt::format("the JSON schema in '{}' cannot be enforced: {}", param, compiled.status().message()));
  r->engine.grammar = structured::SeqGrammar::ForSchema(*compiled, 2);
}

// Sampler settings of llama.cpp and vLLM we do not implement: accepted at
// their neutral value (what a front end sends by default), else refused by
// name; none is ignored.
void RefuseNonNeutral(Fields& f) {
  static const std::pair<const char*, json> kNeutral[] = {
      {"mirostat", 0},           {"tfs_z", 1.0},          {"dry_multiplier", 0.0},     {"xtc_probability", 0.0},
      {"dynatemp_range", 0.0},   {"top_n_sigma", -1.0},   {"use_beam_search", false},  {"best_of", 1},
      {"length_penalty", 1.0},   {"bad_words", json::array()}, {"allowed_token_ids", nullptr},
      {"prompt_logprobs", nullptr}, {"truncate_prompt_tokens", nullptr}, {"n_probs", 0}, {"penalize_nl", false},
      {"skip_special_tokens", true}, {"include_stop_str_in_output", false}, {"min_keep", 0}, {"top_a", 0.0},
  };
  for (const auto& [k, neutral] : kNeutral) {
    if (!f.Has(k)) continue;
    const json& v = f[k];
    const bool same = v == neutral || (v.is_number() && neutral.is_number() && v.get<double>() == neutral.get<double>()) ||
                      (v.is_array() && v.empty() && neutral.is_array());
    if (!same) return f.Fail(k, fmt::format("'{}' is not supported by this server (only its neutral value {})", k, neutral.dump()));
  }
}

// logit_bias as OpenAI ({"id": bias}, -100..100) or llama.cpp ([[id, bias
// or false]]) spell it.
void ParseLogitBias(Fields& f, const ParseContext& ctx, LogitAdjust* adj) {
  if (!f.Has("logit_bias")) return;
  const json& lb = f["logit_bias"];
  const int64_t n = ctx.tok ? ctx.tok->n_vocab() : 0;
  auto add = [&](const std::string& key, const json& id_j, const json& v) {
    int64_t id = -1;
    if (id_j.is_number_integer()) id = id_j.get<int64_t>();
    else if (id_j.is_string()) { try { size_t used = 0; id = std::stoll(key, &used); if (used != key.size()) id = -1; } catch (...) { id = -1; } }
    if (id < 0 || id >= n) return f.Fail("logit_bias", fmt::format("'logit_bias': token id '{}' is not in the vocabulary", key));
    float bias;
    if (v.is_boolean() && !v.get<bool>()) bias = -INFINITY;  // llama.cpp: never this token
    else if (v.is_number() && std::isfinite(v.get<double>()) && v.get<double>() >= -100 && v.get<double>() <= 100) bias = v.get<float>();
    else return f.Fail("logit_bias", "'logit_bias' values must be numbers from -100 to 100 (or false)");
    adj->bias.push_back({static_cast<int32_t>(id), bias});
  };
  if (lb.is_object()) {
    for (auto& [k, v] : lb.items()) { add(k, json(k), v); if (!f.ok()) return; }
  } else if (lb.is_array()) {
    for (const json& e : lb) {
      if (!e.is_array() || e.size() != 2) return f.Fail("logit_bias", "'logit_bias' as a list holds [token id, bias] pairs");
      add(e[0].dump(), e[0], e[1]);
      if (!f.ok()) return;
    }
  } else {
    f.Fail("logit_bias", "'logit_bias' must be an object of token id to bias");
  }
}

void ParseSampling(Fields& f, ApiRequest* r, const ParseContext& ctx) {
  double temperature = 1.0, top_p = 1.0, min_p = 0.0, typical_p = 1.0;
  int64_t top_k = 0, seed = static_cast<int64_t>(ctx.default_seed & 0x7fffffffffffffffull), n = 1;
  f.Num("temperature", 0, 2, &temperature);
  f.Num("top_p", 0, 1, &top_p);
  f.Num("min_p", 0, 1, &min_p);
  f.Num("typical_p", 0, 1, &typical_p);
  f.Int("top_k", -1, 1 << 30, &top_k);
  f.Int("seed", INT64_MIN, INT64_MAX, &seed);
  f.Int("n", 1, 16, &n);
  r->n = static_cast<int>(n);
  if (f.Has("top_p") && top_p <= 0) f.Fail("top_p", "'top_p' must be greater than 0");
  if (f.Has("typical_p") && typical_p <= 0) f.Fail("typical_p", "'typical_p' must be greater than 0");
  LogitAdjust& adj = r->engine.adjust;
  double presence = 0, frequency = 0, rep = 1, repeat = 1;
  int64_t last_n = 64, min_tokens = 0;
  f.Num("presence_penalty", -2, 2, &presence);
  f.Num("frequency_penalty", -2, 2, &frequency);
  // vLLM's repetition_penalty covers the whole context; llama.cpp's
  // repeat_penalty the last repeat_last_n tokens (64 by default, -1 all).
  f.Num("repetition_penalty", 0.01, 10, &rep);
  f.Num("repeat_penalty", 0.01, 10, &repeat);
  f.Int("repeat_last_n", -1, 1 << 30, &last_n);
  if (f.Has("repetition_penalty") && f.Has("repeat_penalty") && rep != repeat)
    f.Fail("repeat_penalty", "'repeat_penalty' and 'repetition_penalty' disagree; give one");
  adj.presence_penalty = static_cast<float>(presence);
  adj.frequency_penalty = static_cast<float>(frequency);
  if (f.Has("repeat_penalty")) {
    adj.repetition_penalty = static_cast<float>(repeat);
    adj.repeat_last_n = static_cast<int>(last_n);
  } else if (f.Has("repetition_penalty")) {
    adj.repetition_penalty = static_cast<float>(rep);
    adj.repeat_last_n = f.Has("repeat_last_n") ? static_cast<int>(last_n) : -1;
  }
  ParseLogitBias(f, ctx, &adj);
  f.Int("min_tokens", 0, 1 << 30, &min_tokens);
  r->engine.min_tokens = static_cast<int>(min_tokens);
  // llama.cpp's per-request draft length ("speculative.n_max"); 0: no drafts.
  int64_t n_draft = -1;
  f.Int("speculative.n_max", 0, 64, &n_draft);
  r->engine.draft_tokens = static_cast<int>(n_draft);
  if (f.Has("stop_token_ids")) {
    const json& ids = f["stop_token_ids"];
    const int64_t nv = ctx.tok ? ctx.tok->n_vocab() : 0;
    if (!ids.is_array()) return f.Fail("stop_token_ids", "'stop_token_ids' must be a list of token ids");
    for (const json& id : ids) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= nv)
        return f.Fail("stop_token_ids", fmt::format("'stop_token_ids': {} is not a token id of this model", id.dump()));
      r->engine.stop_token_ids.push_back(id.get<int32_t>());
    }
  }
  RefuseNonNeutral(f);
  r->engine.sampling.temperature = static_cast<float>(temperature);
  r->engine.sampling.top_p = static_cast<float>(top_p);
  r->engine.sampling.top_k = static_cast<int>(top_k);
  r->engine.sampling.seed = static_cast<uint64_t>(seed);
  r->engine.sampling.min_p = static_cast<float>(min_p);
  r->engine.sampling.typical_p = static_cast<float>(typical_p);
}

}  // namespace

std::optional<ChatPromptTokens> RenderChatRequest(const json& body, const ParseContext& ctx, ApiError* err,
                                                  std::string_view text) {
  if (!body.is_object()) {
    err->message = "the request body must be a JSON object";
    return std::nullopt;
  }
  Fields f(body, err);
  f.SetOrdered(text);
  ChatPromptTokens p;
  RenderChat(f, ctx, &p);
  if (!f.ok()) return std::nullopt;
  return p;
}

std::optional<ApiRequest> ParseApiRequest(ApiKind kind, const std::string& body, const ParseContext& ctx, ApiError* err) {
  std::optional<json> parsed = ParseJsonBounded(body, &err->message);
  if (!parsed) return std::nullopt;
  const json& obj = *parsed;
  if (!obj.is_object()) {
    err->message = "the request body must be a JSON object";
    return std::nullopt;
  }
  ApiRequest r;
  r.kind = kind;
  Fields f(obj, err);
  f.SetOrdered(body);
  f.Str("model", &r.model);
  std::string prompt_text;
  RefuseUnsupported(f);
  if (kind == ApiKind::kCompletion) {
    for (const char* k : {"tools", "tool_choice", "parallel_tool_calls"})
      if (f.Has(k)) f.Fail(k, fmt::format("'{}' needs /v1/chat/completions", k));
  }
  ParseStructured(f, &r);
  if (kind == ApiKind::kCompletion && f.ok()) ParsePrompt(f, ctx, &r, &prompt_text);
  else if (f.ok()) ParseMessages(f, ctx, &r);
  ParseSampling(f, &r, ctx);
  const int64_t room = static_cast<int64_t>(ctx.n_ctx) - static_cast<int64_t>(r.engine.prompt.size());
  int64_t max_tokens = kind == ApiKind::kCompletion ? 16 : std::max<int64_t>(room, 1);
  f.Int("max_tokens", 1, 1 << 30, &max_tokens);
  if (f.Has("n_predict")) {  // llama.cpp's spelling; -1: as many as fit
    int64_t np = -1;
    f.Int("n_predict", -1, 1 << 30, &np);
    if (np == 0) f.Fail("n_predict", "'n_predict' must be -1 or at least 1");
    if (np > 0) max_tokens = np;
    else max_tokens = std::max<int64_t>(room, 1);
  }
  if (kind == ApiKind::kChat) f.Int("max_completion_tokens", 1, 1 << 30, &max_tokens);
  r.engine.max_tokens = static_cast<int>(max_tokens);
  if (kind == ApiKind::kCompletion) {
    int64_t logprobs = -1;
    f.Int("logprobs", 0, 20, &logprobs);
    r.engine.want_logprobs = logprobs >= 0;
    r.engine.top_logprobs = static_cast<int>(std::max<int64_t>(logprobs, 0));
    f.Bool("echo", &r.echo);
  } else {
    int64_t top = 0;
    f.Bool("logprobs", &r.engine.want_logprobs);
    f.Int("top_logprobs", 0, 20, &top);
    if (top > 0 && !r.engine.want_logprobs) f.Fail("top_logprobs", "'top_logprobs' needs 'logprobs': true");
    r.engine.top_logprobs = static_cast<int>(top);
  }
  ParseStop(f, &r.engine.stop);
  f.Bool("ignore_eos", &r.engine.ignore_eos);
  f.Bool("return_tokens", &r.return_tokens);
  f.Bool("return_tokens_as_token_ids", &r.tokens_as_ids);
  f.Bool("stream", &r.stream);
  f.Str("cache_salt", &r.engine.salt);
  f.Bool("cache_prompt", &r.engine.use_cache);
  if (f.Has("stream_options")) {
    const json& so = f["stream_options"];
    if (!so.is_object()) f.Fail("stream_options", "'stream_options' must be an object");
    else if (so.contains("include_usage") && !so["include_usage"].is_null()) {
      if (!so["include_usage"].is_boolean()) f.Fail("stream_options", "'stream_options.include_usage' must be a boolean");
      else r.include_usage = so["include_usage"].get<bool>();
    }
  }
  if (!f.ok()) return std::nullopt;
  if (r.engine.prompt.size() + static_cast<size_t>(r.engine.max_tokens) > ctx.n_ctx) {
    err->param = "max_tokens";
    err->message = fmt::format("this model's maximum context length is {} tokens; the prompt has {} and max_tokens asks for {} more",
                               ctx.n_ctx, r.engine.prompt.size(), r.engine.max_tokens);
    return std::nullopt;
  }
  // Token ids are decoded only to echo them: a 456-token prompt's decode
  // took 0.2 ms of the request thread before the engine saw the request.
  if (r.echo) r.echo_text = prompt_text.empty() ? ctx.tok->Decode(r.engine.prompt) : prompt_text;
  return r;
}

}  // namespace pc
