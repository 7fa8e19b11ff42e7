// Status and Result<T>: how codespace's own operations report failure.
//
// One small type, used everywhere instead of exceptions. A failed syscall becomes a Status whose
// message names the call, its key arguments and errno's text, e.g.
//   setns(/run/netns/cs-1a2b3c, CLONE_NEWNET): Operation not permitted
// so that an operator reading one line knows what failed and where.
//
// How a *run* ended is not a Status: see run/run_outcome.h.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace codespace {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,     // the caller's input is wrong (a bad allowlist entry, a bad flag)
  kNotFound,            // a file, binary or record does not exist
  kAlreadyExists,       //
  kPermissionDenied,    // EPERM / EACCES
  kFailedPrecondition,  // the host or state does not allow it (policy cannot be enforced)
  kUnavailable,         // transient: try again
  kAborted,             // a concurrent change won (e.g. a state transition lost a race)
  kInternal,            // everything else
};

std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "OK" or "<CODE>: <message>".
  std::string ToString() const;

  // Returns a copy whose message is "<context>: <message>"; OK stays OK.
  Status WithContext(std::string_view context) const;

  // Marks a status as deliberately ignored.
  void IgnoreError() const {}

  friend bool operator==(const Status& a, const Status& b) {
    return a.code_ == b.code_ && a.message_ == b.message_;
  }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status OkStatus() { return Status(); }
inline Status InvalidArgumentError(std::string m) {
  return Status(StatusCode::kInvalidArgument, std::move(m));
}
inline Status NotFoundError(std::string m) { return Status(StatusCode::kNotFound, std::move(m)); }
inline Status FailedPreconditionError(std::string m) {
  return Status(StatusCode::kFailedPrecondition, std::move(m));
}
inline Status InternalError(std::string m) { return Status(StatusCode::kInternal, std::move(m)); }
inline Status AbortedError(std::string m) { return Status(StatusCode::kAborted, std::move(m)); }
inline Status UnavailableError(std::string m) {
  return Status(StatusCode::kUnavailable, std::move(m));
}

// "<call>: <strerror(err)>", with a code chosen from errno (EPERM/EACCES → kPermissionDenied,
// ENOENT → kNotFound, EEXIST → kAlreadyExists, EAGAIN/EINTR → kUnavailable, else kInternal).
Status ErrnoError(std::string_view call, int err);

// strerror_r, thread-safe.
std::string ErrnoText(int err);

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design, like StatusOr
  Result(Status status) : v_(std::move(status)) {  // NOLINT
    if (std::get<Status>(v_).ok()) v_ = Status(StatusCode::kInternal, "Result built from OK");
  }

  bool ok() const { return std::holds_alternative<T>(v_); }
  Status status() const { return ok() ? Status() : std::get<Status>(v_); }

  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }

  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  T value_or(T fallback) const& { return ok() ? value() : std::move(fallback); }

 private:
  std::variant<T, Status> v_;
};

namespace internal {
inline Status AsStatus(const Status& s) { return s; }
template <typename T>
Status AsStatus(const Result<T>& r) {
  return r.status();
}
}  // namespace internal

}  // namespace codespace

#define CS_CONCAT_INNER(a, b) a##b
#define CS_CONCAT(a, b) CS_CONCAT_INNER(a, b)

// Returns the status from the enclosing function when `expr` (a Status or Result) is not OK.
// (__COUNTER__ keeps the temporary unique when one use nests inside another's lambda.)
#define RETURN_IF_ERROR(expr) RETURN_IF_ERROR_IMPL(CS_CONCAT(cs_status_, __COUNTER__), expr)
#define RETURN_IF_ERROR_IMPL(var, expr)                                 \
  do {                                                                  \
    ::codespace::Status var = ::codespace::internal::AsStatus((expr)); \
    if (!var.ok()) return var;                                          \
  } while (0)

// `ASSIGN_OR_RETURN(auto x, MakeX());` — binds the value or returns the error.
#define ASSIGN_OR_RETURN(lhs, expr) \
  ASSIGN_OR_RETURN_IMPL(CS_CONCAT(cs_result_, __COUNTER__), lhs, expr)
#define ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                          \
  if (!tmp.ok()) return tmp.status();         \
  lhs = std::move(tmp).value()
