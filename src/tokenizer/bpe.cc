#include "tokenizer/bpe.h"

#include <queue>

namespace pc {
namespace {

struct Symbol {
  int prev, next;
  std::string text;  // empty once merged away
};

struct Pair {
  int32_t rank;
  int left, right;
  std::string merged;  // to detect stale pairs
  // Lowest rank first; among equal ranks the leftmost pair.
  bool operator<(const Pair& o) const { return rank > o.rank || (rank == o.rank && left > o.left); }
};

}  // namespace

void BpeEncodeWord(const Vocab& vocab, const std::string& word, std::vector<int32_t>* out) {
  std::string mapped;
  for (unsigned char b : word) mapped += ByteToUnicode()[b];
  if (vocab.ignore_merges) {
    if (auto whole = vocab.id_of.find(mapped); whole != vocab.id_of.end()) {
      out->push_back(whole->second);
      return;
    }
  }
  std::vector<Symbol> sym;
  for (size_t pos = 0; pos < mapped.size();) {
    const size_t n = std::min(Utf8Len(static_cast<uint8_t>(mapped[pos])), mapped.size() - pos);
    const int i = static_cast<int>(sym.size());
    sym.push_back({i - 1, pos + n < mapped.size() ? i + 1 : -1, mapped.substr(pos, n)});
    pos += n;
  }
  std::priority_queue<Pair> queue;
  auto try_pair = [&](int l, int r) {
    if (l < 0 || r < 0) return;
    const int32_t rank = vocab.MergeRank(sym[l].text, sym[r].text);
    if (rank >= 0) queue.push({rank, l, r, sym[l].text + sym[r].text});
  };
  for (size_t i = 1; i < sym.size(); ++i) try_pair(static_cast<int>(i) - 1, static_cast<int>(i));
  while (!queue.empty()) {
    const Pair p = queue.top();
    queue.pop();
    Symbol& l = sym[p.left];
    Symbol& r = sym[p.right];
    if (l.text.empty() || r.text.empty() || l.next != p.right || l.text + r.text != p.merged) continue;
    l.text += r.text;
    r.text.clear();
    l.next = r.next;
    if (r.next >= 0) sym[r.next].prev = p.left;
    try_pair(l.prev, p.left);
    try_pair(p.left, l.next);
  }
  for (int i = sym.empty() ? -1 : 0; i >= 0; i = sym[i].next) {
    auto it = vocab.id_of.find(sym[i].text);
    if (it != vocab.id_of.end()) {
      out->push_back(it->second);
      continue;
    }
    // Unmerged symbol missing from the vocabulary: emit its characters.
    for (size_t pos = 0; pos < sym[i].text.size();) {
      const size_t n = std::min(Utf8Len(static_cast<uint8_t>(sym[i].text[pos])), sym[i].text.size() - pos);
      auto c = vocab.id_of.find(sym[i].text.substr(pos, n));
      if (c != vocab.id_of.end()) out->push_back(c->second);
      else if (vocab.unk >= 0) out->push_back(vocab.unk);
      pos += n;
    }
  }
}

}  // namespace pc
