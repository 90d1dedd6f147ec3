#include "tokenizer/detokenizer.h"

#include "tokenizer/tokenizer.h"

namespace pc {

size_t CompleteUtf8Prefix(const std::string& s) {
  // Walk back over at most 3 continuation bytes to the last lead byte.
  size_t i = s.size();
  size_t cont = 0;
  while (i > 0 && cont < 4 && (static_cast<uint8_t>(s[i - 1]) & 0xc0) == 0x80) {
    --i;
    ++cont;
  }
  if (i == 0) return cont >= 4 ? s.size() : (cont == 0 ? 0 : s.size());
  const auto lead = static_cast<uint8_t>(s[i - 1]);
  size_t need = 0;
  if ((lead & 0xe0) == 0xc0) need = 1;
  else if ((lead & 0xf0) == 0xe0) need = 2;
  else if ((lead & 0xf8) == 0xf0) need = 3;
  else return s.size();  // ASCII or invalid lead: everything is complete
  return cont >= need ? s.size() : i - 1;
}

std::string StreamDecoder::Push(int32_t token) {
  pending_ += tok_.Piece(token);
  const size_t n = CompleteUtf8Prefix(pending_);
  std::string out = pending_.substr(0, n);
  pending_.erase(0, n);
  return out;
}

std::string StreamDecoder::Flush() {
  std::string out;
  out.swap(pending_);
  return out;
}

}  // namespace pc
