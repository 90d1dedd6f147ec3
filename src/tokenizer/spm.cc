#include "tokenizer/spm.h"

#include <queue>

namespace pc {
namespace {

struct Symbol {
  int prev, next;
  size_t start, len;  // byte range in the text; len 0 once merged away
};

struct Candidate {
  float score;
  int left, right;
  size_t len;  // merged byte length, to detect stale candidates
  // Highest score first; among equal scores the leftmost pair.
  bool operator<(const Candidate& o) const {
    return score < o.score || (score == o.score && left > o.left);
  }
};

}  // namespace

void SpmEncode(const Vocab& vocab, const std::string& text, std::vector<int32_t>* out) {
  std::vector<Symbol> sym;
  for (size_t pos = 0; pos < text.size();) {
    const size_t n = std::min(Utf8Len(static_cast<uint8_t>(text[pos])), text.size() - pos);
    const int i = static_cast<int>(sym.size());
    sym.push_back({i - 1, pos + n < text.size() ? i + 1 : -1, pos, n});
    pos += n;
  }
  std::priority_queue<Candidate> queue;
  auto try_pair = [&](int l, int r) {
    if (l < 0 || r < 0) return;
    const size_t len = sym[l].len + sym[r].len;
    auto it = vocab.id_of.find(text.substr(sym[l].start, len));
    if (it == vocab.id_of.end()) return;
    queue.push({vocab.score[it->second], l, r, len});
  };
  for (size_t i = 1; i < sym.size(); ++i) try_pair(static_cast<int>(i) - 1, static_cast<int>(i));
  while (!queue.empty()) {
    const Candidate c = queue.top();
    queue.pop();
    Symbol& l = sym[c.left];
    Symbol& r = sym[c.right];
    if (l.len == 0 || r.len == 0 || l.len + r.len != c.len || l.next != c.right) continue;
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) sym[r.next].prev = c.left;
    try_pair(l.prev, c.left);
    try_pair(c.left, l.next);
  }
  for (int i = sym.empty() ? -1 : 0; i >= 0; i = sym[i].next) {
    const std::string piece = text.substr(sym[i].start, sym[i].len);
    auto it = vocab.id_of.find(piece);
    if (it != vocab.id_of.end()) {
      out->push_back(it->second);
      continue;
    }
    for (unsigned char b : piece) {
      const int32_t id = vocab.byte_token[b];
      out->push_back(id >= 0 ? id : vocab.unk);
    }
  }
}

}  // namespace pc
