#include "server/reasoning_split.h"

namespace pc {
namespace {

bool IsSpace(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

// The length of the longest suffix of s that is a proper prefix of marker.
size_t HeldSuffix(std::string_view s, std::string_view marker) {
  for (size_t n = std::min(s.size(), marker.size() - 1); n > 0; --n)
    if (s.substr(s.size() - n) == marker.substr(0, n)) return n;
  return 0;
}

}  // namespace

ReasoningSplitter::ReasoningSplitter(std::string open, std::string close, bool starts_inside)
    : open_(std::move(open)), close_(std::move(close)), state_(starts_inside ? State::kInside : State::kBefore) {}

std::pair<std::string, std::string> ReasoningSplitter::Push(std::string_view text) {
  std::string reasoning, content;
  held_ += text;
  while (!held_.empty()) {
    switch (state_) {
      case State::kBefore: {
        size_t lead = 0;
        while (lead < held_.size() && IsSpace(held_[lead])) ++lead;
        std::string_view rest = std::string_view(held_).substr(lead);
        if (rest.size() >= open_.size() && rest.substr(0, open_.size()) == open_) {
          held_.erase(0, lead + open_.size());
          state_ = State::kInside;
          continue;
        }
        if (open_.substr(0, rest.size()) == rest) return {reasoning, content};  // undecided: wait
        state_ = State::kContent;
        continue;
      }
      case State::kInside: {
        const size_t at = held_.find(close_);
        if (at != std::string::npos) {
          reasoning += held_.substr(0, at);
          held_.erase(0, at + close_.size());
          state_ = State::kAfterClose;
          continue;
        }
        const size_t keep = HeldSuffix(held_, close_);
        reasoning += held_.substr(0, held_.size() - keep);
        held_.erase(0, held_.size() - keep);
        return {reasoning, content};
      }
      case State::kAfterClose: {
        size_t lead = 0;
        while (lead < held_.size() && IsSpace(held_[lead])) ++lead;
        held_.erase(0, lead);
        if (!held_.empty()) state_ = State::kContent;
        continue;
      }
      case State::kContent:
        content += held_;
        held_.clear();
        break;
    }
  }
  return {reasoning, content};
}

std::pair<std::string, std::string> ReasoningSplitter::Flush() {
  std::string held = std::move(held_);
  held_.clear();
  if (state_ == State::kInside) return {held, ""};
  if (state_ == State::kAfterClose) return {"", ""};
  return {"", held};  // an undecided beginning was content after all
}

}  // namespace pc
