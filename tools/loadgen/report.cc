#include "report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

namespace pc::loadgen {

using nlohmann::json;

namespace {

std::vector<double> Field(const std::vector<const RequestRecord*>& rs, double (*f)(const RequestRecord&)) {
  std::vector<double> v;
  for (const RequestRecord* r : rs) {
    if (r->ok) v.push_back(f(*r));
  }
  return v;
}

double MeanItl(const RequestRecord& r) { return r.itl_ms.empty() ? NAN : Mean(r.itl_ms); }

Group MakeGroup(const std::string& name, const std::vector<const RequestRecord*>& rs, double wall_s, const Slo& slo) {
  Group g;
  g.name = name;
  g.num_requests = rs.size();
  std::vector<double> itl;
  size_t prompt = 0, cached = 0, out_tokens = 0, good = 0;
  for (const RequestRecord* r : rs) {
    if (!r->ok) {
      ++g.num_errors;
      continue;
    }
    itl.insert(itl.end(), r->itl_ms.begin(), r->itl_ms.end());
    out_tokens += r->output_tokens;
    if (r->cached_tokens) {
      prompt += r->prompt_tokens;
      cached += *r->cached_tokens;
    }
    if (r->ttft_ms <= slo.ttft_ms && r->tpot_ms() <= slo.tpot_ms) ++good;
  }
  g.ttft_ms = Summarize(Field(rs, [](const RequestRecord& r) { return r.ttft_ms; }));
  g.tpot_ms = Summarize(Field(rs, [](const RequestRecord& r) { return r.tpot_ms(); }));
  g.e2e_ms = Summarize(Field(rs, [](const RequestRecord& r) { return r.e2e_ms; }));
  g.itl_ms = Summarize(itl);
  g.cached_fraction = prompt ? static_cast<double>(cached) / static_cast<double>(prompt) : 0;
  g.throughput_tok_s = wall_s > 0 ? static_cast<double>(out_tokens) / wall_s : 0;
  g.goodput_req_s = wall_s > 0 ? static_cast<double>(good) / wall_s : 0;
  return g;
}

std::string Ms(double v) { return std::isnan(v) ? "-" : v >= 100 ? fmt::format("{:.0f}", v) : fmt::format("{:.1f}", v); }

json SummaryJson(const Summary& s) { return {{"n", s.n}, {"mean", s.mean}, {"p50", s.p50}, {"p90", s.p90}, {"p99", s.p99}}; }

}  // namespace

std::vector<Group> Aggregate(const std::vector<RequestRecord>& recs, double wall_s, const Slo& slo) {
  std::vector<const RequestRecord*> all, on, off;
  std::map<CacheOutcome, std::vector<const RequestRecord*>> by_outcome;
  for (const RequestRecord& r : recs) {
    all.push_back(&r);
    (r.cache ? on : off).push_back(&r);
    if (r.cache && r.cached_tokens) by_outcome[ClassifyOutcome(r.prompt_tokens, *r.cached_tokens)].push_back(&r);
  }
  std::vector<Group> g = {MakeGroup("all", all, wall_s, slo)};
  if (!off.empty()) {
    g.push_back(MakeGroup("cache on", on, wall_s, slo));
    g.push_back(MakeGroup("cache off", off, wall_s, slo));
  }
  for (const auto& [o, rs] : by_outcome) {
    g.push_back(MakeGroup(std::string(off.empty() ? "" : "on: ") + OutcomeName(o), rs, wall_s, slo));
  }
  // Hits by the tier that supplied most of their cached tokens, when the
  // server reports more than one tier.
  std::map<std::string, std::vector<const RequestRecord*>> by_tier;
  for (const RequestRecord* r : on) {
    if (r->cached_by_tier.empty() || !r->cached_tokens || *r->cached_tokens == 0) continue;
    auto top = std::max_element(r->cached_by_tier.begin(), r->cached_by_tier.end(),
                                [](const auto& a, const auto& b) { return a.second < b.second; });
    by_tier[top->first].push_back(r);
  }
  if (by_tier.size() > 1) {
    for (const auto& [tier, rs] : by_tier) g.push_back(MakeGroup("tier: " + tier, rs, wall_s, slo));
  }
  return g;
}

Verdict Judge(const std::vector<RequestRecord>& recs) {
  Verdict v;
  std::vector<double> ttft[2], itl[2], e2e[2];
  size_t on_prompt = 0, on_cached = 0;
  for (const RequestRecord& r : recs) {
    if (!r.ok) continue;
    const int arm = r.cache ? 1 : 0;
    if (r.cache && r.cached_tokens) on_prompt += r.prompt_tokens, on_cached += *r.cached_tokens;
    ttft[arm].push_back(r.ttft_ms);
    e2e[arm].push_back(r.e2e_ms);
    if (!r.itl_ms.empty()) itl[arm].push_back(MeanItl(r));
  }
  if (ttft[0].empty() || ttft[1].empty()) {
    v.text = "No A/B comparison in this run (use --ab to send every request with the cache on and off).";
    return v;
  }
  v.has_ab = true;
  v.ttft_ratio = MedianRatioCI(ttft[0], ttft[1]);
  v.e2e_ratio = MedianRatioCI(e2e[0], e2e[1]);
  const bool has_itl = !itl[0].empty() && !itl[1].empty();
  if (has_itl) v.itl_ratio = MedianRatioCI(itl[0], itl[1]);
  v.itl_within_noise = has_itl && v.itl_ratio.Contains(1.0);
  auto pct = [](double r) { return fmt::format("{:+.1f}%", (r - 1) * 100); };
  std::string t = fmt::format(
      "TTFT p50 went from {} ms without the cache to {} ms with it: x{:.3f} (95% CI {:.3f} to {:.3f}, {}).",
      Ms(Percentile(ttft[0], 0.5)), Ms(Percentile(ttft[1], 0.5)), v.ttft_ratio.estimate, v.ttft_ratio.lo,
      v.ttft_ratio.hi, pct(v.ttft_ratio.estimate));
  if (has_itl) {
    t += fmt::format(" ITL p50 (per-request mean gap) went from {} ms to {} ms: {} (95% CI {} to {}), {}.",
                     Ms(Percentile(itl[0], 0.5)), Ms(Percentile(itl[1], 0.5)), pct(v.itl_ratio.estimate),
                     pct(v.itl_ratio.lo), pct(v.itl_ratio.hi),
                     v.itl_within_noise ? "within noise" : "a change beyond noise");
  }
  t += fmt::format(" End-to-end p50 changed {} (95% CI {} to {}).", pct(v.e2e_ratio.estimate), pct(v.e2e_ratio.lo),
                   pct(v.e2e_ratio.hi));
  const bool ttft_down = v.ttft_ratio.hi < 1, ttft_up = v.ttft_ratio.lo > 1;
  const bool itl_down = has_itl && v.itl_ratio.hi < 0.95, itl_up = has_itl && v.itl_ratio.lo > 1.05;
  v.moved_together = (ttft_down && itl_down) || (ttft_up && itl_up);
  const bool nothing_cached = on_prompt > 0 && on_cached * 100 < on_prompt;
  if (nothing_cached) {
    t += " The server reused under 1% of prompt tokens with the cache on, so any difference between the arms is noise "
         "or something other than the cache: for this workload caching does nothing.";
  } else if (v.moved_together) {
    t += " ITL moved together with TTFT: a prefix cache changes only the prefill before the first token, so something "
         "other than the cache differed between the arms (batching, the model, routing); do not credit the TTFT change "
         "to caching.";
  } else if (ttft_down) {
    t += " The cache cut TTFT and left decoding alone: caching pays for this workload.";
  } else if (!ttft_up && std::abs(v.ttft_ratio.estimate - 1) < 0.1) {
    t += " Caching made no measurable difference to TTFT for this workload (little shared prefix, or prefill is a "
         "small part of the request).";
  } else if (!ttft_up) {
    t += fmt::format(" The TTFT interval still includes no change: not conclusive with {} and {} requests; run more.",
                     ttft[1].size(), ttft[0].size());
  } else {
    t += " TTFT got worse with the cache: check for cache thrashing or reload costs.";
  }
  v.text = t;
  return v;
}

std::string TerminalTable(const std::vector<Group>& groups) {
  std::string out = fmt::format("{:<14} {:>5} {:>4} {:>8} {:>8} {:>8} {:>7} {:>7} {:>8} {:>8} {:>7} {:>8}\n", "group", "reqs",
                                "err", "TTFT p50", "TTFT p90", "TTFT p99", "ITL p50", "ITL p99", "TPOT p50", "E2E p50",
                                "cached", "tok/s");
  for (const Group& g : groups) {
    out += fmt::format("{:<14} {:>5} {:>4} {:>8} {:>8} {:>8} {:>7} {:>7} {:>8} {:>8} {:>6.1f}% {:>8.1f}\n", g.name,
                       g.num_requests, g.num_errors, Ms(g.ttft_ms.p50), Ms(g.ttft_ms.p90), Ms(g.ttft_ms.p99),
                       Ms(g.itl_ms.p50), Ms(g.itl_ms.p99), Ms(g.tpot_ms.p50), Ms(g.e2e_ms.p50), g.cached_fraction * 100,
                       g.throughput_tok_s);
  }
  return out + "(times in ms; cached = cached / prompt tokens; tok/s = output tokens per second of the run)\n";
}

json ToJson(const std::vector<RequestRecord>& recs, const std::vector<Group>& groups, const Verdict& v, const json& meta) {
  json j = {{"meta", meta}, {"groups", json::array()}, {"requests", json::array()}};
  for (const Group& g : groups) {
    j["groups"].push_back({{"name", g.name}, {"num_requests", g.num_requests}, {"num_errors", g.num_errors},
                           {"ttft_ms", SummaryJson(g.ttft_ms)}, {"itl_ms", SummaryJson(g.itl_ms)},
                           {"tpot_ms", SummaryJson(g.tpot_ms)}, {"e2e_ms", SummaryJson(g.e2e_ms)},
                           {"cached_fraction", g.cached_fraction}, {"throughput_tok_s", g.throughput_tok_s},
                           {"goodput_req_s", g.goodput_req_s}});
  }
  for (const RequestRecord& r : recs) {
    json q = {{"index", r.index}, {"cache", r.cache}, {"ok", r.ok}, {"error", r.error}, {"http_status", r.http_status},
              {"start_s", r.start_s}, {"ttft_ms", r.ttft_ms}, {"e2e_ms", r.e2e_ms}, {"tpot_ms", r.tpot_ms()},
              {"itl_ms", r.itl_ms}, {"prompt_tokens", r.prompt_tokens}, {"output_tokens", r.output_tokens},
              {"cached_tokens", r.cached_tokens ? json(*r.cached_tokens) : json(nullptr)},
              {"cached_by_tier", r.cached_by_tier},
              {"outcome", r.cached_tokens ? OutcomeName(ClassifyOutcome(r.prompt_tokens, *r.cached_tokens)) : "unknown"}};
    j["requests"].push_back(std::move(q));
  }
  if (v.has_ab) {
    auto iv = [](const Interval& i) { return json{{"estimate", i.estimate}, {"lo", i.lo}, {"hi", i.hi}}; };
    j["verdict"] = {{"ttft_ratio", iv(v.ttft_ratio)}, {"itl_ratio", iv(v.itl_ratio)}, {"e2e_ratio", iv(v.e2e_ratio)},
                    {"itl_within_noise", v.itl_within_noise}, {"moved_together", v.moved_together}, {"text", v.text}};
  } else {
    j["verdict"] = {{"text", v.text}};
  }
  return j;
}

}  // namespace pc::loadgen
