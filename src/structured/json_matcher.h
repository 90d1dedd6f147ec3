// A JSON text checked byte by byte against a compiled schema: the state after
// each byte says whether some completion of the text so far is valid JSON
// that the schema accepts. Nondeterminism (anyOf) runs as parallel threads,
// each a stack of frames.
//
// Shapes: at most kMaxThreads threads, kMaxFrames frames in all, nesting at
// most kMaxDepth per thread (deeper text is rejected, a bound against hostile
// grammars). A matcher is a plain value of about 16 KiB; copies copy only the
// frames in use.
//
// Thread-safety: const methods are safe concurrently; the schema must outlive
// the matcher.
#pragma once
#include <cstdint>
#include <cstring>
#include <string_view>

#include "structured/json_schema.h"

namespace pc::structured {

// Strict UTF-8 inside strings, one byte at a time. State: continuation bytes
// owed (bits 0-1) and the range the next one must fall in (bits 2-4: 0 any
// of 80-BF; 1 A0-BF after E0; 2 80-9F after ED; 3 90-BF after F0; 4 80-8F
// after F4), which keeps out overlong forms, surrogates and code points
// past U+10FFFF. Bytes below 0x80 are the caller's. False: refused.
inline bool Utf8Step(uint8_t* state, uint8_t b) {
  const uint8_t owed = *state & 3, range = uint8_t(*state >> 2);
  if (b < 0x80) return owed == 0;
  if (b < 0xC0) {
    if (owed == 0) return false;
    static constexpr uint8_t kLo[5] = {0x80, 0xA0, 0x80, 0x90, 0x80}, kHi[5] = {0xBF, 0xBF, 0x9F, 0xBF, 0x8F};
    if (b < kLo[range] || b > kHi[range]) return false;
    *state = uint8_t(owed - 1);
    return true;
  }
  if (owed != 0 || b < 0xC2 || b > 0xF4) return false;
  if (b < 0xE0) *state = 1;
  else if (b < 0xF0) *state = uint8_t(2 | (b == 0xE0 ? 1 << 2 : b == 0xED ? 2 << 2 : 0));
  else *state = uint8_t(3 | (b == 0xF0 ? 3 << 2 : b == 0xF4 ? 4 << 2 : 0));
  return true;
}
inline constexpr int kUtf8States = 20;  // state values are below this

struct Frame {
  uint8_t kind = 0, phase = 0, ws = 0, esc = 0;
  uint8_t utf8 = 0, flags = 0;
  uint16_t hex = 0;
  int32_t node = 0;
  uint32_t count = 0;
  int32_t s1 = 0, s2 = 0, s3 = 0, s4 = 0, s5 = 0;
  uint64_t bits1 = 0, bits2 = 0;
};

class JsonMatcher {
 public:
  static constexpr int kMaxFrames = 256, kMaxThreads = 8, kMaxDepth = 64;

  JsonMatcher() = default;
  // The state before the first byte of a value of schema's root.
  JsonMatcher(const CompiledSchema* schema, int max_whitespace) : JsonMatcher(schema, max_whitespace, schema->root) {}
  JsonMatcher(const CompiledSchema* schema, int max_whitespace, int32_t root_node);
  JsonMatcher(const JsonMatcher& o) { CopyFrom(o); }
  JsonMatcher& operator=(const JsonMatcher& o) {
    if (this != &o) CopyFrom(o);
    return *this;
  }
  void CopyFrom(const JsonMatcher& o) {
    schema_ = o.schema_;
    n_threads_ = o.n_threads_;
    n_frames_ = o.n_frames_;
    max_ws_ = o.max_ws_;
    std::memcpy(thread_end_, o.thread_end_, sizeof(thread_end_[0]) * n_threads_);
    std::memcpy(frames_, o.frames_, sizeof(Frame) * n_frames_);
  }

  // The successor after byte into *out (not this); false if no thread
  // accepts it (then *out is unspecified).
  bool Advance(uint8_t byte, JsonMatcher* out) const;
  // In place, over many bytes.
  bool Consume(std::string_view bytes);
  // Whether the text so far is a complete accepted value.
  bool CanEnd() const;
  // Whether it is complete and only whitespace could follow (the value
  // closed: not a number that more digits could extend).
  bool Complete() const;


  // Inside strings (no thread within an escape or elsewhere): what decides
  // which plain content bytes (no quote, backslash or control byte) it
  // accepts. Plain bytes never end the string, so a token of them is
  // accepted exactly when StepPlain accepts each byte (and its code points
  // fit in chars_left).
  struct PlainState {
    int32_t s1 = 0, s2 = 0, s3 = 0, s4 = 0, s5 = 0;  // DFA and trie states
    uint8_t utf8 = 0;
    bool operator==(const PlainState&) const = default;
  };
  struct StringLex {
    int32_t node = 0;
    bool key = false;
    uint64_t obj_required = 0, obj_seen = 0;  // keys: the object's seen bits
    PlainState state;
    uint32_t chars_left = 0;
  };
  // One StringLex per thread into out[kMaxThreads]; the count, 0 if some
  // thread is not inside a string. Threads do not interact inside strings:
  // a plain token is accepted when some thread accepts it.
  int InStrings(StringLex* out) const;
  // Whether StepPlain accepts every well-formed UTF-8 byte there.
  bool PlainFree(const StringLex& lex) const;
  bool StepPlain(const StringLex& lex, PlainState* st, uint8_t byte) const;
  const CompiledSchema* schema() const { return schema_; }

  bool dead() const { return n_threads_ == 0; }

 private:
  bool Feed(Frame* f, int depth, uint8_t byte, JsonMatcher* out, int forks) const;
  // One frame kind's step on a byte (f[depth - 1] is that frame).
  enum class Step {
    kReject,    // the byte is refused
    kEmitted,   // taken and the successor(s) already emitted (whitespace, forks)
    kConsumed,  // taken; emit the thread as it now stands
    kPass,      // the frame changed kind or ended: the frame now on top takes the byte
  };
  Step Whitespace(Frame* f, int depth, JsonMatcher* out) const;
  static bool Push(Frame* f, int& depth, Frame fr);
  Step FeedValue(Frame* f, int& depth, uint8_t b, JsonMatcher* out, int forks) const;
  Step FeedLiteral(Frame* f, int& depth, uint8_t b) const;
  Step FeedString(Frame* f, int& depth, uint8_t b) const;
  Step FeedKey(Frame* f, int& depth, uint8_t b) const;
  bool CloseKey(Frame& obj, const Frame& key) const;
  Step FeedObject(Frame* f, int& depth, uint8_t b, JsonMatcher* out) const;
  Step FeedArray(Frame* f, int& depth, uint8_t b, JsonMatcher* out) const;
  Step FeedNumber(Frame* f, int& depth, uint8_t b) const;
  void Emit(const Frame* f, int depth, JsonMatcher* out) const;

  const CompiledSchema* schema_ = nullptr;
  uint8_t n_threads_ = 0, max_ws_ = 0;
  uint16_t n_frames_ = 0;
  uint16_t thread_end_[kMaxThreads] = {};
  Frame frames_[kMaxFrames];
};

// Whether the whole text is a value the node accepts (used to filter enum
// values at compile time, and by tests).
bool Accepts(const CompiledSchema& schema, int32_t node, std::string_view text);

}  // namespace pc::structured
