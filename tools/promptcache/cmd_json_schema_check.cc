// promptcache json-schema-check: MaskBench-style scoring of the structured-
// output engine. Each stdin line {"name", "schema", "tests": [{"valid",
// "text"}, ...]} is compiled, and each test's text walked token by token
// (canonical tokenization, no BOS): every token must be in the mask computed
// at its step, and the end allowed after the last.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>

#include "commands.h"
#include "gguf/gguf.h"
#include "structured/json_schema.h"
#include "structured/token_mask.h"
#include "tokenizer/tokenizer.h"

namespace pc::cli {
namespace {

struct CheckFlags {
  std::string model;
  int max_whitespace = 20;
};

double Micros(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double, std::micro>(b - a).count();
}

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  size_t k = size_t(q * double(v.size() - 1) + 0.5);
  std::nth_element(v.begin(), v.begin() + long(k), v.end());
  return v[k];
}

int Check(const CheckFlags& f) {
  using Clock = std::chrono::steady_clock;
  Result<GgufFile> gguf = GgufFile::Open(f.model);
  if (!gguf.ok()) return Fail(gguf.status().message());
  Result<Tokenizer> tok = Tokenizer::FromGguf(*gguf);
  if (!tok.ok()) return Fail(tok.status().message());
  std::vector<std::string> pieces(size_t(tok->n_vocab()));
  for (int32_t id = 0; id < tok->n_vocab(); ++id) pieces[size_t(id)] = tok->Piece(id);
  structured::TokenIndex index(std::move(pieces));
  structured::MaskComputer masks(&index);
  structured::TokenMask mask;

  std::vector<double> mask_us, compile_us;
  long schemas = 0, passing = 0, invalid_accepted = 0, valid_rejected = 0, compile_errors = 0;
  std::string line;
  int line_no = 0;
  while (std::getline(std::cin, line)) {
    ++line_no;
    if (line.empty()) continue;
    nlohmann::ordered_json in = nlohmann::ordered_json::parse(line, nullptr, false);
    if (in.is_discarded() || !in.is_object() || !in.contains("schema"))
      return Fail(fmt::format("line {}: expected an object with a schema", line_no));
    ++schemas;
    nlohmann::ordered_json out;
    out["name"] = in.value("name", "");
    auto t0 = Clock::now();
    auto compiled = structured::CompileJsonSchema(in["schema"]);
    double us = Micros(t0, Clock::now());
    out["compiled"] = compiled.ok();
    if (!compiled.ok()) {
      out["error"] = compiled.status().message();
      ++compile_errors;
    } else {
      compile_us.push_back(us);
    }
    out["compile_us"] = us;
    out["results"] = nlohmann::ordered_json::array();
    bool pass = compiled.ok();
    const nlohmann::ordered_json tests = in.value("tests", nlohmann::ordered_json::array());
    for (const auto& t : tests) {
      const bool valid = t.value("valid", false);
      bool accepted = false;
      if (compiled.ok()) {
        std::vector<int32_t> ids = tok->Encode(t.value("text", ""), {.add_special = false, .parse_special = false});
        structured::JsonMatcher m(compiled->get(), f.max_whitespace);
        accepted = true;
        for (int32_t id : ids) {
          auto m0 = Clock::now();
          masks.Compute(m, &mask);
          mask_us.push_back(Micros(m0, Clock::now()));
          if (!structured::MaskHas(mask, id) || !m.Consume(index.bytes(id))) { accepted = false; break; }
        }
        accepted = accepted && m.CanEnd();
        if (valid && !accepted) ++valid_rejected;
        if (!valid && accepted) ++invalid_accepted;
      }
      pass = pass && accepted == valid;
      out["results"].push_back(accepted);
    }
    passing += pass;
    std::printf("%s\n", out.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace).c_str());
  }
  nlohmann::ordered_json summary{{"schemas", schemas},
                                 {"passing", passing},
                                 {"invalid_accepted", invalid_accepted},
                                 {"valid_rejected", valid_rejected},
                                 {"compile_errors", compile_errors},
                                 {"mask_us_p50", Percentile(mask_us, 0.5)},
                                 {"mask_us_p99", Percentile(mask_us, 0.99)},
                                 {"compile_us_p50", Percentile(compile_us, 0.5)},
                                 {"masks", mask_us.size()}};
  std::printf("%s\n", nlohmann::ordered_json{{"summary", summary}}.dump().c_str());
  return 0;
}

}  // namespace

void RegisterJsonSchemaCheck(CLI::App& app, int* exit_code) {
  auto f = std::make_shared<CheckFlags>();
  CLI::App* c = app.add_subcommand("json-schema-check",
                                   "Score structured output on MaskBench-format JSON lines from stdin (compile, masks, acceptance)");
  c->add_option("-m,--model", f->model, "GGUF model or vocabulary file (its tokenizer)")->required();
  c->add_option("--max-whitespace", f->max_whitespace, "Whitespace bytes allowed in one gap of the JSON text")
      ->capture_default_str();
  c->callback([f, exit_code] { *exit_code = Check(*f); });
}

}  // namespace pc::cli
