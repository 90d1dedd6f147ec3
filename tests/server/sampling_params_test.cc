// The sampling parameters clients send, through the server with
// stories260K: each one changes the tokens the way it should, neutral values
// are accepted, and what we do not implement is a 400 naming the field.
#include <httplib.h>

#include <nlohmann/json.hpp>
#include <set>

#include "base/check.h"
#include "server_harness.h"
#include "test_support.h"

namespace pc {
namespace {

using nlohmann::json;

class SamplingParamsTest : public test::StoriesServerTest {
 protected:
  static json Post(json body, int* status) {
    body["prompt"] = "Once upon a time, there was a little girl named Lily.";
    body["return_tokens"] = true;
    httplib::Client c = harness_->Client();
    auto res = c.Post("/v1/completions", body.dump(), "application/json");
    PC_CHECK(res);
    *status = res->status;
    return json::parse(res->body);
  }
  static std::vector<int32_t> Tokens(const json& body) {
    int status = 0;
    json r = Post(body, &status);
    EXPECT_EQ(status, 200) << r.dump();
    if (status != 200) return {};
    return r["choices"][0]["tokens"].get<std::vector<int32_t>>();
  }
  static size_t Distinct(const std::vector<int32_t>& v) { return std::set<int32_t>(v.begin(), v.end()).size(); }
};

const json kGreedy = {{"max_tokens", 48}, {"temperature", 0}, {"ignore_eos", true}};

json With(json base, const json& extra) {
  base.update(extra);
  return base;
}

TEST_F(SamplingParamsTest, LogitBiasForcesAndBans) {
  const std::vector<int32_t> greedy = Tokens(kGreedy);
  ASSERT_EQ(greedy.size(), 48u);
  // OpenAI's object form: +100 on one token makes it every token.
  std::vector<int32_t> forced = Tokens(With(kGreedy, {{"logit_bias", {{"300", 100}}}}));
  EXPECT_EQ(forced, std::vector<int32_t>(48, 300));
  // llama.cpp's list form, false = never: the greedy first token is gone.
  std::vector<int32_t> banned = Tokens(With(kGreedy, {{"logit_bias", json::array({json::array({greedy[0], false})})}}));
  ASSERT_FALSE(banned.empty());
  EXPECT_EQ(std::count(banned.begin(), banned.end(), greedy[0]), 0);
}

TEST_F(SamplingParamsTest, PenaltiesReduceRepetition) {
  const std::vector<int32_t> greedy = Tokens(With(kGreedy, {{"max_tokens", 96}}));
  for (const json& p : {json{{"repetition_penalty", 3.0}}, json{{"repeat_penalty", 3.0}, {"repeat_last_n", -1}},
                        json{{"frequency_penalty", 2.0}}, json{{"presence_penalty", 2.0}}}) {
    std::vector<int32_t> pen = Tokens(With(With(kGreedy, {{"max_tokens", 96}}), p));
    EXPECT_NE(pen, greedy) << p.dump();
    EXPECT_GT(Distinct(pen), Distinct(greedy)) << p.dump();
  }
}

TEST_F(SamplingParamsTest, MinPTypicalPAndSeeds) {
  const json sampled = {{"max_tokens", 32}, {"temperature", 1.0}, {"ignore_eos", true}};
  // Same seed, same tokens; another seed, others.
  EXPECT_EQ(Tokens(With(sampled, {{"seed", 7}})), Tokens(With(sampled, {{"seed", 7}})));
  EXPECT_NE(Tokens(With(sampled, {{"seed", 7}})), Tokens(With(sampled, {{"seed", 8}})));
  // min_p 1 keeps only the most likely token: greedy, whatever the seed.
  const std::vector<int32_t> greedy = Tokens(With(kGreedy, {{"max_tokens", 32}}));
  EXPECT_EQ(Tokens(With(sampled, {{"seed", 1}, {"min_p", 1.0}})), greedy);
  EXPECT_EQ(Tokens(With(sampled, {{"seed", 2}, {"min_p", 1.0}})), greedy);
  // A tiny typical_p keeps one token per step: the seed no longer matters.
  EXPECT_EQ(Tokens(With(sampled, {{"seed", 1}, {"typical_p", 0.001}})),
            Tokens(With(sampled, {{"seed", 2}, {"typical_p", 0.001}})));
}

TEST_F(SamplingParamsTest, StopTokenIdsMinTokensAndNPredict) {
  const std::vector<int32_t> greedy = Tokens(kGreedy);
  ASSERT_GE(greedy.size(), 8u);
  int status = 0;
  json r = Post(With(kGreedy, {{"stop_token_ids", {greedy[3]}}}), &status);
  ASSERT_EQ(status, 200);
  EXPECT_EQ(r["choices"][0]["finish_reason"], "stop");
  auto first = std::find(greedy.begin(), greedy.end(), greedy[3]) - greedy.begin();
  EXPECT_EQ(r["choices"][0]["tokens"].size(), size_t(first));  // the stop token is not output
  // min_tokens bars it (and the end of generation) for the first 10 tokens.
  std::vector<int32_t> late = Tokens(With(kGreedy, {{"stop_token_ids", {greedy[3]}}, {"min_tokens", 10}}));
  EXPECT_GE(late.size(), 10u);
  EXPECT_EQ(std::count(late.begin(), late.begin() + 10, greedy[3]), 0);
  EXPECT_EQ(Tokens(With(kGreedy, {{"max_tokens", nullptr}, {"n_predict", 5}})).size(), 5u);
}

TEST_F(SamplingParamsTest, NeutralValuesPassOthersAreRefusedByName) {
  const json neutral = {{"mirostat", 0}, {"tfs_z", 1.0}, {"dry_multiplier", 0.0}, {"xtc_probability", 0},
                        {"logit_bias", json::object()}, {"min_p", 0}, {"typical_p", 1.0}, {"repeat_penalty", 1.0},
                        {"repetition_penalty", 1.0}, {"presence_penalty", 0}, {"frequency_penalty", 0},
                        {"best_of", 1}, {"use_beam_search", false}, {"bad_words", json::array()}, {"top_n_sigma", -1},
                        {"skip_special_tokens", true}, {"min_tokens", 0}, {"stop_token_ids", json::array()}};
  EXPECT_EQ(Tokens(With(kGreedy, neutral)), Tokens(kGreedy));
  for (const char* body : {R"({"mirostat": 2})", R"({"tfs_z": 0.9})", R"({"dry_multiplier": 0.8})", R"({"best_of": 3})",
                           R"({"xtc_probability": 0.5})", R"({"n": 17})", R"({"logit_bias": {"999999": 5}})",
                           R"({"stop_token_ids": [-1]})", R"({"repeat_penalty": 1.2, "repetition_penalty": 1.1})",
                           R"({"use_beam_search": true})", R"({"guided_choice": ["a"]})", R"({"logits_processors": ["x"]})"}) {
    json extra = json::parse(body);
    int status = 0;
    json r = Post(With(kGreedy, extra), &status);
    EXPECT_EQ(status, 400) << body;
    const std::string field = extra.begin().key();
    EXPECT_NE(r["error"]["message"].get<std::string>().find(field == "repetition_penalty" ? "repeat_penalty" : field),
              std::string::npos)
        << body << " -> " << r.dump();
  }
}

double PrefilledTokens(test::Harness& h) {
  httplib::Client c = h.Client();
  auto res = c.Get("/metrics");
  PC_CHECK(res);
  const std::string key = "promptcache_step_tokens_total{kind=\"prefill\"} ";
  const size_t at = res->body.find(key);
  return at == std::string::npos ? 0 : std::stod(res->body.substr(at + key.size()));
}

// n choices: one prompt computation (the others wait for its blocks and
// take its last logits), consecutive seeds, usage summed; streams carry
// each choice's index and add up to the whole responses.
// llama.cpp's per-request draft length: prompt-lookup drafts change how
// many tokens a step verifies, never which tokens come out; timings count
// them; out of range is a 400 naming the field.
TEST_F(SamplingParamsTest, LookupDraftsPerRequestKeepTheTokens) {
  const json greedy = With(kGreedy, {{"max_tokens", 96}});
  const std::vector<int32_t> plain = Tokens(With(greedy, {{"speculative.n_max", 0}}));
  ASSERT_EQ(plain.size(), 96u);
  int status = 0;
  // Whether a step carries drafts follows the measured step costs, which a
  // busy machine (the suite runs two tests at once) can make say no for a
  // whole request: a few tries, each with the same tokens.
  size_t drafted = 0;
  for (int attempt = 0; attempt < 5 && drafted == 0; ++attempt) {
    const json r = Post(With(greedy, {{"speculative.n_max", 8}}), &status);
    ASSERT_EQ(status, 200) << r.dump();
    EXPECT_EQ(r["choices"][0]["tokens"].get<std::vector<int32_t>>(), plain);
    drafted = r["timings"]["draft_n"].get<size_t>();
    EXPECT_LE(r["timings"]["draft_n_accepted"].get<size_t>(), drafted);
  }
  EXPECT_GT(drafted, 0u) << "the story repeats its words: lookups should find drafts";
  const json bad = Post(With(greedy, {{"speculative.n_max", 65}}), &status);
  EXPECT_EQ(status, 400);
  EXPECT_EQ(bad["error"]["param"], "speculative.n_max") << bad.dump();
}

TEST_F(SamplingParamsTest, NChoicesShareOnePrefill) {
  std::string prompt;
  for (int i = 0; i < 6; ++i) prompt += "Lily and Ben went to the park to play with a red ball and a kite. ";
  const json body = {{"prompt", prompt}, {"max_tokens", 8}, {"temperature", 1.0}, {"seed", 11}, {"n", 3}, {"cache_salt", "n-test"}};
  const double before = PrefilledTokens(*harness_);
  httplib::Client c = harness_->Client();
  auto res = c.Post("/v1/completions", body.dump(), "application/json");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  const json r = json::parse(res->body);
  const double prefilled = PrefilledTokens(*harness_) - before;
  const size_t prompt_tokens = r["usage"]["prompt_tokens"];
  ASSERT_EQ(r["choices"].size(), 3u);
  size_t completion = 0;
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(r["choices"][i]["index"], i);
    completion += r["choices"][i]["text"].get<std::string>().empty() ? 0 : 1;
  }
  EXPECT_EQ(completion, 3u);
  EXPECT_EQ(r["usage"]["completion_tokens"], 24);
  EXPECT_LE(prefilled, prompt_tokens + 16.0) << "the prompt of " << prompt_tokens << " tokens was computed more than once";
  // Choice i is the request with seed 11 + i.
  for (int i = 0; i < 3; ++i) {
    json one = body;
    one["n"] = 1;
    one["seed"] = 11 + i;
    auto single = c.Post("/v1/completions", one.dump(), "application/json");
    ASSERT_TRUE(single);
    EXPECT_EQ(json::parse(single->body)["choices"][0]["text"], r["choices"][i]["text"]) << i;
  }
  // Streamed, greedy: per index the same text as the whole response.
  json greedy = {{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"max_tokens", 6}, {"temperature", 0}, {"n", 2}};
  auto whole = c.Post("/v1/chat/completions", greedy.dump(), "application/json");
  ASSERT_TRUE(whole);
  const json w = json::parse(whole->body);
  greedy["stream"] = true;
  greedy["stream_options"] = {{"include_usage", true}};
  auto sse = c.Post("/v1/chat/completions", greedy.dump(), "application/json");
  ASSERT_TRUE(sse);
  std::string text[2];
  json usage;
  for (const json& j : test::SsePayloads(sse->body)) {
    if (j.contains("usage")) usage = j["usage"];
    for (const json& ch : j["choices"])
      if (ch["delta"].contains("content")) text[ch["index"].get<int>()] += ch["delta"]["content"].get<std::string>();
  }
  for (int i = 0; i < 2; ++i) EXPECT_EQ(text[i], w["choices"][i]["message"]["content"]) << i;
  EXPECT_EQ(usage["completion_tokens"], w["usage"]["completion_tokens"]);
}

}  // namespace
}  // namespace pc
