// promptcache tokenize: text to token ids.
#include <nlohmann/json.hpp>

#include <cstdio>
#include <iostream>
#include <iterator>

#include "commands.h"
#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"

namespace pc::cli {
namespace {

struct TokenizeFlags {
  std::string model;
  bool no_bos = false, jsonl = false, parse_special = false;
};

int Tokenize(const TokenizeFlags& f) {
  Result<GgufFile> gguf = GgufFile::Open(f.model);
  if (!gguf.ok()) return Fail(gguf.status().message());
  Result<Tokenizer> tok = Tokenizer::FromGguf(*gguf);
  if (!tok.ok()) return Fail(tok.status().message());
  const EncodeOptions opt{.add_special = !f.no_bos, .parse_special = f.parse_special};
  if (!f.jsonl) {
    const std::string text((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
    std::printf("%s\n", nlohmann::json(tok->Encode(text, opt)).dump().c_str());
    return 0;
  }
  std::string line;
  int line_no = 0;
  while (std::getline(std::cin, line)) {
    ++line_no;
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_string()) return Fail(fmt::format("line {}: expected one JSON string", line_no));
    std::printf("%s\n", nlohmann::json(tok->Encode(j.get<std::string>(), opt)).dump().c_str());
  }
  return 0;
}

}  // namespace

void RegisterTokenize(CLI::App& app, int* exit_code) {
  auto f = std::make_shared<TokenizeFlags>();
  CLI::App* c = app.add_subcommand("tokenize", "Print the token ids of stdin");
  c->add_option("-m,--model", f->model, "GGUF model or vocabulary file")->required();
  c->add_flag("--no-bos", f->no_bos, "Add no special tokens (BOS/EOS)");
  c->add_flag("--jsonl", f->jsonl, "Read one JSON string per line, print one JSON array per line");
  c->add_flag("--parse-special", f->parse_special, "Recognise control-token text such as <s>");
  c->callback([f, exit_code] { *exit_code = Tokenize(*f); });
}

}  // namespace pc::cli
