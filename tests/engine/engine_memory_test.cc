// The engine under memory pressure: blocks are taken as sequences grow, a
// shared prefix is held once, and a pool too small for the running set
// preempts and resumes sequences without changing any output.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "base/check.h"
#include "engine/engine.h"
#include "engine/stream_output.h"
#include "model/make_model.h"
#include "test_model.h"
#include "test_support.h"

namespace pc {
namespace {

// A small random-weight model made here (no shared data needed): 2 layers,
// GQA, F32, so every test runs everywhere.
test::MadeModel MakeTiny() { return test::MakeTestModel({"engine-memory", 64, 2, 4, 2, 128, true, 2048}, TensorType::kF32, 512); }

// Bytes for `blocks` blocks of 16 tokens in F16 K and V.
size_t PoolBytes(const ModelConfig& c, size_t blocks) {
  return blocks * 2 * static_cast<size_t>(c.n_layer) * 16 * static_cast<size_t>(c.kv_dim()) * 2;
}

using test::Drain;
using test::Greedy;
using test::Output;
using test::Prompt;

double Counter(Engine& e, const std::string& name) {
  const std::string text = e.RenderMetrics();
  const size_t at = text.find("\n" + name + " ");
  if (at == std::string::npos) return 0;
  return std::stod(text.substr(at + name.size() + 2));
}

// A sliding-window model (tiny-gemma3: windows of 32 on five layers of six)
// with a pool too small for its running set: preempted and resumed
// sequences give the outputs they give alone, each holds at most its
// window's local blocks between steps (ceil(32/16)+1 of 5 layers), and no
// block of either pool is left held.
TEST(EngineMemory, AWindowedModelUnderPressureKeepsItsWindowAndItsOutputs) {
  PC_SHARED_OR_SKIP(path, "models/tiny-gemma3-f16.gguf");
  auto model = Model::Load(path, 2);
  ASSERT_TRUE(model.ok()) << model.status().message();
  auto tok = Tokenizer::FromGguf((*model)->gguf());
  ASSERT_TRUE(tok.ok());
  constexpr int kRequests = 6, kNew = 40;
  std::vector<Output> alone(kRequests);
  {
    Engine e(**model, *tok, EngineOptions{});
    for (int i = 0; i < kRequests; ++i) alone[i] = Drain(*e.Submit(Greedy(Prompt(i, 100), kNew)).stream);
  }
  EngineOptions small;
  small.max_batch_tokens = 64;
  // 29 local blocks (8 windows and a step: the floor) and 24 global ones,
  // where the six requests end at 9 each.
  small.cache.mem_bytes = 29 * 5 * 2 * 16 * 64 * 2 + 24 * 1 * 2 * 16 * 64 * 2;
  Engine e(**model, *tok, small);
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (int i = 0; i < kRequests; ++i) streams.push_back(e.Submit(Greedy(Prompt(i, 100), kNew)).stream);
  for (int i = 0; i < kRequests; ++i) {
    const Output got = Drain(*streams[i]);
    ASSERT_EQ(got.ids, alone[i].ids) << "request " << i;
    for (size_t t = 0; t < got.tops.size(); ++t) {
      EXPECT_EQ(got.tops[t], alone[i].tops[t]) << "request " << i << " token " << t;
    }
  }
  EXPECT_GT(Counter(e, "promptcache_preemptions_total"), 0) << "the pool was never short: the test tests nothing";
  for (int tries = 0; tries < 100 && !e.Idle(); ++tries) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  const EngineSnapshot s = e.Snapshot();
  EXPECT_EQ(s.num_local_blocks, 28u);  // 29 less the sentinel
  EXPECT_EQ(s.local_bound_bytes, 3u * 5 * 2 * 16 * 64 * 2);
  EXPECT_GT(s.peak_sequence_local_bytes, 0u);
  EXPECT_LE(s.peak_sequence_local_bytes, s.local_bound_bytes);
  EXPECT_EQ(s.num_used_blocks, 0u) << "blocks leaked";
  EXPECT_EQ(s.num_used_local_blocks, 0u) << "local blocks leaked";
}

TEST(EngineMemory, APoolTooSmallPreemptsAndResumesWithUnchangedOutputs) {
  test::MadeModel l = MakeTiny();
  const ModelConfig& c = l.model->config();
  // Six requests of 40 prompt + 56 new tokens: 6 blocks each at the end,
  // 36 together; the pool has 14, so the running set outgrows it.
  constexpr int kRequests = 6, kNew = 56;
  std::vector<Output> alone(kRequests);
  {
    EngineOptions big;
    big.cache.mem_bytes = PoolBytes(c, 64);
    Engine e(*l.model, *l.tok, big);
    for (int i = 0; i < kRequests; ++i) {
      alone[i] = Drain(*e.Submit(Greedy(Prompt(i, 40), kNew)).stream);
      ASSERT_EQ(alone[i].ids.size(), static_cast<size_t>(kNew));
    }
  }
  EngineOptions small;
  small.cache.mem_bytes = PoolBytes(c, 14);
  small.max_batch_tokens = 64;
  Engine e(*l.model, *l.tok, small);
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (int i = 0; i < kRequests; ++i) {
    SubmitOutcome sub = e.Submit(Greedy(Prompt(i, 40), kNew));
    ASSERT_TRUE(sub.stream) << sub.message;
    streams.push_back(sub.stream);
  }
  for (int i = 0; i < kRequests; ++i) {
    const Output got = Drain(*streams[i]);
    EXPECT_EQ(got.finish, FinishReason::kLength) << "request " << i;
    ASSERT_EQ(got.ids, alone[i].ids) << "request " << i;
    for (size_t t = 0; t < got.tops.size(); ++t) {
      for (size_t j = 0; j < got.tops[t].size(); ++j) {
        EXPECT_EQ(got.tops[t][j].first, alone[i].tops[t][j].first);
        EXPECT_FLOAT_EQ(got.tops[t][j].second, alone[i].tops[t][j].second) << "request " << i << " token " << t;
      }
    }
  }
  EXPECT_GT(Counter(e, "promptcache_preemptions_total"), 0) << "the pool was never short: the test tests nothing";
  EXPECT_GT(Counter(e, "promptcache_resumed_cached_tokens_total"), 0);
  for (int tries = 0; tries < 100 && !e.Idle(); ++tries) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  const EngineSnapshot s = e.Snapshot();
  EXPECT_EQ(s.num_used_blocks, 0u) << "blocks leaked";
  EXPECT_EQ(s.num_running + s.num_waiting, 0u);
}

// A prompt sent again whole: every token's K/V is cached and its last
// logits were kept, so the first token needs no forward pass; the outputs
// are those of the first run, bit for bit. Without the memo the last token
// is computed again, with the same outputs.
TEST(EngineMemory, ARepeatedPromptStartsFromItsKeptLogitsWithoutAForwardPass) {
  test::MadeModel l = MakeTiny();
  const std::string prefill = "promptcache_step_tokens_total{kind=\"prefill\"}";
  for (size_t memo_bytes : {size_t{1} << 20, size_t{0}}) {
    EngineOptions o;
    o.cache.mem_bytes = PoolBytes(l.model->config(), 64);
    o.logits_memo_bytes = memo_bytes;
    Engine e(*l.model, *l.tok, o);
    for (size_t len : {37u, 32u}) {  // a partial last block; whole blocks only
      const Output first = Drain(*e.Submit(Greedy(Prompt(static_cast<int>(len), len), 6)).stream);
      const double computed = Counter(e, prefill), hits = Counter(e, "promptcache_prefix_cache_logits_hits_total");
      const Output again = Drain(*e.Submit(Greedy(Prompt(static_cast<int>(len), len), 6)).stream);
      ASSERT_EQ(again.ids, first.ids) << "len " << len;
      for (size_t t = 0; t < first.tops.size(); ++t) {
        for (size_t j = 0; j < first.tops[t].size(); ++j) {
          EXPECT_EQ(again.tops[t][j].first, first.tops[t][j].first);
          EXPECT_EQ(again.tops[t][j].second, first.tops[t][j].second) << "len " << len << " token " << t;
        }
      }
      if (memo_bytes > 0) {
        EXPECT_EQ(again.num_cached, len);
        EXPECT_EQ(Counter(e, prefill), computed) << "the repeat computed prompt tokens";
        EXPECT_EQ(Counter(e, "promptcache_prefix_cache_logits_hits_total"), hits + 1);
      } else {
        EXPECT_EQ(again.num_cached, len - 1);
        EXPECT_EQ(Counter(e, prefill), computed + 1);
      }
    }
    // One token asked for: answered from the memo and finished at once.
    const Output one = Drain(*e.Submit(Greedy(Prompt(37, 37), 1)).stream);
    EXPECT_EQ(one.finish, FinishReason::kLength);
    EXPECT_EQ(one.ids.size(), 1u);
    for (int tries = 0; tries < 100 && !e.Idle(); ++tries) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    EXPECT_EQ(e.Snapshot().num_used_blocks, 0u) << "blocks leaked";
  }
}

TEST(EngineMemory, ThirtyTwoChatsWithoutMaxTokensShareOnePrefixAndAllRun) {
  test::MadeModel l = MakeTiny();
  const ModelConfig& c = l.model->config();
  // A 1,000-token shared prefix is 63 blocks; 32 requests each reserving
  // their worst case (the whole 2,048-token context, 128 blocks) would need
  // 4,096. The pool has 200: the prefix once plus each request's own tail.
  EngineOptions eo;
  eo.cache.mem_bytes = PoolBytes(c, 200);
  eo.max_running = 32;
  eo.max_batch_tokens = 256;
  Engine e(*l.model, *l.tok, eo);
  const std::vector<int32_t> system = Prompt(99, 1000);
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (int i = 0; i < 32; ++i) {
    std::vector<int32_t> p = system;
    for (int k = 0; k < 8; ++k) p.push_back(static_cast<int32_t>(10 + i * 8 + k));
    EngineRequest r = Greedy(p, static_cast<int>(e.context_length() - p.size()));  // what the server sends without max_tokens
    SubmitOutcome sub = e.Submit(r);
    ASSERT_TRUE(sub.stream) << "request " << i << " refused: " << sub.message;
    streams.push_back(sub.stream);
  }
  // Every stream yields 4 tokens before any is cancelled: all 32 were
  // running at once (none can finish on its own before the context ends).
  for (auto& s : streams) {
    for (int k = 0; k < 4; ++k) {
      std::optional<StreamEvent> ev = s->Next(60000);
      ASSERT_TRUE(ev.has_value());
      ASSERT_FALSE(ev->done) << "finished early: " << ev->error;
    }
  }
  EXPECT_EQ(e.Snapshot().num_running, 32u);
  EXPECT_EQ(Counter(e, "promptcache_preemptions_total"), 0);
  e.CancelAll();
  for (auto& s : streams) EXPECT_EQ(Drain(*s).finish, FinishReason::kCancelled);
}

}  // namespace
}  // namespace pc

namespace pc {
namespace {

// The request log (serve --request-log) is written by the loop outside the
// engine lock; every finished request gets its line, shared blocks the same
// ids, the line of a hit reports its cached tokens, and each its queue time
// and TTFT (the first within the second).
TEST(EngineLog, EveryFinishedRequestIsLoggedWithItsBlocks) {
  test::MadeModel l = MakeTiny();
  const std::string path = test::TempPath("engine-requests.jsonl");
  std::remove(path.c_str());
  {
    EngineOptions eo;
    eo.cache.mem_bytes = PoolBytes(l.model->config(), 64);
    eo.request_log_path = path;
    Engine e(*l.model, *l.tok, eo);
    std::vector<int32_t> shared = Prompt(5, 64);
    std::vector<int32_t> second = shared;
    second.push_back(77);
    EXPECT_EQ(Drain(*e.Submit(Greedy(shared, 3)).stream).finish, FinishReason::kLength);
    EXPECT_EQ(Drain(*e.Submit(Greedy(second, 2)).stream).finish, FinishReason::kLength);
  }  // the engine flushes what it has not written yet
  std::istringstream in(test::ReadText(path));
  std::vector<nlohmann::json> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0]["input_tokens"], 64);
  EXPECT_EQ(lines[0]["output_tokens"], 3);
  EXPECT_EQ(lines[1]["input_tokens"], 65);
  EXPECT_EQ(lines[0]["prefix_blocks"].size(), 4u);
  EXPECT_EQ(lines[1]["prefix_blocks"], lines[0]["prefix_blocks"]);  // 65 tokens: the same 4 full blocks
  EXPECT_EQ(lines[0]["cached_tokens"], 0);
  EXPECT_EQ(lines[1]["cached_tokens"], 64);
  for (const nlohmann::json& j : lines) {
    EXPECT_GE(j["queue_ms"].get<double>(), 0.0);
    EXPECT_GE(j["ttft_ms"].get<double>(), 0.0);  // a repeated prompt's first token can take under 0.05 ms
    EXPECT_LE(j["queue_ms"].get<double>(), j["ttft_ms"].get<double>() + 0.1);
  }
}

// The step log (serve --step-log): one line per step with what it held, at
// the positions it started from, and its measured time; what `advise
// --step-log` writes for simulated steps, so the two can be set side by side.
TEST(EngineLog, EveryStepIsLoggedWithItsItems) {
  test::MadeModel l = MakeTiny();
  const std::string path = test::TempPath("engine-steps.jsonl");
  std::remove(path.c_str());
  {
    EngineOptions eo;
    eo.cache.mem_bytes = PoolBytes(l.model->config(), 64);
    eo.max_batch_tokens = 32;  // no step target: each step takes 32 tokens
    eo.step_log_path = path;
    Engine e(*l.model, *l.tok, eo);
    EXPECT_EQ(Drain(*e.Submit(Greedy(Prompt(9, 64), 3)).stream).finish, FinishReason::kLength);
  }
  std::istringstream in(test::ReadText(path));
  std::vector<nlohmann::json> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(lines.size(), 4u);  // two prompt chunks (the second yields the first token), two decodes
  EXPECT_EQ(lines[0]["chunks"], nlohmann::json::parse("[[0,32]]"));
  EXPECT_EQ(lines[1]["chunks"], nlohmann::json::parse("[[32,32]]"));
  EXPECT_EQ(lines[2]["decodes"], nlohmann::json::parse("[64]"));
  EXPECT_EQ(lines[3]["decodes"], nlohmann::json::parse("[65]"));
  EXPECT_TRUE(lines[0]["decodes"].empty());
  EXPECT_EQ(lines[0]["tokens"], 32);
  EXPECT_EQ(lines[3]["tokens"], 1);
  for (size_t i = 0; i < lines.size(); ++i) {
    EXPECT_GT(lines[i]["ms"].get<double>(), 0.0);
    if (i == 0) continue;
    EXPECT_GE(lines[i]["t_ms"].get<double>(), lines[i - 1]["t_ms"].get<double>() + lines[i - 1]["ms"].get<double>() - 0.01);
  }
}

}  // namespace
}  // namespace pc
