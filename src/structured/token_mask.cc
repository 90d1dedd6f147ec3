#include "structured/token_mask.h"

#include <algorithm>
#include <numeric>

namespace pc::structured {
namespace {

// Whether the bytes are string content the matcher accepts from UTF-8
// state `st` (mirrors LexString for unescaped text).
bool PlainFrom(const std::string& s, uint8_t st) {
  for (char ch : s) {
    uint8_t b = uint8_t(ch);
    if (b == '"' || b == '\\' || b < 0x20 || !Utf8Step(&st, b)) return false;
  }
  return true;
}

bool Special(const std::string& s) {
  return std::any_of(s.begin(), s.end(), [](char c) { return c == '"' || c == '\\' || uint8_t(c) < 0x20; });
}

}  // namespace

TokenIndex::Trie TokenIndex::Build(const std::vector<std::string>& bytes, const std::vector<int32_t>& ids_in) {
  Trie t;
  std::vector<int32_t> ids = ids_in;
  std::sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) { return bytes[size_t(a)] < bytes[size_t(b)]; });
  t.ids = ids;
  std::vector<uint32_t> path;  // node index per depth-1
  const std::string* prev = nullptr;
  for (size_t k = 0; k < ids.size(); ++k) {
    const std::string& s = bytes[size_t(ids[k])];
    size_t common = 0;
    if (prev) {
      while (common < s.size() && common < prev->size() && s[common] == (*prev)[common]) ++common;
    }
    while (path.size() > common) {
      t.nodes[path.back()].subtree_end = uint32_t(t.nodes.size());
      path.pop_back();
    }
    for (size_t d = common; d < s.size(); ++d) {
      TrieNode n;
      n.byte = uint8_t(s[d]);
      n.depth = uint16_t(d + 1);
      path.push_back(uint32_t(t.nodes.size()));
      t.nodes.push_back(n);
    }
    // Sorted order: a token equal to the previous one shares its node;
    // otherwise its last node is new.
    TrieNode& end = t.nodes[path.back()];
    if (common == s.size()) {
      end.tok_end = uint32_t(k + 1);
    } else {
      end.tok_begin = uint32_t(k);
      end.tok_end = uint32_t(k + 1);
    }
    t.max_depth = std::max(t.max_depth, s.size());
    prev = &s;
  }
  while (!path.empty()) {
    t.nodes[path.back()].subtree_end = uint32_t(t.nodes.size());
    path.pop_back();
  }
  return t;
}

TokenIndex::TokenIndex(std::vector<std::string> bytes) : bytes_(std::move(bytes)) {
  std::vector<int32_t> all, special, plain;
  chars_.resize(bytes_.size());
  for (int p = 0; p < kUtf8States; ++p) plain_[p].assign(words(), 0);
  for (size_t i = 0; i < bytes_.size(); ++i) {
    const std::string& s = bytes_[i];
    if (s.empty()) continue;
    all.push_back(int32_t(i));
    if (Special(s)) special.push_back(int32_t(i));
    uint32_t c = uint32_t(std::count_if(s.begin(), s.end(), [](char ch) { return (uint8_t(ch) & 0xC0) != 0x80; }));
    chars_[i] = c;
    bool plain_any = false;
    for (int p = 0; p < kUtf8States; ++p) {
      if (PlainFrom(s, uint8_t(p))) { plain_[p][i >> 6] |= uint64_t(1) << (i & 63); plain_any = true; }
    }
    if (plain_any) {
      max_plain_chars_ = std::max(max_plain_chars_, c);
      plain.push_back(int32_t(i));
    }
  }
  all_ = Build(bytes_, all);
  special_ = Build(bytes_, special);
  plain_trie_ = Build(bytes_, plain);
}

MaskComputer::MaskComputer(const TokenIndex* index)
    : index_(index), stack_(index->all().max_depth + 1), plain_stack_(index->all().max_depth + 1) {}

size_t MaskComputer::PlainKeyHash::operator()(const PlainKey& k) const {
  uint64_t h = k.uid * 0x9E3779B97F4A7C15ull;
  for (int64_t v : {int64_t(k.node), int64_t(k.key), int64_t(k.obj_required), int64_t(k.obj_seen), int64_t(k.st.s1), int64_t(k.st.s2), int64_t(k.st.s3),
                    int64_t(k.st.s4), int64_t(k.st.s5), int64_t(k.st.utf8)})
    h = (h ^ uint64_t(v)) * 0x100000001B3ull;
  return size_t(h ^ (h >> 29));
}

const TokenMask& MaskComputer::PlainSet(const JsonMatcher& m, const JsonMatcher::StringLex& lex) {
  PlainKey key{m.schema()->uid, lex.node, lex.key, lex.obj_required, lex.obj_seen, lex.state};
  auto it = plain_cache_.find(key);
  if (it != plain_cache_.end()) return it->second;
  if (plain_cache_.size() >= kMaxCached) plain_cache_.clear();
  TokenMask set(index_->words(), 0);
  const TokenIndex::Trie& trie = index_->plain_trie();
  const size_t n = trie.nodes.size();
  for (size_t i = 0; i < n;) {
    const TokenIndex::TrieNode& node = trie.nodes[i];
    JsonMatcher::PlainState& st = plain_stack_[node.depth];
    st = node.depth == 1 ? lex.state : plain_stack_[node.depth - 1];
    if (!m.StepPlain(lex, &st, node.byte)) {
      i = node.subtree_end;
      continue;
    }
    for (uint32_t k = node.tok_begin; k < node.tok_end; ++k) {
      int32_t id = trie.ids[k];
      set[size_t(id) >> 6] |= uint64_t(1) << (id & 63);
    }
    ++i;
  }
  return plain_cache_.emplace(key, std::move(set)).first->second;
}

void MaskComputer::Walk(const TokenIndex::Trie& trie, const JsonMatcher& m, TokenMask* mask) {
  const size_t n = trie.nodes.size();
  for (size_t i = 0; i < n;) {
    const TokenIndex::TrieNode& node = trie.nodes[i];
    const JsonMatcher& parent = node.depth == 1 ? m : stack_[node.depth - 1];
    if (!parent.Advance(node.byte, &stack_[node.depth])) {
      i = node.subtree_end;
      continue;
    }
    for (uint32_t k = node.tok_begin; k < node.tok_end; ++k) {
      int32_t id = trie.ids[k];
      (*mask)[size_t(id) >> 6] |= uint64_t(1) << (id & 63);
    }
    ++i;
  }
}

void MaskComputer::Compute(const JsonMatcher& m, TokenMask* mask) {
  JsonMatcher::StringLex lex[JsonMatcher::kMaxThreads];
  const int n = m.InStrings(lex);
  mask->assign(index_->words(), 0);
  if (n == 0) {
    Walk(index_->all(), m, mask);
    return;
  }
  // Plain tokens from sets (every one where any content goes, else the
  // memoised DFA walk), cut to the code points left; the rest walked.
  for (int t = 0; t < n; ++t) {
    const TokenMask& plain = m.PlainFree(lex[t]) ? index_->plain(lex[t].state.utf8) : PlainSet(m, lex[t]);
    if (lex[t].chars_left >= index_->max_plain_chars()) {
      for (size_t w = 0; w < plain.size(); ++w) (*mask)[w] |= plain[w];
      continue;
    }
    for (size_t w = 0; w < plain.size(); ++w) {
      uint64_t bits = plain[w];
      while (bits) {
        int b = __builtin_ctzll(bits);
        bits &= bits - 1;
        int32_t id = int32_t(w * 64 + size_t(b));
        if (index_->chars(id) <= lex[t].chars_left) (*mask)[w] |= uint64_t(1) << b;
      }
    }
  }
  Walk(index_->special(), m, mask);
}

}  // namespace pc::structured
