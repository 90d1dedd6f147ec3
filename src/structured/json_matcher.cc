// The byte-level JSON matcher: one function per frame kind, each consuming a
// byte, refusing it, or finishing its value and handing the byte back to the
// frame below (numbers and number-like literals end only at a delimiter).
#include "structured/json_matcher.h"

#include <cmath>
#include <optional>

namespace pc::structured {
namespace {

enum Kind : uint8_t { kRootF, kValueF, kObjectF, kArrayF, kStringF, kKeyF, kNumberF, kLiteralF };
// Object phases.
enum : uint8_t { kObjOpen, kObjColon, kObjAfterValue, kObjNeedKey };
// Array phases.
enum : uint8_t { kArrOpen, kArrAfterItem, kArrNeedItem };
// Number phases.
enum : uint8_t { kNumStart, kNumMinus, kNumZero, kNumInt, kNumDot, kNumFrac, kNumE, kNumESign, kNumExp };
constexpr uint8_t kNeg = 1;

bool IsWs(uint8_t b) { return b == ' ' || b == '\n' || b == '\t' || b == '\r'; }
bool IsDigit(uint8_t b) { return b >= '0' && b <= '9'; }

// One byte of a string's text (after the opening quote), canonical escapes
// only. Returns -1 refused, 0 consumed with no character yet, 1 one decoded
// byte in *out, 2 the closing quote.
int LexString(Frame& f, uint8_t b, uint8_t* out) {
  switch (f.esc) {
    case 0:
      if (b == '"') return f.utf8 == 0 ? 2 : -1;
      if (b == '\\') { if (f.utf8) return -1; f.esc = 1; return 0; }
      if (b < 0x20) return -1;
      if (!Utf8Step(&f.utf8, b)) return -1;
      *out = b;
      return 1;
    case 1:
      f.esc = 0;
      switch (b) {
        case '"': *out = '"'; return 1;
        case '\\': *out = '\\'; return 1;
        case 'b': *out = '\b'; return 1;
        case 'f': *out = '\f'; return 1;
        case 'n': *out = '\n'; return 1;
        case 'r': *out = '\r'; return 1;
        case 't': *out = '\t'; return 1;
        case 'u': f.esc = 2; return 0;
        default: return -1;
      }
    case 2: case 3:  // \u00XX: only controls without a short form
      if (b != '0') return -1;
      ++f.esc;
      return 0;
    case 4:
      if (b != '0' && b != '1') return -1;
      f.hex = uint16_t((b - '0') << 4);
      f.esc = 5;
      return 0;
    default: {
      int d = IsDigit(b) ? b - '0' : (b >= 'a' && b <= 'f') ? b - 'a' + 10 : -1;
      if (d < 0) return -1;
      uint8_t v = uint8_t(f.hex | d);
      if (v == '\b' || v == '\f' || v == '\n' || v == '\r' || v == '\t') return -1;
      f.esc = 0;
      *out = v;
      return 1;
    }
  }
}

// Within an escape: whether some character it may still decode to passes
// ok (the escape can finish). Canonical escapes: the seven short forms, and
// \u00XX for the other control characters.
template <typename Ok>
bool EscapeViable(const Frame& f, Ok ok) {
  auto short_form = [](uint8_t c) { return c == '\b' || c == '\f' || c == '\n' || c == '\r' || c == '\t'; };
  if (f.esc == 1) {
    for (uint8_t c : {uint8_t('"'), uint8_t('\\'), uint8_t('\b'), uint8_t('\f'), uint8_t('\n'), uint8_t('\r'), uint8_t('\t')})
      if (ok(c)) return true;
  }
  uint8_t lo = 0, hi = 0x1F;
  if (f.esc == 5) { lo = uint8_t(f.hex); hi = uint8_t(f.hex + 15); }
  for (unsigned c = lo; c <= hi; ++c)
    if (!short_form(uint8_t(c)) && ok(uint8_t(c))) return true;
  return false;
}

// Whether the pattern's and format's shortest ways to acceptance fit in
// the code points left.
bool FitsLength(const CompiledSchema& s, const Node& n, const Frame& f) {
  uint32_t left = n.str.max_len - f.count;
  if (n.str.pattern >= 0 && s.dfas[size_t(n.str.pattern)].MinCharsToAccept(f.s1) > left) return false;
  if (n.str.format >= 0 && s.dfas[size_t(n.str.format)].MinCharsToAccept(f.s2) > left) return false;
  return true;
}

bool StepDfa(const CompiledSchema& s, int32_t dfa, int32_t* state, uint8_t b) {
  if (dfa < 0) return true;
  *state = s.dfas[size_t(dfa)].Next(*state, b);
  return *state != ByteDfa::kDead;
}
bool DfaAccepts(const CompiledSchema& s, int32_t dfa, int32_t state) {
  return dfa < 0 || s.dfas[size_t(dfa)].Accepting(state);
}


// Whether some completion of a tracked number prefix can fall inside the
// bounds (an over-approximation: exact checks come at the end).
bool NumberFeasible(const Frame& f, const NumberRule& r, bool fractions) {
  // A decimal multipleOf (C / 10^k) needs every fraction digit past the
  // k-th to be zero: a non-zero one no later digit can undo.
  if (r.has_multiple && f.s1 > r.multiple.scale) {
    uint64_t tail = 1;
    for (int i = r.multiple.scale; i < f.s1; ++i) tail *= 10;
    if (f.bits1 % tail != 0) return false;
  }
  if (!r.has_min && !r.has_max) return true;
  if (f.phase == kNumStart) return true;
  // Exact decimals throughout: magnitudes [a, b) (b absent: unbounded; b ==
  // a: the point a), signed, against the bounds.
  const bool neg = (f.flags & kNeg) != 0;
  auto signed_of = [&](Decimal d) { d.neg = neg && d.mant != 0; return d; };
  auto ge_min = [&](const Decimal& x) { return !r.has_min || Compare(x, r.min) >= 0; };
  auto le_max = [&](const Decimal& x) { return !r.has_max || Compare(x, r.max) <= 0; };
  auto hits = [&](const Decimal& a, const std::optional<Decimal>& b) {
    if (b && b->mant == a.mant && b->scale == a.scale) return ge_min(signed_of(a)) && le_max(signed_of(a));
    if (!neg) return le_max(a) && (!b || !r.has_min || Compare(*b, r.min) > 0);
    return ge_min(signed_of(a)) && (!b || !r.has_max || Compare(signed_of(*b), r.max) < 0);
  };
  if (f.phase == kNumMinus) return hits(Decimal{}, std::nullopt);
  const Decimal m{.mant = f.bits1, .scale = f.s1};
  const bool more = f.count < 18;
  auto plus_ulp = [&](const Decimal& d) { return Decimal{.mant = d.mant + 1, .scale = d.scale}; };
  switch (f.phase) {
    case kNumZero:
      return hits(m, fractions ? std::optional<Decimal>(Decimal{.mant = 1}) : m);
    case kNumInt:
      if (hits(m, fractions && more ? std::optional<Decimal>(plus_ulp(m)) : m)) return true;
      return more && hits(Decimal{.mant = m.mant * 10}, std::nullopt);
    case kNumDot:
      return more && hits(m, plus_ulp(m));
    default:  // kNumFrac
      return hits(m, more ? std::optional<Decimal>(plus_ulp(m)) : m);
  }
}

bool NumberComplete(const Frame& f, const Node& n) {
  bool ints_only = !(n.types & kNumber);
  if (ints_only ? !(f.phase == kNumZero || f.phase == kNumInt)
                : !(f.phase == kNumZero || f.phase == kNumInt || f.phase == kNumFrac || f.phase == kNumExp))
    return false;
  const NumberRule& r = n.num;
  if (!r.tracked()) return true;
  Decimal v{.neg = (f.flags & kNeg) != 0 && f.bits1 != 0, .mant = f.bits1, .scale = f.s1};
  if (r.has_min) { int c = Compare(v, r.min); if (c < 0 || (c == 0 && r.min_excl)) return false; }
  if (r.has_max) { int c = Compare(v, r.max); if (c > 0 || (c == 0 && r.max_excl)) return false; }
  if (r.has_multiple) {
    // v / m = (M * 10^t) / (C * 10^s) must be an integer.
    unsigned __int128 num = v.mant, den = r.multiple.mant;
    for (int i = 0; i < r.multiple.scale; ++i) num *= 10;
    for (int i = 0; i < v.scale; ++i) den *= 10;
    if (den == 0 || num % den != 0) return false;
  }
  return true;
}

// The number grammar, one byte: 1 taken, 0 refused, kNumberEnded when the
// byte is a delimiter after a complete-looking number. Tracked numbers (with
// bounds or multipleOf) keep up to 18 digits as an integer in bits1, the
// fraction digits in s1, and allow no exponent.
constexpr int kNumberEnded = 2;
int NumberByte(Frame& top, uint8_t b, bool fractions, bool tracked) {
  auto digit = [&](uint8_t ph) {
    if (tracked) {
      if (top.count >= 18) return 0;
      top.bits1 = top.bits1 * 10 + (b - '0');
      ++top.count;
      if (ph == kNumFrac) ++top.s1;
    }
    top.phase = ph;
    return 1;
  };
  const bool exp = b == 'e' || b == 'E';
  switch (top.phase) {
    case kNumStart:
      if (b == '-') { top.flags |= kNeg; top.phase = kNumMinus; return 1; }
      [[fallthrough]];
    case kNumMinus:
      if (b == '0') { top.phase = kNumZero; return 1; }
      return IsDigit(b) ? digit(kNumInt) : 0;
    case kNumZero: case kNumInt:
      if (IsDigit(b)) return top.phase == kNumInt ? digit(kNumInt) : 0;
      if (b == '.' && fractions) { top.phase = kNumDot; return 1; }
      if (exp && fractions && !tracked) { top.phase = kNumE; return 1; }
      return kNumberEnded;
    case kNumDot:
      return IsDigit(b) ? digit(kNumFrac) : 0;
    case kNumFrac:
      if (IsDigit(b)) return digit(kNumFrac);
      if (exp && !tracked) { top.phase = kNumE; return 1; }
      return kNumberEnded;
    case kNumE:
      if (b == '+' || b == '-') { top.phase = kNumESign; return 1; }
      if (IsDigit(b)) { top.phase = kNumExp; return 1; }
      return 0;
    case kNumESign:
      top.phase = kNumExp;
      return IsDigit(b) ? 1 : 0;
    default:  // kNumExp
      return IsDigit(b) ? 1 : kNumberEnded;
  }
}

}  // namespace

JsonMatcher::JsonMatcher(const CompiledSchema* schema, int max_whitespace, int32_t root_node)
    : schema_(schema), max_ws_(uint8_t(std::clamp(max_whitespace, 0, 255))) {
  frames_[0] = Frame{.kind = kRootF};
  frames_[1] = Frame{.kind = kValueF, .node = root_node};
  n_frames_ = 2;
  n_threads_ = 1;
  thread_end_[0] = 2;
}

void JsonMatcher::Emit(const Frame* f, int depth, JsonMatcher* out) const {
  // Drop a thread equal to one already there (anyOf branches that converged).
  uint16_t begin = 0;
  for (int t = 0; t < out->n_threads_; ++t) {
    uint16_t end = out->thread_end_[t];
    if (end - begin == depth && std::memcmp(out->frames_ + begin, f, sizeof(Frame) * size_t(depth)) == 0) return;
    begin = end;
  }
  if (out->n_threads_ >= kMaxThreads || out->n_frames_ + depth > kMaxFrames) return;  // refused: bounded work
  std::memcpy(out->frames_ + out->n_frames_, f, sizeof(Frame) * size_t(depth));
  out->n_frames_ = uint16_t(out->n_frames_ + depth);
  out->thread_end_[out->n_threads_++] = out->n_frames_;
}

bool JsonMatcher::Advance(uint8_t byte, JsonMatcher* out) const {
  out->schema_ = schema_;
  out->max_ws_ = max_ws_;
  out->n_threads_ = 0;
  out->n_frames_ = 0;
  Frame buf[kMaxDepth + 1];
  uint16_t begin = 0;
  for (int t = 0; t < n_threads_; ++t) {
    int depth = thread_end_[t] - begin;
    std::memcpy(buf, frames_ + begin, sizeof(Frame) * size_t(depth));
    Feed(buf, depth, byte, out, 0);
    begin = thread_end_[t];
  }
  return out->n_threads_ > 0;
}

bool JsonMatcher::Consume(std::string_view bytes) {
  JsonMatcher next;
  for (char c : bytes) {
    if (!Advance(uint8_t(c), &next)) { n_threads_ = 0; n_frames_ = 0; return false; }
    CopyFrom(next);
  }
  return true;
}

// Feeds byte to one thread (frames f[0..depth)), emitting the successors:
// the frame on top takes the byte, refuses it, or ends and hands it down.
bool JsonMatcher::Feed(Frame* f, int depth, uint8_t b, JsonMatcher* out, int forks) const {
  for (;;) {
    Step st = Step::kReject;
    switch (f[depth - 1].kind) {
      case kRootF: st = IsWs(b) ? Whitespace(f, depth, out) : Step::kReject; break;
      case kValueF: st = FeedValue(f, depth, b, out, forks); break;
      case kLiteralF: st = FeedLiteral(f, depth, b); break;
      case kStringF: st = FeedString(f, depth, b); break;
      case kKeyF: st = FeedKey(f, depth, b); break;
      case kObjectF: st = FeedObject(f, depth, b, out); break;
      case kArrayF: st = FeedArray(f, depth, b, out); break;
      case kNumberF: st = FeedNumber(f, depth, b); break;
    }
    if (st == Step::kReject) return false;
    if (st == Step::kEmitted) return true;
    if (st == Step::kConsumed) {
      // Any byte but whitespace resets the gap count of the frame now on top.
      f[depth - 1].ws = 0;
      Emit(f, depth, out);
      return true;
    }
    // Step::kPass: the byte goes to the frame now on top.
  }
}

JsonMatcher::Step JsonMatcher::Whitespace(Frame* f, int depth, JsonMatcher* out) const {
  Frame& top = f[depth - 1];
  if (top.ws >= max_ws_) return Step::kReject;
  ++top.ws;
  Emit(f, depth, out);
  return Step::kEmitted;
}

bool JsonMatcher::Push(Frame* f, int& depth, Frame fr) {
  if (depth >= kMaxDepth) return false;
  f[depth++] = fr;
  return true;
}

// A value's first byte picks its kind (each alternative of an anyOf is a
// thread of its own, at most 8 forks deep).
JsonMatcher::Step JsonMatcher::FeedValue(Frame* f, int& depth, uint8_t b, JsonMatcher* out, int forks) const {
  const CompiledSchema& s = *schema_;
  Frame& top = f[depth - 1];
  const Node& n = s.nodes[size_t(top.node)];
  if (IsWs(b)) return Whitespace(f, depth, out);
  if (!n.alts.empty()) {
    if (forks > 8) return Step::kReject;
    bool any = false;
    for (int32_t alt : n.alts) {
      Frame copy[kMaxDepth + 1];
      std::memcpy(copy, f, sizeof(Frame) * size_t(depth));
      copy[depth - 1].node = alt;
      any |= Feed(copy, depth, b, out, forks + 1);
    }
    return any ? Step::kEmitted : Step::kReject;
  }
  if (n.literals >= 0) { top = Frame{.kind = kLiteralF, .node = top.node, .s1 = n.literals}; return Step::kPass; }
  if (b == '{' && (n.types & kObject)) { top = Frame{.kind = kObjectF, .node = top.node}; return Step::kConsumed; }
  if (b == '[' && (n.types & kArray)) { top = Frame{.kind = kArrayF, .node = top.node}; return Step::kConsumed; }
  if (b == '"' && (n.types & kString)) { top = Frame{.kind = kStringF, .node = top.node}; return Step::kConsumed; }
  if ((b == '-' || IsDigit(b)) && (n.types & (kInteger | kNumber))) {
    top = Frame{.kind = kNumberF, .node = top.node};
    return Step::kPass;
  }
  if ((b == 't' || b == 'f') && (n.types & kBool)) {
    top = Frame{.kind = kLiteralF, .node = top.node, .s1 = s.bool_trie};
    return Step::kPass;
  }
  if (b == 'n' && (n.types & kNull)) { top = Frame{.kind = kLiteralF, .node = top.node, .s1 = s.null_trie}; return Step::kPass; }
  return Step::kReject;
}

JsonMatcher::Step JsonMatcher::FeedLiteral(Frame* f, int& depth, uint8_t b) const {
  Frame& top = f[depth - 1];
  const ByteTrie& trie = schema_->tries[size_t(top.s1)];
  int32_t next = trie.Child(top.s2, b);
  if (next < 0) {
    if (trie.nodes[size_t(top.s2)].value < 0) return Step::kReject;
    --depth;  // a number-like literal ended at a delimiter
    return Step::kPass;
  }
  top.s2 = next;
  if (trie.nodes[size_t(next)].value >= 0 && trie.nodes[size_t(next)].kids.empty()) --depth;
  return Step::kConsumed;
}

JsonMatcher::Step JsonMatcher::FeedString(Frame* f, int& depth, uint8_t b) const {
  const CompiledSchema& s = *schema_;
  Frame& top = f[depth - 1];
  const Node& n = s.nodes[size_t(top.node)];
  uint8_t c;
  int r = LexString(top, b, &c);
  if (r < 0) return Step::kReject;
  if (r == 2) {
    if (top.count < n.str.min_len || !DfaAccepts(s, n.str.pattern, top.s1) || !DfaAccepts(s, n.str.format, top.s2))
      return Step::kReject;
    --depth;
    return Step::kConsumed;
  }
  if (r == 1) {
    if ((c & 0xC0) != 0x80 && ++top.count > n.str.max_len) return Step::kReject;
    if (!StepDfa(s, n.str.pattern, &top.s1, c) || !StepDfa(s, n.str.format, &top.s2, c)) return Step::kReject;
    if (n.str.max_len != UINT32_MAX && !FitsLength(s, n, top)) return Step::kReject;
  } else if (top.count >= n.str.max_len || !EscapeViable(top, [&](uint8_t ch) {
               int32_t a = top.s1, b2 = top.s2;
               return StepDfa(s, n.str.pattern, &a, ch) && StepDfa(s, n.str.format, &b2, ch);
             })) {
    return Step::kReject;  // an escape begun must be able to finish
  }
  return Step::kConsumed;
}

// The closing quote of a key: the member it names (a property, at most once;
// else a patternProperties match, else additionalProperties).
bool JsonMatcher::CloseKey(Frame& obj, const Frame& key) const {
  const CompiledSchema& s = *schema_;
  const ObjectRule& o = s.nodes[size_t(obj.node)].obj;
  int32_t member = kNoNode;
  const ByteTrie* trie = o.key_trie >= 0 ? &s.tries[size_t(o.key_trie)] : nullptr;
  int32_t p = trie && key.s3 >= 0 ? trie->nodes[size_t(key.s3)].value : -1;
  if (p >= 0) {
    const Property& prop = o.props[size_t(p)];
    if (prop.required_bit >= 0) {
      if (obj.bits1 >> prop.required_bit & 1) return false;
      obj.bits1 |= uint64_t(1) << prop.required_bit;
    } else if (prop.seen_bit >= 0) {
      if (obj.bits2 >> prop.seen_bit & 1) return false;
      obj.bits2 |= uint64_t(1) << prop.seen_bit;
    }
    member = prop.node;
  } else {
    int matched = 0;
    for (size_t i = 0; i < o.pattern_props.size(); ++i) {
      int32_t st = i == 0 ? key.s4 : key.s5;
      if (st >= 0 && s.dfas[size_t(o.pattern_props[i].first)].Accepting(st)) {
        if (matched++ && member != o.pattern_props[i].second) return false;
        member = o.pattern_props[i].second;
      }
    }
    if (!matched) member = o.additional;
  }
  if (member == kNoNode || ++obj.count > o.max_props) return false;
  obj.s1 = member;
  return true;
}

JsonMatcher::Step JsonMatcher::FeedKey(Frame* f, int& depth, uint8_t b) const {
  const CompiledSchema& s = *schema_;
  Frame& top = f[depth - 1];
  Frame& obj = f[depth - 2];
  const ObjectRule& o = s.nodes[size_t(obj.node)].obj;
  uint8_t c;
  int r = LexString(top, b, &c);
  if (r < 0) return Step::kReject;
  if (r == 2) {
    if (!CloseKey(obj, top)) return Step::kReject;
    --depth;
    return Step::kConsumed;
  }
  // The trie holds escaped names: it sees the escaped text (r == 0 inside an
  // escape, then the escape's last byte); the pattern DFAs the decoded bytes.
  if (top.s3 >= 0) top.s3 = s.tries[size_t(o.key_trie)].Child(top.s3, b);
  if (r == 1) {
    for (size_t i = 0; i < o.pattern_props.size() && i < 2; ++i) {
      int32_t& st = i == 0 ? top.s4 : top.s5;
      if (st >= 0) st = s.dfas[size_t(o.pattern_props[i].first)].Next(st, c);
    }
  }
  bool alive = (top.s3 >= 0 && o.KeyAvailable(top.s3, obj.bits1, obj.bits2)) || o.additional != kNoNode ||
               (o.pattern_props.size() > 0 && top.s4 >= 0) || (o.pattern_props.size() > 1 && top.s5 >= 0);
  if (!alive) return Step::kReject;
  if (r == 0 && !EscapeViable(top, [&](uint8_t ch) {
        if (o.additional != kNoNode || top.s3 >= 0) return true;
        for (size_t i = 0; i < o.pattern_props.size() && i < 2; ++i) {
          int32_t st = i == 0 ? top.s4 : top.s5;
          if (st >= 0 && s.dfas[size_t(o.pattern_props[i].first)].Next(st, ch) != ByteDfa::kDead) return true;
        }
        return false;
      }))
    return Step::kReject;
  return Step::kConsumed;
}

JsonMatcher::Step JsonMatcher::FeedObject(Frame* f, int& depth, uint8_t b, JsonMatcher* out) const {
  Frame& top = f[depth - 1];
  const ObjectRule& o = schema_->nodes[size_t(top.node)].obj;
  auto can_add = [&] {
    if (top.count >= o.max_props) return false;
    if (o.additional != kNoNode || !o.pattern_props.empty()) return true;
    for (const Property& p : o.props) {
      if (p.required_bit >= 0 ? !(top.bits1 >> p.required_bit & 1) : p.seen_bit < 0 || !(top.bits2 >> p.seen_bit & 1))
        return true;
    }
    return false;
  };
  auto can_close = [&] { return (top.bits1 & o.required_mask) == o.required_mask && top.count >= o.min_props; };
  auto start_key = [&] {
    if (!can_add()) return Step::kReject;
    top.phase = kObjColon;
    top.ws = 0;
    return Push(f, depth, Frame{.kind = kKeyF, .node = top.node, .s3 = o.key_trie >= 0 ? 0 : -1, .s4 = 0, .s5 = 0})
               ? Step::kConsumed
               : Step::kReject;
  };
  if (IsWs(b)) return Whitespace(f, depth, out);
  switch (top.phase) {
    case kObjOpen:
      if (b == '"') return start_key();
      if (b == '}' && can_close()) { --depth; return Step::kConsumed; }
      return Step::kReject;
    case kObjColon:
      if (b != ':') return Step::kReject;
      top.phase = kObjAfterValue;
      top.ws = 0;
      return Push(f, depth, Frame{.kind = kValueF, .node = top.s1}) ? Step::kConsumed : Step::kReject;
    case kObjAfterValue:
      if (b == ',' && can_add()) { top.phase = kObjNeedKey; top.ws = 0; return Step::kConsumed; }
      if (b == '}' && can_close()) { --depth; return Step::kConsumed; }
      return Step::kReject;
    default:  // kObjNeedKey
      return b == '"' ? start_key() : Step::kReject;
  }
}

JsonMatcher::Step JsonMatcher::FeedArray(Frame* f, int& depth, uint8_t b, JsonMatcher* out) const {
  Frame& top = f[depth - 1];
  const ArrayRule& a = schema_->nodes[size_t(top.node)].arr;
  auto item_node = [&](uint32_t i) { return i < a.prefix.size() ? a.prefix[i] : a.items; };
  if (IsWs(b)) return Whitespace(f, depth, out);
  if (b == ']' && top.phase != kArrNeedItem) {
    if (top.count < a.min_items) return Step::kReject;
    --depth;
    return Step::kConsumed;
  }
  if (top.phase == kArrAfterItem) {
    if (b != ',' || top.count >= a.max_items || item_node(top.count) == kNoNode) return Step::kReject;
    top.phase = kArrNeedItem;
    top.ws = 0;
    return Step::kConsumed;
  }
  // An item begins with this byte.
  if (top.count >= a.max_items || item_node(top.count) == kNoNode) return Step::kReject;
  int32_t item = item_node(top.count);
  ++top.count;
  top.phase = kArrAfterItem;
  top.ws = 0;
  return Push(f, depth, Frame{.kind = kValueF, .node = item}) ? Step::kPass : Step::kReject;
}

JsonMatcher::Step JsonMatcher::FeedNumber(Frame* f, int& depth, uint8_t b) const {
  Frame& top = f[depth - 1];
  const Node& n = schema_->nodes[size_t(top.node)];
  const bool fractions = (n.types & kNumber) != 0;
  int ok = NumberByte(top, b, fractions, n.num.tracked());
  if (ok == kNumberEnded) {
    if (!NumberComplete(top, n)) return Step::kReject;
    --depth;
    return Step::kPass;  // the delimiter goes to the frame below
  }
  if (!ok || !NumberFeasible(top, n.num, fractions)) return Step::kReject;
  return Step::kConsumed;
}

bool JsonMatcher::CanEnd() const {
  uint16_t begin = 0;
  for (int t = 0; t < n_threads_; ++t) {
    int depth = thread_end_[t] - begin;
    const Frame* f = frames_ + begin;
    begin = thread_end_[t];
    while (depth > 0) {
      const Frame& top = f[depth - 1];
      if (top.kind == kRootF) return true;
      if (top.kind == kNumberF && NumberComplete(top, schema_->nodes[size_t(top.node)])) { --depth; continue; }
      if (top.kind == kLiteralF && schema_->tries[size_t(top.s1)].nodes[size_t(top.s2)].value >= 0) { --depth; continue; }
      break;
    }
  }
  return false;
}

bool JsonMatcher::Complete() const {
  if (n_threads_ == 0) return false;
  for (int t = 0; t < n_threads_; ++t) {
    const uint16_t begin = t == 0 ? 0 : thread_end_[t - 1];
    if (thread_end_[t] - begin != 1) return false;  // only the root frame: the value closed
  }
  return true;
}

bool JsonMatcher::PlainFree(const StringLex& lex) const {
  const Node& n = schema_->nodes[size_t(lex.node)];
  return lex.key ? n.obj.additional != kNoNode : n.str.pattern < 0 && n.str.format < 0;
}

int JsonMatcher::InStrings(StringLex* out) const {
  for (int t = 0; t < n_threads_; ++t) {
    const Frame& top = frames_[thread_end_[t] - 1];
    if (top.esc != 0 || (top.kind != kStringF && top.kind != kKeyF)) return 0;
    const Node& n = schema_->nodes[size_t(top.node)];
    StringLex& lex = out[t];
    lex.node = top.node;
    lex.key = top.kind == kKeyF;
    if (lex.key) {
      const Frame& obj = frames_[thread_end_[t] - 2];
      lex.obj_required = obj.bits1;
      lex.obj_seen = obj.bits2;
    }
    lex.state = PlainState{top.s1, top.s2, top.s3, top.s4, top.s5, top.utf8};
    lex.chars_left = lex.key || n.str.max_len == UINT32_MAX ? UINT32_MAX : n.str.max_len - top.count;
    // An automaton under a length bound: a token's fit depends on the state
    // it ends in (FitsLength), which the token sets do not keep.
    if (!lex.key && n.str.max_len != UINT32_MAX && (n.str.pattern >= 0 || n.str.format >= 0)) return 0;
  }
  return n_threads_;
}

bool JsonMatcher::StepPlain(const StringLex& lex, PlainState* st, uint8_t b) const {
  if (!Utf8Step(&st->utf8, b)) return false;
  const CompiledSchema& s = *schema_;
  const Node& n = s.nodes[size_t(lex.node)];
  if (!lex.key) return StepDfa(s, n.str.pattern, &st->s1, b) && StepDfa(s, n.str.format, &st->s2, b);
  const ObjectRule& o = n.obj;
  if (st->s3 >= 0) st->s3 = s.tries[size_t(o.key_trie)].Child(st->s3, b);
  if (o.pattern_props.size() > 0 && st->s4 >= 0) st->s4 = s.dfas[size_t(o.pattern_props[0].first)].Next(st->s4, b);
  if (o.pattern_props.size() > 1 && st->s5 >= 0) st->s5 = s.dfas[size_t(o.pattern_props[1].first)].Next(st->s5, b);
  return (st->s3 >= 0 && o.KeyAvailable(st->s3, lex.obj_required, lex.obj_seen)) || o.additional != kNoNode || (o.pattern_props.size() > 0 && st->s4 >= 0) ||
         (o.pattern_props.size() > 1 && st->s5 >= 0);
}

bool Accepts(const CompiledSchema& schema, int32_t node, std::string_view text) {
  JsonMatcher m(&schema, 0, node);
  return m.Consume(text) && m.CanEnd();
}

}  // namespace pc::structured
