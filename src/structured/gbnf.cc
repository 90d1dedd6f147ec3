#include "structured/gbnf.h"

#include <algorithm>
#include <map>

namespace pc::structured {
namespace {

using Alt = GbnfGrammar::Alt;

class Parser {
 public:
  Parser(std::string_view text, const GbnfLimits& limits, GbnfGrammar* g) : t_(text), limits_(limits), g_(g) {}

  Status Run() {
    if (t_.size() > limits_.max_text_bytes) return Status::Error("the grammar is larger than 1 MiB");
    Space(true);
    while (i_ < t_.size()) {
      const std::string name = Name();
      if (name.empty()) return Err("a rule name");
      Space(false);
      if (t_.substr(i_, 3) != "::=") return Err("'::=' after the rule name '" + name + "'");
      i_ += 3;
      const int32_t id = RuleId(name);
      if (defined_[id]) return Status::Error("the rule '" + name + "' is defined twice");
      defined_[id] = true;
      std::vector<Alt> alts;
      PC_RETURN_IF_ERROR(Alternates(0, &alts));
      g_->rules[id].alts = std::move(alts);
      Space(true);
    }
    for (size_t r = 0; r < g_->rules.size(); ++r)
      if (!defined_[r]) return Status::Error("the rule '" + g_->rules[r].name + "' is used but not defined");
    auto root = ids_.find("root");
    if (root == ids_.end()) return Status::Error("the grammar has no 'root' rule");
    g_->root = root->second;
    return OkStatus();
  }

 private:
  Status Err(const std::string& what) const {
    return Status::Error("grammar syntax: expected " + what + " at byte " + std::to_string(i_));
  }
  // Spaces and comments; newlines too when newline_ok (between rules, and
  // anywhere inside parentheses).
  void Space(bool newline_ok) {
    while (i_ < t_.size()) {
      const char c = t_[i_];
      if (c == ' ' || c == '\t' || ((c == '\n' || c == '\r') && newline_ok)) {
        ++i_;
      } else if (c == '#') {
        while (i_ < t_.size() && t_[i_] != '\n') ++i_;
      } else {
        break;
      }
    }
  }
  static bool NameChar(char c) { return std::isalnum(uint8_t(c)) || c == '-' || c == '_'; }
  std::string Name() {
    const size_t s = i_;
    while (i_ < t_.size() && NameChar(t_[i_])) ++i_;
    return std::string(t_.substr(s, i_ - s));
  }
  int32_t RuleId(const std::string& name) {
    auto it = ids_.find(name);
    if (it != ids_.end()) return it->second;
    return NewRule(name);
  }
  int32_t NewRule(const std::string& name) {
    const int32_t id = int32_t(g_->rules.size());
    g_->rules.push_back({name, {}});
    defined_.push_back(false);
    if (!name.empty() && name[0] != '.') ids_[name] = id;
    return id;
  }
  int32_t Helper(std::vector<Alt> alts) {
    const int32_t id = NewRule("." + std::to_string(g_->rules.size()));
    g_->rules[id].alts = std::move(alts);
    defined_[id] = true;
    return id;
  }
  Status CountElems(size_t n) {
    elems_ += n;
    if (elems_ > limits_.max_elems || g_->rules.size() > limits_.max_rules) return Status::Error("the grammar is too large");
    return OkStatus();
  }

  Status Alternates(int depth, std::vector<Alt>* out) {
    if (depth > 64) return Status::Error("the grammar nests groups deeper than 64");
    for (;;) {
      Alt a;
      PC_RETURN_IF_ERROR(Sequence(depth, &a));
      out->push_back(std::move(a));
      Space(depth > 0);
      if (i_ < t_.size() && t_[i_] == '|') {
        ++i_;
        Space(true);
        continue;
      }
      return OkStatus();
    }
  }

  // One code point of a literal or class, escapes decoded.
  Status Char(uint32_t* cp) {
    if (i_ >= t_.size()) return Err("a character");
    uint8_t c = uint8_t(t_[i_]);
    if (c == '\\') {
      if (++i_ >= t_.size()) return Err("an escape");
      const char e = t_[i_++];
      int hex = e == 'x' ? 2 : e == 'u' ? 4 : e == 'U' ? 8 : 0;
      if (hex) {
        uint32_t v = 0;
        for (int k = 0; k < hex; ++k) {
          if (i_ >= t_.size() || !std::isxdigit(uint8_t(t_[i_]))) return Err("hex digits");
          const char h = t_[i_++];
          v = v * 16 + uint32_t(std::isdigit(uint8_t(h)) ? h - '0' : (std::tolower(h) - 'a' + 10));
        }
        if (v > 0x10FFFF) return Status::Error("grammar: code point past U+10FFFF");
        *cp = v;
        return OkStatus();
      }
      static const std::map<char, uint32_t> kEsc = {{'n', '\n'}, {'r', '\r'}, {'t', '\t'}, {'\\', '\\'}, {'"', '"'},
                                                   {'[', '['}, {']', ']'}, {'-', '-'}, {'^', '^'}, {'/', '/'}};
      auto it = kEsc.find(e);
      if (it == kEsc.end()) return Status::Error(std::string("grammar: unknown escape \\") + e);
      *cp = it->second;
      return OkStatus();
    }
    // UTF-8 in the grammar text itself.
    const int n = c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 0;
    if (n == 0 || i_ + size_t(n) > t_.size()) return Status::Error("grammar: invalid UTF-8");
    uint32_t v = n == 1 ? c : c & (0xFF >> (n + 1));
    for (int k = 1; k < n; ++k) v = (v << 6) | (uint8_t(t_[i_ + size_t(k)]) & 0x3F);
    i_ += size_t(n);
    *cp = v;
    return OkStatus();
  }

  GbnfElem Class(std::vector<std::pair<uint32_t, uint32_t>> ranges, bool negate) {
    GbnfElem e;
    e.ranges_begin = uint32_t(g_->ranges.size());
    for (auto& r : ranges) g_->ranges.push_back(r);
    e.ranges_end = uint32_t(g_->ranges.size());
    e.negate = negate;
    return e;
  }

  // One item (a literal is several elements) appended to a; its first
  // element's index in *start.
  Status Item(int depth, Alt* a, size_t* start) {
    *start = a->elems.size();
    const char c = t_[i_];
    if (c == '"') {
      ++i_;
      while (i_ < t_.size() && t_[i_] != '"') {
        uint32_t cp = 0;
        PC_RETURN_IF_ERROR(Char(&cp));
        a->elems.push_back(Class({{cp, cp}}, false));
      }
      if (i_ >= t_.size()) return Err("a closing '\"'");
      ++i_;
    } else if (c == '[') {
      ++i_;
      const bool negate = i_ < t_.size() && t_[i_] == '^';
      if (negate) ++i_;
      std::vector<std::pair<uint32_t, uint32_t>> ranges;
      while (i_ < t_.size() && t_[i_] != ']') {
        uint32_t lo = 0, hi = 0;
        PC_RETURN_IF_ERROR(Char(&lo));
        hi = lo;
        if (i_ + 1 < t_.size() && t_[i_] == '-' && t_[i_ + 1] != ']') {
          ++i_;
          PC_RETURN_IF_ERROR(Char(&hi));
          if (hi < lo) return Status::Error("grammar: a class range runs backwards");
        }
        ranges.push_back({lo, hi});
      }
      if (i_ >= t_.size()) return Err("a closing ']'");
      ++i_;
      a->elems.push_back(Class(std::move(ranges), negate));
    } else if (c == '.') {
      ++i_;
      a->elems.push_back(Class({{0, 0x10FFFF}}, false));
    } else if (c == '(') {
      ++i_;
      Space(true);
      std::vector<Alt> alts;
      PC_RETURN_IF_ERROR(Alternates(depth + 1, &alts));
      Space(true);
      if (i_ >= t_.size() || t_[i_] != ')') return Err("')'");
      ++i_;
      GbnfElem e;
      e.rule = Helper(std::move(alts));
      a->elems.push_back(e);
    } else if (c == '<') {
      return Status::Error("grammar: token references (<...>) are not supported");
    } else if (NameChar(c)) {
      GbnfElem e;
      e.rule = RuleId(Name());
      a->elems.push_back(e);
    } else {
      return Err("an element");
    }
    return CountElems(a->elems.size() - *start);
  }

  Status Sequence(int depth, Alt* a) {
    for (;;) {
      Space(depth > 0);
      if (i_ >= t_.size()) return OkStatus();
      const char c = t_[i_];
      if (c == '|' || c == ')' || c == '\n' || c == '\r') return OkStatus();
      size_t start = 0;
      PC_RETURN_IF_ERROR(Item(depth, a, &start));
      Space(depth > 0);
      while (i_ < t_.size() && (t_[i_] == '*' || t_[i_] == '+' || t_[i_] == '?' || t_[i_] == '{')) {
        PC_RETURN_IF_ERROR(Repeat(a, start));
        start = a->elems.size() - 1;
        Space(depth > 0);
      }
    }
  }

  // The item a->elems[start..] under a postfix, rewritten into helper rules:
  // x* -> R ::= x R | ; x? -> R ::= x | ; x{m,n} -> m copies of x, then
  // n - m nested optionals (or x* when unbounded).
  Status Repeat(Alt* a, size_t start) {
    int lo = 0, hi = -1;  // -1: unbounded
    const char c = t_[i_++];
    if (c == '+') lo = 1;
    else if (c == '?') hi = 1;
    else if (c == '{') {
      auto number = [&](int* v) {
        const size_t s = i_;
        long n = 0;
        while (i_ < t_.size() && std::isdigit(uint8_t(t_[i_])) && n <= limits_.max_repeat) n = n * 10 + (t_[i_++] - '0');
        *v = int(n);
        return i_ > s;
      };
      Space(false);
      if (!number(&lo)) return Err("a repetition count");
      Space(false);
      hi = lo;
      if (i_ < t_.size() && t_[i_] == ',') {
        ++i_;
        Space(false);
        if (!number(&hi)) hi = -1;
        Space(false);
      }
      if (i_ >= t_.size() || t_[i_] != '}') return Err("'}'");
      ++i_;
      if (lo > limits_.max_repeat || hi > limits_.max_repeat || (hi >= 0 && hi < lo))
        return Status::Error("grammar: a repetition count past 1000 or running backwards");
    }
    Alt item;
    item.elems.assign(a->elems.begin() + long(start), a->elems.end());
    a->elems.resize(start);
    PC_RETURN_IF_ERROR(CountElems(item.elems.size() * size_t(std::max(lo, 1) + (hi > lo ? hi - lo : 1))));
    for (int k = 0; k < lo; ++k) a->elems.insert(a->elems.end(), item.elems.begin(), item.elems.end());
    GbnfElem tail;
    if (hi < 0) {  // R ::= item R |
      tail.rule = Helper({});
      Alt loop = item;
      GbnfElem self;
      self.rule = tail.rule;
      loop.elems.push_back(self);
      g_->rules[tail.rule].alts = {loop, Alt{}};
      a->elems.push_back(tail);
    } else if (hi > lo) {  // R_1 ::= item R_2 | ; ... R_k ::= item |
      int32_t next = -1;
      for (int k = hi - lo; k >= 1; --k) {
        Alt more = item;
        if (next >= 0) {
          GbnfElem n;
          n.rule = next;
          more.elems.push_back(n);
        }
        next = Helper({more, Alt{}});
      }
      tail.rule = next;
      a->elems.push_back(tail);
    }
    return OkStatus();
  }

  std::string_view t_;
  const GbnfLimits& limits_;
  GbnfGrammar* g_;
  size_t i_ = 0, elems_ = 0;
  std::map<std::string, int32_t> ids_;
  std::vector<bool> defined_;
};

// Left recursion would expand forever: a rule that reaches itself through
// first elements (past nullable rules) is refused.
Status CheckLeftRecursion(const GbnfGrammar& g) {
  const size_t n = g.rules.size();
  std::vector<bool> nullable(n, false);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < n; ++r) {
      if (nullable[r]) continue;
      for (const Alt& a : g.rules[r].alts) {
        if (std::all_of(a.elems.begin(), a.elems.end(), [&](const GbnfElem& e) { return e.is_rule() && nullable[size_t(e.rule)]; })) {
          nullable[r] = changed = true;
          break;
        }
      }
    }
  }
  std::vector<std::vector<int32_t>> first(n);
  for (size_t r = 0; r < n; ++r)
    for (const Alt& a : g.rules[r].alts)
      for (const GbnfElem& e : a.elems) {
        if (!e.is_rule()) break;
        first[r].push_back(e.rule);
        if (!nullable[size_t(e.rule)]) break;
      }
  std::vector<uint8_t> color(n, 0);  // 0 new, 1 on the path, 2 done
  for (size_t s = 0; s < n; ++s) {
    if (color[s]) continue;
    std::vector<std::pair<int32_t, size_t>> path = {{int32_t(s), 0}};
    color[s] = 1;
    while (!path.empty()) {
      auto& [r, k] = path.back();
      if (k == first[size_t(r)].size()) {
        color[size_t(r)] = 2;
        path.pop_back();
        continue;
      }
      const int32_t next = first[size_t(r)][k++];
      if (color[size_t(next)] == 1) return Status::Error("the grammar is left-recursive (rule '" + g.rules[size_t(next)].name + "')");
      if (color[size_t(next)] == 0) {
        color[size_t(next)] = 1;
        path.push_back({next, 0});
      }
    }
  }
  return OkStatus();
}

}  // namespace

bool GbnfGrammar::Matches(const GbnfElem& e, uint32_t cp) const {
  bool in = false;
  for (uint32_t k = e.ranges_begin; k < e.ranges_end && !in; ++k) in = cp >= ranges[k].first && cp <= ranges[k].second;
  return in != e.negate;
}

bool GbnfGrammar::MatchesAny(const GbnfElem& e, uint32_t lo, uint32_t hi) const {
  if (!e.negate) {
    for (uint32_t k = e.ranges_begin; k < e.ranges_end; ++k)
      if (ranges[k].first <= hi && ranges[k].second >= lo) return true;
    return false;
  }
  // Negated: some point of [lo, hi] lies outside every range.
  std::vector<std::pair<uint32_t, uint32_t>> rs(ranges.begin() + e.ranges_begin, ranges.begin() + e.ranges_end);
  std::sort(rs.begin(), rs.end());
  uint32_t at = lo;
  for (const auto& [a, b] : rs) {
    if (b < at) continue;
    if (a > at) return true;
    if (b >= hi) return false;
    at = b + 1;
  }
  return at <= hi;
}

Result<std::shared_ptr<const GbnfGrammar>> CompileGbnf(std::string_view text, const GbnfLimits& limits) {
  auto g = std::make_shared<GbnfGrammar>();
  Parser p(text, limits, g.get());
  PC_RETURN_IF_ERROR(p.Run());
  PC_RETURN_IF_ERROR(CheckLeftRecursion(*g));
  GbnfMatcher probe(g.get());
  if (probe.dead()) return Status::Error("the grammar's root admits nothing");
  return std::shared_ptr<const GbnfGrammar>(std::move(g));
}

GbnfMatcher::GbnfMatcher(const GbnfGrammar* g) : g_(g) {
  for (size_t a = 0; a < g->rules[size_t(g->root)].alts.size(); ++a) Expand({Pos{g->root, int32_t(a), 0}}, &stacks_, 0);
  Normalize();
}

// Pops finished alternatives and replaces a rule reference on top by each
// of its alternatives, until every stack ends at a class (or is empty).
void GbnfMatcher::Expand(Stack stack, std::vector<Stack>* out, int depth) const {
  if (out->size() >= kMaxStacks || depth > 256 || stack.size() > kMaxDepth) return;
  while (!stack.empty()) {
    const Pos& p = stack.back();
    const auto& elems = g_->rules[size_t(p.rule)].alts[size_t(p.alt)].elems;
    if (size_t(p.elem) == elems.size()) {
      stack.pop_back();
      continue;
    }
    const GbnfElem& e = elems[size_t(p.elem)];
    if (!e.is_rule()) break;
    // Where this alternative goes on after the rule; nothing, when the rule
    // ends it (a tail call: x* loops without growing the stack).
    if (size_t(++stack.back().elem) == elems.size()) stack.pop_back();
    for (size_t a = 0; a < g_->rules[size_t(e.rule)].alts.size(); ++a) {
      Stack s = stack;
      s.push_back(Pos{e.rule, int32_t(a), 0});
      Expand(std::move(s), out, depth + 1);
    }
    return;
  }
  out->push_back(std::move(stack));
}

void GbnfMatcher::Normalize() {
  std::sort(stacks_.begin(), stacks_.end());
  stacks_.erase(std::unique(stacks_.begin(), stacks_.end()), stacks_.end());
}

bool GbnfMatcher::AdvanceCodePoint(uint32_t cp, GbnfMatcher* out) const {
  for (const Stack& s : stacks_) {
    if (s.empty()) continue;
    const Pos& p = s.back();
    if (!g_->Matches(g_->rules[size_t(p.rule)].alts[size_t(p.alt)].elems[size_t(p.elem)], cp)) continue;
    Stack next = s;
    ++next.back().elem;
    Expand(std::move(next), &out->stacks_, 0);
  }
  out->Normalize();
  return !out->stacks_.empty();
}

bool GbnfMatcher::Advance(uint8_t byte, GbnfMatcher* out) const {
  out->g_ = g_;
  out->stacks_.clear();
  out->cp_ = 0;
  out->need_ = out->len_ = 0;
  if (need_ == 0) {
    if (byte < 0x80) return AdvanceCodePoint(byte, out);
    const int n = byte >= 0xF5 ? 0 : byte >= 0xF0 ? 4 : byte >= 0xE0 ? 3 : byte >= 0xC2 ? 2 : 0;
    if (n == 0) return false;
    out->cp_ = byte & (0xFF >> (n + 1));
    out->need_ = uint8_t(n - 1);
    out->len_ = uint8_t(n);
  } else {
    if ((byte & 0xC0) != 0x80) return false;
    out->cp_ = (cp_ << 6) | (byte & 0x3F);
    out->need_ = uint8_t(need_ - 1);
    out->len_ = len_;
    if (out->need_ == 0) {
      static constexpr uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
      const uint32_t cp = out->cp_;
      if (cp < kMin[len_] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
      out->cp_ = 0;
      out->len_ = 0;
      return AdvanceCodePoint(cp, out);
    }
  }
  // A partial code point: keep the stacks that accept some completion.
  const uint32_t shift = 6u * out->need_;
  const uint32_t lo = out->cp_ << shift, hi = lo | ((1u << shift) - 1);
  for (const Stack& s : stacks_) {
    if (s.empty()) continue;
    const Pos& p = s.back();
    if (g_->MatchesAny(g_->rules[size_t(p.rule)].alts[size_t(p.alt)].elems[size_t(p.elem)], lo, std::min(hi, 0x10FFFFu)))
      out->stacks_.push_back(s);
  }
  return !out->stacks_.empty();
}

bool GbnfMatcher::Consume(std::string_view bytes) {
  GbnfMatcher next;
  for (char c : bytes) {
    if (!Advance(uint8_t(c), &next)) {
      *this = std::move(next);
      return false;
    }
    std::swap(*this, next);
  }
  return true;
}

bool GbnfMatcher::CanEnd() const {
  return need_ == 0 && std::any_of(stacks_.begin(), stacks_.end(), [](const Stack& s) { return s.empty(); });
}

bool GbnfMatcher::Complete() const {
  return need_ == 0 && !stacks_.empty() && std::all_of(stacks_.begin(), stacks_.end(), [](const Stack& s) { return s.empty(); });
}

}  // namespace pc::structured
