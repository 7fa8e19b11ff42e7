// HTTP/1.1 messages for the worker API: a strict, bounded request parser and a response writer.
// Pure: bytes in, values out; no sockets here (api_server.h owns those), so the parser can be
// fuzzed and table-tested.
//
// What is accepted: a request line "METHOD SP origin-form SP HTTP/1.x", header lines
// "name: value" (no obsolete line folding), and a body only by Content-Length (a
// Transfer-Encoding on a request is refused with 501: the API never needs chunked uploads).
// Limits: the head (request line and headers) at most `max_head_bytes`, at most `max_headers`
// lines, the body at most `max_body_bytes` (413 when Content-Length says more).
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace codespace::api {

struct HttpLimits {
  size_t max_head_bytes = 16 * 1024;
  size_t max_headers = 100;
  size_t max_body_bytes = 1024 * 1024;
};

struct HttpRequest {
  std::string method;                          // "GET", "POST", ...
  std::string target;                          // as sent: "/v1/runs?state=queued"
  std::string path;                            // percent-decoded path: "/v1/runs"
  std::map<std::string, std::string> query;    // decoded; a repeated key keeps the last value
  std::map<std::string, std::string> headers;  // names lower-cased; repeated: joined by ", "
  std::string body;
  bool http10 = false;
  bool keep_alive = true;  // HTTP/1.1 default unless "Connection: close"; 1.0 only with keep-alive

  // The header's value, or empty when missing (`name` lower-case).
  std::string Header(std::string_view name) const;
};

enum class ParseState { kIncomplete, kComplete, kError };

struct ParseResult {
  ParseState state = ParseState::kIncomplete;
  size_t consumed = 0;  // kComplete: bytes of the buffer this request took
  int status = 0;       // kError: the HTTP status to answer (400, 413, 414, 431, 501, 505)
  std::string error;    // kError: why
};

// Parses one request from the front of `buffer`. kIncomplete: read more and call again with
// the grown buffer (nothing is kept between calls).
ParseResult ParseRequest(std::string_view buffer, const HttpLimits& limits, HttpRequest* out);

// Percent-decoding of a path or query component ('+' is a space only in queries).
// nullopt for a malformed escape or a decoded NUL.
std::optional<std::string> PercentDecode(std::string_view text, bool plus_is_space);

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::vector<std::pair<std::string, std::string>> headers;  // extra headers
  std::string body;
};

std::string_view ReasonPhrase(int status);

// The whole response, with Content-Length; "Connection: close" when !keep_alive.
std::string SerializeResponse(const HttpResponse& response, bool keep_alive);

// The head of a chunked response (Transfer-Encoding: chunked); chunks follow with ChunkFrame,
// and the last with ChunkFrame("").
std::string ChunkedResponseHead(int status, std::string_view content_type, bool keep_alive);
std::string ChunkFrame(std::string_view data);

// A JSON error body: {"error": message, "field": field} (field omitted when empty).
HttpResponse ErrorResponse(int status, std::string_view message, std::string_view field = {});

}  // namespace codespace::api
