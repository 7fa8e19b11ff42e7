#include "api/http.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <nlohmann/json.hpp>

namespace codespace::api {
namespace {

bool IsTokenChar(char c) {
  if (std::isalnum(static_cast<unsigned char>(c))) return true;
  switch (c) {
    case '!':
    case '#':
    case '$':
    case '%':
    case '&':
    case '\'':
    case '*':
    case '+':
    case '-':
    case '.':
    case '^':
    case '_':
    case '`':
    case '|':
    case '~':
      return true;
    default:
      return false;
  }
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

ParseResult Error(int status, std::string why) {
  ParseResult r;
  r.state = ParseState::kError;
  r.status = status;
  r.error = std::move(why);
  return r;
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::string HttpRequest::Header(std::string_view name) const {
  auto it = headers.find(std::string(name));
  return it == headers.end() ? std::string() : it->second;
}

std::optional<std::string> PercentDecode(std::string_view text, bool plus_is_space) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '%') {
      if (i + 2 >= text.size()) return std::nullopt;
      int hi = HexValue(text[i + 1]), lo = HexValue(text[i + 2]);
      if (hi < 0 || lo < 0) return std::nullopt;
      char decoded = static_cast<char>(hi * 16 + lo);
      if (decoded == '\0') return std::nullopt;
      out.push_back(decoded);
      i += 2;
    } else if (c == '+' && plus_is_space) {
      out.push_back(' ');
    } else {
      out.push_back(c);
    }
  }
  return out;
}

ParseResult ParseRequest(std::string_view buffer, const HttpLimits& limits, HttpRequest* out) {
  // Tolerate (RFC 9112 §2.2) empty lines before the request line.
  size_t start = 0;
  while (start + 1 < buffer.size() && buffer[start] == '\r' && buffer[start + 1] == '\n')
    start += 2;
  size_t head_end = buffer.find("\r\n\r\n", start);
  if (head_end == std::string_view::npos) {
    if (buffer.size() - start > limits.max_head_bytes) {
      return Error(431, "request head too large");
    }
    return ParseResult{};
  }
  if (head_end - start > limits.max_head_bytes) return Error(431, "request head too large");
  std::string_view head = buffer.substr(start, head_end - start);
  for (char c : head) {
    if (c == '\0') return Error(400, "NUL byte in the request head");
  }

  HttpRequest req;
  size_t line_end = head.find("\r\n");
  std::string_view request_line = head.substr(0, line_end);
  std::string_view rest =
      line_end == std::string_view::npos ? std::string_view() : head.substr(line_end + 2);

  size_t sp1 = request_line.find(' ');
  if (sp1 == std::string_view::npos || sp1 == 0) return Error(400, "malformed request line");
  size_t sp2 = request_line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || sp2 == sp1 + 1) return Error(400, "malformed request line");
  std::string_view method = request_line.substr(0, sp1);
  std::string_view target = request_line.substr(sp1 + 1, sp2 - sp1 - 1);
  std::string_view version = request_line.substr(sp2 + 1);
  for (char c : method) {
    if (!IsTokenChar(c)) return Error(400, "malformed method");
  }
  if (version == "HTTP/1.1") {
    req.http10 = false;
  } else if (version == "HTTP/1.0") {
    req.http10 = true;
  } else if (version.size() == 8 && version.substr(0, 5) == "HTTP/") {
    return Error(505, "HTTP version not supported");
  } else {
    return Error(400, "malformed HTTP version");
  }
  if (target.empty() || target.front() != '/') return Error(400, "request target must be a path");
  if (target.size() > 8192) return Error(414, "request target too long");
  for (char c : target) {
    if (static_cast<unsigned char>(c) <= 0x20 || static_cast<unsigned char>(c) >= 0x7f) {
      return Error(400, "invalid character in the request target");
    }
  }
  req.method = std::string(method);
  req.target = std::string(target);
  std::string_view raw_path = target.substr(0, target.find('?'));
  auto path = PercentDecode(raw_path, false);
  if (!path) return Error(400, "malformed percent-escape in the path");
  req.path = std::move(*path);
  if (size_t q = target.find('?'); q != std::string_view::npos) {
    std::string_view query = target.substr(q + 1);
    while (!query.empty()) {
      size_t amp = query.find('&');
      std::string_view pair = query.substr(0, amp);
      query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
      if (pair.empty()) continue;
      size_t eq = pair.find('=');
      auto key = PercentDecode(pair.substr(0, eq), true);
      auto value = PercentDecode(
          eq == std::string_view::npos ? std::string_view() : pair.substr(eq + 1), true);
      if (!key || !value) return Error(400, "malformed percent-escape in the query");
      req.query[*key] = *value;
    }
  }

  size_t header_count = 0;
  while (!rest.empty()) {
    size_t eol = rest.find("\r\n");
    std::string_view line = rest.substr(0, eol);
    rest = eol == std::string_view::npos ? std::string_view() : rest.substr(eol + 2);
    if (++header_count > limits.max_headers) return Error(431, "too many header fields");
    if (line.empty()) return Error(400, "empty header line");
    if (line.front() == ' ' || line.front() == '\t') return Error(400, "obsolete line folding");
    size_t colon = line.find(':');
    if (colon == std::string_view::npos || colon == 0) return Error(400, "malformed header field");
    std::string_view name = line.substr(0, colon);
    for (char c : name) {
      if (!IsTokenChar(c)) return Error(400, "malformed header field name");
    }
    std::string_view value = Trim(line.substr(colon + 1));
    for (char c : value) {
      if (c == '\r' || c == '\n') return Error(400, "bare CR or LF in a header field");
    }
    std::string key = Lower(name);
    auto [it, inserted] = req.headers.emplace(key, std::string(value));
    if (!inserted) {
      // Duplicates that decide framing or identity are ambiguous: refuse rather than guess.
      if (key == "content-length" || key == "host" || key == "authorization") {
        return Error(400, fmt::format("repeated header field {}", key));
      }
      it->second += ", ";
      it->second += value;
    }
  }

  if (req.headers.count("transfer-encoding")) {
    return Error(501, "Transfer-Encoding on a request is not supported; send Content-Length");
  }
  size_t body_length = 0;
  if (auto it = req.headers.find("content-length"); it != req.headers.end()) {
    const std::string& v = it->second;
    if (v.empty() || v.size() > 18 ||
        !std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      return Error(400, "malformed Content-Length");
    }
    uint64_t n = 0;
    std::from_chars(v.data(), v.data() + v.size(), n);
    if (n > limits.max_body_bytes) {
      return Error(413, fmt::format("body of {} bytes is over the limit of {} bytes", n,
                                    limits.max_body_bytes));
    }
    body_length = static_cast<size_t>(n);
  }
  size_t body_start = head_end + 4;
  if (buffer.size() - body_start < body_length) return ParseResult{};
  req.body = std::string(buffer.substr(body_start, body_length));

  std::string connection = Lower(req.Header("connection"));
  if (req.http10) {
    req.keep_alive = connection.find("keep-alive") != std::string::npos;
  } else {
    req.keep_alive = connection.find("close") == std::string::npos;
  }
  *out = std::move(req);
  ParseResult r;
  r.state = ParseState::kComplete;
  r.consumed = body_start + body_length;
  return r;
}

std::string_view ReasonPhrase(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 201:
      return "Created";
    case 202:
      return "Accepted";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 409:
      return "Conflict";
    case 411:
      return "Length Required";
    case 413:
      return "Content Too Large";
    case 414:
      return "URI Too Long";
    case 415:
      return "Unsupported Media Type";
    case 422:
      return "Unprocessable Content";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 501:
      return "Not Implemented";
    case 503:
      return "Service Unavailable";
    case 505:
      return "HTTP Version Not Supported";
    default:
      return "Unknown";
  }
}

std::string SerializeResponse(const HttpResponse& response, bool keep_alive) {
  std::string out =
      fmt::format("HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\n", response.status,
                  ReasonPhrase(response.status), response.content_type, response.body.size());
  for (const auto& [k, v] : response.headers) out += fmt::format("{}: {}\r\n", k, v);
  if (!keep_alive) out += "Connection: close\r\n";
  out += "\r\n";
  out += response.body;
  return out;
}

std::string ChunkedResponseHead(int status, std::string_view content_type, bool keep_alive) {
  return fmt::format("HTTP/1.1 {} {}\r\nContent-Type: {}\r\nTransfer-Encoding: chunked\r\n{}\r\n",
                     status, ReasonPhrase(status), content_type,
                     keep_alive ? "" : "Connection: close\r\n");
}

std::string ChunkFrame(std::string_view data) {
  return fmt::format("{:x}\r\n{}\r\n", data.size(), data);
}

HttpResponse ErrorResponse(int status, std::string_view message, std::string_view field) {
  nlohmann::json j;
  j["error"] = std::string(message);
  if (!field.empty()) j["field"] = std::string(field);
  HttpResponse r;
  r.status = status;
  r.body = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return r;
}

}  // namespace codespace::api
