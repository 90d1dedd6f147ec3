#include "structured/sequence.h"

#include <algorithm>
#include <cstdio>

namespace pc::structured {

void SeqGrammar::Literal(int32_t from, int32_t to, std::string text) {
  SeqEdge e;
  e.from = from;
  e.to = to;
  e.literal = std::move(text);
  edges.push_back(std::move(e));
}

void SeqGrammar::Until(int32_t from, int32_t to, std::string text) {
  Literal(from, to, std::move(text));
  edges.back().until = !edges.back().literal.empty();
}

void SeqGrammar::Json(int32_t from, int32_t to, std::shared_ptr<const CompiledSchema> schema, int32_t node) {
  SeqEdge e;
  e.from = from;
  e.to = to;
  e.schema = schema.get();
  e.node = node;
  edges.push_back(std::move(e));
  schemas.push_back(std::move(schema));
}

void SeqGrammar::RawString(int32_t from, int32_t to, std::shared_ptr<const CompiledSchema> schema, std::string stop) {
  Json(from, to, schema, schema->root);
  edges.back().raw_string = true;
  edges.back().literal = std::move(stop);
}

namespace {
// The longest prefix of lit that text ending in (lit[0, pos) + byte) ends with.
uint32_t AdvanceMarker(const std::string& lit, uint32_t pos, uint8_t byte) {
  for (uint32_t p = pos + 1; p > 0; --p) {
    const size_t k = p - 1;  // bytes kept before this one
    if (uint8_t(lit[k]) == byte && lit.compare(0, k, lit, pos - k, k) == 0) return p;
  }
  return 0;
}
}  // namespace

bool RawStringMatcher::Advance(uint8_t byte, RawStringMatcher* out) const {
  char esc[8];
  int n = 0;
  if (byte == '"' || byte == '\\') {
    esc[n++] = '\\';
    esc[n++] = char(byte);
  } else if (byte == '\n' || byte == '\t' || byte == '\r') {
    esc[n++] = '\\';
    esc[n++] = byte == '\n' ? 'n' : byte == '\t' ? 't' : 'r';
  } else if (byte < 0x20) {
    n = std::snprintf(esc, sizeof(esc), "\\u%04x", unsigned(byte));
  } else {
    esc[n++] = char(byte);
  }
  uint32_t stop_pos = 0;
  if (stop_ && !stop_->empty()) {
    stop_pos = AdvanceMarker(*stop_, stop_pos_, byte);
    if (stop_pos == stop_->size()) return false;  // the stop ends the string, never sits in it
  }
  JsonMatcher cur = m_;
  for (int i = 0; i < n; ++i) {
    JsonMatcher next;
    if (!cur.Advance(uint8_t(esc[i]), &next)) return false;
    cur = std::move(next);
  }
  out->m_ = std::move(cur);
  out->stop_ = stop_;
  out->stop_pos_ = stop_pos;
  return true;
}

bool RawStringMatcher::CanEnd() const {
  JsonMatcher closed;
  return m_.Advance('"', &closed) && closed.CanEnd();
}

void SeqGrammar::Gbnf(int32_t from, int32_t to, std::shared_ptr<const GbnfGrammar> grammar) {
  SeqEdge e;
  e.from = from;
  e.to = to;
  e.gbnf = grammar.get();
  edges.push_back(std::move(e));
  gbnfs.push_back(std::move(grammar));
}

void SeqGrammar::Json(int32_t from, int32_t to, std::shared_ptr<const CompiledSchema> schema) {
  const int32_t root = schema->root;
  Json(from, to, std::move(schema), root);
}

std::shared_ptr<const SeqGrammar> SeqGrammar::ForSchema(std::shared_ptr<const CompiledSchema> schema, int max_ws) {
  auto g = std::make_shared<SeqGrammar>();
  g->max_whitespace = max_ws;
  g->Json(kStart, kAccept, std::move(schema));
  return g;
}

SeqMatcher::SeqMatcher(const SeqGrammar* g) : g_(g) { Enter(SeqGrammar::kStart, this); }

// Empty literals are epsilon edges; the depth bound keeps a cycle of them
// (which no builder makes) from recursing forever.
void SeqMatcher::Enter(int32_t state, SeqMatcher* out) const {
  struct Walker {
    const SeqGrammar* g;
    SeqMatcher* out;
    void Go(int32_t s, int depth) {
      if (s == SeqGrammar::kAccept) out->at_accept_ = true;
      if (depth > 16) return;
      for (size_t i = 0; i < g->edges.size(); ++i) {
        const SeqEdge& e = g->edges[i];
        if (e.from != s) continue;
        if (e.literal_edge() && e.literal.empty()) {
          Go(e.to, depth + 1);
          continue;
        }
        if (out->threads_.size() >= size_t(kMaxThreads)) return;
        Thread t;
        t.edge = int32_t(i);
        if (e.schema && e.raw_string) {
          JsonMatcher open(e.schema, g->max_whitespace, e.node), quoted;
          if (!open.Advance('"', &quoted)) continue;  // the schema takes no string
          t.raw = std::make_shared<const RawStringMatcher>(std::move(quoted), &e.literal);
        } else if (e.schema) {
          t.json = std::make_shared<const JsonMatcher>(e.schema, g->max_whitespace, e.node);
        }
        if (e.gbnf) t.gbnf = std::make_shared<const GbnfMatcher>(e.gbnf);
        out->threads_.push_back(std::move(t));
      }
    }
  };
  Walker{g_, out}.Go(state, 0);
}

void SeqMatcher::Step(const Thread& t, uint8_t byte, SeqMatcher* out) const {
  const SeqEdge& e = g_->edges[size_t(t.edge)];
  if (e.gbnf) return StepInside(t, *t.gbnf, &Thread::gbnf, byte, out);
  if (t.raw) return StepInside(t, *t.raw, &Thread::raw, byte, out);
  if (!e.schema) {
    uint32_t pos = t.pos + 1;
    if (e.until) {
      // The longest prefix of the marker that the text so far ends with.
      pos = AdvanceMarker(e.literal, t.pos, byte);
    } else if (uint8_t(e.literal[t.pos]) != byte) {
      return;
    }
    if (pos == e.literal.size()) {
      Enter(e.to, out);
      return;
    }
    for (const Thread& o : out->threads_)
      if (o.edge == t.edge && o.pos == pos && !o.json && !o.gbnf && !o.raw) return;  // already there
    if (out->threads_.size() >= size_t(kMaxThreads)) return;
    Thread n;
    n.edge = t.edge;
    n.pos = pos;
    out->threads_.push_back(std::move(n));
    return;
  }
  StepInside(t, *t.json, &Thread::json, byte, out);
}

// A thread inside a value (JSON or GBNF): the byte continues the value, and
// where the value may end, it may also begin what follows it.
template <typename M>
void SeqMatcher::StepInside(const Thread& t, const M& m, std::shared_ptr<const M> Thread::*slot, uint8_t byte,
                            SeqMatcher* out) const {
  if (m.CanEnd()) {
    SeqMatcher next;
    next.g_ = g_;
    Enter(g_->edges[size_t(t.edge)].to, &next);
    for (const Thread& n : next.threads_) Step(n, byte, out);
  }
  if (out->threads_.size() >= size_t(kMaxThreads)) return;
  auto adv = std::make_shared<M>();
  if (!m.Advance(byte, adv.get())) return;
  Thread n;
  n.edge = t.edge;
  n.*slot = std::move(adv);
  out->threads_.push_back(std::move(n));
}

bool SeqMatcher::Advance(uint8_t byte, SeqMatcher* out) const {
  out->g_ = g_;
  out->threads_.clear();
  out->at_accept_ = false;
  for (const Thread& t : threads_) Step(t, byte, out);
  return !out->dead();
}

bool SeqMatcher::Consume(std::string_view bytes) {
  SeqMatcher next;
  for (char c : bytes) {
    if (!Advance(uint8_t(c), &next)) {
      *this = std::move(next);
      return false;
    }
    std::swap(*this, next);
  }
  return true;
}

bool SeqMatcher::CanEnd() const {
  if (at_accept_) return true;
  for (const Thread& t : threads_) {
    if (!(t.json ? t.json->CanEnd() : t.gbnf ? t.gbnf->CanEnd() : t.raw && t.raw->CanEnd())) continue;
    SeqMatcher after;
    after.g_ = g_;
    Enter(g_->edges[size_t(t.edge)].to, &after);
    if (after.at_accept_) return true;
  }
  return false;
}

bool SeqMatcher::Complete() const {
  if (!CanEnd()) return false;
  for (const Thread& t : threads_) {
    if (!(t.json ? t.json->Complete() : t.gbnf ? t.gbnf->Complete() : t.raw && t.raw->Complete())) return false;
    SeqMatcher after;
    after.g_ = g_;
    Enter(g_->edges[size_t(t.edge)].to, &after);
    if (!after.threads_.empty()) return false;
  }
  return true;
}

const JsonMatcher* SeqMatcher::SoleJson() const {
  if (at_accept_ || threads_.size() != 1 || !threads_[0].json || threads_[0].json->CanEnd()) return nullptr;
  return threads_[0].json.get();
}

std::vector<SeqMatcher::LitPos> SeqMatcher::Literals() const {
  std::vector<LitPos> out;
  for (const Thread& t : threads_)
    if (g_->edges[size_t(t.edge)].literal_edge() && !g_->edges[size_t(t.edge)].until) out.push_back({t.edge, t.pos});
  return out;
}

SeqMaskComputer::SeqMaskComputer(const TokenIndex* index, std::vector<std::pair<int32_t, std::string>> control)
    : index_(index), control_(std::move(control)), control_of_(size_t(index->n_tokens()), -1), json_(index),
      stack_(index->all().max_depth + 1) {
  for (size_t i = 0; i < control_.size(); ++i) {
    const int32_t id = control_[i].first;
    if (id >= 0 && id < index->n_tokens() && !control_[i].second.empty()) control_of_[size_t(id)] = int32_t(i);
  }
}

std::string_view SeqMaskComputer::Bytes(int32_t id) const {
  if (id < 0 || id >= index_->n_tokens()) return {};
  if (control_of_[size_t(id)] >= 0) return control_[size_t(control_of_[size_t(id)])].second;
  return index_->bytes(id);
}

void SeqMaskComputer::Compute(const SeqMatcher& m, TokenMask* mask) {
  // Inside one JSON value that cannot end yet: the JSON mask (a token that
  // would close the value and run on into the next literal is left out;
  // the value's last bytes then come as their own tokens).
  if (const JsonMatcher* j = m.SoleJson()) {
    json_.Compute(*j, mask);
    return;
  }
  mask->assign(index_->words(), 0);
  const TokenIndex::Trie& trie = index_->all();
  for (size_t i = 0; i < trie.nodes.size();) {
    const TokenIndex::TrieNode& node = trie.nodes[i];
    const SeqMatcher& parent = node.depth == 1 ? m : stack_[node.depth - 1];
    if (!parent.Advance(node.byte, &stack_[node.depth])) {
      i = node.subtree_end;
      continue;
    }
    for (uint32_t k = node.tok_begin; k < node.tok_end; ++k) {
      const int32_t id = trie.ids[k];
      (*mask)[size_t(id) >> 6] |= uint64_t(1) << (id & 63);
    }
    ++i;
  }
  // Control tokens: where a literal spells their whole text.
  for (const SeqMatcher::LitPos& lp : m.Literals()) {
    const std::string& lit = m.grammar()->edges[size_t(lp.edge)].literal;
    for (const auto& [id, text] : control_) {
      if (text.empty() || id < 0 || id >= index_->n_tokens()) continue;
      if (lit.compare(lp.pos, text.size(), text) == 0 && lp.pos + text.size() <= lit.size())
        (*mask)[size_t(id) >> 6] |= uint64_t(1) << (id & 63);
    }
  }
}

}  // namespace pc::structured
