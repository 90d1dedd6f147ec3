// The set of vocabulary tokens a JsonMatcher state allows next: a walk of a
// byte trie of the vocabulary (a token is allowed when the matcher accepts
// all its bytes; a refused prefix prunes its subtree). Inside a string where
// any plain content is accepted, the plain tokens come from precomputed sets
// and only the others (quotes, backslashes, control bytes) are walked.
//
// Shapes: a mask is one bit per token id, 64 per word (TokenMask).
// Thread-safety: TokenIndex is immutable; a MaskComputer is one thread's
// scratch (about 16 KiB per byte of the longest token).
#pragma once
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "structured/json_matcher.h"

namespace pc::structured {

using TokenMask = std::vector<uint64_t>;

inline bool MaskHas(const TokenMask& m, int32_t id) { return (m[size_t(id) >> 6] >> (id & 63)) & 1; }

class TokenIndex {
 public:
  // bytes[id]: the token's text; empty for control tokens (never allowed).
  explicit TokenIndex(std::vector<std::string> bytes);
  int32_t n_tokens() const { return int32_t(bytes_.size()); }
  size_t words() const { return (bytes_.size() + 63) / 64; }
  const std::string& bytes(int32_t id) const { return bytes_[size_t(id)]; }

  // A trie in preorder: node i's subtree is [i, subtree_end).
  struct TrieNode {
    uint8_t byte = 0;
    uint16_t depth = 0;  // 1 for a first byte
    uint32_t subtree_end = 0;
    uint32_t tok_begin = 0, tok_end = 0;  // ids in sorted_ending here
  };
  struct Trie {
    std::vector<TrieNode> nodes;
    std::vector<int32_t> ids;
    size_t max_depth = 0;
  };
  const Trie& all() const { return all_; }
  const Trie& special() const { return special_; }
  // Tokens of plain string content (valid from some UTF-8 state).
  const Trie& plain_trie() const { return plain_trie_; }
  // Tokens of plain string content valid from a UTF-8 state (Utf8Step),
  // and code points per token.
  const TokenMask& plain(uint8_t utf8_state) const { return plain_[utf8_state]; }
  uint32_t chars(int32_t id) const { return chars_[size_t(id)]; }
  uint32_t max_plain_chars() const { return max_plain_chars_; }

 private:
  static Trie Build(const std::vector<std::string>& bytes, const std::vector<int32_t>& ids);
  std::vector<std::string> bytes_;
  Trie all_, special_, plain_trie_;
  TokenMask plain_[kUtf8States];
  std::vector<uint32_t> chars_;
  uint32_t max_plain_chars_ = 0;
};

class MaskComputer {
 public:
  explicit MaskComputer(const TokenIndex* index);
  // The tokens m allows next (end of generation is the caller's: m.CanEnd()).
  void Compute(const JsonMatcher& m, TokenMask* mask);

 private:
  void Walk(const TokenIndex::Trie& trie, const JsonMatcher& m, TokenMask* mask);
  // The plain tokens a constrained string accepts (DFA and key-trie steps
  // only), memoised by schema and lexical state.
  const TokenMask& PlainSet(const JsonMatcher& m, const JsonMatcher::StringLex& lex);

  struct PlainKey {
    uint64_t uid;
    int32_t node;
    bool key;
    uint64_t obj_required, obj_seen;
    JsonMatcher::PlainState st;
    bool operator==(const PlainKey&) const = default;
  };
  struct PlainKeyHash {
    size_t operator()(const PlainKey& k) const;
  };
  static constexpr size_t kMaxCached = 1024;  // masks of n_tokens/8 bytes each

  const TokenIndex* index_;
  std::vector<JsonMatcher> stack_;
  std::vector<JsonMatcher::PlainState> plain_stack_;
  std::unordered_map<PlainKey, TokenMask, PlainKeyHash> plain_cache_;
};

}  // namespace pc::structured
