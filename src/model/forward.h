// The llama forward pass. Model owns the mapped file and weight views; one
// Forward call runs a batch of tokens, each belonging to some sequence whose
// K/V lives in a KvStore behind that sequence's block table. Prefill (many
// tokens of one sequence) and decode (one token per sequence) are the two
// shapes of the same batch.
// Thread-safety: Forward is not reentrant (it uses the model's pool and
// activation buffers).
#pragma once
#include <atomic>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/hash128.h"
#include "gguf/gguf.h"
#include "kernels/ggml_compat.h"
#include "kernels/ops.h"
#include "model/config.h"
#include "kvcache/kv_store.h"
#include "model/weights.h"
#include "runtime/thread_pool.h"

namespace pc {

// Precise: F32 accumulation everywhere. GgmlCompat: the float operations of
// llama.cpp's CPU backend in their order (kernels/ggml_compat.h): its F32/F16
// matmul summation orders, its SiLU exp approximation, and its attention
// (F16 accumulation for query batches under 64 rows or head sizes not a
// multiple of 16), for bit-for-bit comparison with it. Slow: scalar.
enum class Numerics { kPrecise, kGgmlCompat };

struct BatchToken {
  int32_t token = 0;
  int32_t pos = 0;                       // position in its sequence
  std::span<const int32_t> block_table;  // its sequence's blocks
  bool want_logits = false;
  std::span<const int32_t> local_table = {};  // its blocks of the local layers (split stores)
  KvTables tables() const { return {block_table, local_table}; }
};

class Model {
 public:
  // numerics as set_numerics below, chosen at load so that the ggml numerics
  // never pays for repacking it would not use.
  static Result<std::unique_ptr<Model>> Load(const std::string& path, int num_threads = 0,
                                             Numerics numerics = Numerics::kPrecise);
  static Result<std::unique_ptr<Model>> FromGguf(GgufFile gguf, int num_threads = 0,
                                                 Numerics numerics = Numerics::kPrecise);

  const ModelConfig& config() const { return config_; }
  const GgufFile& gguf() const { return gguf_; }
  // Identifies the model (every metadata value, every tensor byte:
  // model/fingerprint.h): cached K/V are only valid for the model that
  // computed them. fingerprint_ms: what computing it cost at load.
  const Hash128& fingerprint() const { return fingerprint_; }
  double fingerprint_ms() const { return fingerprint_ms_; }
  ThreadPool& pool() { return *pool_; }
  // Switching to kGgmlCompat frees the repacked copies of the types whose
  // reference order it reproduces (it reads the file's layout); switching
  // back repacks. Not during Forward.
  void set_numerics(Numerics n);
  // What repacking at load cost (PackWeights); zeros when nothing was
  // repacked (no quantized matrices, the scalar level, or PROMPTCACHE_REPACK=0).
  const PackedWeights& packed() const { return packed_; }
  Numerics numerics() const { return numerics_; }
  // Tokens at the end of a prompt that run as a batch of their own (0:
  // none). The reference engine's server prefills a sliding-window model's
  // prompt in two batches, the last four tokens apart (it checkpoints the
  // windowed cache before them), and a batch's shape picks its roundings (a
  // one-token batch takes the vector-dot order, 64 rows or more the tiled
  // attention), so the ggml numerics, which reproduce it, do the same.
  size_t prompt_tail_tokens() const {
    return numerics_ == Numerics::kGgmlCompat && config_.sliding_window > 0 ? 4 : 0;
  }

  // Runs the batch; K/V of every token is written to kv before attention.
  // logits receives n_vocab floats per token with want_logits, in order.
  // Activation buffers are kept between calls (grown, never shrunk).
  void Forward(std::span<const BatchToken> batch, KvStore& kv, std::vector<float>* logits);
  // The same, asking keep_going() (on the calling thread, with the pool
  // idle) between the stages of each layer: before its attention half (but
  // the first layer's), after its Q/K/V and K/V writes, after its attention,
  // before its feed-forward half and after that half's first matmuls (the
  // gate and up projections, or the experts), five times a layer, so an
  // arrival waits a fifth of a layer at most rather than half of one (a
  // hit that came during a 256-token chunk at depth 1,024 waited 2.8-3.4 ms
  // on a 2-core Zen 5). false drops the batch there and
  // returns false, logits untouched. The batch's K/V rows are then partly
  // written, so its positions must be computed again before anything reads
  // them (the engine drops a step this way for a cache hit that just came).
  // keep_going may itself run one Forward of other sequences (one level
  // only: that pass's own keep_going, if any, runs none), its own buffers
  // and logits apart; this batch then goes on where it stood (the engine
  // pauses a step so).
  // news (optional, with keep_going): a counter the caller bumps whenever
  // keep_going may answer otherwise (a request arrived). Where it moved
  // since the last ask, the longest stage, a prompt chunk's attention,
  // stops between its work items and asks then rather than at its end: a
  // 256-token chunk's attention at depth 1,024 runs 2.5 ms a layer on a
  // 2-core Zen 5, and the median hit of a Mooncake replay waited 2.6-2.9
  // ms for it (docs/BENCHMARKS.md). Unmoved, it costs a relaxed load per item.
  bool Forward(std::span<const BatchToken> batch, KvStore& kv, std::vector<float>* logits,
               const std::function<bool()>& keep_going, const std::atomic<uint64_t>* news = nullptr);
  // How many times a layer keep_going is asked (the first layer's attention
  // half excepted: once less there).
  static constexpr int kAsksPerLayer = 5;
  // For keep_going: the share of the outermost pass's layers done, a half
  // layer (its attention half) at a time (0 to 1; 0 when none runs). On the
  // thread that calls Forward.
  double PassProgress() const {
    return forward_level_ > 0 && config_.n_layer > 0 ? outer_half_layers_done_ / (2.0 * config_.n_layer) : 0.0;
  }
  ~Model();

 private:
  Model() = default;
  struct Scratch;
  // Layer steps of the recipe; x is [n][n_embd].
  void Embed(std::span<const BatchToken> batch, float* x);
  // Rotation of a windowed (swa) or global layer: gemma3's differ.
  RopeParams RopeParamsOf(bool swa) const;
  // fn(t0, t1) over token ranges covering [0, n): on the pool for prompts,
  // inline for a few tokens. For per-token steps (norms, RoPE, K/V writes).
  void ForTokens(size_t n, const std::function<void(size_t, size_t)>& fn);
  // The residual add after a block: s.x[n][n_embd] += s.out[n][n_embd].
  void Residual(size_t n, Scratch& s);
  // With logit_rows (the last layer), where the tiled kernels attend, the
  // rows past their K/V writes are cut to those with want_logits (moved to
  // the front of q and x, *logit_rows their count): nothing reads the
  // others' attention there (a prefill chunk's rows are done after it).
  // Left at SIZE_MAX on the other paths, which attend every row.
  void AttentionBlock(int layer, std::span<const BatchToken> batch, KvStore& kv, Scratch& s,
                      size_t* logit_rows = nullptr);
  void AttendTiled(int layer, std::span<const BatchToken> batch, KvStore& kv, Scratch& s);
  void AttendGgmlCompat(int layer, std::span<const BatchToken> batch, KvStore& kv, Scratch& s);
  // Sliding windows and soft-capped scores (AttendHeadExtras), per head.
  void AttendExtras(int layer, std::span<const BatchToken> batch, KvStore& kv, Scratch& s);
  void FeedForwardBlock(int layer, size_t n, Scratch& s);
  // Asks the batch's keep_going (Forward) unless it already said no; false
  // once it has: the block returns and Forward drops the batch.
  bool KeepGoing(Scratch& s);
  // Whether the pass's news counter moved since its last ask (Forward).
  // Any thread of the pool during a stage; false without keep_going.
  static bool NewsSinceAsk(const Scratch& s);
  // fn(i, thread) over items [0, n) as ParallelForEach does, in rounds that
  // end early when NewsSinceAsk, each followed by an ask; a drop there
  // (s.dropped) leaves the remaining items undone.
  void ForEachAskingOnNews(size_t n, Scratch& s, const std::function<void(size_t, int)>& fn);
  // s.out's n rows := RmsNorm(row, w) when w is not empty (gemma's post norms).
  void PostNorm(const std::vector<float>& w, size_t n, Scratch& s);
  // gate (in place) := act(gate) * up over n rows of n_ff, as the numerics do it.
  void GatedActivation(float* gate, const float* up, size_t n, size_t ff);
  // The mixture of experts FFN on s.xb's n rows into s.out: each token's
  // chosen experts, their outputs weighted and summed in choice order. Each
  // expert runs once over all its tokens of the batch.
  void ExpertsBlock(int layer, size_t n, Scratch& s);
  // Moves the residual rows of tokens with want_logits to the front of x, in
  // order; returns their count.
  size_t KeepLogitRows(std::span<const BatchToken> batch, Scratch& s);
  // logits[m][n_vocab] from the first m rows of x.
  void Output(size_t m, Scratch& s, std::vector<float>* logits);
  // y[n][w.rows] = x[n][w.cols] * w^T, split across the pool.
  void Linear(const WeightMatrix& w, const float* x, size_t n, float* y, Scratch& s);
  // Several matrices over the same input in one pool job (q/k/v, gate/up):
  // one thread handoff instead of one per matrix.
  struct Projection {
    const WeightMatrix* w;
    float* y;  // [n][w->rows]
  };
  // rows_alone: the ggml numerics take the vector-dot order for every row,
  // as the reference's expert matmul does (its dense one tiles prompts).
  void LinearMany(std::span<const Projection> ps, const float* x, size_t n, Scratch& s, bool rows_alone = false);
  // Our kernels (x16 for packed rows), inputs converted per weight type.
  void LinearPrecise(std::span<const Projection> ps, const float* x, size_t n, Scratch& s);
  // Matrices over converted activation rows (n rows x_stride bytes apart),
  // all their output rows split across the pool in one job.
  struct MatJob {
    const WeightMatrix* w;
    const uint8_t* x;
    size_t x_stride, n;
    float* y;  // [n][w->rows]
  };
  void RunMatJobs(std::span<const MatJob> jobs, Scratch& s);
  // The experts' matrices of one step in one pool job: job i multiplies
  // rows [first, first + n) of x (all jobs share x [rows][cols]) by its
  // matrix into y [n][w->rows]. Decode calls 8 experts x 2 matrices per layer:
  // one handoff instead of one per matrix. Precise numerics.
  struct ExpertJob {
    const WeightMatrix* w;
    size_t first, n;
    float* y;
  };
  void LinearExperts(std::span<const ExpertJob> jobs, const float* x, size_t rows, Scratch& s);
  // x [n][cols] converted to activation type at, once per matmul call
  // (kept in s.acts): the rows and their stride in bytes.
  std::pair<const uint8_t*, size_t> ConvertActivations(TensorType at, const float* x, size_t n, size_t cols,
                                                       Scratch& s);
  // The reference engine's matmul (kernels/ggml_compat.h), activations
  // converted as it converts them; all ps share one weight type.
  void LinearGgmlCompat(std::span<const Projection> ps, const float* x, size_t n, Scratch& s, bool rows_alone);
  // One output of w's row `row` over activation row x (as floats) / xq
  // (converted for the weight type); gemm selects the prompt-shaped order.
  static float DotGgmlCompat(const GgmlCompatKernels& k, const WeightMatrix& w, size_t row, const float* x,
                             const void* xq, bool gemm);

  GgufFile gguf_;
  ModelConfig config_;
  ModelWeights weights_;
  PackedWeights packed_;
  std::unique_ptr<ThreadPool> pool_;
  // Forward's buffers, made on first use, one set per nesting level: a
  // keep_going may run one more Forward between two layer stages (the engine
  // pauses a step for a cache hit's), which must not touch the paused
  // pass's residual rows and rotations.
  static constexpr int kForwardLevels = 2;
  std::unique_ptr<Scratch> scratch_[kForwardLevels];
  int forward_level_ = 0;  // Forwards running now, on the calling thread
  int outer_half_layers_done_ = 0;  // the outermost Forward's (PassProgress)
  Numerics numerics_ = Numerics::kPrecise;
  Hash128 fingerprint_;
  double fingerprint_ms_ = 0;
};

}  // namespace pc
