// The advice: capacity curves, per-class savings, the verdict, and its
// terminal, JSON and HTML forms.
#include <fmt/format.h>

#include <cmath>
#include <set>

#include "advise.h"
#include "svg_plot.h"

namespace pc::loadgen {

using nlohmann::json;

namespace {

double MeanOf(const std::vector<SimOutcome>& v, double SimOutcome::*f, const std::vector<size_t>& idx) {
  double s = 0;
  for (size_t i : idx) s += v[i].*f;
  return idx.empty() ? 0 : s / static_cast<double>(idx.size());
}

std::string Bucket(size_t input, size_t output) {
  const char* in = input < 1024 ? "in<1k" : input < 4096 ? "in 1k-4k" : input < 16384 ? "in 4k-16k" : "in>=16k";
  const char* out = output < 64 ? "out<64" : output < 512 ? "out 64-512" : "out>=512";
  return fmt::format("{} {}", in, out);
}

std::string Tokens(size_t n) {
  if (n >= 1000000) return fmt::format("{:.1f}M", static_cast<double>(n) / 1e6);
  if (n >= 1000) return fmt::format("{:.0f}k", static_cast<double>(n) / 1e3);
  return std::to_string(n);
}

std::string Verdict(const Advice& a, const std::vector<SimRequest>& reqs) {
  const SimResult &w = a.with_cache, &wo = a.without_cache;
  if (!a.has_prefix_info) {
    return "This trace carries no prefix information (no prefix_blocks), so every prompt looks unique to the advisor "
           "and it predicts no gain from caching. That is a limit of the log, not a finding about your traffic: record "
           "the hashes with `promptcache serve --request-log FILE`, or measure with `promptcache bench --ab`.";
  }
  double e2e_with = 0, e2e_without = 0, ttft_with = 0, ttft_without = 0;
  for (size_t i = 0; i < reqs.size(); ++i) {
    e2e_with += w.requests[i].e2e_ms, e2e_without += wo.requests[i].e2e_ms;
    ttft_with += w.requests[i].ttft_ms, ttft_without += wo.requests[i].ttft_ms;
  }
  const double e2e_saved = e2e_without > 0 ? 1 - e2e_with / e2e_without : 0;
  const double ttft_saved = ttft_without > 0 ? 1 - ttft_with / ttft_without : 0;
  std::string t = fmt::format(
      "With the configured cache {:.0f}% of prompt tokens come from cache. Predicted TTFT p50 {:.0f} -> {:.0f} ms, p99 "
      "{:.0f} -> {:.0f} ms; end-to-end p50 {:.0f} -> {:.0f} ms; ITL unchanged at {:.1f} ms per token (p50; longer "
      "contexts decode slower whether or not they were cached). Caching removes {:.0f}% of total TTFT and {:.0f}% of "
      "total end-to-end time. ",
      w.cached_fraction * 100, wo.ttft_ms.p50, w.ttft_ms.p50, wo.ttft_ms.p99, w.ttft_ms.p99, wo.e2e_ms.p50, w.e2e_ms.p50,
      w.itl_ms.p50, ttft_saved * 100, e2e_saved * 100);
  if (e2e_saved > 0.25) t += "Verdict: caching pays for this traffic; build around it.";
  else if (e2e_saved > 0.05) t += "Verdict: caching helps, mostly the classes below with long shared prompts.";
  else if (ttft_saved > 0.25) t += "Verdict: caching cuts TTFT but barely moves end-to-end latency: this traffic is generation-heavy.";
  else t += "Verdict: caching barely matters here: the prompts share little, or decoding dominates.";
  const Advice::Class* best = nullptr;
  for (const Advice::Class& c : a.classes) {
    if (c.num_requests * 20 >= reqs.size() && (!best || c.e2e_saved_fraction > best->e2e_saved_fraction)) best = &c;
  }
  if (best && best->e2e_saved_fraction > 0.01) {
    t += fmt::format(" The class that gains most is {} ({:.0f}% of its end-to-end time).", best->name, best->e2e_saved_fraction * 100);
  }
  return t;
}

}  // namespace

Advice Advise(const std::vector<SimRequest>& reqs, const CostProfile& cost, const AdviceOptions& opt) {
  Advice a;
  a.with_cache = Simulate(reqs, cost, {true, opt.tiers, opt.max_running, opt.batch_tokens, opt.step_ms, opt.admission, opt.greedy, opt.on_step});
  a.without_cache = Simulate(reqs, cost, {false, opt.tiers, opt.max_running, opt.batch_tokens, opt.step_ms, opt.admission, opt.greedy, {}});
  std::set<uint64_t> distinct;
  for (const SimRequest& r : reqs) distinct.insert(r.keys.begin(), r.keys.end());
  a.has_prefix_info = !distinct.empty();
  const size_t tpk = reqs.empty() ? 16 : std::max<size_t>(reqs.front().tokens_per_key, 1);
  const size_t working_set = std::max<size_t>(distinct.size() * tpk, tpk);
  double ttft_without = 0;
  for (const SimOutcome& o : a.without_cache.requests) ttft_without += o.ttft_ms;
  // Each tier alone below a pool of the configured size (the pool alone for
  // the pool), over capacities from 1/256 of the working set to twice it.
  for (size_t i = 0; i < opt.tiers.size() && a.has_prefix_info; ++i) {
    std::vector<std::pair<size_t, double>> curve, gains;
    for (double f = 1.0 / 256; f <= 2.0 + 1e-9; f *= 2) {
      const size_t cap = std::max<size_t>(tpk, static_cast<size_t>(static_cast<double>(working_set) * f));
      SimConfig c{true, {opt.tiers[0]}, opt.max_running, opt.batch_tokens, opt.step_ms, opt.admission, opt.greedy, {}};
      if (i == 0) c.tiers[0].capacity_tokens = cap;
      else c.tiers.push_back(TierSpec{opt.tiers[i].name, cap, opt.tiers[i].ttl_s});
      const SimResult r = Simulate(reqs, cost, c);
      double ttft = 0;
      for (const SimOutcome& o : r.requests) ttft += o.ttft_ms;
      curve.emplace_back(cap, r.cached_fraction);
      gains.emplace_back(cap, ttft_without - ttft);
    }
    a.hit_curve[opt.tiers[i].name] = curve;
    const double best = gains.back().second;
    size_t need = 0;
    for (const auto& [cap, g] : gains) {
      if (best > 0 && g >= 0.9 * best) {
        need = cap;
        break;
      }
    }
    a.capacity_for_90pct[opt.tiers[i].name] = need;
  }
  std::map<std::string, std::vector<size_t>> classes;
  for (size_t i = 0; i < reqs.size(); ++i) classes[Bucket(reqs[i].input_tokens, reqs[i].output_tokens)].push_back(i);
  for (const auto& [name, idx] : classes) {
    Advice::Class c;
    c.name = name;
    c.num_requests = idx.size();
    const double e_wo = MeanOf(a.without_cache.requests, &SimOutcome::e2e_ms, idx);
    const double t_wo = MeanOf(a.without_cache.requests, &SimOutcome::ttft_ms, idx);
    c.e2e_saved_fraction = e_wo > 0 ? 1 - MeanOf(a.with_cache.requests, &SimOutcome::e2e_ms, idx) / e_wo : 0;
    c.ttft_saved_fraction = t_wo > 0 ? 1 - MeanOf(a.with_cache.requests, &SimOutcome::ttft_ms, idx) / t_wo : 0;
    a.classes.push_back(c);
  }
  a.verdict = Verdict(a, reqs);
  return a;
}

std::string AdviceTable(const Advice& a) {
  std::string t = fmt::format("{:<10} {:>10} {:>10} {:>10} {:>10} {:>8} {:>8}\n", "", "TTFT p50", "TTFT p99", "E2E p50",
                              "E2E p99", "ITL p50", "cached");
  for (const auto& [name, r] : {std::pair{"no cache", &a.without_cache}, std::pair{"cache", &a.with_cache}}) {
    t += fmt::format("{:<10} {:>10.0f} {:>10.0f} {:>10.0f} {:>10.0f} {:>8.1f} {:>7.1f}%\n", name, r->ttft_ms.p50, r->ttft_ms.p99,
                     r->e2e_ms.p50, r->e2e_ms.p99, r->itl_ms.p50, r->cached_fraction * 100);
  }
  for (const auto& [tier, f] : a.with_cache.fraction_by_tier) t += fmt::format("  from {}: {:.1f}% of prompt tokens\n", tier, f * 100);
  const SimResult& w = a.with_cache;
  if (w.ttft_hits_ms.n > 0 && w.ttft_misses_ms.n > 0) {
    t += fmt::format("  TTFT p50 of hits (>= 90% cached) {:.0f} ms ({} requests), of misses {:.0f} ms ({}; p99 {:.0f} ms)\n",
                     w.ttft_hits_ms.p50, w.ttft_hits_ms.n, w.ttft_misses_ms.p50, w.ttft_misses_ms.n, w.ttft_misses_ms.p99);
  }
  t += "\nper class (mean time removed by caching):\n";
  for (const Advice::Class& c : a.classes) {
    t += fmt::format("  {:<22} {:>6} requests   TTFT -{:>5.1f}%   end-to-end -{:>5.1f}%\n", c.name, c.num_requests,
                     c.ttft_saved_fraction * 100, c.e2e_saved_fraction * 100);
  }
  if (!a.capacity_for_90pct.empty()) {
    t += "\ncapacity reaching 90% of the achievable TTFT gain (each tier alone below the pool):\n";
    for (const auto& [tier, cap] : a.capacity_for_90pct) {
      t += fmt::format("  {:<6} {}\n", tier, cap ? Tokens(cap) + " tokens" : std::string("no gain"));
    }
  }
  return t + "\n" + a.verdict + "\n";
}

json AdviceJson(const Advice& a, const json& meta) {
  auto sim = [](const SimResult& r) {
    auto s = [](const Summary& x) { return json{{"p50", x.p50}, {"p90", x.p90}, {"p99", x.p99}, {"mean", x.mean}}; };
    return json{{"cached_fraction", r.cached_fraction}, {"fraction_by_tier", r.fraction_by_tier}, {"ttft_ms", s(r.ttft_ms)},
                {"e2e_ms", s(r.e2e_ms)}, {"itl_ms", s(r.itl_ms)}, {"ttft_hits_ms", s(r.ttft_hits_ms)},
                {"ttft_misses_ms", s(r.ttft_misses_ms)}};
  };
  json classes = json::array();
  for (const Advice::Class& c : a.classes) {
    classes.push_back({{"name", c.name}, {"num_requests", c.num_requests}, {"ttft_saved_fraction", c.ttft_saved_fraction},
                       {"e2e_saved_fraction", c.e2e_saved_fraction}});
  }
  // Each request's predicted TTFT and cached tokens with the cache as
  // configured, in trace order: to set beside a replay's request by request.
  json requests = json::array();
  for (const SimOutcome& o : a.with_cache.requests) requests.push_back({o.ttft_ms, o.cached_tokens});
  json with_cache = sim(a.with_cache);
  with_cache["requests_ttft_ms_cached"] = std::move(requests);
  return {{"meta", meta},           {"with_cache", with_cache}, {"without_cache", sim(a.without_cache)},
          {"hit_curve", a.hit_curve}, {"capacity_for_90pct", a.capacity_for_90pct}, {"classes", classes},
          {"has_prefix_info", a.has_prefix_info}, {"verdict", a.verdict}};
}

std::string AdviceHtml(const std::string& title, const Advice& a, const json& meta) {
  const char* colors[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728"};
  std::vector<Series> curves;
  size_t ci = 0;
  for (const auto& [tier, pts] : a.hit_curve) {
    Series s{tier, colors[ci++ % 4], {}, true};
    for (const auto& [cap, f] : pts) s.pts.emplace_back(std::log2(static_cast<double>(cap)), f * 100);
    curves.push_back(std::move(s));
  }
  std::vector<double> t_with, t_without;
  for (const SimOutcome& o : a.with_cache.requests) t_with.push_back(o.ttft_ms);
  for (const SimOutcome& o : a.without_cache.requests) t_without.push_back(o.ttft_ms);
  Series saved{"end-to-end", "#2ca02c", {}, false};
  for (size_t i = 0; i < a.classes.size(); ++i) saved.pts.emplace_back(static_cast<double>(i), a.classes[i].e2e_saved_fraction * 100);
  std::string h = HtmlHead(title);
  h += "<p class=\"verdict\" id=\"verdict\">" + HtmlEscape(a.verdict) + "</p>\n<pre id=\"table\">" + HtmlEscape(AdviceTable(a)) +
       "</pre>\n<div class=\"plots\">\n";
  h += Plot("hit-curve", "Cached fraction of prompt tokens against capacity", "capacity (log2 tokens)", "cached tokens (%)", curves);
  h += Plot("ttft-cdf", "Predicted TTFT CDF", "TTFT (ms)", "fraction of requests",
            {Cdf("cache", "#2ca02c", t_with), Cdf("no cache", "#7f7f7f", t_without)});
  h += Plot("class-savings", "End-to-end time removed, per request class (index as in the table)", "class", "saved (%)", {saved});
  h += "</div>\n<h2>Run</h2><pre id=\"meta\">" + HtmlEscape(meta.dump(2)) + "</pre>\n" + HtmlFoot();
  return h;
}

}  // namespace pc::loadgen
