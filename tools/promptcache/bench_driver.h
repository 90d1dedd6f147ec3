// The `bench` driver shared by `promptcache bench` and `promptcache demo`:
// builds the workload, warms up, runs it (optionally A/B), and reports.
// Uses only the load generator (HTTP), never the engine.
#pragma once
#include <optional>
#include <string>

#include "report.h"
#include "runner.h"
#include "workload.h"

namespace pc::cli {

struct BenchConfig {
  std::string workload = "rag";  // rag, chat, multiturn, sysprompt, trace
  loadgen::ShapeParams shape;    // filled from DefaultShape, then flags
  loadgen::TraceParams trace;
  loadgen::RunOptions run;
  loadgen::Slo slo;
  bool ab = false;
  size_t warmup_requests = 2;
  size_t cache_capacity_tokens = 0;  // trace: for the ideal simulation (0: ask /metrics)
  std::string json_path, html_path, title;
};

struct BenchOutcome {
  std::vector<loadgen::RequestRecord> records;
  std::vector<loadgen::Group> groups;
  loadgen::Verdict verdict;
  double wall_s = 0;
  std::optional<double> ideal_cached_fraction;  // trace replay
  double measured_cached_fraction = 0;
};

Result<BenchOutcome> RunBench(const loadgen::Target& target, const BenchConfig& cfg);
// The terminal report: table, verdict, trace comparison.
void PrintBench(const BenchConfig& cfg, const BenchOutcome& out);

}  // namespace pc::cli
