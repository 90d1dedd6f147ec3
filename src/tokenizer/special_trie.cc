#include "tokenizer/special_trie.h"

#include <algorithm>

namespace pc {

void SpecialTrie::Add(const std::string& text, int32_t id) {
  if (text.empty()) return;
  int32_t node = 0;
  for (unsigned char ch : text) {
    auto [it, inserted] = edges_.try_emplace(Key(node, ch), static_cast<int32_t>(token_.size()));
    if (inserted) token_.push_back(-1);
    node = it->second;
  }
  if (token_[static_cast<size_t>(node)] < 0) token_[static_cast<size_t>(node)] = id;
  first_byte_[static_cast<uint8_t>(text[0])] = true;
  max_len_ = std::max(max_len_, text.size());
}

}  // namespace pc
