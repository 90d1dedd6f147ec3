// The forward recipe, llama2.c style: embed, then per layer
// x += Attention(RmsNorm(x)); x += FFN(RmsNorm(x)); then logits.
#include "model/forward.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>

#include "base/check.h"
#include "kernels/attention.h"
#include "kernels/ggml_compat.h"
#include "kernels/ops.h"
#include "kernels/quant.h"
#include "model/attn_plan.h"
#include "model/fingerprint.h"
#include "model/forward_scratch.h"

namespace pc {

Result<std::unique_ptr<Model>> Model::Load(const std::string& path, int num_threads, Numerics numerics) {
  PC_ASSIGN_OR_RETURN(GgufFile gguf, GgufFile::OpenModel(path));
  Result<std::unique_ptr<Model>> m = FromGguf(std::move(gguf), num_threads, numerics);
  if (!m.ok()) return Errorf("{}: {}", path, m.status().message());
  return m;
}

Result<std::unique_ptr<Model>> Model::FromGguf(GgufFile gguf, int num_threads, Numerics numerics) {
  std::unique_ptr<Model> m(new Model());
  m->gguf_ = std::move(gguf);
  PC_ASSIGN_OR_RETURN(m->config_, ReadModelConfig(m->gguf_));
  PC_ASSIGN_OR_RETURN(m->weights_, BindWeights(m->gguf_, m->config_));
  PC_ASSIGN_OR_RETURN(Isa isa, ActiveIsa());
  (void)isa;
  m->pool_ = std::make_unique<ThreadPool>(num_threads);
  // Fingerprint first: it reads every byte of the file, and repacking then
  // drops the originals' pages as it copies them.
  const auto t0 = std::chrono::steady_clock::now();
  m->fingerprint_ = ModelFingerprint(m->gguf_, *m->pool_);
  m->fingerprint_ms_ = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  m->set_numerics(numerics);  // repacks what the numerics' kernels read
  return m;
}

namespace {

// The weight types whose order the ggml numerics reproduce (it reads them
// in the file's layout); every other quantized type runs our kernels there too.
bool HasGgmlOrder(TensorType t) {
  return t == TensorType::kF32 || t == TensorType::kF16 || t == TensorType::kQ8_0 || t == TensorType::kQ4_0 ||
         t == TensorType::kQ6_K || t == TensorType::kMXFP4;
}
bool AnyType(TensorType) { return true; }
bool NoGgmlOrder(TensorType t) { return !HasGgmlOrder(t); }

}  // namespace

void Model::set_numerics(Numerics n) {
  numerics_ = n;
  if (n == Numerics::kGgmlCompat) UnpackWeights(weights_, HasGgmlOrder, &packed_);
  // PROMPTCACHE_REPACK=0 keeps quantized weights in the file's layout (for
  // comparisons: they then run the scalar reference dot). The scalar level
  // has no x16 kernels and reads the file's layout too.
  const char* repack = std::getenv("PROMPTCACHE_REPACK");
  Result<Isa> isa = ActiveIsa();
  const bool simd = isa.ok() && *isa >= Isa::kAvx2;
  if (simd && (repack == nullptr || std::string(repack) != "0")) {
    PackWeights(weights_, gguf_, *pool_, n == Numerics::kGgmlCompat ? NoGgmlOrder : AnyType, &packed_);
  }
}

void Model::Linear(const WeightMatrix& w, const float* x, size_t n, float* y, Scratch& s) {
  const Projection p{&w, y};
  LinearMany({&p, 1}, x, n, s);
}

void Model::LinearMany(std::span<const Projection> ps, const float* x, size_t n, Scratch& s, bool rows_alone) {
  const size_t cols = ps[0].w->cols;
  for (const Projection& p : ps) PC_CHECK(p.w->cols == cols);
  if (numerics_ == Numerics::kGgmlCompat) {
    // The reference's order for the types it has one; ours for the rest.
    std::vector<Projection> ours;
    for (const Projection& p : ps) {
      if (HasGgmlOrder(p.w->type)) LinearGgmlCompat({&p, 1}, x, n, s, rows_alone);
      else ours.push_back(p);
    }
    if (!ours.empty()) LinearPrecise(ours, x, n, s);
    return;
  }
  LinearPrecise(ps, x, n, s);
}

std::pair<const uint8_t*, size_t> Model::ConvertActivations(TensorType at, const float* x, size_t n, size_t cols,
                                                            Scratch& s) {
  if (at == TensorType::kF32) return {reinterpret_cast<const uint8_t*>(x), cols * sizeof(float)};
  for (const Scratch::Converted& c : s.acts) {
    if (c.live && c.type == at) return {c.data.data(), c.row_bytes};
  }
  auto spare = std::find_if(s.acts.begin(), s.acts.end(), [](const Scratch::Converted& c) { return !c.live; });
  if (spare == s.acts.end()) spare = s.acts.insert(s.acts.end(), Scratch::Converted{});
  Scratch::Converted& c = *spare;  // other entries' buffers do not move
  c.type = at;
  c.row_bytes = RowBytes(at, cols);
  c.live = true;
  Fit(c.data, n * c.row_bytes);
  // Rows split across the pool for prompts (a serial conversion took 6% of
  // a Q4_K_M prefill on 2 threads).
  auto convert = [&](size_t t0, size_t t1, int) {
    for (size_t t = t0; t < t1; ++t) {
      uint8_t* dst = c.data.data() + t * c.row_bytes;
      const float* xt = x + t * cols;
      switch (at) {
        case TensorType::kF16: s.kernels->to_f16(xt, reinterpret_cast<uint16_t*>(dst), cols); break;
        case TensorType::kQ8A:
          // Activations as the reference quantizes them (ties to even) in both
          // numerics: no reason to differ from it where precision is equal.
          s.ops->quantize_q8a(xt, reinterpret_cast<BlockQ8A*>(dst), cols);
          break;
        case TensorType::kQ8_K: s.kernels->quantize_q8_k(xt, reinterpret_cast<BlockQ8_K*>(dst), cols); break;
        default: QuantizeRow(at, xt, dst, cols); break;
      }
    }
  };
  if (n >= 8) {
    pool_->ParallelFor(n, 4, convert);
  } else {
    convert(0, n, 0);
  }
  return {c.data.data(), c.row_bytes};
}

void Model::LinearPrecise(std::span<const Projection> ps, const float* x, size_t n, Scratch& s) {
  const size_t cols = ps[0].w->cols;
  // Convert the input once per activation type (F32 is used in place).
  s.ClearActs();
  std::vector<std::pair<const uint8_t*, size_t>> xs;  // per projection: rows, stride
  for (const Projection& p : ps) xs.push_back(ConvertActivations(ActivationTypeFor(p.w->type), x, n, cols, s));
  std::vector<MatJob> jobs;
  for (size_t i = 0; i < ps.size(); ++i) jobs.push_back({ps[i].w, xs[i].first, xs[i].second, n, ps[i].y});
  RunMatJobs(jobs, s);
}

void Model::RunMatJobs(std::span<const MatJob> jobs, Scratch& s) {
  // One row space over all matrices, split across the pool.
  size_t total = 0;
  for (const MatJob& j : jobs) total += j.w->rows;
  const DotKernels& k = *s.kernels;
  pool_->ParallelFor(total, 16, [&](size_t r0, size_t r1, int) {
    size_t base = 0;
    for (const MatJob& j : jobs) {
      const size_t lo = std::max(r0, base), hi = std::min(r1, base + j.w->rows);
      if (lo < hi) MatMulRows(k, s.x16, *j.w, j.x, j.x_stride, j.n, j.y, j.w->rows, lo - base, hi - base);
      base += j.w->rows;
    }
  });
}

// The reference engine's matmul orders (kernels/ggml_compat.h): F32/F16 in
// the blocked-GEMM order for several rows when cols % 16 == 0, in the
// vector-dot order otherwise; Q8_0/Q4_0/MXFP4 over Q8_0 activations (Q4_0 and
// MXFP4 in the order of the reference's repacked rows where it repacks them). F16 weights
// take F16-rounded activations, as there.
float Model::DotGgmlCompat(const GgmlCompatKernels& k, const WeightMatrix& w, size_t row, const float* x,
                           const void* xq, bool gemm) {
  const uint8_t* wr = w.data + row * w.row_bytes();
  const size_t cols = w.cols;
  switch (w.type) {
    case TensorType::kF32: {
      const auto* w32 = reinterpret_cast<const float*>(wr);
      return gemm ? k.f32_gemm(w32, x, cols) : k.f32_vec(w32, x, cols);
    }
    case TensorType::kF16: {
      const auto* w16 = reinterpret_cast<const uint16_t*>(wr);
      const auto* x16 = static_cast<const uint16_t*>(xq);
      return gemm ? k.f16_gemm(w16, x16, cols) : k.f16_vec(w16, x16, cols);
    }
    case TensorType::kQ8_0:
      return k.q8_0(reinterpret_cast<const BlockQ8_0*>(wr), static_cast<const BlockQ8_0*>(xq), cols / kQuantBlock);
    case TensorType::kQ4_0: {
      const auto* w4 = reinterpret_cast<const BlockQ4_0*>(wr);
      const auto* x8 = static_cast<const BlockQ8_0*>(xq);
      return GgmlRepacksRows(w.type, w.rows) ? k.q4_0_repacked(w4, x8, cols / kQuantBlock) : k.q4_0(w4, x8, cols / kQuantBlock);
    }
    case TensorType::kMXFP4: {
      const auto* wm = reinterpret_cast<const BlockMXFP4*>(wr);
      const auto* x8 = static_cast<const BlockQ8_0*>(xq);
      return GgmlRepacksRows(w.type, w.rows) ? k.mxfp4_repacked(wm, x8, cols / kQuantBlock)
                                             : k.mxfp4(wm, x8, cols / kQuantBlock);
    }
    case TensorType::kQ6_K:
      return k.q6_k(reinterpret_cast<const BlockQ6_K*>(wr), static_cast<const BlockQ8_K*>(xq), cols / kSuperBlock);
    default: PC_CHECK(false && "no reference order for this weight type");
  }
  return 0;
}

void Model::LinearGgmlCompat(std::span<const Projection> ps, const float* x, size_t n, Scratch& s, bool rows_alone) {
  const size_t cols = ps[0].w->cols;
  const GgmlCompatKernels& k = ActiveGgmlCompatKernels();
  const bool gemm = !rows_alone && n >= 2 && cols % k.gemm_multiple == 0;
  // Activations converted as the reference converts them for this weight type.
  const TensorType wt = ps[0].w->type;
  size_t row_bytes = 0;
  switch (wt) {
    case TensorType::kF16: row_bytes = cols * sizeof(uint16_t); break;
    case TensorType::kQ8_0:
    case TensorType::kQ4_0:
    case TensorType::kMXFP4: row_bytes = cols / kQuantBlock * sizeof(BlockQ8_0); break;
    case TensorType::kQ6_K: row_bytes = cols / kSuperBlock * sizeof(BlockQ8_K); break;
    default: break;
  }
  Fit(s.xq, n * row_bytes);
  for (size_t t = 0; t < n && row_bytes > 0; ++t) {
    uint8_t* dst = s.xq.data() + t * row_bytes;
    if (wt == TensorType::kF16) {
      s.kernels->to_f16(x + t * cols, reinterpret_cast<uint16_t*>(dst), cols);
    } else if (wt == TensorType::kQ6_K) {
      GgmlQuantizeRowQ8_K(x + t * cols, reinterpret_cast<BlockQ8_K*>(dst), cols);
    } else {
      GgmlQuantizeRowQ8_0(x + t * cols, reinterpret_cast<BlockQ8_0*>(dst), cols);
    }
  }
  for (const Projection& p : ps) {
    pool_->ParallelFor(p.w->rows, 16, [&](size_t r0, size_t r1, int) {
      for (size_t r = r0; r < r1; ++r) {
        for (size_t t = 0; t < n; ++t) {
          p.y[t * p.w->rows + r] = DotGgmlCompat(k, *p.w, r, x + t * cols, s.xq.data() + t * row_bytes, gemm);
        }
      }
    });
  }
}

void Model::Embed(std::span<const BatchToken> batch, float* x) {
  const WeightMatrix& e = weights_.token_embd;
  const size_t dim = static_cast<size_t>(config_.n_embd);
  const float scale = std::sqrt(static_cast<float>(dim));  // gemma
  for (size_t t = 0; t < batch.size(); ++t) {
    PC_CHECK(batch[t].token >= 0 && batch[t].token < config_.n_vocab);
    DequantizeMatrixRow(e, static_cast<size_t>(batch[t].token), x + t * dim);
    if (config_.embed_scale) {
      for (size_t i = 0; i < dim; ++i) x[t * dim + i] *= scale;
    }
  }
}

void Model::ForTokens(size_t n, const std::function<void(size_t, size_t)>& fn) {
  if (n < 8) return fn(0, n);  // decode: not worth a handoff
  pool_->ParallelFor(n, 4, [&](size_t t0, size_t t1, int) { fn(t0, t1); });
}

// x += out over n tokens, split across the pool (a serial pass over a
// 512-token chunk's rows left the other threads waiting).
void Model::Residual(size_t n, Scratch& s) {
  const size_t dim = static_cast<size_t>(config_.n_embd);
  ForTokens(n, [&](size_t t0, size_t t1) { s.ops->add(&s.x[t0 * dim], &s.out[t0 * dim], (t1 - t0) * dim); });
}

RopeParams Model::RopeParamsOf(bool swa) const {
  const ModelConfig& c = config_;
  RopeParams rope;
  rope.head_dim = static_cast<size_t>(c.head_dim);
  rope.rope_dim = static_cast<size_t>(c.rope_dim);
  rope.freq_base = swa ? c.swa_rope_base : c.rope_base;
  rope.neox = c.rope_neox;
  rope.freq_scale = swa ? c.swa_rope_freq_scale : c.rope_freq_scale;
  rope.freq_factors = weights_.rope_freqs.empty() ? nullptr : weights_.rope_freqs.data();
  if (c.rope_yarn) {
    rope.ext_factor = c.yarn_ext_factor;
    rope.attn_factor = c.yarn_attn_factor;
    YarnCorrDims(rope.rope_dim, c.rope_orig_ctx, rope.freq_base, c.yarn_beta_fast, c.yarn_beta_slow, &rope.corr_low,
                 &rope.corr_high);
  }
  return rope;
}

void Model::AttentionBlock(int layer, std::span<const BatchToken> batch, KvStore& kv, Scratch& s,
                           size_t* logit_rows) {
  const ModelConfig& c = config_;
  const LayerWeights& w = weights_.layers[layer];
  size_t n = batch.size();
  ForTokens(n, [&](size_t t0, size_t t1) {
    s.ops->rms_norm_rows(&s.x[t0 * c.n_embd], w.attn_norm.data(), &s.xb[t0 * c.n_embd], t1 - t0, c.n_embd, c.rms_eps);
  });
  const Projection qkv[] = {{&w.wq, s.q.data()}, {&w.wk, s.k.data()}, {&w.wv, s.v.data()}};
  LinearMany(qkv, s.xb.data(), n, s);
  const bool swa = c.is_swa(layer);
  const RopeParams rope = RopeParamsOf(swa);
  const std::vector<float>& angle_table = swa && !s.rope_cs_swa.empty() ? s.rope_cs_swa : s.rope_cs;
  // Per token, each writing only its own K/V row: split across the pool.
  ForTokens(n, [&](size_t t0, size_t t1) {
    for (size_t t = t0; t < t1; ++t) {
      float* q = &s.q[t * c.q_dim()];
      float* k = &s.k[t * c.kv_dim()];
      float* v = &s.v[t * c.kv_dim()];
      // Optional steps of the recipe: biases (qwen2), per-head norms (qwen3).
      if (!w.bq.empty()) s.ops->add(q, w.bq.data(), w.bq.size());
      if (!w.bk.empty()) s.ops->add(k, w.bk.data(), w.bk.size());
      if (!w.bv.empty()) s.ops->add(v, w.bv.data(), w.bv.size());
      if (!w.q_norm.empty()) {
        s.ops->rms_norm_rows(q, w.q_norm.data(), q, static_cast<size_t>(c.n_head), c.head_dim, c.rms_eps);
        s.ops->rms_norm_rows(k, w.k_norm.data(), k, static_cast<size_t>(c.n_kv_head), c.head_dim, c.rms_eps);
      }
      const float* angles = &angle_table[t * rope.rope_dim];  // computed once per forward
      s.ops->rope(q, static_cast<size_t>(c.n_head), angles, rope);
      s.ops->rope(k, static_cast<size_t>(c.n_kv_head), angles, rope);
      kv.Write(layer, batch[t].tables(), batch[t].pos, k, v);
    }
  });
  if (!KeepGoing(s)) return;
  // Soft-caps take the per-head path (the tiled kernels have none); so do
  // windows and sinks in the ggml numerics, whose orders it reproduces.
  const bool default_scale = c.attn_scale == 0 || c.attn_scale == 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  const bool ggml = numerics_ == Numerics::kGgmlCompat && kv.dtype() == KvDtype::kF16;
  if (c.attn_softcap != 0 || (ggml && (swa || !w.sinks.empty()))) {
    AttendExtras(layer, batch, kv, s);
  } else if (ggml && default_scale) {
    AttendGgmlCompat(layer, batch, kv, s);
  } else {
    if (logit_rows != nullptr) {
      n = KeepLogitRows(batch, s);  // x's rows; q's and the batch's below
      s.logit_batch.clear();
      for (size_t t = 0, m = 0; t < batch.size(); ++t) {
        if (!batch[t].want_logits) continue;
        if (m != t) std::memcpy(&s.q[m * c.q_dim()], &s.q[t * c.q_dim()], c.q_dim() * sizeof(float));
        s.logit_batch.push_back(batch[t]);
        ++m;
      }
      batch = s.logit_batch;
      *logit_rows = n;
      if (n == 0) return;
    }
    AttendTiled(layer, batch, kv, s);
  }
  if (!KeepGoing(s)) return;
  Linear(w.wo, s.att.data(), n, s.out.data(), s);
  if (!w.bo.empty()) {
    ForTokens(n, [&](size_t t0, size_t t1) {
      for (size_t t = t0; t < t1; ++t) s.ops->add(&s.out[t * c.n_embd], w.bo.data(), w.bo.size());
    });
  }
  PostNorm(w.post_attn_norm, n, s);
  Residual(n, s);
}

void Model::AttendTiled(int layer, std::span<const BatchToken> batch, KvStore& kv, Scratch& s) {
  const ModelConfig& c = config_;
  const AttnHeads h{static_cast<size_t>(c.n_head), static_cast<size_t>(c.n_kv_head), static_cast<size_t>(c.head_dim),
                    c.attn_scale};
  // Work items: chunks of up to kRows consecutive rows of one sequence, every
  // head (or some K/V heads, below); each streams its sequence's K/V once per
  // span for all of them.
  constexpr size_t kRows = 32;
  using Item = AttnItem;
  std::vector<Item> items;
  std::vector<int32_t> pos(batch.size());
  for (size_t t = 0; t < batch.size(); ++t) pos[t] = batch[t].pos;
  const std::vector<float>& sinks = weights_.layers[layer].sinks;
  const AttnRows rows{s.q.data(), static_cast<size_t>(c.q_dim()), pos.data(), s.att.data(), static_cast<size_t>(c.q_dim()),
                      c.is_swa(layer) ? static_cast<size_t>(c.sliding_window) : 0, sinks.empty() ? nullptr : sinks.data()};
  size_t num_parts = 0;
  for (size_t run = 0; run < batch.size();) {
    size_t end = run + 1;
    while (end < batch.size() && batch[end].block_table.data() == batch[run].block_table.data()) ++end;
    for (size_t r = run; r < end; r += kRows) {
      const size_t r1 = std::min(end, r + kRows);
      const int32_t last = *std::max_element(pos.begin() + static_cast<std::ptrdiff_t>(r), pos.begin() + static_cast<std::ptrdiff_t>(r1));
      items.push_back({r, r1, AttnSpanCount(rows, r, r1), num_parts, {}, static_cast<size_t>(last) + 1});
      num_parts += items.back().num_spans;
    }
    run = end;
  }
  const size_t threads = static_cast<size_t>(pool_->num_threads());
  const bool one_span_each = num_parts == items.size();
  // Several spans are already spread across threads (split-KV below; cutting
  // those by head too measured 7% slower for 30 rows at depth 864).
  if (one_span_each && items.size() < 4 * threads) {
    if (items != s.plan_in) {
      s.plan_in = items;
      s.plan_out = BalanceAttnItems(items, h, threads);
    }
    items = s.plan_out;
  }
  const size_t scratch_floats = AttendScratchFloats(kRows, h);
  Fit(s.attn_scratch, threads * scratch_floats);
  const DotKernels& k = *s.kernels;
  auto view = [&](const Item& it) { return kv.View(layer, batch[it.r0].tables()); };
  // Enough items to keep every thread busy: each runs its spans in order.
  // A chunk's items may ask keep_going between them (Forward's news).
  if (items.size() >= 4 * threads || one_span_each) {
    ForEachAskingOnNews(items.size(), s, [&](size_t i, int thread) {
      const Item& it = items[i];
      AttendRows(k, view(it), rows, it.r0, it.r1, h, s.attn_scratch.data() + static_cast<size_t>(thread) * scratch_floats,
                 it.heads);
    });
    return;
  }
  // Few items over long contexts (decode): split-KV. Every span is its own
  // work item; each item's spans are then merged in order, which is exactly
  // what AttendRows does on one thread, so the bits do not change.
  const size_t part_floats = AttnStateFloats(kRows * h.n_head, h.head_dim);
  Fit(s.attn_parts, num_parts * part_floats);
  // Units: one per (item, span), priced by the positions each reads; the
  // costliest cut in rows where that evens out the threads (a short chunk
  // just past a span boundary: one full span and a short one).
  std::vector<Item> units;
  std::vector<size_t> part_item(num_parts);
  for (size_t i = 0; i < items.size(); ++i) {
    for (size_t sp = 0; sp < items[i].num_spans; ++sp) {
      part_item[items[i].first_part + sp] = i;
      units.push_back({items[i].r0, items[i].r1, 1, items[i].first_part + sp, items[i].heads,
                       AttnSpanPositions(rows, items[i].r0, items[i].r1, sp)});
    }
  }
  if (units != s.split_in) {
    s.split_in = units;
    s.split_out = BalanceSpanUnits(units, h, threads);
  }
  const std::vector<Item>& work = s.split_out;
  auto state = [&](const Item& it, size_t span) {
    return AttnStateAt(s.attn_parts.data() + (it.first_part + span) * part_floats, (it.r1 - it.r0) * h.n_head, h.head_dim);
  };
  pool_->ParallelForEach(work.size(), [&](size_t w, int thread) {
    const Item& piece = work[w];
    const Item& it = items[part_item[piece.first_part]];
    const size_t span = piece.first_part - it.first_part;
    const AttnState out = AttnStateFrom(state(it, span), (piece.r0 - it.r0) * h.n_head, h.head_dim);
    AttendSpan(k, view(it), rows, piece.r0, piece.r1, h, span,
               s.attn_scratch.data() + static_cast<size_t>(thread) * scratch_floats, out, piece.heads);
  });
  // The merges, in row pieces across the threads (a hit's one item merged
  // on one thread while the others waited).
  const std::vector<AttnMergePiece> pieces = CutMergePieces(items, threads);
  pool_->ParallelForEach(pieces.size(), [&](size_t p, int) {
    const AttnMergePiece& pc = pieces[p];
    const Item& it = items[pc.item];
    const size_t first = (pc.r0 - it.r0) * h.n_head;
    const AttnState total = AttnStateFrom(state(it, 0), first, h.head_dim);
    for (size_t sp = 1; sp < it.num_spans; ++sp) {
      MergeAttnStateHeads(total, AttnStateFrom(state(it, sp), first, h.head_dim), pc.r1 - pc.r0, h, it.heads);
    }
    FinishAttnState(total, rows, pc.r0, pc.r1, h, it.heads);
  });
}

void Model::AttendGgmlCompat(int layer, std::span<const BatchToken> batch, KvStore& kv, Scratch& s) {
  const ModelConfig& c = config_;
  const size_t group = c.n_head / c.n_kv_head;
  // The reference picks its kernel by the batch's query rows and head size.
  const bool tiled = batch.size() >= 64 && c.head_dim % 16 == 0;
  pool_->ParallelFor(batch.size() * c.n_head, 1, [&](size_t i0, size_t i1, int) {
    for (size_t i = i0; i < i1; ++i) {
      const size_t t = i / c.n_head, h = i % c.n_head;
      const KvLayerView view = kv.View(layer, batch[t].tables());
      const size_t off = t * c.q_dim() + h * c.head_dim;
      if (tiled) {
        AttendHeadGgmlTiled(&s.q[off], view, batch[t].pos, h / group, c.head_dim, &s.att[off]);
      } else {
        AttendHeadF16Accum(&s.q[off], view, batch[t].pos, h / group, c.head_dim, &s.att[off]);
      }
    }
  });
}

void Model::AttendExtras(int layer, std::span<const BatchToken> batch, KvStore& kv, Scratch& s) {
  const ModelConfig& c = config_;
  const size_t group = c.n_head / c.n_kv_head, hd = static_cast<size_t>(c.head_dim);
  const AttnExtras layer_extras{c.is_swa(layer) ? static_cast<size_t>(c.sliding_window) : 0, c.attn_scale,
                                c.attn_softcap};
  const std::vector<float>& sinks = weights_.layers[layer].sinks;
  const DotKernels& k = *s.kernels;
  const bool ggml = numerics_ == Numerics::kGgmlCompat && kv.dtype() == KvDtype::kF16 && hd <= 512;
  // The reference picks its kernel by the batch's query rows and head size.
  const bool tiled = batch.size() >= 64 && hd % 16 == 0;
  pool_->ParallelFor(batch.size() * c.n_head, 1, [&](size_t i0, size_t i1, int) {
    for (size_t i = i0; i < i1; ++i) {
      const size_t t = i / c.n_head, h = i % c.n_head, off = t * c.q_dim() + h * hd;
      const KvLayerView view = kv.View(layer, batch[t].tables());
      const size_t pos = static_cast<size_t>(batch[t].pos);
      AttnExtras extras = layer_extras;
      if (!sinks.empty()) extras.has_sink = true, extras.sink = sinks[h];
      if (ggml && tiled) {
        AttendHeadGgmlTiledExtras(&s.q[off], view, pos, h / group, hd, extras, &s.att[off]);
      } else if (ggml) {
        AttendHeadExtrasF16Accum(&s.q[off], view, pos, h / group, hd, extras, &s.att[off]);
      } else {
        AttendHeadExtras(k, &s.q[off], view, pos, h / group, hd, extras, &s.att[off]);
      }
    }
  });
}

void Model::PostNorm(const std::vector<float>& w, size_t n, Scratch& s) {
  if (w.empty()) return;
  const ModelConfig& c = config_;
  ForTokens(n, [&](size_t t0, size_t t1) {
    s.ops->rms_norm_rows(&s.out[t0 * c.n_embd], w.data(), &s.out[t0 * c.n_embd], t1 - t0, c.n_embd, c.rms_eps);
  });
}

void Model::GatedActivation(float* gate, const float* up, size_t n, size_t ff) {
  const bool ggml = numerics_ == Numerics::kGgmlCompat;
  const DotKernels& k = ActiveDotKernels();
  ForTokens(n, [&](size_t t0, size_t t1) {
    float* g = gate + t0 * ff;
    const float* u = up + t0 * ff;
    if (config_.ffn_act == ModelConfig::Act::kSwigluOai) {
      SwigluOaiMul(g, u, g, (t1 - t0) * ff);
    } else if (config_.ffn_act == ModelConfig::Act::kGeluTanh) {
      if (ggml) GeluMulF16(g, u, g, (t1 - t0) * ff);
      else k.gelu_mul(g, u, g, (t1 - t0) * ff);
    } else if (ggml) {
      GgmlSiluMul(g, u, g, t1 - t0, static_cast<int>(ff));
    } else {
      k.silu_mul(g, u, g, (t1 - t0) * ff);
    }
  });
}

void Model::FeedForwardBlock(int layer, size_t n, Scratch& s) {
  const ModelConfig& c = config_;
  const LayerWeights& w = weights_.layers[layer];
  ForTokens(n, [&](size_t t0, size_t t1) {
    s.ops->rms_norm_rows(&s.x[t0 * c.n_embd], w.ffn_norm.data(), &s.xb[t0 * c.n_embd], t1 - t0, c.n_embd, c.rms_eps);
  });
  if (c.n_expert > 0) {
    ExpertsBlock(layer, n, s);
    if (!KeepGoing(s)) return;
  } else {
    const Projection gate_up[] = {{&w.w_gate, s.hb.data()}, {&w.w_up, s.hb2.data()}};
    LinearMany(gate_up, s.xb.data(), n, s);
    if (!KeepGoing(s)) return;
    GatedActivation(s.hb.data(), s.hb2.data(), n, static_cast<size_t>(c.n_ff));
    Linear(w.w_down, s.hb.data(), n, s.out.data(), s);
  }
  PostNorm(w.post_ffn_norm, n, s);
  Residual(n, s);
}

bool Model::KeepGoing(Scratch& s) {
  // The counter read before the ask: news during the ask shows next time.
  if (s.news != nullptr) s.news_seen = s.news->load(std::memory_order_acquire);
  if (!s.dropped && s.keep_going != nullptr && *s.keep_going && !(*s.keep_going)()) s.dropped = true;
  return !s.dropped;
}

bool Model::NewsSinceAsk(const Scratch& s) {
  return s.news != nullptr && !s.dropped && s.keep_going != nullptr && *s.keep_going &&
         s.news->load(std::memory_order_relaxed) != s.news_seen;
}

void Model::ForEachAskingOnNews(size_t n, Scratch& s, const std::function<void(size_t, int)>& fn) {
  const size_t threads = static_cast<size_t>(pool_->num_threads());
  for (size_t first = 0; first < n;) {
    // Items are handed out in order, so those run are [first, next).
    std::atomic<size_t> next{first};
    pool_->ParallelFor(std::min(n - first, threads), 1, [&](size_t, size_t, int thread) {
      // Every thread runs one item a round before looking: a round makes
      // progress however often the counter moves.
      for (bool looked = false;; looked = true) {
        if (looked && NewsSinceAsk(s)) return;
        const size_t i = next.fetch_add(1, std::memory_order_relaxed);
        if (i >= n) return;
        fn(i, thread);
      }
    });
    first = std::min(next.load(), n);
    if (first < n && !KeepGoing(s)) return;
  }
}

size_t Model::KeepLogitRows(std::span<const BatchToken> batch, Scratch& s) {
  const size_t dim = static_cast<size_t>(config_.n_embd);
  size_t m = 0;
  for (size_t t = 0; t < batch.size(); ++t) {
    if (!batch[t].want_logits) continue;
    if (m != t) std::memcpy(&s.x[m * dim], &s.x[t * dim], dim * sizeof(float));
    ++m;
  }
  return m;
}

void Model::Output(size_t m, Scratch& s, std::vector<float>* logits) {
  const ModelConfig& c = config_;
  s.ops->rms_norm_rows(s.x.data(), weights_.output_norm.data(), s.xb.data(), m, c.n_embd, c.rms_eps);
  logits->resize(m * c.n_vocab);
  if (m > 0) Linear(weights_.output, s.xb.data(), m, logits->data(), s);
  if (c.final_softcap != 0) SoftCap(logits->data(), logits->size(), c.final_softcap);
}

Model::~Model() = default;

void Model::Forward(std::span<const BatchToken> batch, KvStore& kv, std::vector<float>* logits) {
  Forward(batch, kv, logits, {});
}

bool Model::Forward(std::span<const BatchToken> batch, KvStore& kv, std::vector<float>* logits,
                    const std::function<bool()>& keep_going, const std::atomic<uint64_t>* news) {
  const ModelConfig& c = config_;
  const size_t n = batch.size();
  PC_CHECK(forward_level_ < kForwardLevels);
  std::unique_ptr<Scratch>& mine = scratch_[forward_level_];
  if (!mine) mine = std::make_unique<Scratch>();
  Scratch& s = *mine;
  struct Level {  // left on every return, the pass's keep_going with it
    int& level;
    Scratch& s;
    Level(int& l, Scratch& scratch, const std::function<bool()>& keep) : level(l), s(scratch) {
      ++level;
      s.keep_going = &keep;
      s.dropped = false;
    }
    ~Level() {
      --level;
      s.keep_going = nullptr;
    }
  } level(forward_level_, s, keep_going);
  s.news = news;
  if (news != nullptr) s.news_seen = news->load(std::memory_order_acquire);
  s.kernels = &ActiveDotKernels();
  {
    Result<Isa> isa = ActiveIsa();
    s.x16 = X16KernelsFor(isa.ok() ? *isa : Isa::kScalar);
    s.ops = &RowOpsFor(isa.ok() ? *isa : Isa::kScalar);
  }
  Fit(s.x, n * c.n_embd);
  Fit(s.xb, n * c.n_embd);
  Fit(s.q, n * c.q_dim());
  Fit(s.att, n * c.q_dim());
  Fit(s.k, n * c.kv_dim());
  Fit(s.v, n * c.kv_dim());
  Fit(s.hb, n * c.n_ff);
  Fit(s.hb2, n * c.n_ff);
  Fit(s.out, n * c.n_embd);
  Embed(batch, s.x.data());
  const RopeParams rope = RopeParamsOf(false);
  Fit(s.rope_cs, n * rope.rope_dim);
  for (size_t t = 0; t < n; ++t) RopeAngles(batch[t].pos, rope, &s.rope_cs[t * rope.rope_dim]);
  if (c.sliding_window > 0 && (c.swa_rope_base != c.rope_base || c.swa_rope_freq_scale != c.rope_freq_scale)) {
    const RopeParams swa = RopeParamsOf(true);
    Fit(s.rope_cs_swa, n * swa.rope_dim);
    for (size_t t = 0; t < n; ++t) RopeAngles(batch[t].pos, swa, &s.rope_cs_swa[t * swa.rope_dim]);
  }
  size_t m = n;
  for (int l = 0; l < c.n_layer; ++l) {
    if (forward_level_ == 1) outer_half_layers_done_ = 2 * l;
    if (l > 0 && !KeepGoing(s)) return false;
    const bool last = l == c.n_layer - 1;
    size_t logit_rows = SIZE_MAX;
    AttentionBlock(l, batch, kv, s, last ? &logit_rows : nullptr);
    if (s.dropped) return false;
    if (forward_level_ == 1) outer_half_layers_done_ = 2 * l + 1;
    // Past the last attention only the rows that want logits matter: the
    // last FFN runs on those alone (a prefill chunk's other rows are done).
    if (last) m = logit_rows != SIZE_MAX ? logit_rows : KeepLogitRows(batch, s);
    if (!KeepGoing(s)) return false;
    FeedForwardBlock(l, m, s);
    if (s.dropped) return false;
  }
  Output(m, s, logits);
  return true;
}

}  // namespace pc
