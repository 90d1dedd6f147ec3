// Stop strings over streamed text. Text that might be the start of a stop
// string is held back until it either completes the stop string (generation
// ends, the stop string and anything after it are dropped, as OpenAI does) or
// can no longer match (it is released). Input must be complete UTF-8; the
// output then is too.
// Thread-safety: none (one per request).
#pragma once
#include <string>
#include <vector>

namespace pc {

class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stops);
  // Adds generated text; returns the text that is now safe to emit.
  std::string Push(const std::string& text);
  // Releases text still held (generation ended for another reason).
  std::string Flush();
  bool stopped() const { return stopped_; }

 private:
  std::vector<std::string> stops_;
  std::string held_;
  bool stopped_ = false;
};

}  // namespace pc
