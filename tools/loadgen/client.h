// One streamed /v1/completions request against any OpenAI-compatible server,
// timed on the client: TTFT (send to first token), every inter-token gap,
// end-to-end, and the cached-token count from usage when the server reports
// it. Thread-safety: RunRequest may run concurrently (one connection each,
// taken from a ConnectionPool when given one).
#pragma once
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/mutex.h"

#include <httplib.h>

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
  // Reuse connections (HTTP keep-alive), as the OpenAI SDKs and browsers do;
  // false: a new TCP connection per request.
  bool keep_alive = true;
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

// One connection to the target with the client's settings, and when it
// last finished a request. Thread-safety: one request at a time.
class Connection {
 public:
  explicit Connection(const Target& t);
  httplib::Client cli;
  double idle_since_s = 0;
};

// Idle keep-alive connections to one target, the most recently used first.
// A client keeps its connections open between requests; a fresh connect per
// request puts a TCP handshake, the server's accept and its hand-off to a
// worker thread inside every TTFT measured (0.7 ms more at the median on a
// busy 2-core machine, docs/BENCHMARKS.md). Connections idle longer than
// kMaxIdleS are closed rather than reused: servers close idle ones after 5 s
// (cpp-httplib, uvicorn), and a request sent as the server closes would fail.
// At most kMaxIdle stay open (httpx's default; the OpenAI SDK keeps 20 or
// 100 by version): an idle connection holds a cpp-httplib server thread that
// wakes about 30 times a second (measured on our server).
// Thread-safety: Take and Give may be called concurrently.
class ConnectionPool {
 public:
  static constexpr double kMaxIdleS = 2.0;
  static constexpr size_t kMaxIdle = 20;
  explicit ConnectionPool(const Target& t);
  ~ConnectionPool();
  // An idle connection (reused: true), else a new one (not yet connected).
  std::unique_ptr<Connection> Take(bool* reused);
  // Back to the pool after a complete response (closed when kMaxIdle wait).
  void Give(std::unique_ptr<Connection> c);
  size_t idle() const;

 private:
  Target target_;
  mutable Mutex mu_;
  std::vector<std::unique_ptr<Connection>> idle_ PC_GUARDED_BY(mu_);  // the last is the newest
};

// pool: where the connection comes from and goes back to (null: a new
// connection, closed after the request). A reused connection that fails
// before any response (the server closed it meanwhile) is retried once on a
// new one; the TTFT then counts both tries, as a client would see them.
RequestRecord RunRequest(const Target& t, const BenchRequest& r, double run_start_s, ConnectionPool* pool = nullptr);

// Seconds on a monotonic clock.
double NowSeconds();

}  // namespace pc::loadgen
