#include "runner.h"

#include <atomic>
#include <cmath>
#include <cstdio>
#include <mutex>

#include "base/mutex.h"
#include <random>
#include <thread>

namespace pc::loadgen {

namespace {

class Progress {
 public:
  Progress(size_t total, bool on) : total_(total), on_(on) {}
  void Done(bool ok) {
    ++done_;
    if (!ok) ++errors_;
    Draw();
  }
  void Started() {
    ++started_;
    Draw();
  }
  void Finish() {
    if (on_) std::fprintf(stderr, "\n");
  }

 private:
  void Draw() {
    if (!on_) return;
    MutexLock lock(mu_);
    // At most ~5 redraws a second, and always the last one.
    const double now = NowSeconds();
    if (now - last_draw_s_ < 0.2 && done_ != total_) return;
    last_draw_s_ = now;
    const size_t d = done_, s = started_;
    const int width = 30;
    const int fill = total_ ? static_cast<int>(width * d / total_) : 0;
    std::fprintf(stderr, "\r[%-*s] %zu/%zu done, %zu in flight, %zu errors", width, std::string(static_cast<size_t>(fill), '#').c_str(), d,
                 total_, s - d, errors_.load());
    std::fflush(stderr);
  }
  size_t total_;
  bool on_;
  std::atomic<size_t> done_{0}, started_{0}, errors_{0};
  Mutex mu_;
  double last_draw_s_ PC_GUARDED_BY(mu_) = 0;
};

}  // namespace

std::vector<RequestRecord> Run(const Target& t, const std::vector<BenchRequest>& reqs, const RunOptions& opt) {
  const size_t n = opt.max_requests ? std::min(opt.max_requests, reqs.size()) : reqs.size();
  std::vector<RequestRecord> records(n);
  std::vector<char> ran(n, 0);  // char, not bool: written from several threads
  Progress progress(n, opt.progress);
  const double start = NowSeconds();
  auto expired = [&] { return opt.max_seconds > 0 && NowSeconds() - start > opt.max_seconds; };
  ConnectionPool pool(t);  // one per run: each run's connections start fresh
  auto run_one = [&](size_t i) {
    progress.Started();
    records[i] = RunRequest(t, reqs[i], start, t.keep_alive ? &pool : nullptr);
    records[i].index = i;
    ran[i] = 1;
    progress.Done(records[i].ok);
  };
  if (opt.arrival == Arrival::kClosed) {
    std::atomic<size_t> next{0};
    std::vector<std::thread> workers;
    for (size_t w = 0; w < std::max<size_t>(opt.concurrency, 1); ++w) {
      workers.emplace_back([&] {
        for (size_t i; (i = next++) < n && !expired();) run_one(i);
      });
    }
    for (auto& th : workers) th.join();
  } else {
    // Open loop: each request starts at its arrival time on its own thread.
    std::mt19937_64 rng(opt.seed);
    std::exponential_distribution<double> gap(std::max(opt.rate_per_s, 1e-9));
    std::vector<std::thread> threads;
    std::atomic<size_t> in_flight{0};
    double at = 0;
    for (size_t i = 0; i < n && !expired(); ++i) {
      at = opt.arrival == Arrival::kPoisson ? at + gap(rng) : reqs[i].arrival_s / std::max(opt.speed, 1e-9);
      const double wait = start + at - NowSeconds();
      if (wait > 0) std::this_thread::sleep_for(std::chrono::duration<double>(wait));
      while (in_flight >= opt.max_in_flight) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      ++in_flight;
      threads.emplace_back([&, i] {
        run_one(i);
        --in_flight;
      });
    }
    for (auto& th : threads) th.join();
  }
  progress.Finish();
  std::vector<RequestRecord> out;
  for (size_t i = 0; i < n; ++i) {
    if (ran[i]) out.push_back(std::move(records[i]));
  }
  return out;
}

void Warmup(const Target& t, size_t num_requests, size_t prompt_tokens, TokenRange range) {
  std::random_device rd;
  for (size_t i = 0; i < num_requests; ++i) {
    BenchRequest r;
    r.prompt = KeyTokens((static_cast<uint64_t>(rd()) << 32) | rd(), prompt_tokens, range);
    r.max_tokens = 8;
    r.cache = false;
    RunRequest(t, r, NowSeconds());
  }
}

}  // namespace pc::loadgen
