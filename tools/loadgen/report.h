// Aggregates and reports for a load-generator run: summaries overall, by
// A/B arm and by cache outcome; the A/B verdict in words; JSON with every
// request; a terminal table; a self-contained HTML page with SVG plots.
// Thread-safety: pure functions.
#pragma once
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "client.h"
#include "stats.h"

namespace pc::loadgen {

struct Slo {
  double ttft_ms = 2000;  // goodput counts requests meeting both
  double tpot_ms = 200;
};

struct Group {
  std::string name;  // "all", "cache on", "cache off", "on/miss", ...
  size_t num_requests = 0, num_errors = 0;
  Summary ttft_ms, itl_ms, tpot_ms, e2e_ms;
  double cached_fraction = 0;  // cached / prompt tokens (requests that report it)
  double throughput_tok_s = 0;  // output tokens per second of the run
  double goodput_req_s = 0;     // requests meeting the SLO per second
};

struct Verdict {
  bool has_ab = false;
  Interval ttft_ratio, itl_ratio, e2e_ratio;  // cache on / cache off, medians
  bool itl_within_noise = false;  // the ITL interval contains 1
  bool moved_together = false;    // ITL changed with TTFT, beyond 5%
  std::string text;               // the verdict in words
};

std::vector<Group> Aggregate(const std::vector<RequestRecord>& recs, double wall_s, const Slo& slo);
Verdict Judge(const std::vector<RequestRecord>& recs);
std::string TerminalTable(const std::vector<Group>& groups);
nlohmann::json ToJson(const std::vector<RequestRecord>& recs, const std::vector<Group>& groups, const Verdict& v,
                      const nlohmann::json& meta);
// A self-contained page (inline SVG, no scripts or external resources).
std::string Html(const std::string& title, const std::vector<RequestRecord>& recs, const std::vector<Group>& groups,
                 const Verdict& v, const nlohmann::json& meta);

}  // namespace pc::loadgen
