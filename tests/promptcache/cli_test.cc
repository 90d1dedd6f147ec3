// The promptcache binary end to end: run --json against the reference,
// tokenize --jsonl against the tokenizer vectors, inspect, errors.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <ctime>
#include <fstream>
#include <map>
#include <span>
#include <sstream>

#include "server/chat_template.h"
#include "test_support.h"

namespace pc {
namespace {

std::string Bin() { return PROMPTCACHE_BINARY; }

TEST(Cli, RunJsonMatchesTheReferenceGreedyTokens) {
  PC_SHARED_OR_SKIP(model, "models/stories260K.gguf");
  PC_SHARED_OR_SKIP(ref, "reference/stories260K.jsonl");
  std::istringstream lines(test::ReadText(ref));
  std::string line;
  int cases = 0;
  while (std::getline(lines, line)) {
    const auto j = nlohmann::json::parse(line);
    std::string ids;
    for (int id : j["prompt_tokens"]) ids += (ids.empty() ? "" : ",") + std::to_string(id);
    int rc = 0;
    const std::string out = test::RunCommand(Bin() + " run -m " + model + " --prompt-tokens " + ids +
                                                 " -n 64 --temp 0 --ignore-eos --logprobs 10 --json --ggml-target " +
                                                 test::ReferenceGgmlTarget("stories260K"),
                                             &rc);
    ASSERT_EQ(rc, 0) << out;
    std::istringstream got(out);
    std::string g;
    size_t step = 0;
    while (std::getline(got, g)) {
      const auto tok = nlohmann::json::parse(g);
      ASSERT_LT(step, j["greedy_tokens"].size());
      EXPECT_EQ(tok["id"], j["greedy_tokens"][step]) << "step " << step;
      ASSERT_EQ(tok["top"].size(), 10u);
      EXPECT_EQ(tok["top"][0][0], j["steps"][step]["top"][0][0]);
      // Target 2e-3 (issue); see model_parity_test for why this bound is wider.
      EXPECT_NEAR(tok["top"][0][1].get<double>(), j["steps"][step]["top"][0][1].get<double>(), 2.5e-2);
      ++step;
    }
    EXPECT_EQ(step, 64u);
    ++cases;
  }
  EXPECT_EQ(cases, 8);
}

// `run --logprobs --json` (ggml numerics, run's default) on the files users
// download: K-quant mixes, qwen2, qwen3, phi3, llama3. Greedy generation is
// checked against the reference by its README's rule (tolerances 3e-2 F16,
// 1e-1 quantized), restarting from the reference's tokens where a near-tie
// makes the two choose differently. Three prompts per file.
// jumps: choices that may differ past the margin, per file (router near-ties).
void CheckRunLogprobs(std::span<const std::pair<const char*, float>> files, int jumps = 0) {
  for (const auto& [name, tol] : files) {
    int jumps_left = jumps;
    PC_SHARED_OR_SKIP(model, std::string("models/") + name + ".gguf");
    PC_SHARED_OR_SKIP(ref, std::string("reference/") + name + ".jsonl");
    const std::vector<test::RefCase> cases = test::LoadReference(ref);
    ASSERT_FALSE(cases.empty());
    const std::string target = test::ReferenceGgmlTarget(name);  // captured below: clang 14 does not capture bindings
    auto gen = [&, model = model](const std::vector<int32_t>& prefix, int n) {
      std::string ids;
      for (int32_t id : prefix) ids += (ids.empty() ? "" : ",") + std::to_string(id);
      int rc = 0;
      const std::string out = test::RunCommand(Bin() + " run -m " + model + " --prompt-tokens " + ids + " -n " +
                                                   std::to_string(n) + " --temp 0 --ignore-eos --logprobs 10 --json" +
                                                   " --ggml-target " + target,
                                               &rc);
      EXPECT_EQ(rc, 0) << out;
      std::vector<test::GenStep> steps;
      std::istringstream got(out);
      for (std::string line; std::getline(got, line);) {
        const auto j = nlohmann::json::parse(line);
        test::GenStep s{j["id"].get<int32_t>(), {}};
        for (const auto& t : j["top"]) s.top.emplace_back(t[0].get<int32_t>(), t[1].get<float>());
        steps.push_back(std::move(s));
      }
      return steps;
    };
    float worst = 0;
    for (size_t i = 0; i < std::min<size_t>(3, cases.size()); ++i) {
      worst = std::max(worst, test::CheckGreedyAgainstReference(cases[i], tol, gen, name, 2, &jumps_left));
    }
    std::printf("%s via run: max |logprob diff| %.5f (bound %.3f)\n", name, worst, tol);
  }
}

TEST(Cli, RunLogprobsMatchTheReferencesOfTheNewLayouts) {
  const std::pair<const char*, float> files[] = {
      {"tiny-gqa-q4_k_m", 1e-1f}, {"tiny-gqa-q5_k_m", 1e-1f},  {"tiny-gqa-q6_k", 1e-1f},
      {"tiny-qwen2-f16", 3e-2f},  {"tiny-qwen2-q4_k_m", 1e-1f}, {"tiny-qwen3-f16", 3e-2f},
      {"tiny-qwen3-q8_0", 1e-1f}, {"tiny-phi3-f16", 3e-2f},     {"tiny-phi3-q4_k_m", 1e-1f},
      {"tiny-llama3-f16", 3e-2f}, {"tiny-llama3-q4_k_m", 1e-1f},
  };
  CheckRunLogprobs(files);
}

// The families (model_parity_test: FamilyFile), run as a user runs them:
// free-running greedy generation with `run --logprobs --ggml-target avx2`.
TEST(Cli, RunLogprobsMatchTheReferencesOfTheFamilies) {
  const std::pair<const char*, float> dense[] = {
      {"tiny-gemma3-f16", 3e-2f}, {"tiny-gemma3-q8_0", 1e-1f}, {"tiny-qwen2yarn-f16", 3e-2f},
      {"tiny-gemma2-f16", 3e-2f}, {"tiny-gemma2-q8_0", 1e-1f}};
  CheckRunLogprobs(dense);
  const std::pair<const char*, float> experts[] = {
      {"tiny-mixtral-f16", 3e-2f},   {"tiny-mixtral-q8_0", 1e-1f}, {"tiny-qwen3moe-f16", 3e-2f},
      {"tiny-qwen3moe-q8_0", 1e-1f}, {"tiny-gptoss-f16", 3e-2f},   {"tiny-gptoss-mxfp4", 1e-1f},
  };
  CheckRunLogprobs(experts, /*jumps=*/1);
}

TEST(Cli, TokenizeJsonlMatchesTheVectors) {
  PC_SHARED_OR_SKIP(vocab, "tokenizer/ggml-vocab-gpt-2.gguf");
  const std::string in = test::TempPath("tok.jsonl");
  {
    std::ofstream f(in);
    f << nlohmann::json("Hello world").dump() << "\n" << nlohmann::json(" Hello World!").dump() << "\n";
  }
  int rc = 0;
  const std::string out = test::RunCommand(Bin() + " tokenize -m " + vocab + " --no-bos --jsonl < " + in, &rc);
  ASSERT_EQ(rc, 0);
  EXPECT_EQ(out, "[15496,995]\n[18435,2159,0]\n");
}

TEST(Cli, InspectAndPromptRun) {
  PC_SHARED_OR_SKIP(model, "models/stories260K.gguf");
  int rc = 0;
  std::string out = test::RunCommand(Bin() + " inspect " + model, &rc);
  ASSERT_EQ(rc, 0);
  EXPECT_NE(out.find("llama.block_count"), std::string::npos);
  EXPECT_NE(out.find("blk.4.ffn_down.weight"), std::string::npos);
  out = test::RunCommand(Bin() + " run -m " + model + " -p 'Once upon a time' -n 12 --temp 0", &rc);
  ASSERT_EQ(rc, 0);
  EXPECT_EQ(out.rfind(", there was a little girl", 0), 0u) << out;
}

// bench-model's prefill after a cached prefix (--pp-depth) and without the
// decode test (-n 0, as llama-bench): the JSON names the depth, has no tg.
TEST(Cli, BenchModelPrefillAtDepthAlone) {
  PC_SHARED_OR_SKIP(model, "models/stories260K.gguf");
  int rc = 0;
  std::string out =
      test::RunCommand(Bin() + " bench-model -m " + model + " -p 5 --pp-depth 9 -n 0 -r 2 -t 1 --json", &rc);
  ASSERT_EQ(rc, 0) << out;
  auto j = nlohmann::json::parse(out);
  EXPECT_EQ(j["pp"]["tokens"], 5);
  EXPECT_EQ(j["pp"]["depth"], 9);
  EXPECT_GT(j["pp"]["tok_s_mean"].get<double>(), 0);
  EXPECT_FALSE(j.contains("tg"));
  out = test::RunCommand(Bin() + " bench-model -m " + model + " -p 5 -n 3 -d 4 -r 1 -t 1", &rc);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("pp5 "), std::string::npos) << out;
  EXPECT_NE(out.find("tg3 @ d4"), std::string::npos) << out;
  out = test::RunCommand(Bin() + " bench-model -m " + model + " -p 500 --pp-depth 10000 -n 0 2>&1", &rc);
  EXPECT_EQ(rc, 1);
  EXPECT_NE(out.find("exceed the context length"), std::string::npos) << out;
}

TEST(Cli, BadInputGivesAClearErrorAndExitCode) {
  int rc = 0;
  std::string out = test::RunCommand(Bin() + " run -m /nonexistent.gguf -p hi 2>&1", &rc);
  EXPECT_EQ(rc, 1);
  EXPECT_NE(out.find("cannot open"), std::string::npos) << out;
  const std::string junk = test::TempPath("junk.gguf");
  test::WriteBytes(junk, std::vector<uint8_t>(100, 0x41));
  out = test::RunCommand(Bin() + " inspect " + junk + " 2>&1", &rc);
  EXPECT_EQ(rc, 1);
  EXPECT_NE(out.find("not a GGUF file"), std::string::npos) << out;
  PC_SHARED_OR_SKIP(model, "models/stories260K.gguf");
  out = test::RunCommand(Bin() + " run -m " + model + " --prompt-tokens 1,99999 -n 2 2>&1", &rc);
  EXPECT_EQ(rc, 1);
  EXPECT_NE(out.find("outside the vocabulary"), std::string::npos) << out;
  out = test::RunCommand(Bin() + " run -m " + model + " --prompt-tokens 1,x 2>&1", &rc);
  EXPECT_EQ(rc, 1);
  EXPECT_NE(out.find("not a token id"), std::string::npos) << out;
  // A shared tier without a secret is refused unless trusted explicitly.
  out = test::RunCommand(Bin() + " serve -m " + model + " --port 0 --redis 127.0.0.1:1 2>&1", &rc);
  EXPECT_EQ(rc, 1);
  EXPECT_NE(out.find("--tier-secret-file"), std::string::npos) << out;
  const std::string secret = test::TempPath("short-secret");
  test::WriteBytes(secret, {'a', 'b', 'c'});
  out = test::RunCommand(Bin() + " serve -m " + model + " --port 0 --redis 127.0.0.1:1 --tier-secret-file " + secret +
                             " 2>&1",
                         &rc);
  EXPECT_EQ(rc, 1);
  EXPECT_NE(out.find("at least 16 bytes"), std::string::npos) << out;
  // A pool larger than the machine (100 TB) is refused by name, not aborted.
  for (const char* cmd : {" serve --port 0", " run -p hi -n 1"}) {
    out = test::RunCommand(Bin() + cmd + " -m " + model + " --kv-cache-mem 100000000000000 2>&1", &rc);
    EXPECT_EQ(rc, 1) << cmd;
    EXPECT_NE(out.find("--kv-cache-mem 100000000000000 bytes"), std::string::npos) << out;
    EXPECT_NE(out.find("more than this machine's RAM"), std::string::npos) << out;
  }
}

// promptcache template --jsonl over every shared reference render, a
// template per run: each line is the reference's prompt byte for byte, and
// what the library gives.
TEST(Cli, TemplateJsonlRendersEverySharedTemplateAsTheLibrary) {
  PC_SHARED_OR_SKIP(renders, "templates/renders.jsonl");
  std::map<std::string, std::vector<nlohmann::json>> by_template;
  std::istringstream in(test::ReadText(renders));
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line);
    by_template[j["template"]].push_back(j);
  }
  std::tm date{};
  date.tm_year = 126;
  date.tm_mon = 10;
  date.tm_mday = 30;
  date.tm_hour = 12;
  std::mktime(&date);
  int exact = 0, lib_exact = 0, total = 0;
  for (const auto& [name, lines] : by_template) {
    const std::string tpath = test::SharedPath("templates/" + name + ".jinja");
    const std::string stdin_path = test::TempPath(name + ".jsonl");
    std::ofstream f(stdin_path);
    for (const auto& j : lines) {
      f << nlohmann::json{{"messages", j["messages"]}, {"add_generation_prompt", j["add_generation_prompt"]}}.dump() << "\n";
    }
    f.close();
    int rc = 0;
    const std::string out = test::RunCommand(Bin() + " template --template-file " + tpath +
                                                 " --bos-token '<s>' --eos-token '</s>' --date 2026-11-30 --jsonl < " +
                                                 stdin_path, &rc);
    ASSERT_EQ(rc, 0) << out;
    auto lib = ChatTemplate::FromSource(test::ReadText(tpath), name);
    ASSERT_TRUE(lib.ok());
    lib->set_bos_token("<s>");
    lib->set_eos_token("</s>");
    lib->set_date(date);
    std::istringstream got(out);
    for (const auto& j : lines) {
      std::string g;
      ASSERT_TRUE(std::getline(got, g)) << name;
      const auto r = nlohmann::json::parse(g);
      auto want = lib->Render(j["messages"], j["add_generation_prompt"].get<bool>());
      ASSERT_TRUE(want.ok() && r.contains("prompt")) << name << ": " << g;
      // The library's own agreement with the reference (and its documented
      // rule where they part) is JinjaTemplates.SharedTemplatesRenderAsTheReference.
      EXPECT_EQ(r["prompt"], want->text) << name;
      exact += r["prompt"] == j["prompt"];
      lib_exact += want->text == j["prompt"].get<std::string>();
      ++total;
    }
  }
  std::printf("promptcache template: %d of %d reference renders byte for byte\n", exact, total);
  EXPECT_EQ(total, 136);
  EXPECT_EQ(exact, lib_exact);
  EXPECT_GT(exact, 0);
}

// template --jsonl keeps a line's keys in their order, as the server keeps a
// request's: a template printing `tools | tojson` shows "type" before
// "function" and "name" before "description", as the client wrote them.
TEST(Cli, TemplateJsonlKeepsTheKeysInTheLinesOrder) {
  const std::string tpl = test::TempPath("tojson.jinja"), lines = test::TempPath("ordered.jsonl");
  std::ofstream(tpl) << "{{ tools | tojson }}";
  std::ofstream(lines) << R"({"messages": [], "tools": [{"type": "function", "function": {"name": "f", "description": "d"}}]})"
                       << "\n";
  int rc = 0;
  const std::string out = test::RunCommand(Bin() + " template --template-file " + tpl + " --jsonl < " + lines, &rc);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_EQ(nlohmann::json::parse(out)["prompt"], R"([{"type": "function", "function": {"name": "f", "description": "d"}}])");
}

// template --tool-syntax: the syntax read off a template (here one written
// for the test: Pythonic calls, strings in single quotes, as LFM2.5's), then
// replies parsed into content and calls, arguments typed by the tools.
TEST(Cli, TemplateToolSyntaxReadsCallsOffTheTemplate) {
  const std::string tpl = test::TempPath("pythonic.jinja"), replies = test::TempPath("replies.jsonl");
  std::ofstream(tpl) << "{%- for m in messages %}<|{{ m.role }}|>{{ m.content }}{%- if m.tool_calls %}<calls>["
                        "{%- for c in m.tool_calls %}{{ c.function.name }}({%- for k, v in c.function.arguments.items() %}"
                        "{{ k }}={% if v is string %}'{{ v }}'{% else %}{{ v }}{% endif %}{{ ', ' if not loop.last }}"
                        "{%- endfor %}){{ ', ' if not loop.last }}{%- endfor %}]</calls>{%- endif %}<|end|>{%- endfor %}";
  std::ofstream(replies)
      << nlohmann::json{{"reply", "Checking. <calls>[get(city='Paris', days=3), get(city='Rome')]</calls>"},
                        {"tools", nlohmann::json::parse(R"([{"type": "function", "function": {"name": "get",
                            "parameters": {"type": "object", "properties": {"city": {"type": "string"},
                            "days": {"type": "integer"}}}}}])")}}.dump()
      << "\n" << nlohmann::json{{"reply", "no call"}}.dump() << "\n";
  int rc = 0;
  const std::string out = test::RunCommand(Bin() + " template --template-file " + tpl + " --tool-syntax < " + replies, &rc);
  ASSERT_EQ(rc, 0) << out;
  std::istringstream lines(out);
  std::string syntax, first, second;
  ASSERT_TRUE(std::getline(lines, syntax) && std::getline(lines, first) && std::getline(lines, second)) << out;
  const auto s = nlohmann::json::parse(syntax);
  EXPECT_TRUE(s["supported"].get<bool>()) << syntax;
  EXPECT_EQ(s["per_argument"]["str_open"], "'");
  EXPECT_EQ(s["per_argument"]["sep"], ", ");
  const auto a = nlohmann::json::parse(first);
  EXPECT_EQ(a["content"], "Checking.");
  ASSERT_EQ(a["tool_calls"].size(), 2u) << first;
  EXPECT_EQ(a["tool_calls"][0]["arguments"], R"({"city": "Paris", "days": 3})");
  EXPECT_EQ(a["tool_calls"][1]["arguments"], R"({"city": "Rome"})");
  const auto b = nlohmann::json::parse(second);
  EXPECT_EQ(b["content"], "no call");
  EXPECT_TRUE(b["tool_calls"].empty());
}

}  // namespace
}  // namespace pc
