// Server pieces without HTTP: stop strings, chat templates, request parsing,
// Prometheus rendering.
#include <gtest/gtest.h>

#include "engine/metrics.h"
#include "engine/stop_matcher.h"
#include "base/check.h"
#include "server/chat_template.h"
#include "server/json_body.h"
#include "server/openai_api.h"
#include "test_support.h"

namespace pc {
namespace {

std::string Feed(StopMatcher& m, const std::vector<std::string>& pieces) {
  std::string out;
  for (const std::string& p : pieces) out += m.Push(p);
  return out;
}

TEST(StopMatcher, StopsAcrossPiecesAndDropsTheStopString) {
  StopMatcher m({"END"});
  EXPECT_EQ(m.Push("hello E"), "hello ");
  EXPECT_FALSE(m.stopped());
  EXPECT_EQ(m.Push("N"), "");
  EXPECT_EQ(m.Push("D and more"), "");
  EXPECT_TRUE(m.stopped());
  EXPECT_EQ(m.Push("later"), "");
}

TEST(StopMatcher, ReleasesAFalseStart) {
  StopMatcher m({"END"});
  EXPECT_EQ(Feed(m, {"E", "N", "x"}), "ENx");
  EXPECT_FALSE(m.stopped());
  EXPECT_EQ(m.Push("EN"), "");
  EXPECT_EQ(m.Flush(), "EN");
}

TEST(StopMatcher, EarliestOfSeveralWins) {
  StopMatcher m({"world", "lo w"});
  EXPECT_EQ(m.Push("hello world"), "hel");
  EXPECT_TRUE(m.stopped());
}

TEST(StopMatcher, NoStopsPassesEverythingThrough) {
  StopMatcher m({"", ""});
  EXPECT_EQ(Feed(m, {"a", "b"}), "ab");
}

nlohmann::json Msgs(const std::vector<std::pair<std::string, std::string>>& ms) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& [role, content] : ms) a.push_back({{"role", role}, {"content", content}});
  return a;
}

std::string RenderBuiltin(const char* name, const nlohmann::json& ms, bool add_generation_prompt = true) {
  auto t = ChatTemplate::Builtin(name);
  PC_CHECK(t.ok());
  auto p = t->Render(ms, add_generation_prompt);
  PC_CHECK(p.ok());
  return p->text;
}

TEST(ChatTemplate, BuiltinsRenderEachFamily) {
  const nlohmann::json ms = Msgs({{"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello."}, {"user", "Bye"}});
  EXPECT_EQ(RenderBuiltin("chatml", ms),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello.<|im_end|>\n"
            "<|im_start|>user\nBye<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(RenderBuiltin("llama3", ms),
            "<|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi"
            "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nHello.<|eot_id|><|start_header_id|>user"
            "<|end_header_id|>\n\nBye<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
  EXPECT_EQ(RenderBuiltin("llama2", ms),
            "[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\nHi [/INST] Hello.</s><s>[INST] Bye [/INST]");
  EXPECT_EQ(RenderBuiltin("mistral", ms), "[INST] Be brief.\n\nHi [/INST]Hello.</s><s>[INST] Bye [/INST]");
  EXPECT_EQ(RenderBuiltin("zephyr", ms),
            "<|system|>\nBe brief.</s>\n<|user|>\nHi</s>\n<|assistant|>\nHello.</s>\n<|user|>\nBye</s>\n<|assistant|>\n");
  EXPECT_FALSE(ChatTemplate::Builtin("jinja").ok());
}

TEST(ChatTemplate, ALeadingBosTextIsRemovedAndErrorsAreMessages) {
  auto t = ChatTemplate::FromSource("{{ bos_token }}{% for m in messages %}{{ m.content }}{% endfor %}", "t");
  ASSERT_TRUE(t.ok());
  t->set_bos_token("<s>");
  EXPECT_EQ(t->Render(Msgs({{"user", "hi"}}), true)->text, "hi");
  auto bad = ChatTemplate::FromSource("{{ raise_exception('roles must alternate') }}", "bad");
  ASSERT_TRUE(bad.ok());
  const auto r = bad->Render(Msgs({{"user", "hi"}}), true);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "roles must alternate");
  EXPECT_FALSE(ChatTemplate::FromSource("{% if %}", "broken").ok());
}

// A final assistant message is continued: its turn is left open. Templates
// that move the system text into the last user turn render that turn twice
// over the two renders; it must appear once.
TEST(ChatTemplate, AFinalAssistantMessageIsContinued) {
  const nlohmann::json ms = Msgs({{"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hel"}});
  EXPECT_EQ(RenderBuiltin("chatml", ms, false),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHel");
  auto last_user = ChatTemplate::FromSource(
      "{% for m in messages %}{% if m.role == 'user' %}[INST]{% if loop.revindex0 <= 1 and messages[0].role == 'system' %}"
      "{{ messages[0].content }}\n\n{% endif %}{{ m.content }}[/INST]{% elif m.role == 'assistant' %}{{ m.content }}"
      "{{ eos_token }}{% endif %}{% endfor %}",
      "system-in-last-user");
  ASSERT_TRUE(last_user.ok());
  last_user->set_eos_token("</s>");
  EXPECT_EQ(last_user->Render(ms, false)->text, "[INST]Be brief.\n\nHi[/INST]Hel");
  // A template that never renders assistant turns gets its generation prompt
  // and the content; it drops the system text, which so goes into the first
  // user turn (as the reference engine does).
  auto no_assistant = ChatTemplate::FromSource(
      "{% for m in messages %}{% if m.role == 'user' %}<u>{{ m.content }}{% endif %}{% endfor %}"
      "{% if add_generation_prompt %}<a>{% endif %}",
      "no-assistant");
  ASSERT_TRUE(no_assistant.ok());
  EXPECT_EQ(no_assistant->Render(ms, false)->text, "<u>Be brief.\nHi<a>Hel");
}

// On a reasoning model a continued reply gets a closed, empty reasoning
// block before its text; a reply that brings its own reasoning, a template
// without reasoning markers and a generation prompt are left alone.
TEST(ChatTemplate, AContinuedReplyOnAReasoningModelClosesItsReasoningFirst) {
  const nlohmann::json ms = Msgs({{"user", "Hi"}, {"assistant", "Hel"}});
  const std::string turns =
      "{% for m in messages %}<|im_start|>{{ m.role }}\n{% if m.role == 'assistant' %}{% HEADER %}{% endif %}"
      "{{ m.content }}<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n<think>\n{% endif %}";
  auto make = [&](const std::string& header) {
    std::string src = turns;
    src.replace(src.find("{% HEADER %}"), 12, header);
    auto t = ChatTemplate::FromSource(src, "think");
    EXPECT_TRUE(t.ok());
    return std::move(*t);
  };
  const std::string head = "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n";
  // No block in the template's assistant turn: the fixed spelling.
  EXPECT_EQ(make("").Render(ms, false)->text, head + "<think></think>Hel");
  // A header that leaves a block open gets its close.
  EXPECT_EQ(make("<think>\n").Render(ms, false)->text, head + "<think>\n</think>Hel");
  // A template that renders reasoning_content spells the empty block itself.
  EXPECT_EQ(make("{% if m.reasoning_content %}<think>\n{{ m.reasoning_content }}\n</think>\n\n{% endif %}")
                .Render(ms, false)
                ->text,
            head + "<think>\n\n</think>\n\nHel");
  // Reasoning of its own (a field, or a closed block in the content): as sent.
  nlohmann::json own = ms;
  own[1]["reasoning_content"] = "thought";
  EXPECT_EQ(make("").Render(own, false)->text, head + "Hel");
  own = Msgs({{"user", "Hi"}, {"assistant", "<think>x</think>Hel"}});
  EXPECT_EQ(make("").Render(own, false)->text, head + "<think>x</think>Hel");
  // A generation prompt is the template's.
  EXPECT_EQ(make("").Render(Msgs({{"user", "Hi"}}), true)->text, head + "<think>\n");
  // No reasoning markers in the template: nothing added.
  EXPECT_EQ(RenderBuiltin("chatml", ms, false), head + "Hel");
}

// The block is read off each template by probe renders (rules A-D in
// server/reasoning_block.h), whatever its markers are called; a split turn
// marker: the text from the split starts at the marker.
TEST(ChatTemplate, ReasoningMarkersAreReadOffTheTemplate) {
  const nlohmann::json ms = Msgs({{"user", "Hi"}, {"assistant", "Hel"}});
  auto style = [](const std::string& src) {
    auto t = ChatTemplate::FromSource(src, "probe");
    EXPECT_TRUE(t.ok()) << src;
    return t.ok() ? t->reasoning() : ReasoningStyle{};
  };
  const std::string loop = "{% for m in messages %}<u>{{ m.content }}{% if m.role == 'assistant' %}";
  // A: a reasoning field the template renders, under any spelling.
  const std::string a = "{% for m in messages %}{% if m.role == 'user' %}<|U|>{{ m.content }}{% else %}<|A|>"
                        "{% if m.reasoning_content %} <why:v2>{{ m.reasoning_content }}</why:v2>\n{% endif %}"
                        "{{ m.content }}{% endif %}{% endfor %}{% if add_generation_prompt %}<|A|>{% endif %}";
  const ReasoningStyle sa = style(a);
  EXPECT_TRUE(sa.rendered);
  EXPECT_EQ(sa.open, "<why:v2>");
  EXPECT_EQ(sa.close, "</why:v2>");
  EXPECT_TRUE(sa.drop_space_before);  // the space between the header and the block
  auto ta = ChatTemplate::FromSource(a, "a");
  EXPECT_EQ(ta->Render(ms, false)->text, "<|U|>Hi<|A|><why:v2></why:v2>\nHel");
  // ... read through `thinking` only (gpt-oss's field).
  const ReasoningStyle st = style(
      "{% for m in messages %}<{{ m.role }}>{% if m.thinking %}<|c|>analysis<|m|>{{ m.thinking }}<|end|>{% endif %}"
      "{{ m.content }}{% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}");
  EXPECT_TRUE(st.via_thinking_field);
  EXPECT_EQ(st.close, "<|end|>");
  // B: a generation prompt that opens a tag the source closes.
  const ReasoningStyle sb = style(loop + "{{ m.content.split('</r1>')[-1] }}{% endif %}{% endfor %}"
                                         "{% if add_generation_prompt %}<a><r1>\n{% endif %}");
  EXPECT_EQ(sb.open, "<r1>");
  EXPECT_EQ(sb.empty_block, "<r1></r1>");
  // C: a tag pair named for reasoning, spelled only in the source's prose.
  const ReasoningStyle sc = style("{{ 'Think inside [THOUGHT]...[/THOUGHT] first.' }}" + loop +
                                  "{% endif %}{% endfor %}{% if add_generation_prompt %}<a>{% endif %}");
  EXPECT_EQ(sc.empty_block, "[THOUGHT][/THOUGHT]");
  // D: an empty block the thinking-off generation prompt adds.
  const ReasoningStyle sd = style(loop + "{% endif %}{% endfor %}{% if add_generation_prompt %}<a>\n"
                                         "{% if enable_thinking is false %}<|ch>idea\n<ch|>{% endif %}{% endif %}");
  EXPECT_EQ(sd.open, "<|ch>idea");
  EXPECT_EQ(sd.close, "<ch|>");
  EXPECT_EQ(sd.empty_block, "<|ch>idea\n<ch|>");
  // None: header tags are not blocks (Llama 3's, Mistral's).
  EXPECT_EQ(style(loop + "{% endif %}{% endfor %}<|start_header_id|>assistant<|end_header_id|>\n\n").open, "");
  EXPECT_EQ(style(loop + "{% endif %}{% endfor %}[INST]x[/INST]").open, "");
  EXPECT_EQ(style("<|im_start|>{{ m.content }}").open, "");
  auto marker = ChatTemplate::FromSource(
      "{% for m in messages %}{% if m.role == 'user' %}<|T|><|U|>{{ m.content }}<|E|>"
      "{% else %}<|T|><|A|>{{ m.content }}<|E|>{% endif %}{% endfor %}<|T|><|S|>tools<|E|>",
      "trailer");
  ASSERT_TRUE(marker.ok());
  EXPECT_EQ(marker->Render(Msgs({{"user", "Hi"}, {"assistant", "Hel"}}), false)->text,
            "<|T|><|U|>Hi<|E|><|T|><|S|>tools<|E|><|T|><|A|>Hel");
}

// The load-time probes stop at the first render that runs out of steps (a
// hostile template would cost its load one budget per probe otherwise).
// Here only the system probe's shape loops, so the block that the later
// probes would read stays unknown; the same template without the loop
// shows it, and requests render as usual.
TEST(ChatTemplate, ProbesStopAfterARenderRunsOutOfSteps) {
  const std::string body =
      "{% for m in messages %}<{{ m.role }}>{% if m.reasoning_content %}<why>{{ m.reasoning_content }}</why>"
      "{% endif %}{{ m.content }}{% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}";
  const std::string loop =
      "{% if messages[0].role == 'system' and messages|length == 2 %}"
      "{% for i in range(1000000) %}{% endfor %}{% endif %}";
  auto plain = ChatTemplate::FromSource(body, "plain");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->reasoning().open, "<why>");
  auto hostile = ChatTemplate::FromSource(loop + body, "hostile");
  ASSERT_TRUE(hostile.ok());
  EXPECT_EQ(hostile->reasoning().open, "");
  auto r = hostile->Render(Msgs({{"user", "Hi"}}), true);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->text, "<user>Hi<assistant>");
}

// gpt-oss's real template: the block is its analysis channel, read through
// `thinking`; replies are split at the close's first tag, and the final
// channel's header (whole, or less what the generation prompt wrote) is
// not content. Functionary's plain turns open with `all\n` (no block);
// Llama 3's with nothing.
TEST(ChatTemplate, RepliesOpenWithTheHeadersTheTemplateWrites) {
  auto style = [](const std::string& name) {
    const std::string path = test::SharedPath("templates/" + name + ".jinja");
    auto t = ChatTemplate::FromSource(test::ReadText(path), name);
    EXPECT_TRUE(t.ok()) << name;
    return t.ok() ? t->reasoning() : ReasoningStyle{};
  };
  PC_SHARED_OR_SKIP(path, "templates/openai-gpt-oss-120b.jinja");
  const ReasoningStyle s = style("openai-gpt-oss-120b");
  EXPECT_TRUE(s.via_thinking_field);
  EXPECT_EQ(s.open, "<|channel|>analysis<|message|>");
  EXPECT_EQ(s.split_close, "<|end|>");
  EXPECT_EQ(s.trail, "<|start|>assistant<|channel|>final<|message|>");
  EXPECT_EQ(s.direct, "<|channel|>final<|message|>");
  const ReasoningStyle f = style("meetkai-functionary-medium-v3.2");
  EXPECT_EQ(f.open, "");
  EXPECT_EQ(f.direct, "all\n");
  EXPECT_EQ(style("meta-llama-Llama-3.1-8B-Instruct").direct, "");
}

// Tool results go where the template reads them: a template that reads an
// assistant turn's `tool_responses` and treats `tool` messages like any other
// role gets them folded into the turn (name by position, content parsed as
// JSON); one that handles `tool` messages itself keeps them. Reasoning goes to
// `thinking` where the template reads only that field.
TEST(ChatTemplate, ToolResultsAndReasoningGoWhereTheTemplateReadsThem) {
  const std::string turns =
      "{% for m in messages %}<{{ m.role }}>{% for c in m.tool_calls or [] %}call {{ c.function.name }};{% endfor %}"
      "{% for r in m.tool_responses or [] %}resp {{ r.name | default('?') }}={{ r.response | tojson }};{% endfor %}"
      "{% if m.thinking %}<t>{{ m.thinking }}</t>{% endif %}{{ m.content or '' }}{% endfor %}";
  auto reads = ChatTemplate::FromSource(turns, "tool_responses");
  ASSERT_TRUE(reads.ok());
  nlohmann::json call = {{"id", "c1"}, {"type", "function"}, {"function", {{"name", "f"}, {"arguments", "{}"}}}};
  nlohmann::json call2 = call;
  call2["function"]["name"] = "g";
  const nlohmann::json msgs = {{{"role", "user"}, {"content", "U"}},
                               {{"role", "assistant"}, {"content", nullptr}, {"tool_calls", {call, call2}}},
                               {{"role", "tool"}, {"tool_call_id", "c1"}, {"content", "{\"a\": 1}"}},
                               {{"role", "tool"}, {"tool_call_id", "zz"}, {"name", "other"}, {"content", "hot"}},
                               {{"role", "tool"}, {"tool_call_id", "c3"}, {"name", "h"}, {"content", "[1]"}},
                               {{"role", "user"}, {"content", "V"}},
                               {{"role", "tool"}, {"content", "stray"}}};
  EXPECT_EQ(reads->Render(msgs, false)->text,
            "<user>U<assistant>call f;call g;resp f={\"a\": 1};resp g=\"hot\";resp h=[1];<user>V<tool>stray");
  // A template with its own handling of `tool` messages keeps them.
  auto own = ChatTemplate::FromSource(
      "{% for m in messages %}{% if m.role == 'tool' %}(result {{ m.content }}){% else %}<{{ m.role }}>{{ m.content or '' }}"
      "{% for r in m.tool_responses or [] %}!{% endfor %}{% endif %}{% endfor %}",
      "own");
  ASSERT_TRUE(own.ok());
  EXPECT_EQ(own->Render(msgs, false)->text, "<user>U<assistant>(result {\"a\": 1})(result hot)(result [1])<user>V(result stray)");
  // reasoning_content is given as `thinking` to a template that reads only that.
  const nlohmann::json thought = {{{"role", "user"}, {"content", "U"}},
                                  {{"role", "assistant"}, {"content", "A"}, {"reasoning_content", "why"}},
                                  {{"role", "user"}, {"content", "V"}}};
  EXPECT_EQ(reads->Render(thought, true)->text, "<user>U<assistant><t>why</t>A<user>V");
}

class ApiParse : public ::testing::Test {
 protected:
  void SetUp() override {
    PC_SHARED_OR_SKIP(path, "models/stories260K.gguf");
    auto g = GgufFile::Open(path);
    ASSERT_TRUE(g.ok());
    auto t = Tokenizer::FromGguf(*g);
    ASSERT_TRUE(t.ok());
    tok_ = std::make_unique<Tokenizer>(std::move(*t));
    ctx_.tok = tok_.get();
    ctx_.n_ctx = 512;
    auto chat = ChatTemplate::Builtin("chatml");
    ASSERT_TRUE(chat.ok());
    chat_ = std::make_unique<ChatTemplate>(std::move(*chat));
    chat_->set_tokenizer(tok_.get());
    ctx_.chat_template = chat_.get();
  }
  std::optional<ApiRequest> Parse(ApiKind k, const std::string& body) { return ParseApiRequest(k, body, ctx_, &err_); }
  std::unique_ptr<Tokenizer> tok_;
  std::unique_ptr<ChatTemplate> chat_;
  ParseContext ctx_;
  ApiError err_;
};

TEST_F(ApiParse, CompletionFields) {
  auto r = Parse(ApiKind::kCompletion,
                 R"({"prompt":"Once upon","max_tokens":7,"temperature":0,"top_p":0.5,"top_k":3,"seed":9,
                     "stop":["x","y"],"logprobs":2,"ignore_eos":true,"cache_salt":"s","cache_prompt":false,
                     "stream":true,"stream_options":{"include_usage":true},"unknown_field":[1,2]})");
  ASSERT_TRUE(r) << err_.message;
  EXPECT_EQ(r->engine.prompt, tok_->Encode("Once upon"));
  EXPECT_EQ(r->engine.max_tokens, 7);
  EXPECT_EQ(r->engine.sampling.temperature, 0.0f);
  EXPECT_EQ(r->engine.sampling.top_k, 3);
  EXPECT_EQ(r->engine.sampling.seed, 9u);
  EXPECT_EQ(r->engine.stop, (std::vector<std::string>{"x", "y"}));
  EXPECT_TRUE(r->engine.want_logprobs);
  EXPECT_EQ(r->engine.top_logprobs, 2);
  EXPECT_TRUE(r->engine.ignore_eos);
  EXPECT_EQ(r->engine.salt, "s");
  EXPECT_FALSE(r->engine.use_cache);
  EXPECT_TRUE(r->stream && r->include_usage);
}

TEST_F(ApiParse, TokenPromptsAndDefaults) {
  auto r = Parse(ApiKind::kCompletion, R"({"prompt":[1,2,3]})");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->engine.prompt, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(r->engine.max_tokens, 16);
  EXPECT_TRUE(r->engine.use_cache);
  auto c = Parse(ApiKind::kChat, R"({"messages":[{"role":"user","content":[{"type":"text","text":"Hi"}]}]})");
  ASSERT_TRUE(c) << err_.message;
  EXPECT_EQ(static_cast<size_t>(c->engine.max_tokens), 512 - c->engine.prompt.size());
}

// echo prepends the prompt's text: a string prompt as sent, token ids
// decoded; without echo the ids are never decoded (no text is kept).
TEST_F(ApiParse, EchoTextComesFromTheStringOrTheDecodedIds) {
  const std::vector<int32_t> ids = tok_->Encode("Once upon a time");
  const std::string ids_json = nlohmann::json(ids).dump();
  auto t = Parse(ApiKind::kCompletion, R"({"echo":true,"prompt":)" + ids_json + "}");
  ASSERT_TRUE(t) << err_.message;
  EXPECT_EQ(t->echo_text, tok_->Decode(ids));
  EXPECT_FALSE(t->echo_text.empty());
  auto s = Parse(ApiKind::kCompletion, R"({"echo":true,"prompt":"Once upon a time"})");
  ASSERT_TRUE(s) << err_.message;
  EXPECT_EQ(s->echo_text, "Once upon a time");
  auto n = Parse(ApiKind::kCompletion, R"({"prompt":)" + ids_json + "}");
  ASSERT_TRUE(n) << err_.message;
  EXPECT_FALSE(n->echo);
  EXPECT_TRUE(n->echo_text.empty());
}

TEST_F(ApiParse, RejectsBadFieldsNamingThem) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"prompt":"a","max_tokens":"5"})", "max_tokens"},
      {R"({"prompt":"a","max_tokens":0})", "max_tokens"},
      {R"({"prompt":"a","max_tokens":1.5})", "max_tokens"},
      {R"({"prompt":"a","temperature":-1})", "temperature"},
      {R"({"prompt":"a","top_p":0})", "top_p"},
      {R"({"prompt":"a","n":17})", "n"},
      {R"({"prompt":"a","stop":[1]})", "stop"},
      {R"({"prompt":"a","logprobs":21})", "logprobs"},
      {R"({"prompt":"a","stream":"yes"})", "stream"},
      {R"({"prompt":[1,-2]})", "prompt"},
      {R"({"prompt":[1,99999]})", "prompt"},
      {R"({"prompt":["a","b"]})", "prompt"},
      {R"({"prompt":"a","max_tokens":600})", "max_tokens"},
      {R"({"prompt":"a","presence_penalty":3})", "presence_penalty"},
      {R"({"prompt":"a","min_p":2})", "min_p"},
      {R"({"prompt":"a","logit_bias":{"x":1}})", "logit_bias"},
      {R"({"prompt":"a","response_format":{"type":"json_schema","json_schema":{"schema":{"not":{}}}}})", "response_format"},
      {R"({"max_tokens":3})", "prompt"},
  };
  for (const auto& [body, param] : cases) {
    err_ = ApiError();
    EXPECT_FALSE(Parse(ApiKind::kCompletion, body)) << body;
    EXPECT_EQ(err_.param, param) << body << " -> " << err_.message;
    EXPECT_EQ(err_.status, 400);
    EXPECT_FALSE(err_.message.empty());
  }
  for (const std::string body : {R"({"messages":[]})", R"({"messages":[{"role":"robot","content":"x"}]})",
                                 R"({"messages":[{"role":"user"}]})", R"({"messages":[{"role":"user","content":[{"type":"image_url"}]}]})",
                                 R"({"messages":[{"role":"user","content":"x"}],"top_logprobs":3})"}) {
    err_ = ApiError();
    EXPECT_FALSE(Parse(ApiKind::kChat, body)) << body;
  }
  for (const std::string body : {"", "{", "[1,2]", "null", "\"str\""}) {
    EXPECT_FALSE(Parse(ApiKind::kCompletion, body));
    EXPECT_NE(err_.message.find("JSON"), std::string::npos) << body;
  }
}

TEST(JsonBody, DepthCountsBracketsOutsideStrings) {
  EXPECT_EQ(JsonNestingDepth("1", 64), 0u);
  EXPECT_EQ(JsonNestingDepth(R"({"a":[1,{"b":[]}]})", 64), 4u);
  EXPECT_EQ(JsonNestingDepth(R"({"a":"[[[[\"{{{"})", 64), 1u);
  // Stops counting once past the limit.
  EXPECT_EQ(JsonNestingDepth(std::string(1000, '['), 10), 11u);
  std::string err;
  EXPECT_FALSE(ParseJsonBounded(std::string(65, '[') + std::string(65, ']'), &err));
  EXPECT_NE(err.find("64 levels"), std::string::npos) << err;
  auto ok = ParseJsonBounded(std::string(64, '[') + std::string(64, ']'), &err);
  ASSERT_TRUE(ok);
  EXPECT_TRUE(ok->is_array());
  EXPECT_FALSE(ParseJsonBounded("{", &err));
  EXPECT_NE(err.find("not valid JSON"), std::string::npos);
}

TEST_F(ApiParse, DeeplyNestedPromptIsRefusedNotACrash) {
  // The attack: a 200 KB body nesting 100,000 arrays under "prompt" used to
  // overflow the stack while the prompt was copied.
  for (const char* field : {"prompt", "messages", "stop", "unknown"}) {
    const std::string body = std::string("{\"") + field + "\":" + std::string(100000, '[') +
                             std::string(100000, ']') + "}";
    for (ApiKind k : {ApiKind::kCompletion, ApiKind::kChat}) {
      err_ = ApiError();
      EXPECT_FALSE(Parse(k, body)) << field;
      EXPECT_EQ(err_.status, 400);
      EXPECT_NE(err_.message.find("levels deep"), std::string::npos) << err_.message;
    }
  }
}

TEST(Metrics, RendersPrometheusText) {
  MetricsRegistry m;
  m.Describe("x_seconds", "histogram", "Help text.");
  m.Observe("x_seconds", "", 0.003);
  m.Observe("x_seconds", "", 30);
  m.Add("y_total", "tier=\"pool\"", 2);
  m.Add("y_total", "tier=\"pool\"", 3);
  const std::string t = m.Render();
  EXPECT_NE(t.find("# HELP x_seconds Help text.\n# TYPE x_seconds histogram\n"), std::string::npos);
  EXPECT_NE(t.find("x_seconds_bucket{le=\"0.001\"} 0\n"), std::string::npos);
  EXPECT_NE(t.find("x_seconds_bucket{le=\"0.005\"} 1\n"), std::string::npos);
  EXPECT_NE(t.find("x_seconds_bucket{le=\"25\"} 1\n"), std::string::npos);
  EXPECT_NE(t.find("x_seconds_bucket{le=\"60\"} 2\n"), std::string::npos);
  EXPECT_NE(t.find("x_seconds_bucket{le=\"+Inf\"} 2\n"), std::string::npos);
  EXPECT_NE(t.find("x_seconds_count 2\n"), std::string::npos);
  EXPECT_NE(t.find("# TYPE y_total counter\ny_total{tier=\"pool\"} 5\n"), std::string::npos);
  EXPECT_EQ(m.Get("y_total", "tier=\"pool\""), 5);
}

}  // namespace
}  // namespace pc
