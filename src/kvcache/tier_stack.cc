#include "kvcache/tier_stack.h"

#include <limits>

#include <algorithm>
#include <random>

#include "base/clock.h"
#include "base/piecewise.h"
#include "kvcache/disk_tier.h"

namespace pc {

void CostModel::SetPrefillSamples(std::vector<std::pair<double, double>> samples) {
  std::sort(samples.begin(), samples.end());
  samples_ = std::move(samples);
}

std::optional<TierCost> CostModel::tier_cost(const std::string& tier) const {
  auto it = tiers_.find(tier);
  if (it == tiers_.end()) return std::nullopt;
  return it->second;
}

double CostModel::MsPerTokenAt(double pos) const { return InterpolateLinear(samples_, pos); }

double CostModel::RecomputeMs(size_t first_token, size_t num_tokens) const {
  // Trapezoid over the span: per-token cost is piecewise linear in position.
  const double a = MsPerTokenAt(static_cast<double>(first_token));
  const double b = MsPerTokenAt(static_cast<double>(first_token + num_tokens));
  return 0.5 * (a + b) * static_cast<double>(num_tokens);
}

double CostModel::LoadMs(const std::string& tier, size_t num_blocks) const {
  const std::optional<TierCost> c = tier_cost(tier);
  if (!c) return 0;
  return c->latency_ms + c->ms_per_block * static_cast<double>(num_blocks);
}

bool CostModel::ShouldLoad(const std::string& tier, size_t first_token, size_t num_blocks, size_t block_size) const {
  if (!tier_cost(tier) || samples_.empty()) return true;  // uncalibrated: reuse
  return LoadMs(tier, num_blocks) < RecomputeMs(first_token, num_blocks * block_size);
}

size_t CostModel::MinUsefulMatchTokens(const std::string& tier, size_t block_size, size_t max_tokens) const {
  for (size_t n = 1; n * block_size <= max_tokens; ++n) {
    if (ShouldLoad(tier, 0, n, block_size)) return n * block_size;
  }
  return 0;
}

DiskTierOptions DiskOptionsFor(const PrefixCache& layout, std::string dir, uint64_t budget_bytes) {
  const KvStore& kv = layout.store();
  DiskTierOptions d;
  d.dir = std::move(dir);
  d.budget_bytes = budget_bytes;
  d.fingerprint = layout.layout_fingerprint();
  d.n_layer = static_cast<uint32_t>(kv.num_layers());
  d.kv_dim = static_cast<uint32_t>(kv.kv_dim());
  d.block_size = static_cast<uint32_t>(kv.block_size());
  d.elem_bytes = kv.dtype() == KvDtype::kF16 ? 2 : kv.dtype() == KvDtype::kF32 ? 4 : 1;  // 1: Q8_0 blocks
  return d;
}

std::optional<TierCost> CalibrateTier(KvTier& tier, size_t payload_bytes) {
  std::mt19937_64 rng(std::random_device{}());
  std::vector<BlockPayload> blocks(8);
  std::vector<Hash128> keys;
  for (BlockPayload& b : blocks) {
    b.key = Hash128{rng(), rng()};
    b.bytes.assign(payload_bytes, static_cast<uint8_t>(rng()));
    keys.push_back(b.key);
  }
  tier.Insert(blocks);
  auto time_load = [&](size_t n) {
    double best = 1e300;
    for (int rep = 0; rep < 3; ++rep) {
      const int64_t t0 = NowNs();
      const size_t have = tier.CountLeading(std::span<const Hash128>(keys).first(n));
      if (have < n) return -1.0;
      if (tier.Load(std::span<const Hash128>(keys).first(n)).size() < n) return -1.0;
      best = std::min(best, NsToMs(NowNs() - t0));
    }
    return best;
  };
  const double t1 = time_load(1), t8 = time_load(8);
  tier.Erase(keys);
  TierCost c;
  if (t1 < 0 || t8 < 0) return std::nullopt;  // the tier dropped them: full or down
  c.ms_per_block = std::max(0.0, (t8 - t1) / 7);
  c.latency_ms = std::max(0.0, t1 - c.ms_per_block);
  return c;
}

TierStack::TierStack(std::vector<std::unique_ptr<KvTier>> tiers, size_t max_queue_bytes)
    : tiers_(std::move(tiers)), max_queue_bytes_(max_queue_bytes) {
  writer_ = std::thread([this] { WriterLoop(); });
  loader_ = std::thread([this] { LoaderLoop(); });
}

TierStack::~TierStack() {
  Flush();
  {
    MutexLock lock(mu_);
    stop_ = true;
  }
  write_cv_.notify_all();
  load_cv_.notify_all();
  writer_.join();
  loader_.join();
}

CostModel TierStack::costs() const {
  MutexLock lock(costs_mu_);
  return costs_;
}

void TierStack::set_costs(CostModel c) {
  MutexLock lock(costs_mu_);
  costs_ = std::move(c);
}

void TierStack::Calibrate(CostModel prefill, size_t payload_bytes, double refresh_s) {
  {
    MutexLock lock(costs_mu_);  // the loader thread reads these when idle
    costs_ = std::move(prefill);
    payload_bytes_ = payload_bytes;
    refresh_s_ = refresh_s;
  }
  RefreshTierCosts();
}

bool TierStack::RefreshDue() const {
  MutexLock lock(costs_mu_);
  return refresh_s_ > 0 && payload_bytes_ > 0 && NowNs() - last_refresh_ns_ > static_cast<int64_t>(refresh_s_ * 1e9);
}

// Tier costs drift (a Redis moved, a disk filled); prefill costs do not.
void TierStack::RefreshTierCosts() {
  size_t payload_bytes = 0;
  {
    MutexLock lock(costs_mu_);
    payload_bytes = payload_bytes_;
  }
  std::vector<std::pair<std::string, TierCost>> measured;
  for (const auto& t : tiers_) {
    // A tier that cannot store test blocks now (disk full, Redis down) is
    // never worth a load until the next measurement says otherwise.
    const std::optional<TierCost> c = CalibrateTier(*t, payload_bytes);
    measured.emplace_back(t->name(), c ? *c : TierCost{std::numeric_limits<double>::infinity(), 0});
  }
  MutexLock lock(costs_mu_);
  for (const auto& [name, c] : measured) costs_.SetTierCost(name, c);
  last_refresh_ns_ = NowNs();
}

void TierStack::Enqueue(Write w) {
  {
    MutexLock lock(mu_);
    if (queued_bytes_ + w.block.bytes.size() > max_queue_bytes_) {
      ++dropped_writes_;
      return;
    }
    queued_bytes_ += w.block.bytes.size();
    writes_.push_back(std::move(w));
  }
  write_cv_.notify_one();
}

void TierStack::OnRegistered(const Hash128& key, std::vector<uint8_t> bytes) {
  Enqueue(Write{BlockPayload{key, std::move(bytes)}, false});
}

void TierStack::OnEvicted(const Hash128& key, std::vector<uint8_t> bytes) {
  Enqueue(Write{BlockPayload{key, std::move(bytes)}, true});
}

void TierStack::KeepSpareLocked(std::vector<uint8_t> buffer) {
  if (buffer.capacity() == 0 || spare_bytes_ + buffer.capacity() > kSpareBytes) return;  // freed
  spare_bytes_ += buffer.capacity();
  spare_.push_back(std::move(buffer));
}

std::vector<uint8_t> TierStack::SpareBuffer() {
  MutexLock lock(mu_);
  if (spare_.empty()) return {};
  std::vector<uint8_t> b = std::move(spare_.back());
  spare_.pop_back();
  spare_bytes_ -= b.capacity();
  return b;
}

void TierStack::Recycle(std::vector<std::vector<uint8_t>> buffers) {
  MutexLock lock(mu_);
  for (std::vector<uint8_t>& b : buffers) KeepSpareLocked(std::move(b));
}

void TierStack::WriterLoop() {
  for (;;) {
    std::vector<Write> batch;
    {
      MutexLock lock(mu_);
      while (!stop_ && writes_.empty()) lock.Wait(write_cv_);
      if (writes_.empty()) return;  // stop_ and nothing left
      while (!writes_.empty() && batch.size() < 64) {
        queued_bytes_ -= writes_.front().block.bytes.size();
        batch.push_back(std::move(writes_.front()));
        writes_.pop_front();
      }
      writing_ = true;
    }
    std::vector<BlockPayload> host, persistent;
    for (Write& w : batch) (w.to_host ? host : persistent).push_back(std::move(w.block));
    for (const auto& t : tiers_) {
      const bool is_host = t->name() == "host";
      const std::vector<BlockPayload>& blocks = is_host ? host : persistent;
      if (!blocks.empty()) t->Insert(blocks);
    }
    {
      MutexLock lock(mu_);
      for (std::vector<BlockPayload>* v : {&host, &persistent}) {
        for (BlockPayload& b : *v) KeepSpareLocked(std::move(b.bytes));  // the tiers kept copies
      }
      writing_ = false;
    }
    flushed_cv_.notify_all();
  }
}

void TierStack::Flush() {
  MutexLock lock(mu_);
  while (!writes_.empty() || writing_) lock.Wait(flushed_cv_);
}

void TierStack::SubmitLoad(uint64_t request_id, std::vector<Hash128> keys, size_t first_token, size_t block_size) {
  {
    MutexLock lock(mu_);
    jobs_.push_back(Job{request_id, std::move(keys), first_token, block_size});
  }
  load_cv_.notify_one();
}

std::vector<LoadResult> TierStack::TakeFinishedLoads() {
  MutexLock lock(mu_);
  std::vector<LoadResult> out;
  out.swap(done_);
  return out;
}

LoadResult TierStack::RunJob(const Job& job) {
  const CostModel costs_now = costs();
  LoadResult r;
  r.request_id = job.request_id;
  r.first_token = job.first_token;
  size_t pos = 0;
  for (const auto& t : tiers_) {
    if (pos >= job.keys.size()) break;
    const int64_t t0 = NowNs();
    const std::span<const Hash128> rest = std::span<const Hash128>(job.keys).subspan(pos);
    const size_t n = t->CountLeading(rest);
    if (n == 0 || !costs_now.ShouldLoad(t->name(), job.first_token + pos * job.block_size, n, job.block_size)) continue;
    std::vector<std::vector<uint8_t>> got;
    while (got.size() < n) {
      std::vector<uint8_t> b = SpareBuffer();
      if (b.capacity() == 0) break;  // none left
      got.push_back(std::move(b));
    }
    const size_t loaded = t->LoadInto(rest.first(n), &got);
    r.load_ms_by_tier[t->name()] += NsToMs(NowNs() - t0);
    for (size_t i = 0; i < loaded; ++i) {
      r.keys.push_back(job.keys[pos]);
      r.payloads.push_back(std::move(got[i]));
      r.tier_of.push_back(t->name());
      ++pos;
    }
    got.erase(got.begin(), got.begin() + static_cast<std::ptrdiff_t>(loaded));
    Recycle(std::move(got));  // the buffers this load did not need
  }
  return r;
}

void TierStack::LoaderLoop() {
  for (;;) {
    Job job;
    {
      MutexLock lock(mu_);
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
      while (!stop_ && jobs_.empty()) {
        if (!lock.WaitUntil(load_cv_, deadline)) break;
      }
      if (stop_) return;
      if (jobs_.empty()) {
        lock.Unlock();
        // Idle: keep each tier's health current (a Redis that went away or
        // came back shows in /metrics without waiting for a request).
        for (const auto& t : tiers_) t->Probe();
        if (RefreshDue()) RefreshTierCosts();
        continue;
      }
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    LoadResult r = RunJob(job);
    MutexLock lock(mu_);
    done_.push_back(std::move(r));
  }
}

}  // namespace pc
