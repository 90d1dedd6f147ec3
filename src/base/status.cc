#include "base/status.h"

namespace pc {

const std::string& Status::message() const {
  static const std::string kOk = "OK";
  return message_ ? *message_ : kOk;
}

}  // namespace pc
