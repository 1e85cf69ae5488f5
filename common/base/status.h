// Status and StatusOr<T>: recoverable errors as values.
//
// Our code throws nothing; library exceptions are caught at API and thread
// boundaries and turned into a Status. A Status is cheap to copy when OK (no
// allocation). Thread rule: values, no shared state.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

#include "common/base/check.h"

namespace tandem {

enum class StatusCode : int {
  kOk = 0,
  kInvalidArgument,
  kNotFound,
  kAlreadyExists,
  kResourceExhausted,
  kFailedPrecondition,
  kUnavailable,
  kDeadlineExceeded,
  kCancelled,
  kPermissionDenied,
  kUnimplemented,
  kInternal,
};

std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string message);

  static Status Ok() { return Status(); }

  bool ok() const { return rep_ == nullptr; }
  StatusCode code() const { return rep_ ? rep_->code : StatusCode::kOk; }
  const std::string& message() const;
  // "INVALID_ARGUMENT: message" or "OK".
  std::string ToString() const;

  // Returns a copy with "context: " prepended to the message (no-op when OK).
  Status WithContext(std::string_view context) const;

  // Marks a deliberately ignored status.
  void IgnoreError() const {}

  friend bool operator==(const Status& a, const Status& b) {
    return a.code() == b.code() && a.message() == b.message();
  }

 private:
  struct Rep {
    StatusCode code;
    std::string message;
  };
  std::shared_ptr<const Rep> rep_;
};

Status InvalidArgumentError(std::string message);
Status NotFoundError(std::string message);
Status AlreadyExistsError(std::string message);
Status ResourceExhaustedError(std::string message);
Status FailedPreconditionError(std::string message);
Status UnavailableError(std::string message);
Status DeadlineExceededError(std::string message);
Status CancelledError(std::string message);
Status PermissionDeniedError(std::string message);
Status UnimplementedError(std::string message);
Status InternalError(std::string message);

// StatusOr<T>: either a T or a non-OK Status.
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(const Status& status) : status_(status) {  // NOLINT: implicit by design
    TANDEM_CHECK(!status.ok()) << "StatusOr constructed from an OK Status without a value";
  }
  StatusOr(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design

  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }

  // REQUIRES: ok().
  T& value() & {
    TANDEM_CHECK(ok()) << "value() on error: " << status_.ToString();
    return *value_;
  }
  const T& value() const& {
    TANDEM_CHECK(ok()) << "value() on error: " << status_.ToString();
    return *value_;
  }
  T&& value() && {
    TANDEM_CHECK(ok()) << "value() on error: " << status_.ToString();
    return std::move(*value_);
  }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  Status status_;
  std::optional<T> value_;
};

namespace internal {
inline const Status& GetStatus(const Status& s) { return s; }
template <typename T>
const Status& GetStatus(const StatusOr<T>& s) {
  return s.status();
}
}  // namespace internal

}  // namespace tandem

#define TANDEM_CONCAT_INNER_(a, b) a##b
#define TANDEM_CONCAT_(a, b) TANDEM_CONCAT_INNER_(a, b)

// Returns the status from the enclosing function if `expr` (a Status or StatusOr) is not OK.
// The Status is copied (cheap) so `expr` may be `Foo().status()` on a temporary.
#define TANDEM_RETURN_IF_ERROR(expr)                                     \
  do {                                                                   \
    ::tandem::Status _tandem_st = ::tandem::internal::GetStatus((expr)); \
    if (!_tandem_st.ok()) return _tandem_st;                             \
  } while (0)

// `lhs = value of expr`, or return its error. lhs may declare: `auto x`.
#define TANDEM_ASSIGN_OR_RETURN(lhs, expr) \
  TANDEM_ASSIGN_OR_RETURN_IMPL_(TANDEM_CONCAT_(_tandem_sor_, __LINE__), lhs, expr)
#define TANDEM_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                  \
  if (!tmp.ok()) return tmp.status();                 \
  lhs = std::move(tmp).value()
