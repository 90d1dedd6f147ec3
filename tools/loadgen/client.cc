#include "client.h"

#include <algorithm>

#include "base/hash128.h"

#include <httplib.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <random>

namespace pc::loadgen {

std::string PrefixKey(const std::vector<int32_t>& prompt, size_t tokens_per_key, int prefix_key_tokens) {
  if (prefix_key_tokens < 0 || prompt.empty()) return "";
  const size_t n = std::min(prompt.size(), prefix_key_tokens > 0 ? static_cast<size_t>(prefix_key_tokens)
                                           : tokens_per_key > 0 ? tokens_per_key : size_t{64});
  const auto* bytes = reinterpret_cast<const uint8_t*>(prompt.data());
  return HashBytes(std::span<const uint8_t>(bytes, n * sizeof(int32_t))).Hex().substr(0, 16);
}


using nlohmann::json;

double NowSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double RequestRecord::tpot_ms() const {
  return output_tokens > 1 ? (e2e_ms - ttft_ms) / static_cast<double>(output_tokens - 1) : 0;
}

Result<Target> ParseUrl(const std::string& url) {
  Target t;
  std::string rest = url;
  const std::string scheme = "http://";
  if (rest.rfind(scheme, 0) == 0) rest = rest.substr(scheme.size());
  else if (rest.find("://") != std::string::npos) return Errorf("only http:// URLs are supported: '{}'", url);
  rest = rest.substr(0, rest.find('/'));
  const size_t colon = rest.rfind(':');
  t.host = rest.substr(0, colon);
  if (colon != std::string::npos) {
    try {
      t.port = std::stoi(rest.substr(colon + 1));
    } catch (const std::exception&) {
      return Errorf("bad port in '{}'", url);
    }
  } else {
    t.port = 80;
  }
  if (t.host.empty()) return Errorf("no host in '{}'", url);
  return t;
}

namespace {

// Incremental SSE parser: feeds bytes, calls on_data for each "data:" payload.
class SseParser {
 public:
  template <typename F>
  void Feed(const char* data, size_t n, F&& on_data) {
    buf_.append(data, n);
    size_t end;
    while ((end = buf_.find("\n\n")) != std::string::npos) {
      const std::string event = buf_.substr(0, end);
      buf_.erase(0, end + 2);
      size_t pos = 0;
      while (pos < event.size()) {
        size_t eol = event.find('\n', pos);
        if (eol == std::string::npos) eol = event.size();
        const std::string line = event.substr(pos, eol - pos);
        if (line.rfind("data:", 0) == 0) on_data(line.substr(line.size() > 5 && line[5] == ' ' ? 6 : 5));
        pos = eol + 1;
      }
    }
  }

 private:
  std::string buf_;
};

std::string RandomSalt() {
  static thread_local std::mt19937_64 rng(std::random_device{}());
  return fmt::format("bench-off-{:016x}", rng());
}

}  // namespace

Connection::Connection(const Target& t) : cli(t.host, t.port) {
  cli.set_read_timeout(static_cast<time_t>(t.timeout_s), 0);
  cli.set_connection_timeout(10, 0);
  cli.set_tcp_nodelay(true);  // the request leaves at once; timing starts at the send
  cli.set_keep_alive(t.keep_alive);
}

ConnectionPool::ConnectionPool(const Target& t) : target_(t) {}
ConnectionPool::~ConnectionPool() = default;

std::unique_ptr<Connection> ConnectionPool::Take(bool* reused) {
  {
    MutexLock lock(mu_);
    const double now = NowSeconds();
    if (!idle_.empty() && now - idle_.back()->idle_since_s <= kMaxIdleS) {
      std::unique_ptr<Connection> c = std::move(idle_.back());
      idle_.pop_back();
      *reused = true;
      return c;
    }
    idle_.clear();  // the newest is too old, so are the others
  }
  *reused = false;
  return std::make_unique<Connection>(target_);
}

void ConnectionPool::Give(std::unique_ptr<Connection> c) {
  c->idle_since_s = NowSeconds();
  MutexLock lock(mu_);
  if (idle_.size() < kMaxIdle) idle_.push_back(std::move(c));
}

size_t ConnectionPool::idle() const {
  MutexLock lock(mu_);
  return idle_.size();
}

RequestRecord RunRequest(const Target& t, const BenchRequest& r, double run_start_s, ConnectionPool* pool) {
  RequestRecord rec;
  rec.cache = r.cache;
  rec.prompt_tokens = r.prompt.size();
  json body = {{"prompt", r.prompt}, {"max_tokens", r.max_tokens}, {"temperature", 0}, {"ignore_eos", true},
               {"stream", true}, {"stream_options", {{"include_usage", true}}}};
  if (!t.model.empty()) body["model"] = t.model;
  if (!t.extra_body.empty()) body.update(json::parse(t.extra_body));  // checked by the command
  if (!r.cache) {
    // Bypass: llama.cpp-style cache_prompt plus a fresh salt (vLLM-style),
    // so neither server reuses nor keeps this request's prefix.
    body["cache_prompt"] = false;
    body["cache_salt"] = RandomSalt();
  }
  bool reused = false;
  std::unique_ptr<Connection> conn = pool ? pool->Take(&reused) : std::make_unique<Connection>(t);
  httplib::Headers headers;
  if (!t.api_key.empty()) headers.emplace("Authorization", "Bearer " + t.api_key);
  if (std::string key = PrefixKey(r.prompt, r.tokens_per_key, t.prefix_key_tokens); !key.empty()) {
    headers.emplace("X-Prefix-Key", std::move(key));
  }
  SseParser sse;
  double last = 0;
  bool done = false;
  const double t0 = NowSeconds();
  rec.start_s = t0 - run_start_s;
  auto on_payload = [&](const std::string& payload) {
    if (payload == "[DONE]") {
      done = true;
      return;
    }
    json j = json::parse(payload, nullptr, false);
    if (j.is_discarded() || !j.is_object()) return;
    if (j.contains("error")) {
      rec.error = j["error"].value("message", "error event");
      return;
    }
    if (j.contains("usage") && j["usage"].is_object()) {
      const json& u = j["usage"];
      if (u.contains("completion_tokens") && u["completion_tokens"].is_number()) rec.output_tokens = u["completion_tokens"];
      if (u.contains("prompt_tokens") && u["prompt_tokens"].is_number()) rec.prompt_tokens = u["prompt_tokens"];
      if (u.contains("prompt_tokens_details") && u["prompt_tokens_details"].is_object() &&
          u["prompt_tokens_details"].contains("cached_tokens") && u["prompt_tokens_details"]["cached_tokens"].is_number()) {
        rec.cached_tokens = u["prompt_tokens_details"]["cached_tokens"].get<size_t>();
      }
    }
    if (j.contains("timings") && j["timings"].is_object() && j["timings"].contains("cached_tokens_by_tier") &&
        j["timings"]["cached_tokens_by_tier"].is_object()) {
      for (const auto& [tier, n] : j["timings"]["cached_tokens_by_tier"].items()) {
        if (n.is_number_unsigned()) rec.cached_by_tier[tier] = n.get<size_t>();
      }
    }
    if (!j.contains("choices") || !j["choices"].is_array() || j["choices"].empty()) return;
    const json& c = j["choices"][0];
    const bool has_text = c.contains("text") && c["text"].is_string() && !c["text"].get<std::string>().empty();
    if (!has_text) return;
    const double now = NowSeconds();
    if (last == 0) rec.ttft_ms = (now - t0) * 1e3;
    else rec.itl_ms.push_back((now - last) * 1e3);
    last = now;
  };
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/completions";
  req.headers = headers;
  req.body = body.dump();
  req.set_header("Content-Type", "application/json");
  std::string error_body;
  req.response_handler = [&](const httplib::Response& res) {
    rec.http_status = res.status;
    return true;
  };
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    if (rec.http_status != 200) {
      error_body.append(data, n);
      return true;
    }
    sse.Feed(data, n, on_payload);
    return true;
  };
  httplib::Response res;
  httplib::Error err = httplib::Error::Success;
  bool sent = conn->cli.send(req, res, err);
  if (!sent && reused && rec.http_status == 0) {  // closed by the server while idle: once more, new
    conn = std::make_unique<Connection>(t);
    reused = false;
    sent = conn->cli.send(req, res, err);
  }
  rec.e2e_ms = (NowSeconds() - t0) * 1e3;
  if (!sent) {
    rec.error = "connection failed: " + httplib::to_string(err);
  } else if (rec.http_status != 200) {
    json e = json::parse(error_body, nullptr, false);
    rec.error = fmt::format("HTTP {}: {}", rec.http_status,
                            !e.is_discarded() && e.contains("error") && e["error"].is_object() ? e["error"].value("message", "")
                                                                                                 : error_body.substr(0, 200));
  } else if (!done && rec.error.empty()) {
    rec.error = "stream ended without [DONE]";
  }
  // Servers that do not send usage: count the token chunks.
  if (rec.output_tokens == 0 && last != 0) rec.output_tokens = rec.itl_ms.size() + 1;
  rec.ok = rec.error.empty() && last != 0;
  if (rec.ok && rec.output_tokens == 0) rec.ok = false, rec.error = "no tokens";
  // A complete response leaves the connection ready for the next request.
  if (pool && sent && done && rec.http_status == 200 && t.keep_alive) pool->Give(std::move(conn));
  return rec;
}

}  // namespace pc::loadgen
