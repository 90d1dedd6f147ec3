// The mixture-of-experts FFN of the forward recipe (forward.h: ExpertsBlock):
// routing, each expert once over its tokens of the batch, the weighted sum.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "base/check.h"
#include "kernels/ggml_compat.h"
#include "kernels/ops.h"
#include "model/forward.h"
#include "model/forward_scratch.h"

namespace pc {

namespace {

// The k highest scores (ties to the lower index): their experts and scores.
void TopExperts(const std::vector<float>& score, size_t k, int32_t* chosen, float* chosen_score) {
  std::vector<int32_t> order(score.size());
  for (size_t e = 0; e < score.size(); ++e) order[e] = static_cast<int32_t>(e);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return score[a] > score[b]; });
  for (size_t j = 0; j < k; ++j) {
    chosen[j] = order[j];
    chosen_score[j] = score[static_cast<size_t>(order[j])];
  }
}

// One token's routing: softmax over the router logits, the k most probable
// experts (ties to the lower index), their probabilities renormalised to sum
// to one (qwen3moe and Mixtral both normalise).
void RouteToken(const float* logits, size_t n_expert, size_t k, int32_t* chosen, float* weight) {
  float max = logits[0];
  for (size_t e = 1; e < n_expert; ++e) max = std::max(max, logits[e]);
  std::vector<float> prob(n_expert);
  double sum = 0;
  for (size_t e = 0; e < n_expert; ++e) sum += prob[e] = std::exp(logits[e] - max);
  for (size_t e = 0; e < n_expert; ++e) prob[e] = static_cast<float>(prob[e] / sum);
  TopExperts(prob, k, chosen, weight);
  float total = 0;
  for (size_t j = 0; j < k; ++j) total += weight[j];
  for (size_t j = 0; j < k; ++j) weight[j] /= total;
}

// The same in the reference's arithmetic (the ggml numerics): its soft_max,
// the k most probable (ties to the lower index), their probabilities over
// their sum (summed in double, as its row sums); softmax_chosen (gpt-oss):
// the k highest logits, and the soft_max of those k alone.
void RouteTokenGgml(const float* logits, size_t n_expert, size_t k, bool softmax_chosen, int32_t* chosen,
                    float* weight) {
  std::vector<float> prob(logits, logits + n_expert);
  if (!softmax_chosen) GgmlSoftMaxRow(prob.data(), prob.data(), n_expert);
  TopExperts(prob, k, chosen, weight);
  if (softmax_chosen) {
    GgmlSoftMaxRow(weight, weight, k);
    return;
  }
  double total = 0;
  for (size_t j = 0; j < k; ++j) total += weight[j];
  for (size_t j = 0; j < k; ++j) weight[j] /= static_cast<float>(total);
}

}  // namespace

void Model::LinearExperts(std::span<const ExpertJob> jobs, const float* x, size_t rows, Scratch& s) {
  if (jobs.empty()) return;
  const size_t cols = jobs[0].w->cols;
  s.ClearActs();  // every job's rows converted once per activation type
  std::vector<MatJob> mat;
  for (const ExpertJob& j : jobs) {
    PC_CHECK(j.w->cols == cols && j.first + j.n <= rows);
    const auto [base, stride] = ConvertActivations(ActivationTypeFor(j.w->type), x, rows, cols, s);
    mat.push_back({j.w, base + j.first * stride, stride, j.n, j.y});
  }
  RunMatJobs(mat, s);
}

void Model::ExpertsBlock(int layer, size_t n, Scratch& s) {
  const ModelConfig& c = config_;
  const LayerWeights& w = weights_.layers[layer];
  const size_t n_exp = static_cast<size_t>(c.n_expert), k = static_cast<size_t>(c.n_expert_used);
  const size_t ff = static_cast<size_t>(c.n_ff_expert), dim = static_cast<size_t>(c.n_embd);
  Fit(s.router, n * n_exp);
  Linear(w.w_router, s.xb.data(), n, s.router.data(), s);
  for (size_t t = 0; t < n && !w.b_router.empty(); ++t) AddInPlace(&s.router[t * n_exp], w.b_router.data(), n_exp);
  std::vector<int32_t> chosen(n * k);
  std::vector<float> weight(n * k);
  std::vector<std::vector<uint32_t>> slots(n_exp);  // per expert: its (token * k + choice) slots
  for (size_t t = 0; t < n; ++t) {
    if (numerics_ == Numerics::kGgmlCompat) {
      RouteTokenGgml(&s.router[t * n_exp], n_exp, k, c.ffn_act == ModelConfig::Act::kSwigluOai, &chosen[t * k],
                     &weight[t * k]);
    } else {
      RouteToken(&s.router[t * n_exp], n_exp, k, &chosen[t * k], &weight[t * k]);
    }
    for (size_t j = 0; j < k; ++j) slots[static_cast<size_t>(chosen[t * k + j])].push_back(static_cast<uint32_t>(t * k + j));
  }
  // Every (token, choice) row gathered in expert order: expert e's rows are
  // [first[e], first[e] + slots[e].size()). Decode reads only the chosen experts.
  const size_t m_all = n * k;
  std::vector<size_t> first(n_exp + 1, 0);
  for (size_t e = 0; e < n_exp; ++e) first[e + 1] = first[e] + slots[e].size();
  Fit(s.ex, m_all * dim);
  Fit(s.hb, m_all * ff);
  Fit(s.hb2, m_all * ff);
  Fit(s.ey, m_all * dim);
  for (size_t e = 0; e < n_exp; ++e) {
    for (size_t i = 0; i < slots[e].size(); ++i) {
      std::memcpy(&s.ex[(first[e] + i) * dim], &s.xb[slots[e][i] / k * dim], dim * sizeof(float));
    }
  }
  std::vector<ExpertJob> gate_up, down;
  for (size_t e = 0; e < n_exp; ++e) {
    const size_t m = slots[e].size();
    if (m == 0) continue;
    if (numerics_ == Numerics::kGgmlCompat) {
      // The reference's orders, a matrix at a time: its expert matmul dots
      // each row with each token alone, however many tokens an expert has.
      const Projection gu[] = {{&w.gate_exps[e], &s.hb[first[e] * ff]}, {&w.up_exps[e], &s.hb2[first[e] * ff]}};
      LinearMany(gu, &s.ex[first[e] * dim], m, s, /*rows_alone=*/true);
    } else {
      gate_up.push_back({&w.gate_exps[e], first[e], m, &s.hb[first[e] * ff]});
      gate_up.push_back({&w.up_exps[e], first[e], m, &s.hb2[first[e] * ff]});
    }
  }
  LinearExperts(gate_up, s.ex.data(), m_all, s);
  for (size_t e = 0; e < n_exp; ++e) {
    for (size_t r = first[e]; r < first[e + 1] && !w.b_gate_exps.empty(); ++r) AddInPlace(&s.hb[r * ff], &w.b_gate_exps[e * ff], ff);
    for (size_t r = first[e]; r < first[e + 1] && !w.b_up_exps.empty(); ++r) AddInPlace(&s.hb2[r * ff], &w.b_up_exps[e * ff], ff);
  }
  GatedActivation(s.hb.data(), s.hb2.data(), m_all, ff);  // row by row: the same bits as per expert
  for (size_t e = 0; e < n_exp; ++e) {
    const size_t m = slots[e].size();
    if (m == 0) continue;
    if (numerics_ == Numerics::kGgmlCompat) {
      const Projection d{&w.down_exps[e], &s.ey[first[e] * dim]};
      LinearMany({&d, 1}, &s.hb[first[e] * ff], m, s, /*rows_alone=*/true);
    } else {
      down.push_back({&w.down_exps[e], first[e], m, &s.ey[first[e] * dim]});
    }
  }
  LinearExperts(down, s.hb.data(), m_all, s);
  Fit(s.moe_out, n * k * dim);
  for (size_t e = 0; e < n_exp; ++e) {
    for (size_t i = 0; i < slots[e].size(); ++i) {
      float* ey = &s.ey[(first[e] + i) * dim];
      if (!w.b_down_exps.empty()) AddInPlace(ey, &w.b_down_exps[e * dim], dim);
      float* dst = &s.moe_out[slots[e][i] * dim];
      const float wt = weight[slots[e][i]];
      for (size_t d = 0; d < dim; ++d) dst[d] = ey[d] * wt;
    }
  }
  // Summed in choice order, as the reference adds its weighted experts.
  for (size_t t = 0; t < n; ++t) {
    float* out = &s.out[t * dim];
    std::memcpy(out, &s.moe_out[t * k * dim], dim * sizeof(float));
    for (size_t j = 1; j < k; ++j) AddInPlace(out, &s.moe_out[(t * k + j) * dim], dim);
  }
}

}  // namespace pc
