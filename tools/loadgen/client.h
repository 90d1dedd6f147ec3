// One streamed /v1/completions request against any OpenAI-compatible server,
// timed on the client: TTFT (send to first token), every inter-token gap,
// end-to-end, and the cached-token count from usage when the server reports
// it. Thread-safety: RunRequest may run concurrently (one connection each).
#pragma once
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "workload.h"

namespace pc::loadgen {

struct Target {
  std::string host = "127.0.0.1";
  int port = 8080;
  std::string api_key;
  std::string model;  // sent as "model" (some servers require it)
  double timeout_s = 600;
  // X-Prefix-Key: a hash of the prompt's first prefix_key_tokens ids (0:
  // the trace's tokens per block key, else 64; -1: no header), for routers
  // that keep requests sharing a prefix on one replica (deploy/haproxy.cfg).
  int prefix_key_tokens = 0;
  // Fields merged into every request body (JSON object text; "" none), e.g.
  // a response_format or sampling settings; they override the defaults.
  std::string extra_body;
};

// The X-Prefix-Key value for a prompt ("" when none is sent).
std::string PrefixKey(const std::vector<int32_t>& prompt, size_t tokens_per_key, int prefix_key_tokens);

struct RequestRecord {
  size_t index = 0;    // position in the run
  bool cache = true;   // A/B arm
  bool ok = false;
  std::string error;
  int http_status = 0;
  double start_s = 0;  // send time from the run start
  double ttft_ms = 0, e2e_ms = 0;
  std::vector<double> itl_ms;  // gaps between token arrivals
  size_t prompt_tokens = 0, output_tokens = 0;
  std::optional<size_t> cached_tokens;  // absent when the server does not report it
  // timings.cached_tokens_by_tier when the server reports it (promptcache does).
  std::map<std::string, size_t> cached_by_tier;
  double tpot_ms() const;  // (e2e - ttft) / (output - 1)
};

// Parses "http://host:port" (the path part is ignored).
Result<Target> ParseUrl(const std::string& url);

RequestRecord RunRequest(const Target& t, const BenchRequest& r, double run_start_s);

// Seconds on a monotonic clock.
double NowSeconds();

}  // namespace pc::loadgen
