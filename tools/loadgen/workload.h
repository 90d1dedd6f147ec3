// Workloads for the load generator: named shapes and trace replay, all as
// token-id prompts (OpenAI /v1/completions accepts them; so do llama.cpp's
// server and vLLM), which gives exact control over sharing: a shared
// document or block is the same token ids in every request that uses it.
// Thread-safety: pure functions.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace pc::loadgen {

struct TokenRange {
  int32_t lo = 1000, hi = 9000;  // ids drawn from [lo, hi): ordinary tokens in any llama-family vocabulary
};

struct BenchRequest {
  std::vector<int32_t> prompt;
  int max_tokens = 16;
  double arrival_s = 0;  // offset from the start (trace and Poisson arrivals)
  bool cache = true;     // A/B arm: false sends the request with the cache bypassed
  int session = -1;      // multiturn: the conversation; -1 for none
  // Trace replay: the request's prefix block keys and tokens per key.
  std::vector<uint64_t> block_keys;
  size_t tokens_per_key = 0;
};

// n token ids determined by key (equal keys: equal tokens; different keys:
// different tokens with overwhelming probability).
std::vector<int32_t> KeyTokens(uint64_t key, size_t n, TokenRange r);

struct ShapeParams {
  std::string name;          // rag, quote, chat, multiturn, sysprompt
  size_t num_requests = 16;
  size_t num_docs = 4;       // rag: shared documents
  size_t doc_tokens = 4000;  // rag: document length
  size_t system_tokens = 1000;  // sysprompt: shared system prompt
  size_t prompt_tokens = 200;   // chat prompt; rag/sysprompt question; multiturn user turn
  size_t output_tokens = 32;    // answer length (max_tokens with ignore_eos)
  size_t turns = 4;             // multiturn: turns per conversation
  uint64_t seed = 1;
  TokenRange range;
};

// Defaults per shape (rag: 4000-token documents, 32-token answers; quote:
// rag whose question ends with the first kQuoteOpeningTokens tokens of a
// passage of its document, so an answer that quotes continues the passage
// (2000-token documents, 128-token answers: a copy-heavy decode); chat:
// 200-token prompts, 400-token answers; sysprompt: a 1000-token system
// prompt, 50-token questions, 64-token answers; multiturn: 4 turns of
// 100-token messages, 64-token answers).
Result<ShapeParams> DefaultShape(const std::string& name);
constexpr size_t kQuoteOpeningTokens = 16;
Result<std::vector<BenchRequest>> MakeShape(const ShapeParams& p);

struct TraceParams {
  std::string path;
  double token_scale = 1.0 / 32;  // input tokens and block size are multiplied by this
  double time_scale = 1.0;        // arrival offsets are multiplied by this
  double output_scale = 1.0;
  size_t max_output_tokens = 64;
  size_t max_requests = 300;
  size_t sample_every = 1;  // keep every k-th line (spreads a short replay over the whole trace)
  size_t skip_lines = 0;    // start after this many lines (arrival times rebased to the first kept)
  TokenRange range;
};
// Reads JSON Lines {t_ms, input_tokens, output_tokens, prefix_blocks, block_size}.
Result<std::vector<BenchRequest>> LoadTrace(const TraceParams& p);

// The cached-token fraction an ideal prefix cache of capacity_tokens would
// reach on these requests in arrival order: longest prefix of resident keys,
// LRU eviction by key. Requests without keys count as misses.
double IdealCachedFraction(const std::vector<BenchRequest>& reqs, size_t capacity_tokens);

// Two copies of each request, cache on and off, in ABBA order: on, off, off, on, ...
std::vector<BenchRequest> Interleave(const std::vector<BenchRequest>& reqs);

}  // namespace pc::loadgen
