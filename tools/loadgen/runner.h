// Runs a list of requests against a target with an arrival process, showing
// a live progress bar on stderr. Thread-safety: Run is self-contained (it
// starts and joins its own threads).
#pragma once
#include <vector>

#include "client.h"

namespace pc::loadgen {

enum class Arrival { kClosed, kPoisson, kTrace };

struct RunOptions {
  Arrival arrival = Arrival::kClosed;
  size_t concurrency = 1;      // closed loop: requests in flight
  double rate_per_s = 1;       // Poisson arrivals
  double speed = 1;            // trace: timestamps divided by this
  size_t max_requests = 0;     // 0: all
  double max_seconds = 0;      // 0: no limit (no new request starts after it)
  size_t max_in_flight = 256;  // open-loop cap
  bool progress = true;
  uint64_t seed = 1;
};

std::vector<RequestRecord> Run(const Target& t, const std::vector<BenchRequest>& reqs, const RunOptions& opt);

// Requests with fresh random prompts and the cache bypassed: they warm the
// server (threads, pages, allocator) without caching any measured prefix.
void Warmup(const Target& t, size_t num_requests, size_t prompt_tokens, TokenRange range);

}  // namespace pc::loadgen
