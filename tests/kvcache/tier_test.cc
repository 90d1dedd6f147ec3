// Spill tiers: host, disk and Redis on their own (round trips, budgets,
// restarts, corruption, outages), the cost model, and the engine with tiers
// (outputs equal to no cache at all; restart and cross-process reuse).
// Redis is started by the tests on a free loopback port.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <functional>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "base/check.h"
#include "base/clock.h"
#include "engine/engine.h"
#include "kvcache/disk_tier.h"
#include "kvcache/payload_seal.h"
#include "kvcache/redis_tier.h"
#include "kvcache/tier_stack.h"

#include <hiredis/hiredis.h>
#include "reference_generate.h"
#include "test_support.h"

namespace pc {
namespace {

namespace fs = std::filesystem;

BlockPayload Block(uint64_t key, size_t bytes = 1000) {
  BlockPayload b{Hash128{key, key * 7 + 1}, std::vector<uint8_t>(bytes)};
  for (size_t i = 0; i < bytes; ++i) b.bytes[i] = static_cast<uint8_t>(key * 31 + i);
  return b;
}
std::vector<Hash128> Keys(std::initializer_list<uint64_t> ks) {
  std::vector<Hash128> v;
  for (uint64_t k : ks) v.push_back(Hash128{k, k * 7 + 1});
  return v;
}

TEST(HostTier, RoundTripAndLruBudget) {
  HostTier t(3000);
  t.Insert(std::vector<BlockPayload>{Block(1), Block(2), Block(3)});
  EXPECT_EQ(t.CountLeading(Keys({1, 2, 3, 4})), 3u);
  EXPECT_EQ(t.CountLeading(Keys({2, 9, 3})), 1u);
  ASSERT_EQ(t.Load(Keys({1})).size(), 1u);  // 1 becomes most recent
  t.Insert(std::vector<BlockPayload>{Block(4)});  // evicts 2, the least recent
  EXPECT_EQ(t.CountLeading(Keys({1})), 1u);
  EXPECT_EQ(t.CountLeading(Keys({2})), 0u);
  const std::vector<std::vector<uint8_t>> got = t.Load(Keys({3, 4, 2, 1}));
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[1], Block(4).bytes);
  EXPECT_EQ(t.stats().num_evicted, 1u);
  t.Insert(std::vector<BlockPayload>{Block(5, 5000)});  // larger than the budget: dropped
  EXPECT_EQ(t.stats().num_dropped, 1u);
  // A smaller block in an evicted entry's buffer: its own bytes, no more.
  t.Insert(std::vector<BlockPayload>{Block(6, 400)});
  EXPECT_EQ(t.stats().num_evicted, 2u);
  const auto six = t.Load(Keys({6}));
  ASSERT_EQ(six.size(), 1u);
  EXPECT_EQ(six[0], Block(6, 400).bytes);
  EXPECT_EQ(t.stats().bytes_used, 2400u);
}

DiskTierOptions DiskOpts(const std::string& dir, uint64_t budget = 1 << 20) {
  DiskTierOptions o;
  o.dir = dir;
  o.budget_bytes = budget;
  o.fingerprint = Hash128{11, 22};
  o.n_layer = 2, o.kv_dim = 8, o.block_size = 16, o.elem_bytes = 2;
  return o;
}

std::string FreshDir(const std::string& name) {
  const std::string d = test::TempPath(name);
  fs::remove_all(d);
  return d;
}

TEST(DiskTier, SurvivesRestartAndIgnoresOtherModels) {
  const std::string dir = FreshDir("disk-restart");
  {
    DiskTier t(DiskOpts(dir));
    t.Insert(std::vector<BlockPayload>{Block(1), Block(2)});
    t.Insert(std::vector<BlockPayload>{Block(3)});
  }
  DiskTier again(DiskOpts(dir));
  EXPECT_EQ(again.CountLeading(Keys({1, 2, 3})), 3u);
  const auto got = again.Load(Keys({1, 2, 3}));
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[2], Block(3).bytes);
  DiskTierOptions other = DiskOpts(dir);
  other.fingerprint = Hash128{99, 99};  // another model: sees nothing, deletes nothing
  DiskTier foreign(other);
  EXPECT_EQ(foreign.CountLeading(Keys({1})), 0u);
  EXPECT_EQ(foreign.num_ignored_files(), 2u);
  EXPECT_EQ(DiskTier(DiskOpts(dir)).CountLeading(Keys({1, 2, 3})), 3u);
}

// LoadInto writes each payload whole into the buffers it is handed, whatever
// they held (other blocks' bytes, other sizes), appends where there are too
// few, and leaves the spare ones alone; what it returns counts the loaded.
TEST(Tiers, LoadIntoReusesBuffersAndWritesEachPayloadWhole) {
  const std::string dir = FreshDir("disk-load-into");
  HostTier host(1 << 20);
  DiskTier disk(DiskOpts(dir));
  for (KvTier* t : std::initializer_list<KvTier*>{&host, &disk}) {
    t->Insert(std::vector<BlockPayload>{Block(1), Block(2, 700), Block(3, 1300)});
    std::vector<std::vector<uint8_t>> bufs = {std::vector<uint8_t>(2000, 0xee), std::vector<uint8_t>(10, 0xdd)};
    const uint8_t* first = bufs[0].data();
    ASSERT_EQ(t->LoadInto(Keys({1, 2, 3, 9}), &bufs), 3u) << t->name();
    ASSERT_EQ(bufs.size(), 3u);
    EXPECT_EQ(bufs[0], Block(1).bytes) << t->name();
    EXPECT_EQ(bufs[1], Block(2, 700).bytes) << t->name();
    EXPECT_EQ(bufs[2], Block(3, 1300).bytes) << t->name();
    EXPECT_EQ(bufs[0].data(), first) << "a buffer large enough is reused, not replaced";
    bufs.push_back(std::vector<uint8_t>(5, 0x11));
    ASSERT_EQ(t->LoadInto(Keys({2}), &bufs), 1u);
    EXPECT_EQ(bufs[0], Block(2, 700).bytes);
    EXPECT_EQ(bufs[3], std::vector<uint8_t>(5, 0x11)) << "spare buffers untouched";
    EXPECT_EQ(t->LoadInto(Keys({9, 1}), &bufs), 0u);
  }
}

// The tier stack keeps payload buffers given back, up to its cap, and hands
// them out for the next payloads: loads through it stay exact.
TEST(TierStack, RecycledBuffersComeBackAndLoadsStayExact) {
  std::vector<std::unique_ptr<KvTier>> v;
  v.push_back(std::make_unique<HostTier>(1 << 20));
  TierStack stack(std::move(v));
  stack.set_costs(CostModel());
  EXPECT_TRUE(stack.SpareBuffer().empty());
  for (uint64_t k : {1, 2, 3}) stack.OnEvicted(Block(k).key, Block(k).bytes);
  stack.Flush();  // the host tier copied them; their buffers are spare now
  std::vector<uint8_t> spare = stack.SpareBuffer();
  EXPECT_GE(spare.capacity(), 1000u);
  stack.Recycle({std::move(spare)});
  for (int round = 0; round < 3; ++round) {
    stack.SubmitLoad(7, Keys({1, 2, 3}), 0, 16);
    std::vector<LoadResult> done;
    for (int i = 0; i < 2000 && done.empty(); ++i) {
      done = stack.TakeFinishedLoads();
      if (done.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    ASSERT_EQ(done.size(), 1u);
    ASSERT_EQ(done[0].payloads.size(), 3u);
    for (uint64_t k = 1; k <= 3; ++k) EXPECT_EQ(done[0].payloads[k - 1], Block(k).bytes) << round;
    stack.Recycle(std::move(done[0].payloads));
  }
  // Past the cap, buffers are freed rather than kept.
  std::vector<std::vector<uint8_t>> big;
  big.emplace_back(TierStack::kSpareBytes + 1, 0);
  stack.Recycle(std::move(big));
  for (int i = 0; i < 3; ++i) EXPECT_LT(stack.SpareBuffer().capacity(), TierStack::kSpareBytes);
}

std::vector<std::string> Segments(const std::string& dir) {
  std::vector<std::string> v;
  for (const auto& e : fs::directory_iterator(dir)) v.push_back(e.path().string());
  std::sort(v.begin(), v.end());
  return v;
}

TEST(DiskTier, FlippedBytesAndTruncationAreDetected) {
  const std::string dir = FreshDir("disk-corrupt");
  {
    DiskTier t(DiskOpts(dir));
    t.Insert(std::vector<BlockPayload>{Block(1), Block(2), Block(3)});
  }
  const std::string seg = Segments(dir).front();
  {
    std::fstream f(seg, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(DiskTier::kHeaderBytes + DiskTier::kEntryHeaderBytes + 1000 + DiskTier::kEntryHeaderBytes + 10);
    f.put('\x5a');  // inside block 2's payload
  }
  DiskTier t(DiskOpts(dir));
  EXPECT_EQ(t.CountLeading(Keys({1, 2, 3})), 3u);  // the index cannot know yet
  EXPECT_EQ(t.Load(Keys({1, 2, 3})).size(), 1u);   // block 2 fails its checksum
  EXPECT_EQ(t.stats().num_corrupt, 1u);
  EXPECT_EQ(t.CountLeading(Keys({1, 2})), 1u);     // and is gone
  // Truncate inside block 3: the scan keeps blocks 1 (and 2, already dropped from the file's view).
  fs::resize_file(seg, fs::file_size(seg) - 300);
  DiskTier cut(DiskOpts(dir));
  EXPECT_EQ(cut.stats().num_corrupt, 1u);
  EXPECT_EQ(cut.CountLeading(Keys({1})), 1u);
  EXPECT_EQ(cut.CountLeading(Keys({3})), 0u);
  EXPECT_EQ(cut.Load(Keys({1})).size(), 1u);
}

TEST(DiskTier, QuotaEvictsOldSegmentsAndFailedWritesDoNotStopService) {
  const std::string dir = FreshDir("disk-quota");
  DiskTier t(DiskOpts(dir, 5000));  // room for about four 1-block segments
  for (uint64_t k = 1; k <= 20; ++k) t.Insert(std::vector<BlockPayload>{Block(k)});
  const TierStats s = t.stats();
  EXPECT_LE(s.bytes_used, 5000u);
  EXPECT_GT(s.num_evicted, 10u);
  EXPECT_EQ(t.CountLeading(Keys({20})), 1u);
  EXPECT_EQ(t.CountLeading(Keys({1})), 0u);
  uint64_t on_disk = 0;
  for (const std::string& f : Segments(dir)) on_disk += fs::file_size(f);
  EXPECT_LE(on_disk, 5000u);
  // The directory disappears under it (as a full or failed disk would refuse
  // writes): inserts are dropped, lookups still answer, nothing throws.
  fs::remove_all(dir);
  std::ofstream(dir) << "not a directory";
  t.Insert(std::vector<BlockPayload>{Block(30)});
  EXPECT_GE(t.stats().num_errors, 1u);
  EXPECT_FALSE(t.stats().healthy);
  t.Insert(std::vector<BlockPayload>{Block(31)});  // paused: dropped without trying
  EXPECT_EQ(t.CountLeading(Keys({30})), 0u);
  EXPECT_TRUE(t.Load(Keys({20})).empty());  // its file is gone: a miss, counted corrupt
  fs::remove(dir);
}

// A redis-server of our own on a free port.
class RedisServer {
 public:
  RedisServer() {
    for (int attempt = 0; attempt < 20 && pid_ <= 0; ++attempt) {
      port_ = 20000 + static_cast<int>(std::random_device{}() % 30000);
      pid_ = fork();
      if (pid_ == 0) {
        const std::string port = std::to_string(port_);
        execlp("redis-server", "redis-server", "--port", port.c_str(), "--save", "", "--appendonly", "no",
               "--bind", "127.0.0.1", "--loglevel", "warning", static_cast<char*>(nullptr));
        _exit(127);
      }
      if (!WaitReady()) {
        Stop();
        pid_ = -1;
      }
    }
  }
  ~RedisServer() { Stop(); }
  bool ok() const { return pid_ > 0; }
  int port() const { return port_; }
  void Stop() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
      pid_ = -1;
    }
  }

 private:
  bool WaitReady() {
    for (int i = 0; i < 100; ++i) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) return false;  // exited (no binary, port taken)
      RedisTierOptions o;
      o.port = port_;
      RedisTier probe(o);
      if (probe.stats().healthy) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }
  pid_t pid_ = -1;
  int port_ = 0;
};

#define REDIS_OR_SKIP(var)                                                                 \
  RedisServer var;                                                                         \
  if (!var.ok()) {                                                                         \
    if (test::RequireShared()) FAIL() << "redis-server could not be started";              \
    GTEST_SKIP() << "redis-server not available (apt-get install redis-server); skipping"; \
  }

TEST(RedisTier, SharedBetweenClientsAndSurvivesOutages) {
  REDIS_OR_SKIP(redis);
  RedisTierOptions o;
  o.port = redis.port();
  o.fingerprint = Hash128{1, 2};
  RedisTier a(o), b(o);
  a.Insert(std::vector<BlockPayload>{Block(1), Block(2), Block(3)});
  EXPECT_EQ(b.CountLeading(Keys({1, 2, 3, 4})), 3u);
  const auto got = b.Load(Keys({1, 2, 4, 3}));
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[1], Block(2).bytes);
  RedisTierOptions other = o;
  other.ns = "tenant-b";
  EXPECT_EQ(RedisTier(other).CountLeading(Keys({1})), 0u);
  // Down: calls return at once with nothing, the tier reports unhealthy.
  redis.Stop();
  const int64_t t0 = NowNs();
  EXPECT_EQ(b.CountLeading(Keys({1})), 0u);
  EXPECT_TRUE(b.Load(Keys({1})).empty());
  b.Insert(std::vector<BlockPayload>{Block(9)});
  EXPECT_LT(NsToMs(NowNs() - t0), 2000);
  EXPECT_FALSE(b.stats().healthy);
  EXPECT_GE(b.stats().num_errors, 1u);
}

TEST(RedisTier, CorruptOrForeignValuesAreRejected) {
  REDIS_OR_SKIP(redis);
  RedisTierOptions o;
  o.port = redis.port();
  o.fingerprint = Hash128{5, 6};
  RedisTier t(o);
  t.Insert(std::vector<BlockPayload>{Block(1), Block(2), Block(3)});
  // Overwrite block 2 with a short value and block 3 with a flipped payload byte.
  redisContext* c = redisConnect("127.0.0.1", redis.port());
  ASSERT_TRUE(c != nullptr && c->err == 0);
  const std::string prefix = "promptcache:" + o.fingerprint.Hex() + ":";
  freeReplyObject(redisCommand(c, "SET %s %b", (prefix + Hash128{2, 15}.Hex()).c_str(), "abc", size_t{3}));
  redisReply* v = static_cast<redisReply*>(redisCommand(c, "GET %s", (prefix + Hash128{3, 22}.Hex()).c_str()));
  ASSERT_TRUE(v != nullptr && v->type == REDIS_REPLY_STRING);
  std::string bad(v->str, v->len);
  freeReplyObject(v);
  bad[20] ^= 0x40;
  freeReplyObject(redisCommand(c, "SET %s %b", (prefix + Hash128{3, 22}.Hex()).c_str(), bad.data(), bad.size()));
  redisFree(c);
  EXPECT_EQ(t.Load(Keys({1, 2, 3})).size(), 1u);  // stops at the short value (refused, counted)
  EXPECT_TRUE(t.Load(Keys({3})).empty());         // checksum mismatch
  EXPECT_EQ(t.stats().num_corrupt, 2u);
  EXPECT_TRUE(t.stats().healthy);  // bad data is not an outage
}

TEST(PayloadSeal, KeyedTagsBindSecretKeyAndPayload) {
  auto a = PayloadSeal::FromSecret("0123456789abcdef\n");  // the newline is not part of it
  auto b = PayloadSeal::FromSecret("0123456789abcdeX");
  auto a2 = PayloadSeal::FromSecret("0123456789abcdef");
  ASSERT_TRUE(a.ok() && b.ok() && a2.ok());
  EXPECT_FALSE(PayloadSeal::FromSecret("short").ok());
  const std::vector<uint8_t> payload = Block(1).bytes;
  const Hash128 k{1, 2}, other{1, 3};
  const std::string v = a->Seal(k, payload);
  std::vector<uint8_t> out;
  auto bytes = [](const std::string& s) { return std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(s.data()), s.size()); };
  EXPECT_TRUE(a2->Open(k, bytes(v), &out));
  EXPECT_EQ(out, payload);
  EXPECT_FALSE(b->Open(k, bytes(v), &out));      // another secret
  EXPECT_FALSE(a->Open(other, bytes(v), &out));  // moved to another key
  EXPECT_FALSE(PayloadSeal().Open(k, bytes(v), &out));  // unkeyed reader
  std::string flipped = v;
  flipped[40] ^= 1;
  EXPECT_FALSE(a->Open(k, bytes(flipped), &out));
  EXPECT_FALSE(a->Open(k, bytes(v.substr(0, 31)), &out));  // shorter than a tag
  EXPECT_TRUE(PayloadSeal().Open(k, bytes(PayloadSeal().Seal(k, payload)), &out));
}

TEST(RedisTier, AddressParsing) {
  RedisTierOptions o;
  ASSERT_TRUE(ParseRedisAddress("10.0.0.7:6380", &o).ok());
  EXPECT_EQ(o.host, "10.0.0.7");
  EXPECT_EQ(o.port, 6380);
  RedisTierOptions d;
  ASSERT_TRUE(ParseRedisAddress("cache.local", &d).ok());
  EXPECT_EQ(d.port, 6379);
  for (const char* bad : {"host:", "host:abc", "host:99999", ":6379", "host:63x79"}) {
    const Status st = ParseRedisAddress(bad, &o);
    EXPECT_FALSE(st.ok()) << bad;
    EXPECT_NE(st.message().find("HOST:PORT"), std::string::npos) << bad;
  }
}

TEST(CostModel, InterpolatesAndFindsTheCrossover) {
  CostModel m;
  m.SetPrefillSamples({{0, 1.0}, {1000, 2.0}});  // ms per token
  EXPECT_NEAR(m.RecomputeMs(0, 1000), 1500, 1e-9);
  EXPECT_NEAR(m.RecomputeMs(1000, 1000), 2500, 1e-9);  // extrapolated slope
  m.SetTierCost("slow", TierCost{100, 1});
  m.SetTierCost("fast", TierCost{0.01, 0.01});
  // 16-token blocks: loading n blocks costs 100 + n ms; recomputing ~16 n ms.
  EXPECT_EQ(m.MinUsefulMatchTokens("slow", 16, 100000), 112u);
  EXPECT_FALSE(m.ShouldLoad("slow", 0, 6, 16));
  EXPECT_TRUE(m.ShouldLoad("slow", 0, 7, 16));
  EXPECT_EQ(m.MinUsefulMatchTokens("fast", 16, 100000), 16u);
  m.SetTierCost("never", TierCost{1e9, 0});
  EXPECT_EQ(m.MinUsefulMatchTokens("never", 16, 4096), 0u);
}

// --- The engine with tiers -------------------------------------------------

struct Out {
  std::vector<int32_t> ids;
  std::vector<std::vector<std::pair<int32_t, float>>> tops;
  std::map<std::string, size_t> by_tier;
  size_t cached = 0;
};

Out Serve(Engine& e, const std::vector<int32_t>& prompt, int n = 8) {
  EngineRequest r;
  r.prompt = prompt;
  r.max_tokens = n;
  r.sampling.temperature = 0;
  r.ignore_eos = true;
  r.top_logprobs = 3;
  r.want_logprobs = true;
  SubmitOutcome sub = e.Submit(r);
  PC_CHECK(sub.stream);
  Out o;
  for (;;) {
    std::optional<StreamEvent> ev = sub.stream->Next(1000);
    if (!ev) continue;
    if (ev->done) {
      PC_CHECK(ev->finish == FinishReason::kLength);
      o.by_tier = ev->cached_by_tier;
      o.cached = ev->num_cached_tokens;
      return o;
    }
    o.ids.push_back(ev->token);
    o.tops.push_back(ev->top);
  }
}

struct Loaded {
  std::unique_ptr<Model> model;
  std::unique_ptr<Tokenizer> tok;
};
Loaded LoadStories(const std::string& path) {
  Loaded l;
  l.model = std::move(*Model::Load(path, 2));
  l.tok = std::make_unique<Tokenizer>(std::move(*Tokenizer::FromGguf(l.model->gguf())));
  return l;
}

// Cold reference: no cache at all.
Out Reference(Loaded& l, const std::vector<int32_t>& prompt, int n = 8) {
  GenerateOptions o;
  o.max_tokens = n;
  o.sampling.temperature = 0;
  o.ignore_eos = true;
  o.logprobs = 3;
  Out out;
  PC_CHECK(Generate(*l.model, *l.tok, prompt, o, [&](const TokenEvent& e) {
             out.ids.push_back(e.id);
             out.tops.push_back(e.top);
             return true;
           }).ok());
  return out;
}

void ExpectSame(const Out& got, const Out& want, const std::string& what) {
  ASSERT_EQ(got.ids, want.ids) << what;
  for (size_t i = 0; i < want.tops.size(); ++i) {
    for (size_t j = 0; j < want.tops[i].size(); ++j) {
      EXPECT_EQ(got.tops[i][j].first, want.tops[i][j].first) << what;
      EXPECT_NEAR(got.tops[i][j].second, want.tops[i][j].second, 1e-4) << what;
    }
  }
}

std::vector<int32_t> Doc(int i, size_t n = 70) {
  std::vector<int32_t> p = {1};
  for (size_t k = 1; k < n; ++k) p.push_back(static_cast<int32_t>(3 + (i * 131 + k * 17 + k * k) % 500));
  return p;
}

EngineOptions SmallPool(const ModelConfig& c, TierStack* tiers, size_t blocks = 24) {
  EngineOptions eo;
  eo.cache.mem_bytes = blocks * 2 * static_cast<size_t>(c.n_layer) * 16 * static_cast<size_t>(c.kv_dim()) * 2;
  eo.tiers = tiers;
  eo.max_running = 2;
  return eo;
}

std::unique_ptr<TierStack> Tiers(const Model& m, const std::string& disk_dir, int redis_port, size_t host_bytes,
                                 const PayloadSeal& seal = {}) {
  PrefixCache probe(m.config().kv_shape(), m.fingerprint(), CacheOptions{16, KvDtype::kF16, 1});
  std::vector<std::unique_ptr<KvTier>> t;
  if (host_bytes) t.push_back(std::make_unique<HostTier>(host_bytes));
  if (!disk_dir.empty()) {
    DiskTierOptions d = DiskOptionsFor(probe, disk_dir, uint64_t{1} << 30);
    d.seal = seal;
    t.push_back(std::make_unique<DiskTier>(d));
  }
  if (redis_port) {
    RedisTierOptions r;
    r.port = redis_port;
    r.fingerprint = probe.layout_fingerprint();
    r.seal = seal;
    t.push_back(std::make_unique<RedisTier>(r));
  }
  return std::make_unique<TierStack>(std::move(t));
}

TEST(EngineTiers, OutputsEqualNoCacheAcrossEveryTier) {
  PC_SHARED_OR_SKIP(path, "models/stories260K.gguf");
  REDIS_OR_SKIP(redis);
  Loaded l = LoadStories(path);
  const size_t block_bytes = 2 * static_cast<size_t>(l.model->config().n_layer) * 16 * l.model->config().kv_dim() * 2;
  const std::string dir = FreshDir("engine-tiers");
  std::map<std::string, size_t> seen;
  for (const char* layout : {"host", "disk", "redis", "host+disk+redis"}) {
    const std::string s = layout;
    auto tiers = Tiers(*l.model, s.find("disk") != std::string::npos ? dir + "/" + s : "",
                       s.find("redis") != std::string::npos ? redis.port() : 0,
                       s.find("host") != std::string::npos ? 64 * block_bytes : 0);
    Engine e(*l.model, *l.tok, SmallPool(l.model->config(), tiers.get()));
    // Six 70-token documents do not fit the 24-block pool together: the
    // second round finds their blocks evicted to (or written behind to) tiers.
    for (int round = 0; round < 2; ++round) {
      for (int d = 0; d < 6; ++d) {
        const Out got = Serve(e, Doc(d + 100 * static_cast<int>(s.size())));
        ExpectSame(got, Reference(l, Doc(d + 100 * static_cast<int>(s.size()))), s);
        for (const auto& [tier, n] : got.by_tier) seen[tier] += n;
        if (round == 1 && d == 0) {
          EXPECT_EQ(got.cached, 64u) << s;
        }
      }
      tiers->Flush();
    }
  }
  EXPECT_GT(seen["host"], 0u);
  EXPECT_GT(seen["disk"], 0u);
  EXPECT_GT(seen["redis"], 0u);
}

// Runs fn in a child process (before this process starts any thread of its
// own) and returns its exit code.
int InChild(const std::function<int()>& fn) {
  fflush(nullptr);
  const pid_t pid = fork();
  if (pid == 0) _exit(fn());
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

TEST(EngineTiers, RestartHitsDiskAndCorruptionIsRecomputed) {
  PC_SHARED_OR_SKIP(path, "models/stories260K.gguf");
  const std::string dir = FreshDir("engine-restart");
  const std::vector<int32_t> prompt = Doc(7, 90);
  ASSERT_EQ(InChild([&] {
              Loaded l = LoadStories(path);
              auto tiers = Tiers(*l.model, dir, 0, 0);
              Engine e(*l.model, *l.tok, SmallPool(l.model->config(), tiers.get()));
              return Serve(e, prompt).cached == 0 ? 0 : 1;
            }),
            0);
  Loaded l = LoadStories(path);
  const Out want = Reference(l, prompt);
  {
    auto tiers = Tiers(*l.model, dir, 0, 0);
    Engine e(*l.model, *l.tok, SmallPool(l.model->config(), tiers.get()));
    const Out got = Serve(e, prompt);
    ExpectSame(got, want, "after restart");
    EXPECT_EQ(got.by_tier.at("disk"), 80u);  // 5 full blocks of the 90-token prompt
  }
  // Flip a byte in every stored payload: each load fails its checksum and the
  // prompt is recomputed, with the same output.
  for (const auto& f : fs::directory_iterator(dir)) {
    std::fstream io(f.path(), std::ios::in | std::ios::out | std::ios::binary);
    io.seekp(DiskTier::kHeaderBytes + DiskTier::kEntryHeaderBytes + 5);
    io.put('\x7f');
  }
  auto tiers = Tiers(*l.model, dir, 0, 0);
  Engine e(*l.model, *l.tok, SmallPool(l.model->config(), tiers.get()));
  const Out got = Serve(e, prompt);
  ExpectSame(got, want, "corrupt disk");
  EXPECT_EQ(got.cached, 0u);
  EXPECT_GE(tiers->tiers()[0]->stats().num_corrupt, 1u);
}

TEST(EngineTiers, SecondProcessHitsOnTheFirstsPrefillThroughRedis) {
  PC_SHARED_OR_SKIP(path, "models/stories260K.gguf");
  REDIS_OR_SKIP(redis);
  const std::vector<int32_t> prompt = Doc(9, 100);
  ASSERT_EQ(InChild([&] {
              Loaded l = LoadStories(path);
              auto tiers = Tiers(*l.model, "", redis.port(), 0);
              Engine e(*l.model, *l.tok, SmallPool(l.model->config(), tiers.get()));
              const bool cold = Serve(e, prompt).cached == 0;
              tiers->Flush();
              return cold ? 0 : 1;
            }),
            0);
  Loaded l = LoadStories(path);
  auto tiers = Tiers(*l.model, "", redis.port(), 0);
  Engine e(*l.model, *l.tok, SmallPool(l.model->config(), tiers.get()));
  const Out got = Serve(e, prompt);
  ExpectSame(got, Reference(l, prompt), "via redis");
  EXPECT_EQ(got.by_tier.at("redis"), 96u);
}

TEST(EngineTiers, RedisKilledMidRunRequestsComplete) {
  PC_SHARED_OR_SKIP(path, "models/stories260K.gguf");
  REDIS_OR_SKIP(redis);
  Loaded l = LoadStories(path);
  auto tiers = Tiers(*l.model, "", redis.port(), 0);
  Engine e(*l.model, *l.tok, SmallPool(l.model->config(), tiers.get()));
  for (int round = 0; round < 3; ++round) {
    for (int d = 0; d < 6; ++d) {
      if (round == 1 && d == 3) redis.Stop();
      const Out got = Serve(e, Doc(d + 40));
      ExpectSame(got, Reference(l, Doc(d + 40)), "redis outage");
    }
  }
  EXPECT_FALSE(tiers->tiers()[0]->stats().healthy);
  const std::string m = e.RenderMetrics();
  EXPECT_NE(m.find("promptcache_tier_healthy{tier=\"redis\"} 0"), std::string::npos);
}

// The Redis health gauge follows the server while no request touches the
// tier (the tier stack probes idle tiers about once a second).
TEST(EngineTiers, RedisHealthIsCurrentWithoutRequests) {
  PC_SHARED_OR_SKIP(path, "models/stories260K.gguf");
  REDIS_OR_SKIP(redis);
  Loaded l = LoadStories(path);
  auto tiers = Tiers(*l.model, "", redis.port(), 0);
  Engine e(*l.model, *l.tok, SmallPool(l.model->config(), tiers.get()));
  EXPECT_NE(e.RenderMetrics().find("promptcache_tier_healthy{tier=\"redis\"} 1"), std::string::npos);
  redis.Stop();
  bool down = false;
  for (int i = 0; i < 100 && !down; ++i) {  // up to 10 s; about 1 s expected
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    down = e.RenderMetrics().find("promptcache_tier_healthy{tier=\"redis\"} 0") != std::string::npos;
  }
  EXPECT_TRUE(down);
}

// A tier that cannot hold test blocks (a full disk) is reported as
// unavailable, not as a load time of 1e9 ms.
TEST(CostModel, ATierThatDropsEverythingIsUnavailable) {
  DiskTierOptions d;
  d.dir = FreshDir("full-disk");
  d.budget_bytes = 100;  // smaller than one block: every insert is dropped
  DiskTier full(d);
  EXPECT_FALSE(CalibrateTier(full, 4096).has_value());
  HostTier host(1 << 20);
  const std::optional<TierCost> c = CalibrateTier(host, 4096);
  ASSERT_TRUE(c.has_value());
  EXPECT_LT(c->latency_ms, 100.0);
}

// What an attacker with write access to Redis can do to the first block of
// a prompt's cached K/V: rewrite it (each K/V element set to 1.0, tokens
// kept) or move another prompt's block under its key, sealing the value as
// well as it can without the secret (the unkeyed checksum).
enum class Forgery { kOverwriteKv, kOtherTokens };
void Forge(int port, const Model& m, const std::vector<int32_t>& victim, const std::vector<int32_t>& donor, Forgery how) {
  PrefixCache probe(m.config().kv_shape(), m.fingerprint(), CacheOptions{16, KvDtype::kF16, 1});
  const std::string prefix = "promptcache:" + probe.layout_fingerprint().Hex() + ":";
  const Hash128 target = probe.BlockHashes(victim, "")[0];
  const Hash128 source = how == Forgery::kOtherTokens ? probe.BlockHashes(donor, "")[0] : target;
  redisContext* c = redisConnect("127.0.0.1", port);
  PC_CHECK(c != nullptr && c->err == 0);
  redisReply* v = static_cast<redisReply*>(redisCommand(c, "GET %s", (prefix + source.Hex()).c_str()));
  PC_CHECK(v != nullptr && v->type == REDIS_REPLY_STRING && v->len > 32);
  std::vector<uint8_t> payload(v->str + 32, v->str + v->len);
  freeReplyObject(v);
  if (how == Forgery::kOverwriteKv) {
    for (size_t i = 16 * sizeof(int32_t); i + 1 < payload.size(); i += 2) {
      payload[i] = 0x00;  // fp16 1.0 = 0x3c00
      payload[i + 1] = 0x3c;
    }
  }
  const std::string forged = PayloadSeal().Seal(target, payload);
  freeReplyObject(redisCommand(c, "SET %s %b", (prefix + target.Hex()).c_str(), forged.data(), forged.size()));
  redisFree(c);
}

// Attack 4 of the hardening issue: with a tier secret, values rewritten in
// Redis by someone without it are refused and counted, and the output is
// the no-cache output. Without a secret (--tier-trust-unauthenticated) the
// same rewrite is loaded: that mode trusts the store.
TEST(EngineTiers, RedisEntriesForgedWithoutTheSecretAreRejected) {
  PC_SHARED_OR_SKIP(path, "models/stories260K.gguf");
  REDIS_OR_SKIP(redis);
  Loaded l = LoadStories(path);
  auto seal = PayloadSeal::FromSecret("correct horse battery staple");
  ASSERT_TRUE(seal.ok());
  for (bool keyed : {true, false}) {
    const std::vector<int32_t> prompt = Doc(keyed ? 11 : 12, 80);
    const Out want = Reference(l, prompt);
    {
      auto tiers = Tiers(*l.model, "", redis.port(), 0, keyed ? *seal : PayloadSeal());
      Engine e(*l.model, *l.tok, SmallPool(l.model->config(), tiers.get()));
      Serve(e, prompt);
      tiers->Flush();
    }
    Forge(redis.port(), *l.model, prompt, {}, Forgery::kOverwriteKv);
    auto tiers = Tiers(*l.model, "", redis.port(), 0, keyed ? *seal : PayloadSeal());
    Engine e(*l.model, *l.tok, SmallPool(l.model->config(), tiers.get()));
    const Out got = Serve(e, prompt);
    if (keyed) {
      ExpectSame(got, want, "forged entry, keyed");
      EXPECT_EQ(got.cached, 0u);  // the chain stops at the forged first block
      EXPECT_EQ(tiers->tiers()[0]->stats().num_corrupt, 1u);
    } else {
      EXPECT_EQ(got.by_tier.at("redis"), 79u);  // loaded (all but the last token): this mode cannot tell
      EXPECT_NE(got.tops, want.tops);
    }
  }
}

// A tier entry whose payload holds other tokens than its key stands for
// (a block moved under another key, checksum recomputed) is refused at
// adoption and counted; the output is the no-cache output.
TEST(EngineTiers, AnEntryHoldingOtherTokensIsRefused) {
  PC_SHARED_OR_SKIP(path, "models/stories260K.gguf");
  REDIS_OR_SKIP(redis);
  Loaded l = LoadStories(path);
  const std::vector<int32_t> victim = Doc(21, 80), donor = Doc(22, 80);
  {
    auto tiers = Tiers(*l.model, "", redis.port(), 0);
    Engine e(*l.model, *l.tok, SmallPool(l.model->config(), tiers.get()));
    Serve(e, victim);
    Serve(e, donor);
    tiers->Flush();
  }
  Forge(redis.port(), *l.model, victim, donor, Forgery::kOtherTokens);
  auto tiers = Tiers(*l.model, "", redis.port(), 0);
  Engine e(*l.model, *l.tok, SmallPool(l.model->config(), tiers.get()));
  const Out got = Serve(e, victim);
  ExpectSame(got, Reference(l, victim), "moved entry");
  EXPECT_EQ(got.cached, 0u);
  EXPECT_NE(e.RenderMetrics().find("promptcache_tier_rejected_blocks_total{tier=\"redis\"} 1"), std::string::npos);
}

// Attack 3: a copy of the model with another rope.freq_base, on the same
// disk cache, is another model: it finds none of the first one's blocks.
TEST(EngineTiers, AModelDifferingInOneValueNeverReusesBlocks) {
  PC_SHARED_OR_SKIP(path, "models/stories260K.gguf");
  const std::string dir = FreshDir("engine-two-models");
  const std::vector<int32_t> prompt = Doc(31, 80);
  Loaded l = LoadStories(path);
  {
    auto tiers = Tiers(*l.model, dir, 0, 0);
    Engine e(*l.model, *l.tok, SmallPool(l.model->config(), tiers.get()));
    Serve(e, prompt);
    tiers->Flush();
  }
  GgufWriter w;
  for (const auto& [key, value] : l.model->gguf().metadata()) w.Set(key, value);
  w.Set("llama.rope.freq_base", GgufValue::Of(20000.0f));
  for (const GgufTensorInfo& t : l.model->gguf().tensors()) {
    ASSERT_TRUE(w.AddTensor(t.name, t.type, t.dims, {t.data, static_cast<size_t>(t.size_bytes)}).ok());
  }
  const std::string copy = test::TempPath("stories-freq-base.gguf");
  ASSERT_TRUE(w.WriteFile(copy).ok());
  Loaded other = LoadStories(copy);
  ASSERT_NE(other.model->fingerprint(), l.model->fingerprint());
  auto tiers = Tiers(*other.model, dir, 0, 0);
  Engine e(*other.model, *other.tok, SmallPool(other.model->config(), tiers.get()));
  const Out got = Serve(e, prompt);
  EXPECT_EQ(got.cached, 0u);
  ExpectSame(got, Reference(other, prompt), "other model");
}

}  // namespace
}  // namespace pc
