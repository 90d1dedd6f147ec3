// The tiers below the pool, their background threads, and the cost model
// that decides when a reload beats recomputing.
//
// Writes never block the step loop: the pool's listener hooks copy a block's
// bytes (on the loop thread; a memcpy) and queue them for the writer thread.
// A block registered in the pool (just computed) is written behind to the
// persistent tiers (disk, Redis), so other processes and restarts can use it
// at once; a block evicted from the pool goes to the host tier. The queue
// has a byte bound; past it, writes are dropped (counted), never waited for.
//
// Loads run on the loader thread: a job walks the tiers in order, each
// answering how many of the remaining keys it holds (one round trip), and
// loads them when the cost model predicts loading is faster than
// recomputing those tokens; the engine installs finished loads into the
// pool at its next step. Thread-safety: public methods may be called from
// any thread.
#pragma once
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <thread>

#include "base/mutex.h"
#include "kvcache/prefix_cache.h"
#include "kvcache/tier.h"

namespace pc {

struct TierCost {
  double latency_ms = 0;       // per call
  double ms_per_block = 0;     // transfer
};

class CostModel {
 public:
  // (position, prefill ms per token at that position), any order.
  void SetPrefillSamples(std::vector<std::pair<double, double>> samples);
  void SetTierCost(const std::string& tier, TierCost c) { tiers_[tier] = c; }
  std::optional<TierCost> tier_cost(const std::string& tier) const;
  // Predicted prefill time of tokens [first, first + n).
  double RecomputeMs(size_t first_token, size_t num_tokens) const;
  double LoadMs(const std::string& tier, size_t num_blocks) const;
  bool ShouldLoad(const std::string& tier, size_t first_token, size_t num_blocks, size_t block_size) const;
  // Shortest match from position 0 (a multiple of block_size) whose load
  // beats recomputing it; 0 when none up to max_tokens does.
  size_t MinUsefulMatchTokens(const std::string& tier, size_t block_size, size_t max_tokens) const;
  const std::vector<std::pair<double, double>>& prefill_samples() const { return samples_; }
  // What a chunk pays once per cached position before it (the K/V read and
  // widened once for all its rows), ms, from one-token steps at depth 0 and
  // deep; and the chunk length of the prefill samples.
  void SetKvPass(double ms_per_position, size_t sample_chunk) { kv_pass_ms_ = ms_per_position, sample_chunk_ = sample_chunk; }
  double kv_pass_ms_per_position() const { return kv_pass_ms_; }
  size_t sample_chunk_tokens() const { return sample_chunk_; }

 private:
  double MsPerTokenAt(double pos) const;
  std::vector<std::pair<double, double>> samples_;
  double kv_pass_ms_ = 0;
  size_t sample_chunk_ = 0;
  std::map<std::string, TierCost> tiers_;
};

// Times loads of 1 and of 8 blocks of payload_bytes (random keys, erased
// after); nullopt when the tier could not store or return them (full, down).
// The stack then treats the tier as unavailable (an infinite load latency)
// until its next measurement.
std::optional<TierCost> CalibrateTier(KvTier& tier, size_t payload_bytes);

// Disk tier options for a pool's KV layout (fingerprint, layer count, row
// size, block size, element size), so its segments are only read back by a
// pool of the same model and layout.
struct DiskTierOptions;
DiskTierOptions DiskOptionsFor(const PrefixCache& layout, std::string dir, uint64_t budget_bytes);

struct LoadResult {
  uint64_t request_id = 0;
  size_t first_token = 0;                        // position of keys[0]'s first token
  std::vector<Hash128> keys;                     // leading keys loaded, in order
  std::vector<std::vector<uint8_t>> payloads;    // one per key
  std::vector<std::string> tier_of;              // one per key
  std::map<std::string, double> load_ms_by_tier;
};

class TierStack : public PoolListener {
 public:
  TierStack(std::vector<std::unique_ptr<KvTier>> tiers, size_t max_queue_bytes = size_t{256} << 20);
  ~TierStack() override;  // finishes queued writes

  const std::vector<std::unique_ptr<KvTier>>& tiers() const { return tiers_; }
  // A copy of the current cost model (tier costs are re-measured in the
  // background every refresh_s seconds after Calibrate).
  CostModel costs() const PC_EXCLUDES(costs_mu_);
  void set_costs(CostModel c);
  // Takes the measured prefill costs (engine/calibrate.h: run the model
  // before the engine starts) and measures every tier's load cost.
  void Calibrate(CostModel prefill, size_t payload_bytes, double refresh_s = 600);

  // PoolListener (loop thread).
  void OnRegistered(const Hash128& key, std::vector<uint8_t> bytes) override;
  void OnEvicted(const Hash128& key, std::vector<uint8_t> bytes) override;
  std::vector<uint8_t> SpareBuffer() override PC_EXCLUDES(mu_);
  // Payload buffers done with (a LoadResult's, once installed), kept for the
  // next loads and payloads up to kSpareBytes (tier.h says why).
  void Recycle(std::vector<std::vector<uint8_t>> buffers) PC_EXCLUDES(mu_);
  static constexpr size_t kSpareBytes = size_t{64} << 20;

  // Queues a lookup-and-load for keys (the prompt's blocks not in the pool),
  // the first of which starts at first_token.
  void SubmitLoad(uint64_t request_id, std::vector<Hash128> keys, size_t first_token, size_t block_size);
  std::vector<LoadResult> TakeFinishedLoads();
  // Blocks until every queued write has reached its tier.
  void Flush();
  uint64_t num_dropped_writes() const { return dropped_writes_; }

 private:
  struct Write {
    BlockPayload block;
    bool to_host;  // evicted (host) or registered (persistent tiers)
  };
  struct Job {
    uint64_t request_id;
    std::vector<Hash128> keys;
    size_t first_token, block_size;
  };
  void WriterLoop();
  void LoaderLoop();
  LoadResult RunJob(const Job& job);
  void Enqueue(Write w);
  void KeepSpareLocked(std::vector<uint8_t> buffer) PC_REQUIRES(mu_);

  void RefreshTierCosts() PC_EXCLUDES(costs_mu_);
  bool RefreshDue() const PC_EXCLUDES(costs_mu_);

  std::vector<std::unique_ptr<KvTier>> tiers_;  // fixed at construction
  mutable Mutex costs_mu_;
  CostModel costs_ PC_GUARDED_BY(costs_mu_);
  size_t payload_bytes_ PC_GUARDED_BY(costs_mu_) = 0;
  double refresh_s_ PC_GUARDED_BY(costs_mu_) = 0;
  int64_t last_refresh_ns_ PC_GUARDED_BY(costs_mu_) = 0;
  size_t max_queue_bytes_;
  Mutex mu_;  // the write queue, the load jobs and their results
  std::condition_variable write_cv_, load_cv_, flushed_cv_;
  std::deque<Write> writes_ PC_GUARDED_BY(mu_);
  size_t queued_bytes_ PC_GUARDED_BY(mu_) = 0;
  bool writing_ PC_GUARDED_BY(mu_) = false;
  std::deque<Job> jobs_ PC_GUARDED_BY(mu_);
  std::vector<LoadResult> done_ PC_GUARDED_BY(mu_);
  std::vector<std::vector<uint8_t>> spare_ PC_GUARDED_BY(mu_);  // buffers to reuse
  size_t spare_bytes_ PC_GUARDED_BY(mu_) = 0;                   // their capacity
  bool stop_ PC_GUARDED_BY(mu_) = false;
  std::atomic<uint64_t> dropped_writes_{0};
  std::thread writer_, loader_;
};

}  // namespace pc
