// Incremental detokenizer for streaming: feeds token pieces and releases only
// complete UTF-8 characters, holding back a partial multi-byte sequence until
// the tokens that finish it arrive. Not thread-safe (one per stream).
#pragma once
#include <string>

namespace pc {

class Tokenizer;

class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tok) : tok_(tok) {}
  // Returns the newly complete text (possibly empty).
  std::string Push(int32_t token);
  // Releases whatever is held back (an incomplete sequence at stream end).
  std::string Flush();

 private:
  const Tokenizer& tok_;
  std::string pending_;
};

// Length of the longest prefix of s that ends on a complete UTF-8 character
// (invalid bytes count as complete, so they are never held forever).
size_t CompleteUtf8Prefix(const std::string& s);

}  // namespace pc
