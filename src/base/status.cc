#include "base/status.h"

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace codespace {

std::string_view StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "OK";
    case StatusCode::kInvalidArgument: return "INVALID_ARGUMENT";
    case StatusCode::kNotFound: return "NOT_FOUND";
    case StatusCode::kAlreadyExists: return "ALREADY_EXISTS";
    case StatusCode::kPermissionDenied: return "PERMISSION_DENIED";
    case StatusCode::kFailedPrecondition: return "FAILED_PRECONDITION";
    case StatusCode::kUnavailable: return "UNAVAILABLE";
    case StatusCode::kAborted: return "ABORTED";
    case StatusCode::kInternal: return "INTERNAL";
  }
  return "UNKNOWN";
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  return fmt::format("{}: {}", StatusCodeName(code_), message_);
}

Status Status::WithContext(std::string_view context) const {
  if (ok()) return *this;
  return Status(code_, fmt::format("{}: {}", context, message_));
}

std::string ErrnoText(int err) {
  char buf[256];
  // GNU strerror_r returns the message pointer (possibly static, possibly buf).
  const char* text = strerror_r(err, buf, sizeof(buf));
  return text;
}

Status ErrnoError(std::string_view call, int err) {
  StatusCode code = StatusCode::kInternal;
  switch (err) {
    case EPERM:
    case EACCES: code = StatusCode::kPermissionDenied; break;
    case ENOENT: code = StatusCode::kNotFound; break;
    case EEXIST: code = StatusCode::kAlreadyExists; break;
    case EAGAIN:
    case EINTR: code = StatusCode::kUnavailable; break;
    default: break;
  }
  return Status(code, fmt::format("{}: {}", call, ErrnoText(err)));
}

}  // namespace codespace
