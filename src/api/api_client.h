// A small HTTP/1.1 client for the worker API (the CLI, and tests): one request per call over a
// fresh connection to the unix socket or a TCP address, Content-Length or chunked responses.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <string_view>

#include "base/status.h"
#include "base/unique_fd.h"

namespace codespace::api {

struct ClientResponse {
  int status = 0;
  std::map<std::string, std::string> headers;  // names lower-cased
  std::string body;                            // de-chunked
};

// Connects to "unix:/path" or "HOST:PORT" (IPv4 literal).
Result<UniqueFd> ConnectTo(const std::string& address);

// Sends one request and reads the whole answer. `on_body`, when given, receives a 2xx answer's
// body as it arrives (the answer's body then stays empty) and may return false to stop reading;
// other answers' bodies (errors) are collected in `body` as usual.
Result<ClientResponse> CallApi(const std::string& address, std::string_view method,
                               std::string_view target, std::string_view body = {},
                               const std::map<std::string, std::string>& headers = {},
                               const std::function<bool(std::string_view)>& on_body = nullptr);

// The same over an already connected descriptor (keep-alive: several calls on one fd).
Result<ClientResponse> CallApiOn(int fd, std::string_view method, std::string_view target,
                                 std::string_view body,
                                 const std::map<std::string, std::string>& headers,
                                 const std::function<bool(std::string_view)>& on_body);

// Decodes the log-frames body ("<tag> <len>\n<bytes>"...) incrementally.
class LogFrameDecoder {
 public:
  // Feeds bytes; calls `sink(tag, data)` for every complete frame. False on a malformed frame.
  bool Feed(std::string_view bytes,
            const std::function<void(std::string_view, std::string_view)>& sink);

 private:
  std::string pending_;
};

}  // namespace codespace::api
