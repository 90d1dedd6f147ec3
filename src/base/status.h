// Status and Result<T>: error values for untrusted input (files, requests).
// Internal invariants use PC_CHECK instead (check.h).
#pragma once
#include <fmt/format.h>

#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace pc {

class Status {
 public:
  Status() = default;
  static Status Error(std::string message) { return Status(std::move(message)); }
  bool ok() const { return !message_.has_value(); }
  const std::string& message() const;

 private:
  explicit Status(std::string message) : message_(std::move(message)) {}
  std::optional<std::string> message_;
};

inline Status OkStatus() { return Status(); }

template <typename... Args>
Status Errorf(fmt::format_string<Args...> f, Args&&... args) {
  return Status::Error(fmt::format(f, std::forward<Args>(args)...));
}

// Holds either a value or an error Status.
template <typename T>
class Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {}  // NOLINT
  bool ok() const { return v_.index() == 0; }
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() { return value(); }
  Status status() const { return ok() ? OkStatus() : std::get<1>(v_); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace pc

// Propagate an error Status from an expression yielding Status.
#define PC_RETURN_IF_ERROR(expr)          \
  do {                                    \
    ::pc::Status pc_status_ = (expr);     \
    if (!pc_status_.ok()) return pc_status_; \
  } while (0)

#define PC_CONCAT_INNER(a, b) a##b
#define PC_CONCAT(a, b) PC_CONCAT_INNER(a, b)
// Assign the value of a Result expression or return its error.
#define PC_ASSIGN_OR_RETURN(lhs, expr)                                  \
  auto PC_CONCAT(pc_result_, __LINE__) = (expr);                        \
  if (!PC_CONCAT(pc_result_, __LINE__).ok())                            \
    return PC_CONCAT(pc_result_, __LINE__).status();                    \
  lhs = std::move(PC_CONCAT(pc_result_, __LINE__)).value()
