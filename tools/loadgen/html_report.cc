// The HTML report: inline SVG plots drawn here (no scripts, no external
// resources), so the file opens anywhere, offline.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "report.h"
#include "svg_plot.h"

namespace pc::loadgen {

std::string HtmlEscape(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '&': o += "&amp;"; break;
      case '"': o += "&quot;"; break;
      default: o += c;
    }
  }
  return o;
}

namespace {
// Ticks at 1, 2, 5 x 10^k covering [lo, hi].
std::vector<double> Ticks(double lo, double hi) {
  const double span = std::max(hi - lo, 1e-9);
  const double raw = span / 5, mag = std::pow(10, std::floor(std::log10(raw)));
  const double step = raw / mag < 2 ? 2 * mag : raw / mag < 5 ? 5 * mag : 10 * mag;
  std::vector<double> t;
  for (double x = std::ceil(lo / step) * step; x <= hi + 1e-9; x += step) t.push_back(x);
  return t;
}
std::string Escape(const std::string& s) { return HtmlEscape(s); }
}  // namespace

std::string Plot(const std::string& id, const std::string& title, const std::string& xlabel, const std::string& ylabel,
                 const std::vector<Series>& series) {
  const double W = 600, H = 340, L = 64, R = 16, T = 36, B = 48;
  double x0 = INFINITY, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY;
  for (const Series& s : series) {
    for (auto [x, y] : s.pts) {
      x0 = std::min(x0, x), x1 = std::max(x1, x), y0 = std::min(y0, y), y1 = std::max(y1, y);
    }
  }
  std::string svg = fmt::format(R"(<svg id="{}" class="plot" xmlns="http://www.w3.org/2000/svg" width="{}" height="{}" viewBox="0 0 {} {}">)", id, W,
                                H, W, H);
  svg += fmt::format(R"(<text x="{}" y="20" font-size="14" font-weight="bold">{}</text>)", L, Escape(title));
  if (!std::isfinite(x0)) return svg + fmt::format(R"(<text x="{}" y="{}">no data</text></svg>)", L, H / 2);
  if (x1 == x0) x1 = x0 + 1;
  if (y1 == y0) y1 = y0 + 1;
  x0 = std::min(x0, 0.0), y0 = std::min(y0, 0.0);
  auto sx = [&](double x) { return L + (x - x0) / (x1 - x0) * (W - L - R); };
  auto sy = [&](double y) { return H - B - (y - y0) / (y1 - y0) * (H - T - B); };
  svg += fmt::format(R"(<rect x="{}" y="{}" width="{}" height="{}" fill="none" stroke="#999"/>)", L, T, W - L - R, H - T - B);
  for (double t : Ticks(x0, x1)) {
    svg += fmt::format(R"(<line x1="{0}" y1="{1}" x2="{0}" y2="{2}" stroke="#eee"/><text x="{0}" y="{3}" font-size="11" text-anchor="middle">{4:g}</text>)",
                       sx(t), T, H - B, H - B + 14, t);
  }
  for (double t : Ticks(y0, y1)) {
    svg += fmt::format(R"(<line x1="{0}" y1="{1}" x2="{2}" y2="{1}" stroke="#eee"/><text x="{3}" y="{4}" font-size="11" text-anchor="end">{5:g}</text>)",
                       L, sy(t), W - R, L - 4, sy(t) + 4, t);
  }
  svg += fmt::format(R"(<text x="{}" y="{}" font-size="12" text-anchor="middle">{}</text>)", (L + W - R) / 2, H - 10, Escape(xlabel));
  svg += fmt::format(R"svg(<text x="14" y="{}" font-size="12" text-anchor="middle" transform="rotate(-90 14 {})">{}</text>)svg",
                     (T + H - B) / 2, (T + H - B) / 2, Escape(ylabel));
  double ly = T + 14;
  for (const Series& s : series) {
    if (s.pts.empty()) continue;
    if (s.line) {
      std::string pts;
      for (auto [x, y] : s.pts) pts += fmt::format("{:.1f},{:.1f} ", sx(x), sy(y));
      svg += fmt::format(R"(<polyline class="series" fill="none" stroke="{}" stroke-width="2" points="{}"/>)", s.color, pts);
    } else {
      for (auto [x, y] : s.pts) {
        svg += fmt::format(R"(<circle class="series" cx="{:.1f}" cy="{:.1f}" r="3" fill="{}" fill-opacity="0.7"/>)", sx(x), sy(y), s.color);
      }
    }
    svg += fmt::format(R"(<rect x="{}" y="{}" width="10" height="10" fill="{}"/><text x="{}" y="{}" font-size="11">{} (n={})</text>)",
                       W - R - 150, ly - 9, s.color, W - R - 136, ly, Escape(s.name), s.pts.size());
    ly += 15;
  }
  return svg + "</svg>";
}

Series Cdf(std::string name, std::string color, std::vector<double> v) {
  Series s{std::move(name), std::move(color), {}, true};
  std::sort(v.begin(), v.end());
  for (size_t i = 0; i < v.size(); ++i) s.pts.emplace_back(v[i], static_cast<double>(i + 1) / static_cast<double>(v.size()));
  return s;
}

std::string HtmlHead(const std::string& title) {
  return "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>" + HtmlEscape(title) +
         "</title><style>body{font-family:sans-serif;margin:24px;max-width:1280px}table{border-collapse:collapse}"
         "td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}th{background:#f4f4f4}"
         ".plots{display:flex;flex-wrap:wrap;gap:12px}.verdict{background:#f8f8e8;padding:10px;border-left:4px solid #cc4}"
         "</style></head><body>\n<h1>" + HtmlEscape(title) + "</h1>\n";
}

std::string HtmlFoot() { return "</body></html>\n"; }

std::string Html(const std::string& title, const std::vector<RequestRecord>& recs, const std::vector<Group>& groups,
                 const Verdict& v, const nlohmann::json& meta) {
  const char* colors[] = {"#d62728", "#ff7f0e", "#2ca02c", "#1f77b4"};
  std::vector<double> ttft_by[4], itl_on, itl_off;
  Series scatter_cached{"requests", "#1f77b4", {}, false}, itl_ctx_on{"cache on", "#2ca02c", {}, false},
      itl_ctx_off{"cache off", "#7f7f7f", {}, false};
  for (const RequestRecord& r : recs) {
    if (!r.ok) continue;
    const int bucket = !r.cache ? 3 : r.cached_tokens ? static_cast<int>(ClassifyOutcome(r.prompt_tokens, *r.cached_tokens)) : 0;
    ttft_by[bucket].push_back(r.ttft_ms);
    (r.cache ? itl_on : itl_off).insert((r.cache ? itl_on : itl_off).end(), r.itl_ms.begin(), r.itl_ms.end());
    if (r.cached_tokens && r.prompt_tokens) {
      scatter_cached.pts.emplace_back(static_cast<double>(*r.cached_tokens) / static_cast<double>(r.prompt_tokens), r.ttft_ms);
    }
    if (!r.itl_ms.empty()) {
      // Mean context while decoding: the prompt plus half the output.
      const double ctx = static_cast<double>(r.prompt_tokens) + static_cast<double>(r.output_tokens) / 2;
      (r.cache ? itl_ctx_on : itl_ctx_off).pts.emplace_back(ctx, Mean(r.itl_ms));
    }
  }
  const char* names[] = {"miss", "partial", "hit", "cache off"};
  std::vector<Series> ttft_cdf;
  for (int b = 0; b < 4; ++b) ttft_cdf.push_back(Cdf(names[b], colors[b], ttft_by[b]));
  std::string h = HtmlHead(title);
  h += "<p class=\"verdict\" id=\"verdict\">" + HtmlEscape(v.text) + "</p>\n";
  h += "<table id=\"summary\"><tr><th>group</th><th>requests</th><th>errors</th><th>TTFT p50</th><th>TTFT p90</th><th>TTFT p99</th>"
       "<th>ITL p50</th><th>ITL p99</th><th>TPOT p50</th><th>E2E p50</th><th>cached</th><th>tok/s</th><th>goodput req/s</th></tr>\n";
  for (const Group& g : groups) {
    h += fmt::format("<tr><td style=\"text-align:left\">{}</td><td>{}</td><td>{}</td><td>{:.1f}</td><td>{:.1f}</td><td>{:.1f}</td>"
                     "<td>{:.1f}</td><td>{:.1f}</td><td>{:.1f}</td><td>{:.1f}</td><td>{:.1f}%</td><td>{:.1f}</td><td>{:.3f}</td></tr>\n",
                     HtmlEscape(g.name), g.num_requests, g.num_errors, g.ttft_ms.p50, g.ttft_ms.p90, g.ttft_ms.p99, g.itl_ms.p50,
                     g.itl_ms.p99, g.tpot_ms.p50, g.e2e_ms.p50, g.cached_fraction * 100, g.throughput_tok_s, g.goodput_req_s);
  }
  h += "</table><p>Times in milliseconds. Outcomes: miss (nothing reused), partial, hit (at least 90% of the prompt "
       "reused), from the server's usage.prompt_tokens_details.cached_tokens.</p>\n<div class=\"plots\">\n";
  h += Plot("ttft-cdf", "TTFT CDF by cache outcome", "TTFT (ms)", "fraction of requests", ttft_cdf);
  h += Plot("itl-cdf", "ITL CDF, cache on vs off", "inter-token gap (ms)", "fraction of gaps",
            {Cdf("cache on", "#2ca02c", itl_on), Cdf("cache off", "#7f7f7f", itl_off)});
  h += Plot("ttft-vs-cached", "TTFT against cached fraction", "cached / prompt tokens", "TTFT (ms)", {scatter_cached});
  h += Plot("itl-vs-context", "ITL against context length", "mean context while decoding (tokens)", "mean ITL (ms)",
            {itl_ctx_on, itl_ctx_off});
  h += "</div>\n<h2>Run</h2><pre id=\"meta\">" + HtmlEscape(meta.dump(2)) + "</pre>\n" + HtmlFoot();
  return h;
}

}  // namespace pc::loadgen
