// Pattern text -> syntax tree (code-point classes) -> Thompson NFA over UTF-8
// bytes -> subset-constructed DFA over byte classes, dead states pruned.
#include "structured/regex.h"

#include <algorithm>
#include <map>

namespace pc::structured {
namespace {

constexpr uint32_t kMaxCp = 0x10FFFF;
using Ranges = std::vector<std::pair<uint32_t, uint32_t>>;  // code points, inclusive

Ranges Normalize(Ranges r) {
  std::sort(r.begin(), r.end());
  Ranges out;
  for (auto [lo, hi] : r) {
    if (!out.empty() && lo <= out.back().second + 1) {
      out.back().second = std::max(out.back().second, hi);
    } else {
      out.push_back({lo, hi});
    }
  }
  return out;
}

Ranges Complement(const Ranges& r) {
  Ranges out;
  uint32_t next = 0;
  for (auto [lo, hi] : Normalize(r)) {
    if (lo > next) out.push_back({next, lo - 1});
    next = hi + 1;
  }
  if (next <= kMaxCp) out.push_back({next, kMaxCp});
  return out;
}

Ranges Digits() { return {{'0', '9'}}; }
Ranges Word() { return {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}}; }
Ranges Space() {
  return {{'\t', '\r'}, {' ', ' '}, {0xA0, 0xA0}, {0x1680, 0x1680}, {0x2000, 0x200A}, {0x2028, 0x2029},
          {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000}, {0xFEFF, 0xFEFF}};
}

struct Re {
  enum Kind { kEmpty, kClass, kConcat, kAlt, kRepeat, kBol, kEol } kind = kEmpty;
  Ranges ranges;
  std::vector<Re> kids;
  int min = 0, max = -1;  // kRepeat; max -1 = unbounded

  static Re Of(Kind k) { Re r; r.kind = k; return r; }
  static Re Cls(Ranges rs) { Re r; r.kind = kClass; r.ranges = std::move(rs); return r; }
  static Re Rep(int lo, int hi) { Re r; r.kind = kRepeat; r.min = lo; r.max = hi; return r; }
};

class Parser {
 public:
  explicit Parser(std::string_view s) : s_(s) {}
  Result<Re> Parse() {
    PC_ASSIGN_OR_RETURN(Re re, Alt(0));
    if (pos_ != s_.size()) return Errorf("pattern: unbalanced ')' at byte {}", pos_);
    return re;
  }

 private:
  bool More() const { return pos_ < s_.size(); }
  char Peek() const { return s_[pos_]; }

  Result<Re> Alt(int depth) {
    if (depth > 64) return Errorf("pattern: groups nested too deeply");
    Re alt = Re::Of(Re::kAlt);
    while (true) {
      PC_ASSIGN_OR_RETURN(Re c, Concat(depth));
      alt.kids.push_back(std::move(c));
      if (!More() || Peek() != '|') break;
      ++pos_;
    }
    if (alt.kids.size() == 1) return std::move(alt.kids[0]);
    return alt;
  }

  Result<Re> Concat(int depth) {
    Re cat = Re::Of(Re::kConcat);
    while (More() && Peek() != '|' && Peek() != ')') {
      PC_ASSIGN_OR_RETURN(Re atom, Atom(depth));
      PC_ASSIGN_OR_RETURN(Re rep, Quantified(std::move(atom)));
      cat.kids.push_back(std::move(rep));
    }
    return cat;
  }

  Result<int> Number() {
    size_t start = pos_;
    long v = 0;
    while (More() && Peek() >= '0' && Peek() <= '9') {
      v = v * 10 + (Peek() - '0');
      if (v > 100000) return Errorf("pattern: repetition count too large");
      ++pos_;
    }
    if (pos_ == start) return -1;
    return int(v);
  }

  Result<Re> Quantified(Re atom) {
    for (bool quantified = false; More(); quantified = true) {
      char c = Peek();
      int lo, hi;
      if (c == '*') { lo = 0; hi = -1; ++pos_; }
      else if (c == '+') { lo = 1; hi = -1; ++pos_; }
      else if (c == '?') { lo = 0; hi = 1; ++pos_; }
      else if (c == '{') {
        size_t save = pos_++;
        PC_ASSIGN_OR_RETURN(int a, Number());
        if (a < 0) { pos_ = save; return atom; }  // a literal '{' (ECMA annex B)
        hi = a;
        if (More() && Peek() == ',') {
          ++pos_;
          PC_ASSIGN_OR_RETURN(int b, Number());
          hi = b;  // -1: unbounded
        }
        if (!More() || Peek() != '}') { pos_ = save; return atom; }
        ++pos_;
        lo = a;
        if (hi >= 0 && hi < lo) return Errorf("pattern: repetition {{{},{}}} out of order", lo, hi);
      } else {
        return atom;
      }
      if (quantified) return Errorf("pattern: nothing to repeat at byte {}", pos_ - 1);
      if (atom.kind == Re::kBol || atom.kind == Re::kEol) return Errorf("pattern: quantified anchor");
      if (More() && Peek() == '?') ++pos_;  // lazy: the same language
      Re rep = Re::Rep(lo, hi);
      rep.kids.push_back(std::move(atom));
      atom = std::move(rep);
    }
    return atom;
  }

  Result<uint32_t> Utf8Char() {
    uint8_t b = uint8_t(s_[pos_]);
    int n = b < 0x80 ? 1 : b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : b >= 0xC0 ? 2 : 0;
    if (n == 0 || pos_ + n > s_.size()) return Errorf("pattern: invalid UTF-8 at byte {}", pos_);
    uint32_t cp = n == 1 ? b : b & (0xFF >> (n + 1));
    for (int i = 1; i < n; ++i) cp = (cp << 6) | (uint8_t(s_[pos_ + i]) & 0x3F);
    pos_ += n;
    return cp;
  }

  Result<uint32_t> Hex(int digits) {
    uint32_t v = 0;
    for (int i = 0; i < digits; ++i) {
      if (!More() || !isxdigit(uint8_t(Peek()))) return Errorf("pattern: bad hex escape at byte {}", pos_);
      char c = s_[pos_++];
      v = v * 16 + uint32_t(c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10);
    }
    return v;
  }

  // After a backslash: a class (\d ...) or one code point.
  Result<Ranges> Escape() {
    if (!More()) return Errorf("pattern: trailing backslash");
    char c = s_[pos_++];
    switch (c) {
      case 'd': return Digits();
      case 'D': return Complement(Digits());
      case 'w': return Word();
      case 'W': return Complement(Word());
      case 's': return Space();
      case 'S': return Complement(Space());
      case 'n': return Ranges{{'\n', '\n'}};
      case 'r': return Ranges{{'\r', '\r'}};
      case 't': return Ranges{{'\t', '\t'}};
      case 'f': return Ranges{{'\f', '\f'}};
      case 'v': return Ranges{{'\v', '\v'}};
      case '0': return Ranges{{0, 0}};
      case 'x': { PC_ASSIGN_OR_RETURN(uint32_t v, Hex(2)); return Ranges{{v, v}}; }
      case 'u': {
        uint32_t v;
        if (More() && Peek() == '{') {
          ++pos_;
          v = 0;
          int n = 0;
          while (More() && Peek() != '}') {
            PC_ASSIGN_OR_RETURN(uint32_t d, Hex(1));
            v = v * 16 + d;
            if (++n > 6 || v > kMaxCp) return Errorf("pattern: bad \\u{{}} escape");
          }
          if (!More()) return Errorf("pattern: unterminated \\u{{");
          ++pos_;
        } else {
          PC_ASSIGN_OR_RETURN(v, Hex(4));
        }
        return Ranges{{v, v}};
      }
      case 'b': case 'B': return Errorf("pattern: word boundary \\{} is not supported", c);
      case 'c': case 'k': case 'p': case 'P': return Errorf("pattern: escape \\{} is not supported", c);
      default:
        if (c >= '1' && c <= '9') return Errorf("pattern: backreference \\{} is not supported", c);
        if (uint8_t(c) >= 0x80) { --pos_; PC_ASSIGN_OR_RETURN(uint32_t cp, Utf8Char()); return Ranges{{cp, cp}}; }
        return Ranges{{uint32_t(uint8_t(c)), uint32_t(uint8_t(c))}};
    }
  }

  Result<Re> Class() {
    bool negate = More() && Peek() == '^';
    if (negate) ++pos_;
    Ranges r;
    bool first = true;
    while (true) {
      if (!More()) return Errorf("pattern: unterminated character class");
      if (Peek() == ']' && !first) break;
      first = false;
      Ranges lo_set;
      if (Peek() == '\\') { ++pos_; PC_ASSIGN_OR_RETURN(lo_set, Escape()); }
      else { PC_ASSIGN_OR_RETURN(uint32_t cp, Utf8Char()); lo_set = {{cp, cp}}; }
      bool single = lo_set.size() == 1 && lo_set[0].first == lo_set[0].second;
      if (single && pos_ + 1 < s_.size() && Peek() == '-' && s_[pos_ + 1] != ']') {
        ++pos_;
        Ranges hi_set;
        if (Peek() == '\\') { ++pos_; PC_ASSIGN_OR_RETURN(hi_set, Escape()); }
        else { PC_ASSIGN_OR_RETURN(uint32_t cp, Utf8Char()); hi_set = {{cp, cp}}; }
        if (hi_set.size() != 1 || hi_set[0].first != hi_set[0].second) return Errorf("pattern: class range to a class");
        if (hi_set[0].first < lo_set[0].first) return Errorf("pattern: class range out of order");
        r.push_back({lo_set[0].first, hi_set[0].first});
      } else {
        r.insert(r.end(), lo_set.begin(), lo_set.end());
      }
    }
    ++pos_;  // ']'
    return Re::Cls(negate ? Complement(r) : Normalize(r));
  }

  Result<Re> Atom(int depth) {
    char c = Peek();
    if (c == '(') {
      ++pos_;
      if (More() && Peek() == '?') {
        ++pos_;
        if (More() && Peek() == ':') {
          ++pos_;
        } else if (More() && Peek() == '<' && pos_ + 1 < s_.size() && s_[pos_ + 1] != '=' && s_[pos_ + 1] != '!') {
          while (More() && Peek() != '>') ++pos_;
          if (!More()) return Errorf("pattern: unterminated group name");
          ++pos_;
        } else {
          return Errorf("pattern: lookaround and flags (?...) are not supported");
        }
      }
      PC_ASSIGN_OR_RETURN(Re inner, Alt(depth + 1));
      if (!More() || Peek() != ')') return Errorf("pattern: missing ')'");
      ++pos_;
      return inner;
    }
    ++pos_;
    switch (c) {
      case '[': return Class();
      case '.': return Re::Cls(Complement({{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}}));
      case '^': return Re::Of(Re::kBol);
      case '$': return Re::Of(Re::kEol);
      case '\\': { PC_ASSIGN_OR_RETURN(Ranges r, Escape()); return Re::Cls(r); }
      case '*': case '+': case '?': return Errorf("pattern: nothing to repeat at byte {}", pos_ - 1);
      default:
        --pos_;
        PC_ASSIGN_OR_RETURN(uint32_t cp, Utf8Char());
        return Re::Cls({{cp, cp}});
    }
  }

  std::string_view s_;
  size_t pos_ = 0;
};

// ---- NFA over bytes ----

struct Edge {
  enum Kind : uint8_t { kByte, kEps, kBol, kEol } kind;
  uint8_t lo, hi;
  int to;
};

class Nfa {
 public:
  explicit Nfa(size_t max_states) : max_states_(max_states) {}
  Result<int> NewState() {
    if (states.size() >= max_states_) return Errorf("pattern: too large (over {} automaton states)", max_states_);
    states.emplace_back();
    return int(states.size() - 1);
  }
  void Add(int from, Edge e) { states[size_t(from)].push_back(e); }

  // Emits re between from and a new state, returned.
  Result<int> Emit(const Re& re, int from) {
    switch (re.kind) {
      case Re::kEmpty: return from;
      case Re::kBol: case Re::kEol: {
        PC_ASSIGN_OR_RETURN(int to, NewState());
        Add(from, {re.kind == Re::kBol ? Edge::kBol : Edge::kEol, 0, 0, to});
        return to;
      }
      case Re::kClass: return EmitClass(re.ranges, from);
      case Re::kConcat: {
        int at = from;
        for (const Re& k : re.kids) { PC_ASSIGN_OR_RETURN(at, Emit(k, at)); }
        return at;
      }
      case Re::kAlt: {
        PC_ASSIGN_OR_RETURN(int end, NewState());
        for (const Re& k : re.kids) {
          PC_ASSIGN_OR_RETURN(int s, NewState());
          Add(from, {Edge::kEps, 0, 0, s});
          PC_ASSIGN_OR_RETURN(int e, Emit(k, s));
          Add(e, {Edge::kEps, 0, 0, end});
        }
        return end;
      }
      case Re::kRepeat: {
        int at = from;
        for (int i = 0; i < re.min; ++i) { PC_ASSIGN_OR_RETURN(at, Emit(re.kids[0], at)); }
        if (re.max < 0) {  // a loop: at -> body -> at
          PC_ASSIGN_OR_RETURN(int body, NewState());
          Add(at, {Edge::kEps, 0, 0, body});
          PC_ASSIGN_OR_RETURN(int e, Emit(re.kids[0], body));
          Add(e, {Edge::kEps, 0, 0, at});
          PC_ASSIGN_OR_RETURN(int out, NewState());
          Add(at, {Edge::kEps, 0, 0, out});
          return out;
        }
        PC_ASSIGN_OR_RETURN(int end, NewState());
        for (int i = re.min; i < re.max; ++i) {
          Add(at, {Edge::kEps, 0, 0, end});
          PC_ASSIGN_OR_RETURN(at, Emit(re.kids[0], at));
        }
        Add(at, {Edge::kEps, 0, 0, end});
        return end;
      }
    }
    return from;
  }

  std::vector<std::vector<Edge>> states;

 private:
  // A code-point range as byte sequences (UTF-8, no surrogates).
  Result<int> EmitClass(const Ranges& ranges, int from) {
    PC_ASSIGN_OR_RETURN(int end, NewState());
    std::vector<std::vector<std::pair<uint8_t, uint8_t>>> seqs;
    for (auto [lo, hi] : ranges) {
      if (lo <= 0xD7FF) Utf8Ranges(lo, std::min(hi, 0xD7FFu), &seqs);
      if (hi >= 0xE000) Utf8Ranges(std::max(lo, 0xE000u), hi, &seqs);
    }
    for (const auto& seq : seqs) {
      int at = from;
      for (size_t i = 0; i < seq.size(); ++i) {
        int to = end;
        if (i + 1 < seq.size()) { PC_ASSIGN_OR_RETURN(to, NewState()); }
        Add(at, {Edge::kByte, seq[i].first, seq[i].second, to});
        at = to;
      }
    }
    return end;
  }

  static int Utf8Len(uint32_t cp) { return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4; }
  static void Encode(uint32_t cp, int n, uint8_t* out) {
    static constexpr uint8_t kLead[5] = {0, 0, 0xC0, 0xE0, 0xF0};
    for (int i = n - 1; i > 0; --i) { out[i] = uint8_t(0x80 | (cp & 0x3F)); cp >>= 6; }
    out[0] = uint8_t(n == 1 ? cp : (kLead[n] | cp));
  }
  // Splits [lo, hi] until each piece is a product of byte ranges.
  static void Utf8Ranges(uint32_t lo, uint32_t hi, std::vector<std::vector<std::pair<uint8_t, uint8_t>>>* out) {
    if (lo > hi) return;
    for (uint32_t b : {0x7Fu, 0x7FFu, 0xFFFFu}) {
      if (lo <= b && b < hi) { Utf8Ranges(lo, b, out); Utf8Ranges(b + 1, hi, out); return; }
    }
    int n = Utf8Len(lo);
    for (int i = 1; i < n; ++i) {
      uint32_t m = (1u << (6 * i)) - 1;
      if ((lo & ~m) != (hi & ~m)) {
        if ((lo & m) != 0) { Utf8Ranges(lo, lo | m, out); Utf8Ranges((lo | m) + 1, hi, out); return; }
        if ((hi & m) != m) { Utf8Ranges(lo, (hi & ~m) - 1, out); Utf8Ranges(hi & ~m, hi, out); return; }
      }
    }
    uint8_t a[4], b[4];
    Encode(lo, n, a);
    Encode(hi, n, b);
    std::vector<std::pair<uint8_t, uint8_t>> seq;
    for (int i = 0; i < n; ++i) seq.push_back({a[i], b[i]});
    out->push_back(std::move(seq));
  }

  size_t max_states_;
};

}  // namespace

class DfaBuilder {
 public:
  // Subset construction over byte classes, then dead states pruned and each
  // state's shortest distance to acceptance (in characters) computed.
  static Result<ByteDfa> Build(const Nfa& nfa, int start, int accept_state, size_t max_states) {
    ByteDfa dfa;
    const std::vector<uint8_t> rep = ByteClasses(nfa, &dfa);
    std::vector<int32_t> next;
    std::vector<uint8_t> accept;
    PC_RETURN_IF_ERROR(Subsets(nfa, start, accept_state, max_states, rep, &next, &accept));
    PruneDead(size_t(dfa.n_classes_), &next, &accept);
    dfa.next_ = std::move(next);
    dfa.accept_ = std::move(accept);
    MinChars(&dfa);
    return dfa;
  }

 private:
  // Byte classes: bytes no edge tells apart share a column. Returns each
  // class's representative byte.
  static std::vector<uint8_t> ByteClasses(const Nfa& nfa, ByteDfa* dfa) {
    std::array<bool, 257> cut{};
    for (const auto& st : nfa.states)
      for (const Edge& e : st)
        if (e.kind == Edge::kByte) { cut[e.lo] = true; cut[size_t(e.hi) + 1] = true; }
    int cls = -1;
    std::vector<uint8_t> rep;
    for (int b = 0; b < 256; ++b) {
      if (b == 0 || cut[size_t(b)]) { ++cls; rep.push_back(uint8_t(b)); }
      dfa->byte_class_[size_t(b)] = uint8_t(cls);
    }
    dfa->n_classes_ = cls + 1;
    return rep;
  }

  // The states reachable from set without consuming a byte (`^` only from
  // the start, `$` only when asked), sorted.
  static std::vector<int> Closure(const Nfa& nfa, std::vector<int> set, bool at_start, bool through_eol) {
    std::vector<char> seen(nfa.states.size(), 0);
    std::vector<int> stack = set;
    for (int s : set) seen[size_t(s)] = 1;
    while (!stack.empty()) {
      int s = stack.back();
      stack.pop_back();
      for (const Edge& e : nfa.states[size_t(s)]) {
        bool follow = e.kind == Edge::kEps || (e.kind == Edge::kBol && at_start) || (e.kind == Edge::kEol && through_eol);
        if (follow && !seen[size_t(e.to)]) { seen[size_t(e.to)] = 1; set.push_back(e.to); stack.push_back(e.to); }
      }
    }
    std::sort(set.begin(), set.end());
    return set;
  }

  // The transition table ([state][class]) and acceptance of every state
  // set reachable from the start; an error past max_states.
  static Status Subsets(const Nfa& nfa, int start, int accept_state, size_t max_states, const std::vector<uint8_t>& rep,
                        std::vector<int32_t>* next, std::vector<uint8_t>* accept) {
    std::map<std::vector<int>, int32_t> ids;
    std::vector<std::vector<int>> sets;
    // The start state stays apart from any equal set reached later: only it
    // may pass a `^`.
    auto intern = [&](std::vector<int> set, bool is_start = false) -> Result<int32_t> {
      std::vector<int> key = set;
      if (is_start) key.push_back(-1);
      auto it = ids.find(key);
      if (it != ids.end()) return it->second;
      if (sets.size() >= max_states) return Errorf("pattern: too complex (over {} automaton states)", max_states);
      int32_t id = int32_t(sets.size());
      ids.emplace(std::move(key), id);
      sets.push_back(std::move(set));
      return id;
    };
    PC_ASSIGN_OR_RETURN(int32_t s0, intern(Closure(nfa, {start}, true, false), true));
    (void)s0;
    for (size_t i = 0; i < sets.size(); ++i) {
      std::vector<int> with_eol = Closure(nfa, sets[i], i == 0, true);
      accept->push_back(std::binary_search(with_eol.begin(), with_eol.end(), accept_state) ? 1 : 0);
      for (uint8_t r : rep) {
        std::vector<int> moved;
        for (int s : sets[i])
          for (const Edge& e : nfa.states[size_t(s)])
            if (e.kind == Edge::kByte && e.lo <= r && r <= e.hi) moved.push_back(e.to);
        if (moved.empty()) { next->push_back(ByteDfa::kDead); continue; }
        std::sort(moved.begin(), moved.end());
        moved.erase(std::unique(moved.begin(), moved.end()), moved.end());
        PC_ASSIGN_OR_RETURN(int32_t to, intern(Closure(nfa, std::move(moved), false, false)));
        next->push_back(to);
      }
    }
    return OkStatus();
  }

  // States that cannot reach acceptance become dead (a viable prefix = not
  // dead); a pattern matching nothing is one dead start state.
  static void PruneDead(size_t k, std::vector<int32_t>* next, std::vector<uint8_t>* accept) {
    const size_t n = accept->size();
    std::vector<char> live(n, 0);
    for (size_t i = 0; i < n; ++i) live[i] = (*accept)[i];
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t i = 0; i < n; ++i) {
        if (live[i]) continue;
        for (size_t c = 0; c < k; ++c) {
          int32_t t = (*next)[i * k + c];
          if (t != ByteDfa::kDead && live[size_t(t)]) { live[i] = 1; changed = true; break; }
        }
      }
    }
    for (int32_t& t : *next)
      if (t != ByteDfa::kDead && !live[size_t(t)]) t = ByteDfa::kDead;
    if (!live[0]) {
      next->assign(k, ByteDfa::kDead);
      accept->assign(1, 0);
    }
  }

  // Shortest distances to acceptance, a continuation byte costing 0 and any
  // other 1 (Bellman-Ford style relaxation; few states).
  static void MinChars(ByteDfa* dfa) {
    const size_t m = dfa->accept_.size(), k = size_t(dfa->n_classes_);
    dfa->min_chars_.assign(m, UINT32_MAX);
    for (size_t i = 0; i < m; ++i)
      if (dfa->accept_[i]) dfa->min_chars_[i] = 0;
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t i = 0; i < m; ++i) {
        for (int b = 0; b < 256; ++b) {
          int32_t t = dfa->next_[i * k + dfa->byte_class_[size_t(b)]];
          if (t == ByteDfa::kDead || dfa->min_chars_[size_t(t)] == UINT32_MAX) continue;
          uint32_t d = dfa->min_chars_[size_t(t)] + ((b & 0xC0) == 0x80 ? 0 : 1);
          if (d < dfa->min_chars_[i]) { dfa->min_chars_[i] = d; changed = true; }
        }
      }
    }
  }
};

bool ByteDfa::Matches(std::string_view text) const {
  int32_t s = kStart;
  for (char c : text) {
    s = Next(s, uint8_t(c));
    if (s == kDead) return false;
  }
  return Accepting(s);
}

Result<ByteDfa> CompileRegex(std::string_view pattern, bool search, const RegexLimits& limits) {
  if (pattern.size() > limits.max_pattern_bytes) return Errorf("pattern: longer than {} bytes", limits.max_pattern_bytes);
  Parser parser(pattern);
  PC_ASSIGN_OR_RETURN(Re re, parser.Parse());
  Nfa nfa(limits.max_nfa_states);
  PC_ASSIGN_OR_RETURN(int start, nfa.NewState());
  int at = start;
  Re any = Re::Rep(0, -1);
  any.kids.push_back(Re::Cls({{0, kMaxCp}}));
  if (search) { PC_ASSIGN_OR_RETURN(at, nfa.Emit(any, at)); }
  PC_ASSIGN_OR_RETURN(at, nfa.Emit(re, at));
  if (search) { PC_ASSIGN_OR_RETURN(at, nfa.Emit(any, at)); }
  return DfaBuilder::Build(nfa, start, at, limits.max_dfa_states);
}

}  // namespace pc::structured
