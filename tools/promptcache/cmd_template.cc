// promptcache template: render chat messages with a model's (or a file's)
// chat template, one JSON line in, one JSON line out; for tests and for
// users debugging prompts.
#include <nlohmann/json.hpp>

#include <cstdio>
#include <ctime>
#include <fstream>
#include <iostream>
#include <iterator>

#include "commands.h"
#include "model/forward.h"
#include "server/chat_template.h"
#include "server/tool_syntax.h"

namespace pc::cli {
namespace {

struct TemplateFlags {
  std::string model, file, bos, eos, date;
  bool bos_set = false, eos_set = false, jsonl = false, tool_syntax = false;
};

// --tool-syntax: the tool-call syntax read off the template, then each stdin
// line {"reply": TEXT, "tools"?: [...]} parsed as a model's reply would be.
int RunToolSyntax(const ChatTemplate& chat) {
  const ToolSyntax syn = ToolSyntax::Derive(chat);
  std::printf("%s\n", syn.Describe().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  std::string line;
  while (std::getline(std::cin, line)) {
    if (line.empty()) continue;
    const nlohmann::json in = nlohmann::json::parse(line, nullptr, false);
    nlohmann::json out;
    if (in.is_discarded() || !in.is_object() || !in.contains("reply") || !in["reply"].is_string()) {
      out["error"] = "each line must be a JSON object with \"reply\" (a string)";
    } else {
      const nlohmann::json tools = in.value("tools", nlohmann::json::array());
      const ToolSyntax::Parsed p =
          syn.Parse(in["reply"].get<std::string>(), [](size_t i) { return "call" + std::to_string(i); }, &tools);
      out["content"] = p.content;
      out["tool_calls"] = nlohmann::json::array();
      for (const ToolCall& c : p.calls) out["tool_calls"].push_back({{"id", c.id}, {"name", c.name}, {"arguments", c.arguments}});
      if (p.partial) out["partial"] = {{"name", p.partial_call.name}, {"arguments", p.partial_call.arguments}};
    }
    std::printf("%s\n", out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  }
  return 0;
}

int RunTemplate(const TemplateFlags& f) {
  if (f.model.empty() == f.file.empty()) return Fail("give exactly one of -m MODEL and --template-file F");
  if (!f.jsonl && !f.tool_syntax) {
    return Fail("--jsonl is required: one {\"messages\", \"add_generation_prompt\"} object per stdin line");
  }
  Result<ChatTemplate> chat = Status::Error("");
  std::unique_ptr<Tokenizer> tok;
  if (!f.model.empty()) {
    Result<GgufFile> g = GgufFile::Open(f.model);
    if (!g.ok()) return Fail(g.status().message());
    Result<Tokenizer> t = Tokenizer::FromGguf(*g);
    if (!t.ok()) return Fail(t.status().message());
    tok = std::make_unique<Tokenizer>(std::move(*t));
    chat = ChatTemplateForModel(*g, *tok);
  } else {
    std::ifstream in(f.file);
    if (!in) return Fail("cannot read '" + f.file + "'");
    chat = ChatTemplate::FromSource(std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>()), f.file);
  }
  if (!chat.ok()) return Fail(chat.status().message());
  if (f.bos_set) chat->set_bos_token(f.bos);
  if (f.eos_set) chat->set_eos_token(f.eos);
  if (!f.date.empty()) {
    std::tm tm{};
    if (std::sscanf(f.date.c_str(), "%d-%d-%d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday) != 3) {
      return Fail("--date must be YYYY-MM-DD");
    }
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    tm.tm_hour = 12;
    std::mktime(&tm);  // fills the weekday and day of the year
    chat->set_date(tm);
  }
  if (f.tool_syntax) return RunToolSyntax(*chat);
  std::string line;
  while (std::getline(std::cin, line)) {
    if (line.empty()) continue;
    nlohmann::json out;
    // Keys in the line's order, as the server passes a request's messages
    // and tools (a template printing `tool | tojson` shows them so).
    const nlohmann::ordered_json in = nlohmann::ordered_json::parse(line, nullptr, false);
    if (in.is_discarded() || !in.is_object() || !in.contains("messages")) {
      out["error"] = "each line must be a JSON object with \"messages\"";
    } else {
      nlohmann::ordered_json extra = in;
      extra.erase("messages");
      extra.erase("add_generation_prompt");
      const bool agp = in.value("add_generation_prompt", true);
      Result<ChatPrompt> p = chat->Render(in["messages"], agp, extra);
      if (p.ok()) out["prompt"] = p->text;
      else out["error"] = p.status().message();
    }
    std::printf("%s\n", out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  }
  return 0;
}

}  // namespace

void RegisterTemplate(CLI::App& app, int* exit_code) {
  auto f = std::make_shared<TemplateFlags>();
  CLI::App* c = app.add_subcommand("template", "Render chat messages (JSON lines on stdin) with a chat template");
  c->add_option("-m,--model", f->model, "Use this GGUF's tokenizer.chat_template and BOS/EOS texts");
  c->add_option("--template-file", f->file, "Use this Jinja file");
  c->add_option("--bos-token", f->bos, "bos_token text (default: the model's, or <s>)")->each([f](const std::string&) { f->bos_set = true; });
  c->add_option("--eos-token", f->eos, "eos_token text (default: the model's, or </s>)")->each([f](const std::string&) { f->eos_set = true; });
  c->add_option("--date", f->date, "Pin strftime_now's date (YYYY-MM-DD)");
  c->add_flag("--tool-syntax", f->tool_syntax,
              "Print the tool-call syntax read off the template (JSON); then parse each stdin line {\"reply\", \"tools\"?} "
              "into {\"content\", \"tool_calls\"}");
  c->add_flag("--jsonl", f->jsonl, "Each stdin line {\"messages\": [...], \"add_generation_prompt\": bool} -> {\"prompt\"} or {\"error\"}");
  c->callback([f, exit_code] { *exit_code = RunTemplate(*f); });
}

}  // namespace pc::cli
