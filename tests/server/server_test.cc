// End-to-end over loopback HTTP with stories260K: the OpenAI routes, SSE,
// greedy output equal to single-request generation, cached_tokens, tenants,
// cancellation, 429, and thousands of hostile bodies.
#include <httplib.h>

#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <thread>

#include "base/check.h"
#include "server/server.h"
#include "server_harness.h"
#include "reference_generate.h"
#include "test_model.h"
#include "test_support.h"

namespace pc {
namespace {

using nlohmann::json;
using test::Harness;

struct StreamResult {
  int status = 0;
  std::vector<json> chunks;
  bool done = false;
  std::string text;
  std::vector<int32_t> tokens;
};

// Parses an SSE body into its JSON payloads.
StreamResult ParseSse(int status, const std::string& body) {
  StreamResult r;
  r.status = status;
  size_t pos = 0;
  while ((pos = body.find("data: ", pos)) != std::string::npos) {
    const size_t end = body.find("\n\n", pos);
    const std::string payload = body.substr(pos + 6, end - pos - 6);
    pos = end;
    if (payload == "[DONE]") {
      r.done = true;
      continue;
    }
    json j = json::parse(payload);
    if (j.contains("choices") && !j["choices"].empty()) {
      const json& c = j["choices"][0];
      if (c.contains("text")) r.text += c["text"].get<std::string>();
      if (c.contains("delta") && c["delta"].contains("content")) r.text += c["delta"]["content"].get<std::string>();
      if (c.contains("tokens")) for (const json& t : c["tokens"]) r.tokens.push_back(t.get<int32_t>());
    }
    r.chunks.push_back(std::move(j));
  }
  return r;
}

// The suite's shared Harness (StoriesServerTest) is unused here: each test
// starts the engine and server options it needs.
class ServerTest : public test::StoriesServerTest {
 protected:
  static std::unique_ptr<Harness> Start(EngineOptions eo = {}, ServerOptions so = {}) {
    if (eo.cache.mem_bytes == 0) eo.cache.mem_bytes = 64 << 20;
    return std::make_unique<Harness>(*model_, *tok_, eo, so);
  }
  // The reference: one request alone through Generate, greedy.
  static std::vector<int32_t> Reference(const std::vector<int32_t>& prompt, int n) {
    GenerateOptions o;
    o.max_tokens = n;
    o.sampling.temperature = 0;
    o.ignore_eos = true;
    std::vector<int32_t> ids;
    auto st = Generate(*model_, *tok_, prompt, o, [&](const TokenEvent& e) {
      ids.push_back(e.id);
      return true;
    });
    PC_CHECK(st.ok());
    return ids;
  }
  static json Post(httplib::Client& c, const std::string& path, const json& body, int* status = nullptr,
                   const httplib::Headers& h = {}) {
    auto res = c.Post(path.c_str(), h, body.dump(), "application/json");
    PC_CHECK(res);
    if (status) *status = res->status;
    return json::parse(res->body);
  }
  static StreamResult PostStream(httplib::Client& c, const std::string& path, const json& body) {
    auto res = c.Post(path.c_str(), body.dump(), "application/json");
    PC_CHECK(res);
    return ParseSse(res->status, res->body);
  }
};

const char* kStory = "Once upon a time, there was a little girl named Lily. She loved to play in the park with her";

TEST_F(ServerTest, GreedyCompletionEqualsSingleRequestGeneration) {
  auto h = Start();
  httplib::Client c = h->Client();
  const std::vector<int32_t> prompt = tok_->Encode(kStory);
  const std::vector<int32_t> ref = Reference(prompt, 40);
  json body = {{"prompt", kStory}, {"max_tokens", 40}, {"temperature", 0}, {"ignore_eos", true}, {"return_tokens", true}};
  int status = 0;
  json r = Post(c, "/v1/completions", body, &status);
  ASSERT_EQ(status, 200) << r.dump();
  EXPECT_EQ(r["choices"][0]["tokens"].get<std::vector<int32_t>>(), ref);
  EXPECT_EQ(r["choices"][0]["text"], tok_->Decode(ref));
  EXPECT_EQ(r["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(r["usage"]["prompt_tokens"], prompt.size());
  EXPECT_EQ(r["usage"]["completion_tokens"], 40);
  for (const char* k : {"queue_ms", "ttft_ms", "prefill_ms", "decode_ms_per_token", "cached_tokens_by_tier"}) {
    EXPECT_TRUE(r["timings"].contains(k)) << k;
  }
  body["stream"] = true;
  body["stream_options"] = {{"include_usage", true}};
  StreamResult s = PostStream(c, "/v1/completions", body);
  ASSERT_EQ(s.status, 200);
  EXPECT_TRUE(s.done);
  EXPECT_EQ(s.tokens, ref);
  EXPECT_EQ(s.text, tok_->Decode(ref));
  ASSERT_GE(s.chunks.size(), 2u);
  EXPECT_EQ(s.chunks.back()["usage"]["completion_tokens"], 40);
  EXPECT_TRUE(s.chunks.back()["choices"].empty());
}

TEST_F(ServerTest, GreedyOutputEqualsTheCli) {
  auto h = Start();
  httplib::Client c = h->Client();
  int code = -1;
  const std::string out = test::RunCommand(std::string(PROMPTCACHE_BINARY) + " run -m " +
                                               test::SharedPath("models/stories260K.gguf") + " -p '" + kStory +
                                               "' -n 32 --temp 0 --ignore-eos --json 2>/dev/null",
                                           &code);
  ASSERT_EQ(code, 0);
  std::vector<int32_t> cli;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) cli.push_back(json::parse(line)["id"].get<int32_t>());
  ASSERT_EQ(cli.size(), 32u);
  json r = Post(c, "/v1/completions", {{"prompt", kStory}, {"max_tokens", 32}, {"temperature", 0}, {"ignore_eos", true},
                                       {"return_tokens", true}});
  EXPECT_EQ(r["choices"][0]["tokens"].get<std::vector<int32_t>>(), cli);
}

TEST_F(ServerTest, ChatStreamsAndMatches) {
  auto h = Start();
  httplib::Client c = h->Client();
  json body = {{"messages", {{{"role", "system"}, {"content", "Tell a story."}}, {{"role", "user"}, {"content", "A cat"}}}},
               {"max_tokens", 24}, {"temperature", 0}, {"ignore_eos", true}};
  int status = 0;
  json r = Post(c, "/v1/chat/completions", body, &status);
  ASSERT_EQ(status, 200) << r.dump();
  EXPECT_EQ(r["object"], "chat.completion");
  EXPECT_EQ(r["choices"][0]["message"]["role"], "assistant");
  const std::string text = r["choices"][0]["message"]["content"];
  EXPECT_FALSE(text.empty());
  body["stream"] = true;
  StreamResult s = PostStream(c, "/v1/chat/completions", body);
  EXPECT_TRUE(s.done);
  EXPECT_EQ(s.text, text);
  EXPECT_EQ(s.chunks.front()["choices"][0]["delta"]["role"], "assistant");
  EXPECT_EQ(s.chunks.front()["object"], "chat.completion.chunk");
  // The rendered prompt is what ChatML asks for (the model has no template of its own).
  const std::string chatml =
      "<|im_start|>system\nTell a story.<|im_end|>\n<|im_start|>user\nA cat<|im_end|>\n<|im_start|>assistant\n";
  EXPECT_EQ(r["usage"]["prompt_tokens"], tok_->Encode(chatml, {.add_special = true, .parse_special = true}).size());
}

TEST_F(ServerTest, RepeatReportsCachedTokens) {
  auto h = Start();
  httplib::Client c = h->Client();
  const std::string prompt = std::string(kStory) + " friends. One day, Lily saw a big red ball in the sky and she wanted";
  const size_t n = tok_->Encode(prompt).size();
  ASSERT_GT(n, 32u);
  json body = {{"prompt", prompt}, {"max_tokens", 8}, {"temperature", 0}};
  json a = Post(c, "/v1/completions", body);
  json b = Post(c, "/v1/completions", body);
  EXPECT_EQ(a["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  // Token-exact: every prompt token, the partial last block included (the
  // last token's logits were kept: no token is computed again).
  const size_t expect = n;
  EXPECT_EQ(b["usage"]["prompt_tokens_details"]["cached_tokens"], expect);
  EXPECT_EQ(b["timings"]["cached_tokens_by_tier"]["pool"], expect);
  EXPECT_EQ(a["choices"][0]["text"], b["choices"][0]["text"]);
  // Opting out per request: nothing read.
  body["cache_prompt"] = false;
  EXPECT_EQ(Post(c, "/v1/completions", body)["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  // Another salt: another namespace.
  body["cache_prompt"] = true;
  body["cache_salt"] = "other";
  EXPECT_EQ(Post(c, "/v1/completions", body)["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  const std::string m = c.Get("/metrics")->body;
  EXPECT_NE(m.find("promptcache_prefix_cache_hit_tokens_total{tier=\"pool\"} " + std::to_string(expect)), std::string::npos) << m;
  for (const char* name : {"promptcache_ttft_seconds_bucket", "promptcache_itl_seconds_count", "promptcache_e2e_seconds_sum",
                           "promptcache_queue_seconds_count", "promptcache_kv_pool_blocks{state=\"used\"}",
                           "promptcache_requests_running", "promptcache_requests_waiting",
                           "promptcache_prompt_tokens_total", "promptcache_generation_tokens_total",
                           "# TYPE promptcache_tier_load_seconds histogram", "promptcache_min_useful_match_tokens{tier=\"pool\"}"}) {
    EXPECT_NE(m.find(name), std::string::npos) << name;
  }
}

TEST_F(ServerTest, TenantsNeverShareCachedPrefixes) {
  ServerOptions so;
  so.api_keys = {{"key-a", "alice"}, {"key-b", "bob"}};
  auto h = Start({}, so);
  httplib::Client c = h->Client();
  const json body = {{"prompt", std::string(kStory) + " mom and dad every day after school"}, {"max_tokens", 4}, {"temperature", 0}};
  const httplib::Headers ka = {{"Authorization", "Bearer key-a"}}, kb = {{"Authorization", "Bearer key-b"}};
  int status = 0;
  Post(c, "/v1/completions", body, &status, {});
  EXPECT_EQ(status, 401);
  Post(c, "/v1/completions", body, &status, {{"Authorization", "Bearer wrong"}});
  EXPECT_EQ(status, 401);
  EXPECT_EQ(Post(c, "/v1/completions", body, &status, ka)["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  EXPECT_EQ(Post(c, "/v1/completions", body, &status, kb)["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  // Even naming the other tenant as cache_salt does not reach its blocks.
  json spoof = body;
  spoof["cache_salt"] = "alice";
  EXPECT_EQ(Post(c, "/v1/completions", spoof, &status, kb)["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  EXPECT_GT(Post(c, "/v1/completions", body, &status, ka)["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
}

TEST_F(ServerTest, ConcurrentStreamsEqualTheirSingleRequestOutputs) {
  EngineOptions eo;
  eo.max_batch_tokens = 24;  // forces chunked prefill interleaved with decode
  auto h = Start(eo);
  const int kClients = 8;
  std::vector<std::string> prompts;
  std::vector<std::vector<int32_t>> refs;
  for (int i = 0; i < kClients; ++i) {
    prompts.push_back(std::string(kStory) + (i % 2 ? " cat" : " dog") + std::string(static_cast<size_t>(i), '!'));
    refs.push_back(Reference(tok_->Encode(prompts.back()), 30));
  }
  std::vector<StreamResult> got(kClients);
  std::vector<std::thread> ts;
  for (int i = 0; i < kClients; ++i) {
    ts.emplace_back([&, i] {
      httplib::Client c = h->Client();
      got[i] = PostStream(c, "/v1/completions",
                          {{"prompt", prompts[i]}, {"max_tokens", 30}, {"temperature", 0}, {"ignore_eos", true},
                           {"return_tokens", true}, {"stream", true}});
    });
  }
  for (auto& t : ts) t.join();
  for (int i = 0; i < kClients; ++i) EXPECT_EQ(got[i].tokens, refs[i]) << "client " << i;
}

TEST_F(ServerTest, DisconnectCancelsAndFreesBlocks) {
  auto h = Start();
  // A client that stops reading after a few chunks closes its connection.
  int chunks = 0;
  httplib::Client c = h->Client();
  httplib::Request rq;
  rq.method = "POST";
  rq.path = "/v1/completions";
  rq.body = json({{"prompt", kStory}, {"max_tokens", 480}, {"ignore_eos", true}, {"stream", true}}).dump();
  rq.set_header("Content-Type", "application/json");
  rq.content_receiver = [&](const char*, size_t, uint64_t, uint64_t) { return ++chunks < 3; };
  c.send(rq);
  EXPECT_EQ(chunks, 3);
  for (int i = 0; i < 500 && !h->engine->Idle(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_TRUE(h->engine->Idle());
  EXPECT_EQ(h->engine->Snapshot().num_used_blocks, 0u);
  EXPECT_EQ(h->engine->metrics().Get("promptcache_requests_total", "finish_reason=\"cancelled\""), 1);
  EXPECT_LT(h->engine->metrics().Get("promptcache_generation_tokens_total"), 480);
}

TEST_F(ServerTest, FullQueueAnswers429WithRetryAfter) {
  EngineOptions eo;
  eo.max_running = 1;
  eo.max_waiting = 1;
  auto h = Start(eo);
  std::atomic<int> ok{0}, limited{0};
  std::atomic<bool> retry_after{true};
  std::vector<std::thread> ts;
  for (int i = 0; i < 8; ++i) {
    ts.emplace_back([&] {
      httplib::Client c = h->Client();
      auto res = c.Post("/v1/completions", json({{"prompt", kStory}, {"max_tokens", 300}, {"ignore_eos", true}}).dump(),
                        "application/json");
      PC_CHECK(res);
      if (res->status == 200) ++ok;
      if (res->status == 429) {
        ++limited;
        if (res->get_header_value("Retry-After").empty()) retry_after = false;
        EXPECT_EQ(json::parse(res->body)["error"]["type"], "rate_limit_error");
      }
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_GE(ok, 1);
  EXPECT_GE(limited, 1);
  EXPECT_EQ(ok + limited, 8);
  EXPECT_TRUE(retry_after);
}

TEST_F(ServerTest, AuxiliaryRoutes) {
  auto h = Start();
  httplib::Client c = h->Client();
  auto models = c.Get("/v1/models");
  ASSERT_TRUE(models);
  EXPECT_EQ(json::parse(models->body)["data"][0]["object"], "model");
  EXPECT_EQ(json::parse(c.Get("/health")->body)["status"], "ok");
  json t = Post(c, "/tokenize", {{"content", "Lily went home."}});
  EXPECT_EQ(t["tokens"].get<std::vector<int32_t>>(), tok_->Encode("Lily went home.", {.add_special = false}));
  EXPECT_EQ(Post(c, "/detokenize", {{"tokens", t["tokens"]}})["content"], tok_->Decode(t["tokens"].get<std::vector<int32_t>>()));
  auto nf = c.Get("/nope");
  EXPECT_EQ(nf->status, 404);
  EXPECT_TRUE(json::parse(nf->body).contains("error"));
  json stopped = Post(c, "/v1/completions", {{"prompt", kStory}, {"max_tokens", 40}, {"temperature", 0}, {"stop", " the"}});
  const std::string full = Post(c, "/v1/completions", {{"prompt", kStory}, {"max_tokens", 40}, {"temperature", 0}})["choices"][0]["text"];
  const size_t cut = full.find(" the");
  ASSERT_NE(cut, std::string::npos) << full;
  EXPECT_EQ(stopped["choices"][0]["text"], full.substr(0, cut));
  EXPECT_EQ(stopped["choices"][0]["finish_reason"], "stop");
  json lp = Post(c, "/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "Hi"}}}}, {"max_tokens", 3},
                                             {"logprobs", true}, {"top_logprobs", 2}});
  ASSERT_EQ(lp["choices"][0]["logprobs"]["content"].size(), 3u) << lp.dump();
  EXPECT_EQ(lp["choices"][0]["logprobs"]["content"][0]["top_logprobs"].size(), 2u);
}

// -c/--ctx-size: the context a request may fill, reported as max_model_len,
// bounding prompt + max_tokens and setting a chat's default max_tokens; the
// KV pool caps it.
TEST_F(ServerTest, ContextSizeBoundsRequestsAndIsCappedByThePool) {
  EngineOptions eo;
  eo.ctx_tokens = 64;
  auto h = Start(eo);
  httplib::Client c = h->Client();
  EXPECT_EQ(json::parse(c.Get("/v1/models")->body)["data"][0]["max_model_len"], 64);
  const std::vector<int32_t> prompt(60, 100);
  int status = 0;
  json over = Post(c, "/v1/completions", {{"prompt", prompt}, {"max_tokens", 5}}, &status);
  EXPECT_EQ(status, 400) << over.dump();
  EXPECT_NE(over["error"]["message"].get<std::string>().find("64"), std::string::npos) << over.dump();
  json fits = Post(c, "/v1/completions", {{"prompt", prompt}, {"max_tokens", 4}, {"ignore_eos", true}}, &status);
  EXPECT_EQ(status, 200) << fits.dump();
  EXPECT_EQ(fits["usage"]["completion_tokens"], 4);
  json chat = Post(c, "/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "Hi"}}}}, {"ignore_eos", true}}, &status);
  EXPECT_EQ(status, 200) << chat.dump();
  EXPECT_EQ(chat["usage"]["prompt_tokens"].get<int>() + chat["usage"]["completion_tokens"].get<int>(), 64) << chat.dump();
  // A pool of 4 blocks of 16 tokens holds 64 positions: the context is capped there.
  EngineOptions small;
  small.cache.mem_bytes = 4 * 16 * 2 * static_cast<size_t>(model_->config().n_layer) *
                          static_cast<size_t>(model_->config().kv_dim()) * 2;
  small.cache.block_size = 16;
  auto h2 = Start(small);
  httplib::Client c2 = h2->Client();
  EXPECT_EQ(json::parse(c2.Get("/v1/models")->body)["data"][0]["max_model_len"], 64);
}

// Bodies that must all be refused with a 4xx JSON error.
std::vector<std::string> HostileBodies(size_t n, size_t n_ctx) {
  std::mt19937 rng(1234);
  const std::vector<json> valid = {
      {{"prompt", "Once upon a time"}, {"max_tokens", 4}},
      {{"messages", {{{"role", "user"}, {"content", "Hi"}}}}, {"max_tokens", 4}},
  };
  const std::vector<json> bad_values = {"x", -1, 0, 1e300, -1e300, 3.5, true, nullptr, json::array(), json::object(),
                                        json::array({1, "a"}), INT64_MIN, UINT64_MAX};
  // Values each field must refuse (null would mean "absent", so none here).
  const std::vector<std::pair<std::string, std::vector<json>>> bad_fields = {
      {"max_tokens", {"x", -1, 0, 3.5, true, json::array(), json::object(), 1e300, 100000}},
      {"temperature", {"x", -1, 3, true, json::array(), 1e300}},
      {"top_p", {"x", 0, 1.5, -1, true}},
      {"top_k", {"x", -2, 3.5, true, json::array()}},
      {"n", {17, 0, "x", true}},
      {"stop", {1, true, json::object(), json::array({1}), json::array({"a", 1})}},
      {"logprobs", {"x", json::array(), json::object(), -1.5}},
      {"stream", {"x", 1, json::array(), json::object()}},
      {"stream_options", {"x", 1, json::array(), json{{"include_usage", "x"}}}},
      {"ignore_eos", {"x", 1, json::array()}},
      {"cache_salt", {1, true, json::array(), json::object()}},
      {"cache_prompt", {"x", 1, json::array()}},
      {"seed", {"x", 3.5, true, json::array()}},
      {"presence_penalty", {"x", 5, -3, json::array()}},
      {"min_p", {"x", 2, -1}},
      {"logit_bias", {"x", 1, json{{"99999", 1}}, json{{"1", 500}}}},
      {"response_format", {"x", json{{"type", "yaml"}}, json{{"type", "json_schema"}}}},
      {"json_schema", {1, json{{"$ref", "#/nowhere"}}}},
      {"prompt", {1, true, json::object(), json::array(), json::array({-1}), json::array({1.5}),
                  json::array({"a", "b"}), json::array({json::array()})}},
      {"messages", {1, "x", json::array(), json::array({1}), json::array({json{{"role", "user"}}}),
                    json::array({json{{"role", "alien"}, {"content", "x"}}})}},
  };
  std::vector<std::string> out;
  while (out.size() < n) {
    const json& v = valid[rng() % valid.size()];
    const std::string s = v.dump();
    switch (rng() % 6) {
      case 0: out.push_back(s.substr(0, rng() % s.size())); break;  // truncated
      case 1: {  // a byte replaced by something that breaks the syntax
        std::string t = s;
        t[rng() % t.size()] = "{}[]\",:\\\x01"[rng() % 9];
        if (!json::accept(t)) out.push_back(t);
        break;
      }
      case 2: {  // a field with a wrong type or an out-of-range value
        json t = v;
        const auto& [f, values] = bad_fields[rng() % bad_fields.size()];
        const json& bad = values[rng() % values.size()];
        t[f] = bad;
        // Each route ignores the other's prompt field: break both.
        if (f == "prompt" || f == "messages") {
          const std::vector<json>& bp = bad_fields[bad_fields.size() - 2].second;
          const std::vector<json>& bm = bad_fields[bad_fields.size() - 1].second;
          t["prompt"] = bp[rng() % bp.size()];
          t["messages"] = bm[rng() % bm.size()];
        }
        out.push_back(t.dump());
        break;
      }
      case 3: out.push_back(bad_values[rng() % bad_values.size()].dump()); break;
      case 4: {  // random bytes
        std::string t(rng() % 200, '\0');
        for (char& ch : t) ch = static_cast<char>(rng());
        if (!json::accept(t)) out.push_back(t);
        break;
      }
      case 5: {  // deep nesting and prompts beyond the context
        if (rng() % 2) out.push_back(std::string(100000, '[') + std::string(100000, ']'));
        else out.push_back(json({{"prompt", std::vector<int>(n_ctx + 1, 5)}, {"max_tokens", 1}}).dump());
        break;
      }
    }
  }
  return out;
}

TEST_F(ServerTest, DeepNestingUnderAFieldIsA400AndTheServerServesOn) {
  auto h = Start();
  httplib::Client c = h->Client();
  // 100,000 nested arrays (200 KB) under each route's main field.
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  const std::pair<const char*, const char*> cases[] = {{"/v1/completions", "prompt"},
                                                       {"/v1/chat/completions", "messages"},
                                                       {"/tokenize", "content"},
                                                       {"/detokenize", "tokens"}};
  for (const auto& [path, field] : cases) {
    auto res = c.Post(path, std::string("{\"") + field + "\":" + deep + "}", "application/json");
    ASSERT_TRUE(res) << path << ": no response (the server died?)";
    EXPECT_EQ(res->status, 400) << path;
    json j = json::parse(res->body, nullptr, false);
    ASSERT_TRUE(j.contains("error")) << res->body;
    EXPECT_NE(j["error"]["message"].get<std::string>().find("levels deep"), std::string::npos) << res->body;
  }
  json ok = Post(c, "/v1/completions", {{"prompt", kStory}, {"max_tokens", 4}});
  EXPECT_EQ(ok["usage"]["completion_tokens"], 4);
}

// CPU denial of service: prompts that cannot fit the context are refused by
// their size before tokenization (a 15 MB prompt took 12 s to tokenize), and
// special-token text is scanned in one pass (100,000 "<s>" took 20 s).
TEST_F(ServerTest, OversizedPromptsAreRefusedBeforeTokenizing) {
  auto h = Start();
  httplib::Client c = h->Client();
  std::string specials;
  for (int i = 0; i < 100000; ++i) specials += "<s>";
  int status = 0;
  json r = Post(c, "/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", specials}}}}}, &status);
  EXPECT_EQ(status, 400) << r.dump().substr(0, 300);
  EXPECT_EQ(r["error"]["param"], "messages");
  EXPECT_NE(r["error"]["message"].get<std::string>().find("300"), std::string::npos) << r.dump().substr(0, 300);
  const std::string huge(15 << 20, 'a');
  r = Post(c, "/v1/completions", {{"prompt", huge}}, &status);
  EXPECT_EQ(status, 400);
  EXPECT_EQ(r["error"]["param"], "prompt");
  r = Post(c, "/tokenize", {{"content", huge}}, &status);
  EXPECT_EQ(status, 400);
  r = Post(c, "/v1/completions", {{"prompt", kStory}, {"stop", std::string(2000, 'x')}}, &status);
  EXPECT_EQ(status, 400);
  EXPECT_EQ(r["error"]["param"], "stop");
  // A prompt of many special tokens that does fit is served.
  std::string some;
  for (int i = 0; i < 300; ++i) some += "<s>";
  r = Post(c, "/v1/completions", {{"prompt", some}, {"max_tokens", 2}}, &status);
  EXPECT_EQ(status, 200) << r.dump();
  json ok = Post(c, "/v1/completions", {{"prompt", kStory}, {"max_tokens", 4}});
  EXPECT_EQ(ok["usage"]["completion_tokens"], 4);
}

TEST_F(ServerTest, FiveThousandHostileBodiesGet4xxJson) {
  auto h = Start();
  httplib::Client c = h->Client();
  const std::vector<std::string> bodies = HostileBodies(5000, static_cast<size_t>(model_->config().n_ctx));
  const char* paths[] = {"/v1/completions", "/v1/chat/completions", "/tokenize", "/detokenize", "/apply-template"};
  size_t i = 0, refused = 0, generating = 0;
  for (const std::string& b : bodies) {
    const std::string path = paths[i++ % 5];
    auto res = c.Post(path.c_str(), b, "application/json");
    ASSERT_TRUE(res) << "no response for body " << i;
    json j = json::parse(res->body, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << res->body;
    ASSERT_LT(res->status, 500) << path << ": " << res->body;
    // Every body is invalid for the generating routes. The tokenizer routes
    // read only their own fields, so a body whose messages are sound may be
    // answered; whatever they refuse is refused as JSON with an error.
    if (path.find("/v1/") == 0) {
      ++generating;
      if (res->status >= 400) ++refused;
      else ADD_FAILURE() << path << " answered " << res->status << " to " << b.substr(0, 200);
    }
    if (res->status >= 400) {
      ASSERT_TRUE(j.contains("error")) << res->body;
    }
  }
  EXPECT_EQ(refused, generating);
  // And the server still serves.
  json ok = Post(c, "/v1/completions", {{"prompt", kStory}, {"max_tokens", 4}});
  EXPECT_EQ(ok["usage"]["completion_tokens"], 4);
}

// Greedy generation through /v1/completions with 10 logprobs per step, ids
// via return_tokens_as_token_ids: what CheckGreedyAgainstReference calls.
test::GenerateFn GreedyViaServer(httplib::Client& c) {
  return [&c](const std::vector<int32_t>& prefix, int n) {
    const json body = {{"prompt", prefix},   {"max_tokens", n}, {"temperature", 0},
                       {"ignore_eos", true}, {"logprobs", 10},  {"return_tokens", true},
                       {"return_tokens_as_token_ids", true}};
    auto res = c.Post("/v1/completions", body.dump(), "application/json");
    PC_CHECK(res);
    const json j = json::parse(res->body);
    std::vector<test::GenStep> steps;
    const json& choice = j["choices"][0];
    for (size_t i = 0; i < choice["tokens"].size(); ++i) {
      test::GenStep st{choice["tokens"][i].get<int32_t>(), {}};
      for (const auto& [key, lp] : choice["logprobs"]["top_logprobs"][i].items()) {
        st.top.emplace_back(std::stoi(key.substr(std::string("token_id:").size())), lp.get<float>());
      }
      std::sort(st.top.begin(), st.top.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
      steps.push_back(std::move(st));
    }
    return steps;
  };
}

// One file through the server in both numerics, checked on its first two
// reference prompts by the README's rule (test::CheckGreedyAgainstReference)
// with bound tol (ggml numerics) or precise_tol (serve's default).
// precise_tol < 0: the precise numerics are not checked (a mixture of
// experts there: model_parity_test says why). jumps: router near-ties
// allowed (test::CheckGreedyAgainstReference). The ggml numerics reproduce
// the build of the reference engine that recorded the file.
void CheckFileViaServer(const std::string& name, float tol, float precise_tol, int jumps = 0) {
  PC_SHARED_OR_SKIP(path, "models/" + name + ".gguf");
  PC_SHARED_OR_SKIP(ref, "reference/" + name + ".jsonl");
  const std::vector<test::RefCase> cases = test::LoadReference(ref);
  test::ScopedGgmlTarget target(name);
  for (Numerics numerics : {Numerics::kGgmlCompat, Numerics::kPrecise}) {
    if (numerics == Numerics::kPrecise && precise_tol < 0) continue;
    auto model = Model::Load(path, 2, numerics);
    ASSERT_TRUE(model.ok()) << model.status().message();
    auto tok = Tokenizer::FromGguf((*model)->gguf());
    ASSERT_TRUE(tok.ok());
    EngineOptions eo;
    eo.cache.mem_bytes = 16 << 20;
    Harness h(**model, *tok, eo, ServerOptions{});
    httplib::Client c = h.Client();
    const test::GenerateFn gen = GreedyViaServer(c);
    const bool ggml = numerics == Numerics::kGgmlCompat;
    const float bound = ggml ? tol : precise_tol;
    float worst = 0;
    int jumps_left = jumps;
    for (size_t i = 0; i < std::min<size_t>(2, cases.size()); ++i) {
      worst = std::max(worst, test::CheckGreedyAgainstReference(cases[i], bound, gen, name, 2, &jumps_left));
    }
    std::printf("%s via serve (%s numerics): max |logprob diff| %.5f (bound %.3f)\n", name.c_str(),
                ggml ? "ggml" : "precise", worst, bound);
  }
}

// The files users download, through the server (greedy completions with 10
// logprobs, ids via return_tokens_as_token_ids). With --numerics ggml the
// README's bounds hold as given; with the precise numerics (serve's default)
// too, but for the three tiny-gqa K-quant files whose bound is 1.5x
// (model_parity_test explains why).
TEST(ServerLayouts, NewLayoutsMatchTheirReferences) {
  struct File {
    const char* name;
    float tol, precise_tol;
  };
  const File files[] = {
      {"tiny-gqa-q4_k_m", 1e-1f, 1.5e-1f}, {"tiny-gqa-q5_k_m", 1e-1f, 1.5e-1f}, {"tiny-gqa-q6_k", 1e-1f, 1.5e-1f},
      {"tiny-qwen2-f16", 3e-2f, 3e-2f},    {"tiny-qwen2-q4_k_m", 1e-1f, 1e-1f}, {"tiny-qwen3-f16", 3e-2f, 3e-2f},
      {"tiny-qwen3-q8_0", 1e-1f, 1e-1f},   {"tiny-phi3-f16", 3e-2f, 3e-2f},     {"tiny-phi3-q4_k_m", 1e-1f, 1e-1f},
      {"tiny-llama3-f16", 3e-2f, 3e-2f},   {"tiny-llama3-q4_k_m", 1e-1f, 1e-1f},
  };
  for (const File& f : files) CheckFileViaServer(f.name, f.tol, f.precise_tol);
}

// The families whose whole reference runs hold (model_parity_test), through
// serve: gemma3 (windows) and YaRN in both numerics, gemma2 (soft-caps) and
// the mixtures of experts (gpt-oss with MXFP4 among them) in the ggml
// numerics.
TEST(ServerLayouts, FamiliesMatchTheirReferences) {
  CheckFileViaServer("tiny-gemma3-f16", 3e-2f, 3e-2f);
  CheckFileViaServer("tiny-gemma3-q8_0", 1e-1f, 1e-1f);
  CheckFileViaServer("tiny-gemma2-f16", 3e-2f, -1);
  CheckFileViaServer("tiny-gemma2-q8_0", 1e-1f, -1);
  CheckFileViaServer("tiny-qwen2yarn-f16", 3e-2f, 3e-2f);
  for (const char* moe : {"tiny-mixtral-f16", "tiny-qwen3moe-f16", "tiny-gptoss-f16"}) CheckFileViaServer(moe, 3e-2f, -1, 1);
  for (const char* moe : {"tiny-mixtral-q8_0", "tiny-qwen3moe-q8_0", "tiny-gptoss-mxfp4"}) CheckFileViaServer(moe, 1e-1f, -1, 1);
}

// A sliding-window model keeps prefix reuse exact and useful: a 1,000-token
// prompt, the same again, then it with 100 tokens more. The repeats reuse at
// least 90% of their prompts, and every top-10 logprob of their outputs
// equals the cold run's (a salt that shares nothing), bit for bit.
TEST(ServerFamilies, Gemma3PrefixReuseIsExact) {
  PC_SHARED_OR_SKIP(path, "models/tiny-gemma3-f16.gguf");
  auto model = Model::Load(path, 2);
  ASSERT_TRUE(model.ok()) << model.status().message();
  auto tok = Tokenizer::FromGguf((*model)->gguf());
  ASSERT_TRUE(tok.ok());
  EngineOptions eo;
  eo.cache.mem_bytes = 64 << 20;
  Harness h(**model, *tok, eo, ServerOptions{});
  httplib::Client c = h.Client();
  std::vector<int32_t> prompt;
  for (int i = 0; i < 1100; ++i) prompt.push_back(3 + (i * 37 + i / 7) % 500);
  const std::vector<int32_t> first(prompt.begin(), prompt.begin() + 1000);
  auto ask = [&](const std::vector<int32_t>& p, const std::string& salt, int* cached) {
    const json body = {{"prompt", p}, {"max_tokens", 8}, {"temperature", 0}, {"ignore_eos", true},
                       {"logprobs", 10}, {"cache_salt", salt}};
    auto res = c.Post("/v1/completions", body.dump(), "application/json");
    PC_CHECK(res && res->status == 200);
    const json j = json::parse(res->body);
    *cached = j["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>();
    return j["choices"][0]["logprobs"]["top_logprobs"].dump();
  };
  int cached = 0;
  const std::string cold = ask(first, "a", &cached);
  EXPECT_EQ(cached, 0);
  EXPECT_EQ(ask(first, "a", &cached), cold);
  EXPECT_GE(cached, 900);
  const std::string longer_cold = ask(prompt, "b", &cached);
  EXPECT_EQ(cached, 0);
  EXPECT_EQ(ask(prompt, "a", &cached), longer_cold);
  EXPECT_GE(cached, 990);
  // The window layers' rows are held for the window only: the peak per
  // sequence on them is within ceil(32/16)+1 blocks of 5 local layers, while
  // the global layer held all 1,108 positions (70 blocks).
  const std::string m = c.Get("/metrics")->body;
  auto metric = [&](const std::string& key) {
    const size_t at = m.find("\n" + key + " ");
    EXPECT_NE(at, std::string::npos) << key;
    return at == std::string::npos ? -1.0 : std::stod(m.substr(at + key.size() + 2));
  };
  const double row_pair = 2 * 64 * 2 * 16;  // K and V, 64 F16 elements, 16 positions: one layer's block
  EXPECT_EQ(metric("promptcache_kv_window_bound_bytes"), 3 * 5 * row_pair);
  EXPECT_GT(metric("promptcache_kv_sequence_peak_bytes{layers=\"local\"}"), 0);
  EXPECT_LE(metric("promptcache_kv_sequence_peak_bytes{layers=\"local\"}"), 3 * 5 * row_pair);
  EXPECT_EQ(metric("promptcache_kv_sequence_peak_bytes{layers=\"global\"}"), 70 * 1 * row_pair);
  EXPECT_GT(metric("promptcache_kv_local_pool_blocks{state=\"cached\"}"), 60);
}

}  // namespace
}  // namespace pc
