// promptcache bench-tiers: TTFT when a long prefix comes back from each spill
// tier vs recomputing it, and the measured crossover match length per tier
// (the shortest cached prefix whose load beats its recompute). A benchmark,
// not a test: run it on an idle machine.
#include <cstdio>
#include <filesystem>

#include "base/clock.h"
#include "commands.h"
#include "engine/engine.h"
#include "kvcache/disk_tier.h"
#include "kvcache/redis_tier.h"

namespace pc::cli {
namespace {

struct Flags {
  std::string model, disk_dir = "/tmp/promptcache-bench-tiers", redis, kv_type = "f16";
  size_t prompt_len = 4096;
  int reps = 3, threads = 0;
};

std::vector<int32_t> Prompt(size_t len, int32_t n_vocab, uint64_t seed) {
  std::vector<int32_t> p = {1};
  uint64_t x = seed * 0x9e3779b97f4a7c15ull + 7;
  while (p.size() < len) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    p.push_back(300 + static_cast<int32_t>(x % static_cast<uint64_t>(n_vocab - 300)));
  }
  return p;
}

// TTFT and where the cached tokens came from, for one request.
struct Shot {
  double ttft_ms = 0, load_ms = 0;
  size_t cached = 0;
  std::string tiers;
};
Shot Once(Engine& e, const std::vector<int32_t>& prompt, bool use_cache) {
  EngineRequest r;
  r.prompt = prompt;
  r.max_tokens = 1;
  r.sampling.temperature = 0;
  r.use_cache = use_cache;
  std::shared_ptr<RequestStream> s = e.Submit(r).stream;
  for (;;) {
    std::optional<StreamEvent> ev = s->Next(60000);
    if (!ev || !ev->done) continue;
    Shot shot{ev->timings.ttft_ms, 0, ev->num_cached_tokens, ""};
    for (const auto& [t, n] : ev->cached_by_tier) {
      if (n) shot.tiers += fmt::format("{}{}={}", shot.tiers.empty() ? "" : ",", t, n);
    }
    for (const auto& [t, ms] : ev->tier_load_ms) shot.load_ms += ms;
    return shot;
  }
}

std::unique_ptr<KvTier> MakeTier(const std::string& name, const Flags& f, const PrefixCache& probe) {
  if (name == "host") return std::make_unique<HostTier>(uint64_t{8} << 30);
  if (name == "disk") return std::make_unique<DiskTier>(DiskOptionsFor(probe, f.disk_dir, uint64_t{16} << 30));
  RedisTierOptions r;
  ParseRedisAddress(f.redis, &r);  // checked in BenchTiers
  r.ns = "promptcache-bench";
  r.ttl_s = 600;
  r.fingerprint = probe.layout_fingerprint();
  return std::make_unique<RedisTier>(r);
}

int BenchTiers(const Flags& f) {
  Result<std::unique_ptr<Model>> model = Model::Load(f.model, f.threads);
  if (!model.ok()) return Fail(model.status().message());
  Result<Tokenizer> tok = Tokenizer::FromGguf((*model)->gguf());
  if (!tok.ok()) return Fail(tok.status().message());
  const ModelConfig& c = (*model)->config();
  Result<KvDtype> kv_type = ParseKvDtype(f.kv_type, static_cast<size_t>(c.head_dim));
  if (!kv_type.ok()) return Fail(kv_type.status().message());
  const CacheOptions co{16, *kv_type, 1};
  PrefixCache probe(c.kv_shape(), (*model)->fingerprint(), co);
  const size_t block_bytes = probe.payload_bytes();
  const size_t pool_bytes = (f.prompt_len / 16 + 3) * block_bytes;  // one prompt fits; a second evicts it
  std::vector<std::string> names = {"host", "disk"};
  if (!f.redis.empty()) {
    RedisTierOptions check;
    if (Status st = ParseRedisAddress(f.redis, &check); !st.ok()) return Fail(st.message());
    names.push_back("redis");
  }
  std::filesystem::remove_all(f.disk_dir);
  std::printf("model %s, prompt %zu tokens, KV %s, block %zu bytes, %d reps\n\n", f.model.c_str(), f.prompt_len,
              KvDtypeName(*kv_type), block_bytes, f.reps);
  std::printf("%-10s %12s %12s %10s  %s\n", "source", "TTFT ms", "load ms", "cached", "tiers");
  for (int rep = 0; rep < f.reps; ++rep) {
    const std::vector<int32_t> prompt = Prompt(f.prompt_len, c.n_vocab, 1000 + static_cast<uint64_t>(rep));
    const std::vector<int32_t> other = Prompt(f.prompt_len, c.n_vocab, 5000 + static_cast<uint64_t>(rep));
    for (const std::string& name : names) {
      std::vector<std::unique_ptr<KvTier>> v;
      v.push_back(MakeTier(name, f, probe));
      TierStack stack(std::move(v));
      stack.set_costs(CostModel());  // always load: we measure, not decide
      EngineOptions eo;
      eo.cache.mem_bytes = pool_bytes;
      eo.cache.dtype = *kv_type;
      eo.tiers = &stack;
      Engine e(**model, *tok, eo);
      if (name == "host" && rep == 0) {
        const Shot cold = Once(e, prompt, false);
        std::printf("%-10s %12.1f %12s %10zu  %s\n", "recompute", cold.ttft_ms, "-", cold.cached, "-");
      }
      Once(e, prompt, true);  // computes it; written behind to disk/redis
      Once(e, other, true);   // evicts it from the pool (to host)
      stack.Flush();
      const Shot s = Once(e, prompt, true);
      std::printf("%-10s %12.1f %12.2f %10zu  %s\n", name.c_str(), s.ttft_ms, s.load_ms, s.cached, s.tiers.c_str());
    }
  }
  // Crossover: load m tokens from each tier vs recompute m tokens at position 0.
  std::printf("\n%-8s", "tokens");
  std::printf(" %12s", "recompute");
  for (const std::string& n : names) std::printf(" %10s", n.c_str());
  std::printf("   (ms)\n");
  std::vector<std::unique_ptr<KvTier>> tiers;
  for (const std::string& n : names) tiers.push_back(MakeTier(n, f, probe));
  std::vector<size_t> crossover(names.size(), 0);
  for (size_t m = 16; m <= std::min<size_t>(f.prompt_len, 1024); m *= 2) {
    Session session(**model, m, *kv_type);
    const std::vector<int32_t> p = Prompt(m, c.n_vocab, 77);
    const int64_t t0 = NowNs();
    session.Prefill(p);
    const double recompute_ms = NsToMs(NowNs() - t0);
    std::printf("%-8zu %12.2f", m, recompute_ms);
    for (size_t i = 0; i < tiers.size(); ++i) {
      std::vector<BlockPayload> blocks(m / 16);
      std::vector<Hash128> keys;
      for (size_t b = 0; b < blocks.size(); ++b) {
        blocks[b].key = Hash128{m * 1000 + b, 4242};
        blocks[b].bytes.assign(block_bytes, static_cast<uint8_t>(b));
        keys.push_back(blocks[b].key);
      }
      tiers[i]->Insert(blocks);
      // Into buffers an earlier load filled, as the tier stack reuses them
      // (tier.h): the first load, untimed, maps their pages.
      std::vector<std::vector<uint8_t>> bufs;
      tiers[i]->LoadInto(keys, &bufs);
      const int64_t l0 = NowNs();
      const size_t have = tiers[i]->CountLeading(keys);
      const size_t got = tiers[i]->LoadInto(std::span<const Hash128>(keys).first(have), &bufs);
      const double load_ms = NsToMs(NowNs() - l0);
      tiers[i]->Erase(keys);
      std::printf(" %10.2f", got == keys.size() ? load_ms : NAN);
      if (crossover[i] == 0 && got == keys.size() && load_ms < recompute_ms) crossover[i] = m;
    }
    std::printf("\n");
  }
  std::printf("\nmeasured crossover (shortest match whose load beats recompute):");
  for (size_t i = 0; i < names.size(); ++i) {
    std::printf(" %s %s", names[i].c_str(), crossover[i] ? fmt::format("{} tokens", crossover[i]).c_str() : "none <= 1024");
  }
  std::printf("\n");
  std::filesystem::remove_all(f.disk_dir);
  return 0;
}

}  // namespace

void RegisterBenchTiers(CLI::App& app, int* exit_code) {
  auto f = std::make_shared<Flags>();
  CLI::App* c = app.add_subcommand("bench-tiers", "Benchmark: TTFT from each spill tier vs recompute, and the crossover match length");
  c->add_option("-m,--model", f->model, "GGUF model")->required();
  c->add_option("--prompt-len", f->prompt_len, "Prefix length in tokens")->check(CLI::Range(32, 1 << 20));
  c->add_option("-r,--reps", f->reps, "Repetitions")->check(CLI::Range(1, 100));
  c->add_option("--disk-dir", f->disk_dir, "Scratch directory for the disk tier (deleted before and after)");
  c->add_option("--redis", f->redis, "HOST:PORT of a Redis to include");
  c->add_option("-t,--threads", f->threads, "Threads");
  c->add_option("--kv-type", f->kv_type, "KV cache element type: f16, f32, q8_0")->check(CLI::IsMember({"f16", "f32", "q8_0"}));
  c->callback([f, exit_code] { *exit_code = BenchTiers(*f); });
}

}  // namespace pc::cli
