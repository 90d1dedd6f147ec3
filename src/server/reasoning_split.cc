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

ReasoningSplitter::ReasoningSplitter(std::string open, std::string close, bool starts_inside, std::string trail,
                                     std::string direct)
    : open_(std::move(open)),
      close_(std::move(close)),
      trail_(std::move(trail)),
      direct_(std::move(direct)),
      state_(starts_inside ? State::kInside : State::kBefore) {}

bool ReasoningSplitter::Take(const std::string& lit, State next, bool* wait) {
  if (lit.empty()) return false;
  if (held_.size() >= lit.size() && held_.compare(0, lit.size(), lit) == 0) {
    held_.erase(0, lit.size());
    state_ = next;
    return true;
  }
  if (lit.compare(0, held_.size(), held_) == 0) *wait = true;
  return false;
}

std::pair<std::string, std::string> ReasoningSplitter::Push(std::string_view text) {
  std::string reasoning, content;
  held_ += text;
  while (!held_.empty()) {
    switch (state_) {
      case State::kBefore: {
        size_t lead = 0;
        while (lead < held_.size() && IsSpace(held_[lead])) ++lead;
        if (lead == held_.size()) return {reasoning, content};  // undecided: wait
        const std::string spaces = held_.substr(0, lead);
        held_.erase(0, lead);
        bool wait = false;
        if (Take(open_, State::kInside, &wait) || Take(direct_, State::kAfterTrail, &wait)) continue;
        held_.insert(0, spaces);
        if (wait) return {reasoning, content};
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
      case State::kAfterClose:
      case State::kAfterTrail: {
        size_t lead = 0;
        while (lead < held_.size() && IsSpace(held_[lead])) ++lead;
        held_.erase(0, lead);
        if (held_.empty()) return {reasoning, content};
        bool wait = false;
        if (state_ == State::kAfterClose && Take(trail_, State::kAfterTrail, &wait)) continue;
        if (wait) return {reasoning, content};
        state_ = State::kContent;
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
  return {"", held};  // an undecided beginning (or trail) was content after all
}

}  // namespace pc
