// Tool-call syntax read off real chat templates: for every shared template
// that renders calls (JSON arguments, or one element per argument), the calls the template itself
// writes (other names, ids and arguments than the probes) parse back
// exactly, the forcing grammar accepts that text, and it refuses arguments
// that break the tool's parameters.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>

#include "server/chat_template.h"
#include "server/tool_calls.h"
#include "server/tool_syntax.h"
#include "test_support.h"

namespace pc {
namespace {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;  // calls with their keys in the clients' order


const json kTools = json::parse(R"([
  {"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
   "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1}},
                  "required": ["city"], "additionalProperties": false}}},
  {"type": "function", "function": {"name": "search_web", "description": "Search",
   "parameters": {"type": "object", "properties": {"query": {"type": "string"}, "tags": {"type": "array", "items": {"type": "string"}}},
                  "required": ["query"]}}}])");

ojson Call(const std::string& id, const std::string& name, const json& args, bool as_object) {
  const ojson a = ojson::parse(args.dump());
  return {{"id", id}, {"type", "function"}, {"function", {{"name", name}, {"arguments", as_object ? a : ojson(args.dump())}}}};
}

// The assistant turn's calls as the template writes them: the text that
// differs from a plain turn (as Derive reads it).
std::string CallsText(const ChatTemplate& t, const ojson& calls) {
  const ojson user = {{"role", "user"}, {"content", "Weather?"}};
  const ojson extra = {{"tools", ojson::parse(kTools.dump())}};
  auto plain = t.RenderTurns(ojson::array({user, {{"role", "assistant"}, {"content", "QQ"}}}), extra);
  auto with = t.RenderTurns(ojson::array({user, {{"role", "assistant"}, {"content", ""}, {"tool_calls", calls}}}), extra);
  if (!plain.ok() || !with.ok()) return "";
  const size_t q = plain->find("QQ");
  size_t p = 0, s = 0;
  while (p < q && p < with->size() && (*plain)[p] == (*with)[p]) ++p;
  while (s < plain->size() - q - 2 && s < with->size() - p && (*plain)[plain->size() - 1 - s] == (*with)[with->size() - 1 - s]) ++s;
  while (p > 0 && std::string_view("<[{|").find((*with)[p - 1]) != std::string_view::npos) --p;
  while (s > 0 && std::string_view(">]}|").find((*with)[with->size() - s]) != std::string_view::npos) --s;
  return with->substr(p, with->size() - p - s);
}

std::string Id(size_t i) { return "gen" + std::to_string(i); }

// How many bytes of text the matcher takes, advancing it over them.
size_t Accepted(structured::SeqMatcher* m, std::string_view text) {
  size_t n = 0;
  for (char c : text) {
    structured::SeqMatcher next;
    if (!m->Advance(uint8_t(c), &next)) break;
    *m = next;
    ++n;
  }
  return n;
}

// The calls the template itself writes (other names, ids and arguments
// than the probes) parse back exactly, the forcing grammar accepts that
// text, and it refuses arguments that break the tool's parameters.
void ExpectRoundTrip(const ChatTemplate& t, const ToolSyntax& syn, const std::string& path) {
  const bool obj = syn.args_as_object();
  const json a1 = {{"city", "Zürich"}, {"days", 3}}, a2 = {{"query", "prompt \"cache\""}, {"tags", {"a", "b"}}};
  // One call, then two where the template allows it.
  for (int n : {1, 2}) {
    ojson calls = ojson::array({Call("abcdefgh1", "get_weather", a1, obj)});
    if (n == 2) calls.push_back(Call("abcdefgh2", "search_web", a2, obj));
    const std::string text = CallsText(t, calls);
    if (text.empty() || (n == 2 && text.find("search_web") == std::string::npos)) continue;  // the template refuses two calls
    // Content first; a syntax whose calls start with the name (anchored)
    // has content before its separator, and may begin the reply with a call.
    const std::string lead = syn.anchored() ? "Let me check." + syn.trigger() : "Let me check.\n";
    if (syn.anchored()) {
      const ToolSyntax::Parsed at_start = syn.Parse(text, Id, &kTools);
      EXPECT_EQ(at_start.calls.size(), size_t(n)) << path << "\n" << text;
      EXPECT_EQ(at_start.content, "") << path;
    }
    const ToolSyntax::Parsed p = syn.Parse(lead + text, Id, &kTools);
    EXPECT_EQ(p.calls.size(), size_t(n)) << path << "\n" << text << "\n" << syn.Describe().dump();
    if (p.calls.size() != size_t(n)) continue;
    EXPECT_EQ(p.content, "Let me check.") << path;
    EXPECT_EQ(p.calls[0].name, "get_weather");
    EXPECT_EQ(json::parse(p.calls[0].arguments), a1) << path;
    if (n == 2) {
      EXPECT_EQ(p.calls[1].name, "search_web");
      EXPECT_EQ(json::parse(p.calls[1].arguments), a2) << path;
    }
    // The forcing grammar takes the template's own text (ids where it has them).
    auto g = syn.Grammar(kTools, "", true, {"abcdefgh1", "abcdefgh2", "abcdefgh3"});
    ASSERT_TRUE(g.ok()) << g.status().message();
    structured::SeqMatcher m(g->get());
    std::string trimmed = text.substr(text.find_first_not_of(" \n"), text.find_last_not_of(" \n") + 1 - text.find_first_not_of(" \n"));
    // A template that prints lists as Python's repr or in its own quotes:
    // a forced call writes them as JSON (read back either way, above).
    if (const ArgSyntax* per_arg = syn.per_argument(); per_arg && !per_arg->compound_json) {
      const std::string json_tags = json(a2["tags"]).dump(), python = "['a', 'b']",
                        quoted = "[" + per_arg->str_open + "a" + per_arg->str_close + "," + per_arg->str_open + "b" +
                                 per_arg->str_close + "]";
      for (const std::string& form : {python, quoted}) {
        if (size_t at = trimmed.find(form); at != std::string::npos) trimmed.replace(at, form.size(), json_tags);
      }
    }
    const size_t ok_bytes = Accepted(&m, trimmed);
    EXPECT_TRUE(ok_bytes == trimmed.size() && m.CanEnd()) << path << "\n" << trimmed.substr(0, ok_bytes) << "<-HERE->" << trimmed.substr(ok_bytes);
    // Arguments that break the parameters are refused.
    ojson bad = ojson::array({Call("abcdefgh1", "get_weather", {{"city", "X"}, {"days", 0}}, obj)});
    const std::string bad_text = CallsText(t, bad);
    structured::SeqMatcher mb(g->get());
    EXPECT_FALSE(mb.Consume(bad_text.substr(bad_text.find_first_not_of(" \n"))) && mb.CanEnd()) << path;
  }
}

TEST(ToolSyntax, SharedTemplatesRoundTrip) {
  PC_SHARED_OR_SKIP(dir, "templates");
  int supported = 0, total = 0;
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().extension() == ".jinja") names.push_back(e.path().string());
  }
  std::sort(names.begin(), names.end());
  for (const std::string& path : names) {
    auto t = ChatTemplate::FromSource(test::ReadText(path), path);
    ASSERT_TRUE(t.ok()) << path;
    ++total;
    const ToolSyntax syn = ToolSyntax::Derive(*t);
    std::printf("%-60s %s\n", std::filesystem::path(path).filename().c_str(),
                syn.supported() ? ("trigger " + json(syn.trigger()).dump()).c_str() : ("- " + syn.reason()).c_str());
    if (!syn.supported()) continue;
    ++supported;
    ExpectRoundTrip(*t, syn, path);
  }
  std::printf("tool-call syntax derived for %d of %d templates\n", supported, total);
  EXPECT_GE(supported, 29);
}

// One element per argument whose tag says whether the value is a string
// (GigaChat 3.5 writes string="true" or "false"), in a template written for
// this test: strings raw, other values as JSON; derived, read back and forced.
TEST(ToolSyntax, ArgumentsTaggedByTheirTypeRoundTrip) {
  const std::string src = R"({%- for m in messages -%}
<|{{ m.role }}|>
{%- if m.tool_calls -%}
<calls>
{%- for c in m.tool_calls %}
<call fn="{{ c.function.name }}">
{%- for k, v in c.function.arguments.items() %}
<arg key="{{ k }}" text="{{ 'yes' if v is string else 'no' }}">{{ v if v is string else v | tojson }}</arg>
{%- endfor %}
</call>
{%- endfor %}
</calls>
{%- else -%}
{{ m.content }}
{%- endif -%}
<|end|>
{% endfor -%}
{%- if add_generation_prompt %}<|assistant|>{% endif -%})";
  auto t = ChatTemplate::FromSource(src, "type-tagged");
  ASSERT_TRUE(t.ok()) << t.status().message();
  const ToolSyntax syn = ToolSyntax::Derive(*t);
  ASSERT_TRUE(syn.supported()) << syn.reason();
  ASSERT_NE(syn.per_argument(), nullptr) << syn.Describe().dump();
  EXPECT_EQ(syn.per_argument()->str_open, "yes\">");
  EXPECT_EQ(syn.per_argument()->other_open, "no\">");
  ExpectRoundTrip(*t, syn, "type-tagged");
  // A string parameter forced raw under its tag, a number as JSON under its own.
  auto g = syn.Grammar(kTools, "get_weather", false, {});
  ASSERT_TRUE(g.ok()) << g.status().message();
  const std::string forced = "<calls><call fn=\"get_weather\"><arg key=\"city\" text=\"yes\">Oslo</arg>"
                             "<arg key=\"days\" text=\"no\">2</arg></call></calls>";
  structured::SeqMatcher m(g->get());
  const size_t ok_bytes = Accepted(&m, forced);
  EXPECT_TRUE(ok_bytes == forced.size() && m.CanEnd()) << forced.substr(0, ok_bytes) << "<-HERE->" << forced.substr(ok_bytes);
  structured::SeqMatcher wrong_tag(g->get());
  EXPECT_FALSE(wrong_tag.Consume("<calls><call fn=\"get_weather\"><arg key=\"city\" text=\"no\">"));
}

// A template that prints a call's arguments with `|string` (InternLM2's in
// vLLM's examples, here one written for the test) shows an object as
// Python's repr but the clients' JSON text as it is: it gets the text, and
// replies in JSON parse.
TEST(ToolSyntax, ArgumentsPrintedAsStringsTakeTheClientsText) {
  const std::string src = R"({%- for m in messages -%}
<|{{ m.role }}|>{{ m.content or '' }}
{%- for c in m.tool_calls or [] -%}
<act>{"name": "{{ c.function.name }}", "arguments": {{ c.function.arguments | string }}}</act>
{%- endfor -%}
<|end|>
{% endfor -%})";
  auto t = ChatTemplate::FromSource(src, "string-args");
  ASSERT_TRUE(t.ok()) << t.status().message();
  const ToolSyntax syn = ToolSyntax::Derive(*t);
  ASSERT_TRUE(syn.supported()) << syn.reason();
  EXPECT_FALSE(syn.args_as_object());
  EXPECT_EQ(syn.per_argument(), nullptr) << syn.Describe().dump();
  const ToolSyntax::Parsed p =
      syn.Parse(R"(OK<act>{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}</act>)", Id, &kTools);
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(json::parse(p.calls[0].arguments), json({{"city", "Paris"}, {"days", 3}}));
  ExpectRoundTrip(*t, syn, "string-args");
}

// A template that holds the final assistant turn back to continue it (as
// Nemotron's JSON template does; here one written for the test) shows calls
// only in turns a user turn follows: the syntax is read off those.
TEST(ToolSyntax, CallsOfATemplateThatHoldsTheLastTurnBack) {
  const std::string src = R"({%- set ns = namespace(msgs=messages, last=none) -%}
{%- if messages[-1]['role'] == 'assistant' -%}{%- set ns.last = messages[-1]['content'] -%}{%- set ns.msgs = messages[:-1] -%}{%- endif -%}
{%- for m in ns.msgs -%}<|{{ m.role }}|>{{ m.content }}
{%- if m.tool_calls -%}<call>{% for c in m.tool_calls %}{{ c.function | tojson }}{% endfor %}</call>{%- endif -%}<|end|>
{%- endfor -%}
{%- if ns.last is not none -%}<|assistant|>{{ ns.last }}{%- endif -%})";
  auto t = ChatTemplate::FromSource(src, "holds-last");
  ASSERT_TRUE(t.ok()) << t.status().message();
  const ToolSyntax syn = ToolSyntax::Derive(*t);
  ASSERT_TRUE(syn.supported()) << syn.reason();
  EXPECT_EQ(syn.trigger(), "<call>{\"name\":") << syn.Describe().dump();
  const ToolSyntax::Parsed p =
      syn.Parse(R"(Sure.<call>{"name": "get_weather", "arguments": {"city": "Paris"}}</call>)", Id, &kTools);
  ASSERT_EQ(p.calls.size(), 1u) << syn.Describe().dump();
  EXPECT_EQ(p.content, "Sure.");
  EXPECT_EQ(json::parse(p.calls[0].arguments), json({{"city", "Paris"}}));
}

TEST(ToolSyntax, PartialCallsAndPlainReplies) {
  auto t = ChatTemplate::Builtin("chatml");
  ASSERT_TRUE(t.ok());
  const std::string hermes =
      "{%- for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}{%- if m.tool_calls %}{%- for c in m.tool_calls %}"
      "\n<tool_call>\n{\"name\": \"{{ c.function.name }}\", \"arguments\": {{ c.function.arguments | tojson }}}\n</tool_call>"
      "{%- endfor %}{%- endif %}<|im_end|>\n{%- endfor %}";
  auto h = ChatTemplate::FromSource(hermes, "hermes");
  ASSERT_TRUE(h.ok());
  const ToolSyntax syn = ToolSyntax::Derive(*h);
  ASSERT_TRUE(syn.supported()) << syn.reason();
  EXPECT_EQ(syn.trigger(), "<tool_call>");
  // A reply with no call is all content; a call cut inside its arguments is partial.
  EXPECT_EQ(syn.Parse("just text", Id).content, "just text");
  const std::string full = "ok <tool_call>\n{\"name\":\"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
  for (size_t cut = 0; cut <= full.size(); ++cut) {
    const ToolSyntax::Parsed p = syn.Parse(full.substr(0, cut), Id);
    if (p.partial) {
      EXPECT_EQ(p.partial_call.name, "get_weather");
      EXPECT_EQ(std::string(R"({"city": "Paris"})").rfind(p.partial_call.arguments, 0), 0u) << p.partial_call.arguments;
    }
  }
  const ToolSyntax::Parsed p = syn.Parse(full, Id);
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0].id, "gen0");
  EXPECT_EQ(p.content, "ok");
  // The ChatML built-in renders no calls: no syntax.
  EXPECT_FALSE(ToolSyntax::Derive(*t).supported());
}

// One element per argument (Qwen3-Coder's syntax, read off its template):
// a reply cut anywhere in a call reports it partial with arguments that are
// a prefix of the whole call's, so streamed fragments add up; values are
// typed by the tool's parameters (a string parameter's "42" stays a string,
// an integer's is a number; Python's True is true); a reply with no marker
// stays content.
TEST(ToolSyntax, PerArgumentCallsStreamAsPrefixes) {
  PC_SHARED_OR_SKIP(path, "templates/Qwen3-Coder.jinja");
  auto t = ChatTemplate::FromSource(test::ReadText(path), path);
  ASSERT_TRUE(t.ok());
  const ToolSyntax syn = ToolSyntax::Derive(*t);
  ASSERT_TRUE(syn.supported()) << syn.reason();
  ASSERT_NE(syn.per_argument(), nullptr);
  EXPECT_EQ(syn.per_argument()->key_before, "<parameter=");
  const json tools = json::parse(R"([{"type": "function", "function": {"name": "set", "parameters": {"type": "object",
      "properties": {"label": {"type": "string"}, "count": {"type": "integer"}, "on": {"type": "boolean"}}}}}])");
  const std::string full =
      "Sure.\n<tool_call>\n<function=set>\n<parameter=label>\n42\n</parameter>\n<parameter=count>\n7\n</parameter>\n"
      "<parameter=on>\nTrue\n</parameter>\n</function>\n</tool_call>";
  const ToolSyntax::Parsed whole = syn.Parse(full, Id, &tools);
  ASSERT_EQ(whole.calls.size(), 1u);
  EXPECT_EQ(whole.content, "Sure.");
  EXPECT_EQ(whole.calls[0].name, "set");
  EXPECT_EQ(whole.calls[0].arguments, R"({"label": "42", "count": 7, "on": true})");
  size_t partials = 0;
  for (size_t cut = 0; cut < full.size(); ++cut) {
    const ToolSyntax::Parsed p = syn.Parse(full.substr(0, cut), Id, &tools);
    if (!p.partial) continue;
    ++partials;
    EXPECT_EQ(p.partial_call.name, "set");
    EXPECT_EQ(whole.calls[0].arguments.rfind(p.partial_call.arguments, 0), 0u) << p.partial_call.arguments;
  }
  EXPECT_GT(partials, 100u);
  EXPECT_EQ(syn.Parse("no call here", Id, &tools).content, "no call here");
}

// gpt-oss's template writes the recipient in the role header ("to=functions.f
// <|channel|>commentary json<|message|>"), its replies mostly in the channel
// header with another tag ("<|channel|>commentary to=functions.f
// <|constrain|>json<|message|>"). The words before the tag that opens the
// arguments are read off the unit's literal, so both spellings parse, whole
// and streamed in pieces of any size, and those words never reach the
// content; prose mentioning the trigger, or a header broken by a newline,
// stays content.
TEST(ToolSyntax, HeaderWordsMayComeBeforeTheNameOrAmongOtherTags) {
  PC_SHARED_OR_SKIP(path, "templates/openai-gpt-oss-120b.jinja");
  auto t = ChatTemplate::FromSource(test::ReadText(path), path);
  ASSERT_TRUE(t.ok());
  const ToolSyntax syn = ToolSyntax::Derive(*t);
  ASSERT_TRUE(syn.supported()) << syn.reason();
  const std::string args = R"({"city": "Paris", "days": 2})";
  for (const std::string& reply :
       {"<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>" + args + "<|call|>",
        "to=functions.get_weather<|channel|>commentary json<|message|>" + args + "<|call|>",
        "<|channel|>commentary json to=functions.get_weather<|message|>" + args + "<|call|>"}) {
    const ToolSyntax::Parsed whole = syn.Parse(reply, Id, &kTools);
    ASSERT_EQ(whole.calls.size(), 1u) << reply;
    EXPECT_EQ(whole.calls[0].name, "get_weather");
    EXPECT_EQ(whole.calls[0].arguments, args);
    EXPECT_EQ(whole.content, "") << reply;
    for (size_t step : {1u, 2u, 3u, 5u, 8u}) {
      ToolCallStream stream(&syn, {"id0"}, &kTools);
      std::string content, streamed;
      auto take = [&](const ToolCallStream::Delta& d) {
        content += d.content;
        for (const json& e : d.tool_calls) {
          if (e.contains("function") && e["function"].contains("arguments")) streamed += e["function"]["arguments"].get<std::string>();
        }
      };
      for (size_t i = 0; i < reply.size(); i += step) take(stream.Push(reply.substr(i, step)));
      std::vector<ToolCall> calls;
      take(stream.Finish(&calls));
      ASSERT_EQ(calls.size(), 1u) << reply << " step " << step;
      EXPECT_EQ(calls[0].name, "get_weather");
      EXPECT_EQ(streamed, args) << reply << " step " << step;
      EXPECT_EQ(content, "") << reply << " step " << step;
    }
  }
  for (const std::string& prose : {std::string("Use to=functions.get_weather please"),
                                   "<|channel|>commentary to=functions.get_weather\n<|message|>" + args + "<|call|>"}) {
    const ToolSyntax::Parsed p = syn.Parse(prose, Id, &kTools);
    EXPECT_TRUE(p.calls.empty() && !p.partial) << prose;
    EXPECT_EQ(p.content, prose);
  }
  // A final-channel reply streams out whole: the held start of "<|channel|>"
  // is released once it cannot begin the header words.
  ToolCallStream plain(&syn, {"id0"}, &kTools);
  std::string out;
  for (char c : std::string("<|channel|>final<|message|>Sunny.")) out += plain.Push(std::string(1, c)).content;
  std::vector<ToolCall> none;
  out += plain.Finish(&none).content;
  EXPECT_TRUE(none.empty());
  EXPECT_EQ(out, "<|channel|>final<|message|>Sunny.");
}

// functionary's calls start with the name ("NAME\nARGS" right after the
// ">>>" its generation prompt ends with; ">>>" between calls; content as
// "all\nTEXT"): a reply that begins with a request tool's name and a newline
// is a call, later calls follow the separator; streamed in pieces of any
// size, the reply's start is held until that is decided, and the content and
// arguments add up to the whole parse.
TEST(ToolSyntax, CallsThatStartWithTheNameAreReadFromTheReplyStart) {
  PC_SHARED_OR_SKIP(path, "templates/meetkai-functionary-medium-v3.2.jinja");
  auto t = ChatTemplate::FromSource(test::ReadText(path), path);
  ASSERT_TRUE(t.ok());
  const ToolSyntax syn = ToolSyntax::Derive(*t);
  ASSERT_TRUE(syn.supported()) << syn.reason();
  ASSERT_TRUE(syn.anchored());
  EXPECT_EQ(syn.trigger(), ">>>");
  const std::string a1 = R"({"city": "Paris"})", a2 = R"({"query": "x"})";
  struct Case {
    std::string reply, content;
    std::vector<std::string> names;
  };
  const std::vector<Case> cases = {
      {"get_weather\n" + a1 + ">>>search_web\n" + a2, "", {"get_weather", "search_web"}},
      {"all\nLet me check.>>>get_weather\n" + a1, "all\nLet me check.", {"get_weather"}},
      {"Hello there, get_weather\n" + a1, "Hello there, get_weather\n" + a1, {}},
      {"get_weathers\n" + a1, "get_weathers\n" + a1, {}},  // not a tool of the request
      {"get", "get", {}},
      {"all\nSunny.", "all\nSunny.", {}}};
  for (const Case& c : cases) {
    const ToolSyntax::Parsed whole = syn.Parse(c.reply, Id, &kTools);
    EXPECT_EQ(whole.content, c.content) << c.reply;
    ASSERT_EQ(whole.calls.size(), c.names.size()) << c.reply;
    for (size_t i = 0; i < c.names.size(); ++i) EXPECT_EQ(whole.calls[i].name, c.names[i]);
    for (size_t step : {1u, 2u, 5u, 9u}) {
      ToolCallStream stream(&syn, {"id0", "id1"}, &kTools);
      std::string content, streamed;
      auto take = [&](const ToolCallStream::Delta& d) {
        content += d.content;
        for (const json& e : d.tool_calls) {
          if (e.contains("function") && e["function"].contains("arguments")) streamed += e["function"]["arguments"].get<std::string>();
        }
      };
      for (size_t i = 0; i < c.reply.size(); i += step) take(stream.Push(c.reply.substr(i, step)));
      std::vector<ToolCall> calls;
      take(stream.Finish(&calls));
      EXPECT_EQ(content, c.content) << c.reply << " step " << step;
      ASSERT_EQ(calls.size(), c.names.size()) << c.reply << " step " << step;
      std::string args;
      for (const ToolCall& call : calls) args += call.arguments;
      EXPECT_EQ(streamed, args) << c.reply << " step " << step;
    }
  }
}

// Replies that are pieces of calls in any order (cut, doubled, unclosed,
// stray quotes) on the per-argument and numbered syntaxes: nothing throws,
// and every call reported whole carries arguments that are a JSON object.
TEST(ToolSyntax, BrokenRepliesNeverGiveBrokenArguments) {
  PC_SHARED_OR_SKIP(dir, "templates");
  const char* pieces[] = {"<tool_call>", "\n", "<function=", "get_weather", ">", "<parameter=", "city", "</parameter>",
                          "</function>", "</tool_call>", "Paris", "[", "'a'", "{", "}", "\"", "\\", "7", "True", ",",
                          ":", "<|\"|>", "<|tool_call>call:", "<tool_call|>", "functions.get_weather:0",
                          "<|tool_calls_section_begin|>", "<|tool_call_begin|>", "<|tool_call_argument_begin|>",
                          "<|tool_call_end|>", "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>"};
  std::mt19937 rng(7);
  for (const char* name : {"Qwen3-Coder", "google-gemma-4-31B-it", "moonshotai-Kimi-K2", "GLM-4.6", "ByteDance-Seed-OSS"}) {
    auto t = ChatTemplate::FromSource(test::ReadText(dir + "/" + name + ".jinja"), name);
    ASSERT_TRUE(t.ok()) << name;
    const ToolSyntax syn = ToolSyntax::Derive(*t);
    ASSERT_TRUE(syn.supported()) << name << ": " << syn.reason();
    size_t with_calls = 0;
    for (int i = 0; i < 3000; ++i) {
      std::string reply;
      for (int n = static_cast<int>(rng() % 31); n > 0; --n) reply += pieces[rng() % std::size(pieces)];
      const ToolSyntax::Parsed p = syn.Parse(reply, Id, &kTools);
      with_calls += !p.calls.empty();
      for (const ToolCall& c : p.calls) {
        const json args = json::parse(c.arguments, nullptr, false);
        EXPECT_TRUE(args.is_object()) << name << ": " << reply << " -> " << c.arguments;
      }
    }
    std::printf("%s: %zu of 3000 broken replies still held a whole call\n", name, with_calls);
  }
}

}  // namespace
}  // namespace pc
