// The load generator: statistics on synthetic timings, the verdict rules,
// prompt synthesis (equal keys -> equal tokens), trace loading, the ideal
// cache simulation, the report, connection reuse against a stub stream, and
// a short run against our own server.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <set>
#include <thread>

#include "client.h"
#include "report.h"
#include "runner.h"
#include "server/server.h"
#include "stats.h"
#include "test_support.h"
#include "workload.h"

#include <httplib.h>

namespace pc::loadgen {
namespace {

TEST(LoadgenStats, Percentiles) {
  std::vector<double> v;
  for (int i = 100; i >= 1; --i) v.push_back(i);
  EXPECT_DOUBLE_EQ(Percentile(v, 0.5), 50.5);
  EXPECT_DOUBLE_EQ(Percentile(v, 0.9), 90.1);
  EXPECT_NEAR(Percentile(v, 0.99), 99.01, 1e-9);
  EXPECT_DOUBLE_EQ(Percentile(v, 0), 1);
  EXPECT_DOUBLE_EQ(Percentile(v, 1), 100);
  EXPECT_DOUBLE_EQ(Percentile({7}, 0.9), 7);
  EXPECT_TRUE(std::isnan(Percentile({}, 0.5)));
  const Summary s = Summarize(v);
  EXPECT_EQ(s.n, 100u);
  EXPECT_DOUBLE_EQ(s.mean, 50.5);
  EXPECT_NEAR(StdDev({2, 4, 4, 4, 5, 5, 7, 9}), 2.138, 1e-3);
}

std::vector<double> Around(double center, int n, double spread) {
  std::vector<double> v;
  for (int i = 0; i < n; ++i) v.push_back(center * (1 + spread * std::sin(i * 12.9898)));
  return v;
}

TEST(LoadgenStats, MedianRatioIntervals) {
  const std::vector<double> a = Around(1000, 60, 0.1);
  const Interval tenth = MedianRatioCI(a, Around(100, 60, 0.1));
  EXPECT_NEAR(tenth.estimate, 0.1, 0.01);
  EXPECT_LT(tenth.hi, 0.2);
  EXPECT_TRUE(tenth.Contains(tenth.estimate));
  const Interval same = MedianRatioCI(a, Around(1000, 60, 0.1));
  EXPECT_TRUE(same.Contains(1.0));
  EXPECT_EQ(MedianRatioCI(a, Around(100, 60, 0.1)).lo, tenth.lo);  // deterministic
}

TEST(LoadgenStats, OutcomeBuckets) {
  EXPECT_EQ(ClassifyOutcome(100, 0), CacheOutcome::kMiss);
  EXPECT_EQ(ClassifyOutcome(100, 1), CacheOutcome::kPartial);
  EXPECT_EQ(ClassifyOutcome(100, 89), CacheOutcome::kPartial);
  EXPECT_EQ(ClassifyOutcome(100, 90), CacheOutcome::kHit);
  EXPECT_EQ(ClassifyOutcome(0, 0), CacheOutcome::kMiss);
}

RequestRecord Rec(bool cache, double ttft, double itl, size_t prompt, size_t cached) {
  RequestRecord r;
  r.ok = true;
  r.cache = cache;
  r.ttft_ms = ttft;
  r.itl_ms.assign(9, itl);
  r.output_tokens = 10;
  r.e2e_ms = ttft + 9 * itl;
  r.prompt_tokens = prompt;
  r.cached_tokens = cached;
  return r;
}

TEST(LoadgenReport, VerdictCreditsTheCacheWhenOnlyTtftMoves) {
  std::vector<RequestRecord> recs;
  for (int i = 0; i < 40; ++i) {
    const double wob = 1 + 0.05 * std::sin(i);
    recs.push_back(Rec(false, 1000 * wob, 20 * wob, 1000, 0));
    recs.push_back(Rec(true, 80 * wob, 20 * (2 - wob), 1000, i < 4 ? 0 : 992));
  }
  const Verdict v = Judge(recs);
  ASSERT_TRUE(v.has_ab);
  EXPECT_LT(v.ttft_ratio.hi, 0.1);
  EXPECT_TRUE(v.itl_within_noise);
  EXPECT_FALSE(v.moved_together);
  EXPECT_NE(v.text.find("caching pays"), std::string::npos) << v.text;
  const std::vector<Group> g = Aggregate(recs, 10, Slo{});
  ASSERT_EQ(g.size(), 5u);  // all, on, off, on: miss, on: hit
  EXPECT_EQ(g[3].name, "on: miss");
  EXPECT_EQ(g[3].num_requests, 4u);
  EXPECT_EQ(g[4].name, "on: hit");
  EXPECT_EQ(g[4].num_requests, 36u);
  EXPECT_NEAR(g[1].cached_fraction, 36 * 992 / 40000.0, 1e-12);
  EXPECT_NEAR(g[0].throughput_tok_s, 80 * 10 / 10.0, 1e-9);
}

TEST(LoadgenReport, VerdictFlagsItlMovingWithTtft) {
  std::vector<RequestRecord> recs;
  for (int i = 0; i < 40; ++i) {
    const double wob = 1 + 0.05 * std::sin(i);
    recs.push_back(Rec(false, 1000 * wob, 40 * wob, 1000, 0));
    recs.push_back(Rec(true, 500 * wob, 20 * wob, 1000, 0));
  }
  const Verdict v = Judge(recs);
  EXPECT_TRUE(v.moved_together);
  EXPECT_FALSE(v.itl_within_noise);
  EXPECT_NE(v.text.find("something other than the cache"), std::string::npos) << v.text;
}

TEST(LoadgenReport, VerdictDoesNotCreditACacheThatServedNothing) {
  std::vector<RequestRecord> recs;
  for (int i = 0; i < 40; ++i) {
    recs.push_back(Rec(false, 1000 + i, 20, 1000, 0));
    recs.push_back(Rec(true, 800 + i, 20, 1000, 0));
  }
  const Verdict v = Judge(recs);
  EXPECT_NE(v.text.find("caching does nothing"), std::string::npos) << v.text;
}

TEST(LoadgenWorkload, InterleaveAlternatesArmOrder) {
  std::vector<BenchRequest> rs(3);
  for (size_t i = 0; i < 3; ++i) rs[i].prompt = {static_cast<int32_t>(i)};
  const std::vector<BenchRequest> ab = Interleave(rs);
  ASSERT_EQ(ab.size(), 6u);
  const bool want[] = {true, false, false, true, true, false};
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(ab[i].cache, want[i]) << i;
    EXPECT_EQ(ab[i].prompt, rs[i / 2].prompt);
  }
}

TEST(LoadgenReport, NoAbWithoutBothArms) {
  EXPECT_FALSE(Judge({Rec(true, 1, 1, 10, 0)}).has_ab);
}

TEST(LoadgenWorkload, KeyTokensAreDeterministicAndDistinct) {
  const TokenRange r{10, 500};
  EXPECT_EQ(KeyTokens(42, 64, r), KeyTokens(42, 64, r));
  EXPECT_NE(KeyTokens(42, 64, r), KeyTokens(43, 64, r));
  for (int32_t t : KeyTokens(7, 1000, r)) {
    EXPECT_GE(t, 10);
    EXPECT_LT(t, 500);
  }
}

TEST(LoadgenWorkload, RagSharesDocumentsExactly) {
  ShapeParams p = *DefaultShape("rag");
  p.doc_tokens = 300, p.num_docs = 3, p.num_requests = 9, p.prompt_tokens = 20;
  const std::vector<BenchRequest> rs = *MakeShape(p);
  ASSERT_EQ(rs.size(), 9u);
  for (size_t i = 0; i < rs.size(); ++i) {
    ASSERT_EQ(rs[i].prompt.size(), 320u);
    EXPECT_EQ(rs[i].max_tokens, 32);
    for (size_t j = 0; j < i; ++j) {
      const bool same_doc = i % 3 == j % 3;
      EXPECT_EQ(std::equal(rs[i].prompt.begin(), rs[i].prompt.begin() + 300, rs[j].prompt.begin()), same_doc);
      EXPECT_NE(rs[i].prompt, rs[j].prompt);  // questions differ
      EXPECT_NE(rs[i].prompt[0] == rs[j].prompt[0] && rs[i].prompt[1] == rs[j].prompt[1] && rs[i].prompt[2] == rs[j].prompt[2],
                !same_doc);
    }
  }
  ShapeParams other = p;
  other.seed = 2;
  EXPECT_NE(MakeShape(other)->front().prompt, rs.front().prompt);  // a new seed: new documents
}

// quote: each prompt ends with the opening of a passage of its document,
// with room after it in the document for the whole answer.
TEST(LoadgenWorkload, QuoteEndsWithTheOpeningOfAPassage) {
  ShapeParams p = *DefaultShape("quote");
  EXPECT_EQ(p.output_tokens, 128u);
  p.doc_tokens = 400, p.num_docs = 2, p.num_requests = 6, p.prompt_tokens = 10, p.output_tokens = 50;
  const std::vector<BenchRequest> rs = *MakeShape(p);
  ASSERT_EQ(rs.size(), 6u);
  std::set<size_t> starts;
  for (const BenchRequest& r : rs) {
    ASSERT_EQ(r.prompt.size(), 400 + 10 + kQuoteOpeningTokens);
    EXPECT_EQ(r.max_tokens, 50);
    const auto doc_end = r.prompt.begin() + 400;
    const auto opening = r.prompt.end() - static_cast<std::ptrdiff_t>(kQuoteOpeningTokens);
    const auto at = std::search(r.prompt.begin(), doc_end, opening, r.prompt.end());
    ASSERT_NE(at, doc_end) << "the opening is not a passage of the document";
    EXPECT_LE(static_cast<size_t>(at - r.prompt.begin()) + kQuoteOpeningTokens + 50, 400u) << "no room for the answer";
    starts.insert(static_cast<size_t>(at - r.prompt.begin()));
  }
  EXPECT_GT(starts.size(), 3u) << "passages start at different places";
  EXPECT_TRUE(std::equal(rs[0].prompt.begin(), rs[0].prompt.begin() + 400, rs[2].prompt.begin()));  // documents shared
}

TEST(LoadgenWorkload, MultiturnGrowsEachConversation) {
  ShapeParams p = *DefaultShape("multiturn");
  p.num_requests = 8, p.turns = 4;  // 2 conversations
  const std::vector<BenchRequest> rs = *MakeShape(p);
  ASSERT_EQ(rs.size(), 8u);
  for (size_t i = 2; i < rs.size(); ++i) {
    const BenchRequest& prev = rs[i - 2];
    EXPECT_EQ(rs[i].session, prev.session);
    EXPECT_EQ(rs[i].prompt.size(), prev.prompt.size() + p.output_tokens + p.prompt_tokens);
    EXPECT_TRUE(std::equal(prev.prompt.begin(), prev.prompt.end(), rs[i].prompt.begin()));
  }
  EXPECT_FALSE(DefaultShape("nope").ok());
}

TEST(LoadgenWorkload, TraceEqualHashesBecomeEqualBlocks) {
  const std::string path = test::TempPath("trace.jsonl");
  {
    std::ofstream out(path);
    out << R"({"t_ms":0,"input_tokens":2048,"output_tokens":500,"prefix_blocks":[1,2,3,4],"block_size":512})" "\n";
    out << R"({"t_ms":1000,"input_tokens":1800,"output_tokens":5,"prefix_blocks":[1,2,9,10],"block_size":512})" "\n";
    out << R"({"t_ms":2500,"input_tokens":700,"output_tokens":5,"prefix_blocks":[7,8],"block_size":512})" "\n";
  }
  TraceParams tp;
  tp.path = path;
  tp.token_scale = 1.0 / 32;
  tp.time_scale = 0.5;
  tp.max_output_tokens = 64;
  const std::vector<BenchRequest> rs = *LoadTrace(tp);
  ASSERT_EQ(rs.size(), 3u);
  EXPECT_EQ(rs[0].prompt.size(), 64u);
  EXPECT_EQ(rs[1].prompt.size(), 56u);
  EXPECT_EQ(rs[2].prompt.size(), 22u);
  EXPECT_EQ(rs[0].tokens_per_key, 16u);
  EXPECT_DOUBLE_EQ(rs[1].arrival_s, 0.5);
  EXPECT_EQ(rs[0].max_tokens, 64);
  EXPECT_EQ(rs[1].max_tokens, 5);
  // Blocks 1, 2 shared; block 3 vs 9 distinct.
  EXPECT_TRUE(std::equal(rs[0].prompt.begin(), rs[0].prompt.begin() + 32, rs[1].prompt.begin()));
  EXPECT_FALSE(std::equal(rs[0].prompt.begin() + 32, rs[0].prompt.begin() + 48, rs[1].prompt.begin() + 32));
  EXPECT_NE(rs[2].prompt[0], rs[0].prompt[0]);
  // Ideal cache: request 2 reuses 32 of its 56 tokens; nothing else.
  EXPECT_NEAR(IdealCachedFraction(rs, 1 << 20), 32.0 / (64 + 56 + 22), 1e-12);
  // With room for 2 blocks only, blocks 1 and 2 are evicted by 3 and 4.
  EXPECT_NEAR(IdealCachedFraction(rs, 32), 0.0, 1e-12);
  std::ofstream(path) << "{\"t_ms\": \"x\"}\n";
  EXPECT_FALSE(LoadTrace(tp).ok());
}

TEST(LoadgenWorkload, SharedTraceLoads) {
  PC_SHARED_OR_SKIP(path, "traces/mooncake_synthetic.jsonl");
  TraceParams tp;
  tp.path = path;
  tp.max_requests = 300;
  const std::vector<BenchRequest> rs = *LoadTrace(tp);
  ASSERT_EQ(rs.size(), 300u);
  // Sharing in this trace builds up over its hour: the first 300 requests
  // reuse about 5% of their tokens; every 13th request across the trace, 15%.
  EXPECT_NEAR(IdealCachedFraction(rs, size_t{1} << 30), 0.049, 0.01);
  tp.sample_every = 13;
  const std::vector<BenchRequest> spread = *LoadTrace(tp);
  EXPECT_EQ(spread.size(), 300u);
  EXPECT_NEAR(IdealCachedFraction(spread, size_t{1} << 30), 0.15, 0.02);
  EXPECT_LT(IdealCachedFraction(spread, 4096), IdealCachedFraction(spread, size_t{1} << 30));
}

TEST(LoadgenReport, HtmlHasFourPlots) {
  std::vector<RequestRecord> recs;
  for (int i = 0; i < 10; ++i) {
    recs.push_back(Rec(false, 900 + i, 20, 1000, 0));
    recs.push_back(Rec(true, i < 3 ? 900 : 90 + i, 20 + i % 3, 1000, i < 3 ? 0 : i < 5 ? 500 : 992));
  }
  const std::vector<Group> g = Aggregate(recs, 5, Slo{});
  const std::string html = Html("test <report>", recs, g, Judge(recs), {{"k", "v"}});
  for (const char* id : {"ttft-cdf", "itl-cdf", "ttft-vs-cached", "itl-vs-context"}) {
    EXPECT_NE(html.find(std::string("id=\"") + id + "\""), std::string::npos) << id;
  }
  EXPECT_NE(html.find("test &lt;report&gt;"), std::string::npos);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  size_t series = 0;
  for (size_t p = 0; (p = html.find("class=\"series\"", p)) != std::string::npos; ++p) ++series;
  EXPECT_GE(series, 4u + 2 + 20 + 20);
  // The page the render test opens in headless Chromium.
  if (const char* out = std::getenv("PROMPTCACHE_SAMPLE_REPORT")) std::ofstream(out) << html;
}

// A server that streams two tokens per request and notes each request's
// client port (one port: one connection).
class StubStream {
 public:
  explicit StubStream(time_t keep_alive_s) {
    http_.set_keep_alive_timeout(keep_alive_s);
    http_.set_keep_alive_max_count(100);
    http_.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
      {
        MutexLock lock(mu_);
        ports_.push_back(req.remote_port);
      }
      res.set_chunked_content_provider("text/event-stream", [](size_t, httplib::DataSink& sink) {
        const std::string events =
            "data: {\"choices\":[{\"text\":\"a\"}]}\n\n"
            "data: {\"choices\":[{\"text\":\"b\"}]}\n\n"
            "data: {\"choices\":[],\"usage\":{\"completion_tokens\":2,\"prompt_tokens\":3}}\n\n"
            "data: [DONE]\n\n";
        sink.write(events.data(), events.size());
        sink.done();
        return true;
      });
    });
    port_ = http_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { http_.listen_after_bind(); });  // connects queue until it accepts
  }
  ~StubStream() {
    http_.stop();
    thread_.join();
  }
  int port() const { return port_; }
  std::vector<int> ports() {
    MutexLock lock(mu_);
    return ports_;
  }

 private:
  httplib::Server http_;
  int port_ = 0;
  std::thread thread_;
  Mutex mu_;
  std::vector<int> ports_ PC_GUARDED_BY(mu_);
};

std::vector<BenchRequest> ThreeTokenPrompts(size_t n) {
  std::vector<BenchRequest> reqs(n);
  for (BenchRequest& r : reqs) r.prompt = {1, 2, 3}, r.max_tokens = 2;
  return reqs;
}

TEST(LoadgenClient, KeepAliveReusesOneConnection) {
  StubStream stub(5);
  Target t;
  t.port = stub.port();
  RunOptions ro;
  ro.progress = false;
  const std::vector<RequestRecord> recs = loadgen::Run(t, ThreeTokenPrompts(6), ro);
  ASSERT_EQ(recs.size(), 6u);
  for (const RequestRecord& r : recs) {
    ASSERT_TRUE(r.ok) << r.error;
    EXPECT_EQ(r.output_tokens, 2u);
    EXPECT_EQ(r.itl_ms.size(), 1u);
  }
  const std::vector<int> ports = stub.ports();
  ASSERT_EQ(ports.size(), 6u);
  EXPECT_EQ(std::set<int>(ports.begin(), ports.end()).size(), 1u);

  t.keep_alive = false;  // --new-connections
  ASSERT_EQ(loadgen::Run(t, ThreeTokenPrompts(4), ro).size(), 4u);
  const std::vector<int> all = stub.ports();
  EXPECT_EQ(std::set<int>(all.begin() + 6, all.end()).size(), 4u);
}

TEST(LoadgenClient, ConnectionClosedWhileIdleIsReplaced) {
  StubStream stub(1);  // the server closes a connection idle for 1 s
  Target t;
  t.port = stub.port();
  ConnectionPool pool(t);
  const std::vector<BenchRequest> reqs = ThreeTokenPrompts(1);
  ASSERT_TRUE(RunRequest(t, reqs[0], NowSeconds(), &pool).ok);
  EXPECT_EQ(pool.idle(), 1u);
  std::this_thread::sleep_for(std::chrono::milliseconds(1300));
  const RequestRecord again = RunRequest(t, reqs[0], NowSeconds(), &pool);
  ASSERT_TRUE(again.ok) << again.error;
  const std::vector<int> ports = stub.ports();
  ASSERT_EQ(ports.size(), 2u);
  EXPECT_NE(ports[0], ports[1]);
  EXPECT_EQ(pool.idle(), 1u);
}

TEST(LoadgenClient, PoolKeepsAtMostMaxIdle) {
  Target t;
  ConnectionPool pool(t);
  std::vector<std::unique_ptr<Connection>> taken;
  for (size_t i = 0; i < ConnectionPool::kMaxIdle + 5; ++i) {
    bool reused = true;
    taken.push_back(pool.Take(&reused));
    EXPECT_FALSE(reused);
  }
  for (auto& c : taken) pool.Give(std::move(c));
  EXPECT_EQ(pool.idle(), ConnectionPool::kMaxIdle);
  bool reused = false;
  EXPECT_NE(pool.Take(&reused), nullptr);
  EXPECT_TRUE(reused);
  EXPECT_EQ(pool.idle(), ConnectionPool::kMaxIdle - 1);
}

// A short A/B run against our own server with stories260K.
TEST(LoadgenEndToEnd, RagAgainstOurServer) {
  PC_SHARED_OR_SKIP(path, "models/stories260K.gguf");
  auto model = Model::Load(path, 2);
  ASSERT_TRUE(model.ok());
  auto tok = Tokenizer::FromGguf((*model)->gguf());
  ASSERT_TRUE(tok.ok());
  EngineOptions eo;
  eo.cache.mem_bytes = 32 << 20;
  Engine engine(**model, *tok, eo);
  ServerOptions so;
  so.port = 0;
  Server server(engine, *tok, so);
  const int port = *server.Bind();
  std::thread http([&] { server.Run(); });
  ShapeParams p = *DefaultShape("rag");
  p.doc_tokens = 200, p.num_docs = 2, p.num_requests = 6, p.prompt_tokens = 10, p.output_tokens = 8;
  p.range = {10, 500};
  Target t;
  t.port = port;
  RunOptions ro;
  ro.concurrency = 2;
  ro.progress = false;
  const std::vector<RequestRecord> recs = loadgen::Run(t, Interleave(*MakeShape(p)), ro);
  server.Stop();
  http.join();
  ASSERT_EQ(recs.size(), 12u);
  size_t hits = 0, misses = 0;
  for (const RequestRecord& r : recs) {
    ASSERT_TRUE(r.ok) << r.error;
    EXPECT_EQ(r.output_tokens, 8u);
    EXPECT_EQ(r.itl_ms.size(), 7u);
    EXPECT_EQ(r.prompt_tokens, 210u);
    ASSERT_TRUE(r.cached_tokens.has_value());
    if (!r.cache) {
      EXPECT_EQ(*r.cached_tokens, 0u);
    }
    if (r.cache) ++(ClassifyOutcome(r.prompt_tokens, *r.cached_tokens) == CacheOutcome::kHit ? hits : misses);
  }
  // Each document is a miss the first time (or while the other arm's copy
  // computes it) and a hit after.
  EXPECT_GE(hits, 3u);
  EXPECT_GE(misses, 1u);
  EXPECT_TRUE(Judge(recs).has_ab);
}

}  // namespace
}  // namespace pc::loadgen
