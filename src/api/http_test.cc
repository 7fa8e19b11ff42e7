#include "api/http.h"

#include <gtest/gtest.h>

namespace codespace::api {
namespace {

ParseResult Parse(std::string_view text, HttpRequest* req, HttpLimits limits = {}) {
  return ParseRequest(text, limits, req);
}

TEST(HttpParse, SimpleGetWithQuery) {
  HttpRequest req;
  std::string text = "GET /v1/runs?state=queued&limit=5&x=a%20b+c HTTP/1.1\r\nHost: h\r\n\r\nNEXT";
  ParseResult r = Parse(text, &req);
  ASSERT_EQ(r.state, ParseState::kComplete) << r.error;
  EXPECT_EQ(r.consumed, text.size() - 4);
  EXPECT_EQ(req.method, "GET");
  EXPECT_EQ(req.path, "/v1/runs");
  EXPECT_EQ(req.query["state"], "queued");
  EXPECT_EQ(req.query["limit"], "5");
  EXPECT_EQ(req.query["x"], "a b c");
  EXPECT_EQ(req.Header("host"), "h");
  EXPECT_TRUE(req.keep_alive);
}

TEST(HttpParse, IncompleteUntilBodyArrives) {
  HttpRequest req;
  EXPECT_EQ(Parse("POST /a HTTP/1.1\r\nContent-Length: 4\r\n\r\nab", &req).state,
            ParseState::kIncomplete);
  EXPECT_EQ(Parse("POST /a HTTP/1.1\r\nContent-Le", &req).state, ParseState::kIncomplete);
  ParseResult r = Parse("POST /a HTTP/1.1\r\nContent-Length: 4\r\n\r\nabcd", &req);
  ASSERT_EQ(r.state, ParseState::kComplete);
  EXPECT_EQ(req.body, "abcd");
}

TEST(HttpParse, ConnectionSemantics) {
  HttpRequest req;
  ASSERT_EQ(Parse("GET / HTTP/1.1\r\nConnection: close\r\n\r\n", &req).state,
            ParseState::kComplete);
  EXPECT_FALSE(req.keep_alive);
  ASSERT_EQ(Parse("GET / HTTP/1.0\r\n\r\n", &req).state, ParseState::kComplete);
  EXPECT_FALSE(req.keep_alive);
  ASSERT_EQ(Parse("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n", &req).state,
            ParseState::kComplete);
  EXPECT_TRUE(req.keep_alive);
}

struct BadCase {
  const char* text;
  int status;
};

TEST(HttpParse, RefusesBadRequests) {
  const BadCase cases[] = {
      {"GET\r\n\r\n", 400},
      {"GET  / HTTP/1.1\r\n\r\n", 400},
      {"GET / HTTP/2.0\r\n\r\n", 505},
      {"GET / FTP/1.1\r\n\r\n", 400},
      {"GET http://x/ HTTP/1.1\r\n\r\n", 400},
      {"G(T / HTTP/1.1\r\n\r\n", 400},
      {"GET /%zz HTTP/1.1\r\n\r\n", 400},
      {"GET /%00 HTTP/1.1\r\n\r\n", 400},
      {"GET / HTTP/1.1\r\n folded\r\n\r\n", 400},
      {"GET / HTTP/1.1\r\nNoColon\r\n\r\n", 400},
      {"GET / HTTP/1.1\r\nBad Name: x\r\n\r\n", 400},
      {"POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n", 400},
      {"POST / HTTP/1.1\r\nContent-Length: 1x\r\n\r\n", 400},
      {"POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nx", 400},
      {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", 501},
      {"POST / HTTP/1.1\r\nContent-Length: 2000000\r\n\r\n", 413},
  };
  for (const auto& c : cases) {
    HttpRequest req;
    ParseResult r = Parse(c.text, &req);
    EXPECT_EQ(r.state, ParseState::kError) << c.text;
    EXPECT_EQ(r.status, c.status) << c.text << ": " << r.error;
  }
}

TEST(HttpParse, HeadLimits) {
  HttpRequest req;
  HttpLimits limits;
  limits.max_head_bytes = 64;
  std::string big = "GET / HTTP/1.1\r\nX: " + std::string(100, 'a');
  EXPECT_EQ(Parse(big, &req, limits).status, 431);
  limits = HttpLimits{};
  limits.max_headers = 2;
  EXPECT_EQ(Parse("GET / HTTP/1.1\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n", &req, limits).status, 431);
}

TEST(HttpResponse, SerializesAndChunks) {
  HttpResponse r = ErrorResponse(404, "no \"run\"", "id");
  std::string s = SerializeResponse(r, false);
  EXPECT_NE(s.find("HTTP/1.1 404 Not Found\r\n"), std::string::npos);
  EXPECT_NE(s.find("Connection: close\r\n"), std::string::npos);
  EXPECT_NE(s.find(R"({"error":"no \"run\"","field":"id"})"), std::string::npos);
  EXPECT_EQ(ChunkFrame("hello"), "5\r\nhello\r\n");
  EXPECT_EQ(ChunkFrame(""), "0\r\n\r\n");
}

}  // namespace
}  // namespace codespace::api
