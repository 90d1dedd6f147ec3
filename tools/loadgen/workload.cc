#include "workload.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <list>
#include <unordered_map>

namespace pc::loadgen {

namespace {
uint64_t Mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
// Key spaces, so a document never collides with a question.
constexpr uint64_t kDoc = 1ull << 60, kQuestion = 2ull << 60, kSystem = 3ull << 60, kTurn = 4ull << 60,
                   kTraceBlock = 5ull << 60, kTraceTail = 6ull << 60;

std::vector<int32_t> Cat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}
}  // namespace

std::vector<int32_t> KeyTokens(uint64_t key, size_t n, TokenRange r) {
  std::vector<int32_t> out(n);
  const uint64_t span = static_cast<uint64_t>(std::max(1, r.hi - r.lo));
  uint64_t s = Mix(key ^ 0x5851f42d4c957f2dull);
  for (int32_t& t : out) {
    s = Mix(s + 0x9e3779b97f4a7c15ull);
    t = r.lo + static_cast<int32_t>(s % span);
  }
  return out;
}

Result<ShapeParams> DefaultShape(const std::string& name) {
  ShapeParams p;
  p.name = name;
  if (name == "rag") {
    p.doc_tokens = 4000, p.prompt_tokens = 32, p.output_tokens = 32, p.num_docs = 4, p.num_requests = 16;
  } else if (name == "quote") {
    p.doc_tokens = 2000, p.prompt_tokens = 32, p.output_tokens = 128, p.num_docs = 2, p.num_requests = 8;
  } else if (name == "chat") {
    p.prompt_tokens = 200, p.output_tokens = 400, p.num_requests = 8;
  } else if (name == "sysprompt") {
    p.system_tokens = 1000, p.prompt_tokens = 50, p.output_tokens = 64, p.num_requests = 16;
  } else if (name == "multiturn") {
    p.prompt_tokens = 100, p.output_tokens = 64, p.turns = 4, p.num_requests = 16;
  } else {
    return Errorf("unknown workload '{}' (rag, quote, chat, multiturn, sysprompt)", name);
  }
  return p;
}

Result<std::vector<BenchRequest>> MakeShape(const ShapeParams& p) {
  std::vector<BenchRequest> out;
  const uint64_t salt = Mix(p.seed) & 0xffffffffffull;  // seeds separate runs
  auto req = [&](std::vector<int32_t> prompt) {
    BenchRequest r;
    r.prompt = std::move(prompt);
    r.max_tokens = static_cast<int>(p.output_tokens);
    return r;
  };
  if (p.name == "rag") {
    for (size_t i = 0; i < p.num_requests; ++i) {
      const size_t doc = i % std::max<size_t>(p.num_docs, 1);
      out.push_back(req(Cat(KeyTokens(kDoc + salt * 4096 + doc, p.doc_tokens, p.range),
                            KeyTokens(kQuestion + salt * 65536 + i, p.prompt_tokens, p.range))));
    }
  } else if (p.name == "quote") {
    // The passage starts where the rest of the document can hold the answer.
    const size_t span = p.doc_tokens > kQuoteOpeningTokens + p.output_tokens ? p.doc_tokens - kQuoteOpeningTokens - p.output_tokens : 1;
    for (size_t i = 0; i < p.num_requests; ++i) {
      const size_t doc = i % std::max<size_t>(p.num_docs, 1);
      const std::vector<int32_t> d = KeyTokens(kDoc + salt * 4096 + doc, p.doc_tokens, p.range);
      const size_t at = std::min<size_t>(Mix(salt * 65536 + i) % span, d.size());
      const size_t end = std::min(d.size(), at + kQuoteOpeningTokens);
      std::vector<int32_t> prompt = Cat(d, KeyTokens(kQuestion + salt * 65536 + i, p.prompt_tokens, p.range));
      prompt.insert(prompt.end(), d.begin() + static_cast<std::ptrdiff_t>(at), d.begin() + static_cast<std::ptrdiff_t>(end));
      out.push_back(req(std::move(prompt)));
    }
  } else if (p.name == "chat") {
    for (size_t i = 0; i < p.num_requests; ++i) out.push_back(req(KeyTokens(kQuestion + salt * 65536 + i, p.prompt_tokens, p.range)));
  } else if (p.name == "sysprompt") {
    const std::vector<int32_t> sys = KeyTokens(kSystem + salt, p.system_tokens, p.range);
    for (size_t i = 0; i < p.num_requests; ++i) out.push_back(req(Cat(sys, KeyTokens(kQuestion + salt * 65536 + i, p.prompt_tokens, p.range))));
  } else if (p.name == "multiturn") {
    // Conversations grow by a user message and a stand-in for the previous
    // answer each turn; turn-major order so each turn follows its previous one.
    const size_t turns = std::max<size_t>(p.turns, 1);
    const size_t convs = std::max<size_t>(1, p.num_requests / turns);
    std::vector<std::vector<int32_t>> history(convs);
    for (size_t t = 0; t < turns; ++t) {
      for (size_t c = 0; c < convs; ++c) {
        if (t > 0) history[c] = Cat(history[c], KeyTokens(kTurn + salt * 65536 + c * 64 + t * 2, p.output_tokens, p.range));
        history[c] = Cat(history[c], KeyTokens(kTurn + salt * 65536 + c * 64 + t * 2 + 1, p.prompt_tokens, p.range));
        BenchRequest r = req(history[c]);
        r.session = static_cast<int>(c);
        out.push_back(std::move(r));
      }
    }
  } else {
    return Errorf("unknown workload '{}'", p.name);
  }
  return out;
}

Result<std::vector<BenchRequest>> LoadTrace(const TraceParams& p) {
  std::ifstream in(p.path);
  if (!in) return Errorf("cannot read trace '{}'", p.path);
  std::vector<BenchRequest> out;
  std::string line;
  size_t lineno = 0;
  double first_t_ms = 0;
  while (out.size() < p.max_requests && std::getline(in, line)) {
    ++lineno;
    if (line.empty() || lineno <= p.skip_lines || (lineno - 1 - p.skip_lines) % std::max<size_t>(p.sample_every, 1) != 0) continue;
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("t_ms") || !j.contains("input_tokens") ||
        !j.contains("output_tokens") || !j["input_tokens"].is_number() || !j["t_ms"].is_number() ||
        !j["output_tokens"].is_number()) {
      return Errorf("{}:{}: expected {{t_ms, input_tokens, output_tokens, ...}}", p.path, lineno);
    }
    BenchRequest r;
    if (out.empty()) first_t_ms = j["t_ms"].get<double>();
    r.arrival_s = (j["t_ms"].get<double>() - first_t_ms) / 1e3 * p.time_scale;
    const size_t input = std::max<size_t>(1, static_cast<size_t>(std::llround(j["input_tokens"].get<double>() * p.token_scale)));
    const size_t block = j.contains("block_size") && j["block_size"].is_number() ? j["block_size"].get<size_t>() : 0;
    r.tokens_per_key = std::max<size_t>(1, static_cast<size_t>(std::llround(static_cast<double>(block) * p.token_scale)));
    if (j.contains("prefix_blocks") && j["prefix_blocks"].is_array()) {
      for (const auto& b : j["prefix_blocks"]) {
        if (!b.is_number_integer()) return Errorf("{}:{}: prefix_blocks must hold integers", p.path, lineno);
        r.block_keys.push_back(b.get<uint64_t>());
      }
    }
    // Equal keys become equal token blocks; whatever the blocks do not cover
    // is unique to the request.
    for (uint64_t k : r.block_keys) {
      if (r.prompt.size() >= input) break;
      const std::vector<int32_t> t = KeyTokens(kTraceBlock + k, r.tokens_per_key, p.range);
      r.prompt.insert(r.prompt.end(), t.begin(), t.end());
    }
    if (r.prompt.size() > input) r.prompt.resize(input);
    if (r.prompt.size() < input) {
      const std::vector<int32_t> tail = KeyTokens(kTraceTail + lineno, input - r.prompt.size(), p.range);
      r.prompt.insert(r.prompt.end(), tail.begin(), tail.end());
    }
    const double outn = std::round(j["output_tokens"].get<double>() * p.output_scale);
    r.max_tokens = static_cast<int>(std::clamp<double>(outn, 1, static_cast<double>(p.max_output_tokens)));
    out.push_back(std::move(r));
  }
  if (out.empty()) return Errorf("trace '{}' has no requests", p.path);
  return out;
}

double IdealCachedFraction(const std::vector<BenchRequest>& reqs, size_t capacity_tokens) {
  // LRU of keys; a key is resident with all its tokens_per_key tokens.
  std::list<uint64_t> lru;  // front: most recent
  std::unordered_map<uint64_t, std::list<uint64_t>::iterator> where;
  size_t used_tokens = 0, prompt_tokens = 0, cached_tokens = 0;
  for (const BenchRequest& r : reqs) {
    prompt_tokens += r.prompt.size();
    const size_t tpk = std::max<size_t>(r.tokens_per_key, 1);
    const size_t full_keys = std::min(r.block_keys.size(), r.prompt.size() / tpk);
    size_t k = 0;
    while (k < full_keys && where.count(r.block_keys[k])) ++k;
    // The last prompt token is always computed (its logits start the answer).
    cached_tokens += std::min(k * tpk, r.prompt.size() - 1);
    for (size_t i = 0; i < full_keys; ++i) {
      const uint64_t key = r.block_keys[i];
      if (auto it = where.find(key); it != where.end()) {
        lru.splice(lru.begin(), lru, it->second);
        continue;
      }
      lru.push_front(key);
      where[key] = lru.begin();
      used_tokens += tpk;
      while (used_tokens > capacity_tokens && !lru.empty()) {
        where.erase(lru.back());
        lru.pop_back();
        used_tokens -= tpk;
      }
    }
  }
  return prompt_tokens ? static_cast<double>(cached_tokens) / static_cast<double>(prompt_tokens) : 0;
}

std::vector<BenchRequest> Interleave(const std::vector<BenchRequest>& reqs) {
  // ABBA order (on, off, off, on, ...): a drift over the run, or whatever
  // the previous request leaves behind, falls on both arms alike.
  std::vector<BenchRequest> out;
  for (size_t i = 0; i < reqs.size(); ++i) {
    const bool on_first = i % 2 == 0;
    out.push_back(reqs[i]);
    out.back().cache = on_first;
    out.push_back(reqs[i]);
    out.back().cache = !on_first;
  }
  return out;
}

}  // namespace pc::loadgen
