#include "net/dns_message.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "base/testing/status_matchers.h"

namespace codespace {
namespace {

using ::codespace::testing::IsOk;
using ::codespace::testing::StatusHasMessage;
using ::codespace::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::Not;

// Writes raw DNS bytes, so that tests can state malformed messages exactly.
class Wire {
 public:
  Wire& U8(uint8_t v) {
    bytes_.push_back(v);
    return *this;
  }
  Wire& U16(uint16_t v) { return U8(static_cast<uint8_t>(v >> 8)).U8(static_cast<uint8_t>(v)); }
  Wire& U32(uint32_t v) {
    return U16(static_cast<uint16_t>(v >> 16)).U16(static_cast<uint16_t>(v & 0xFFFF));
  }
  Wire& Header(uint16_t id, uint16_t flags, uint16_t qd, uint16_t an, uint16_t ns, uint16_t ar) {
    return U16(id).U16(flags).U16(qd).U16(an).U16(ns).U16(ar);
  }
  // Labels as written; a trailing root byte is added.
  Wire& Name(std::string_view name) {
    for (uint8_t b : EncodeDnsName(name)) U8(b);
    return *this;
  }
  Wire& Pointer(uint16_t offset) { return U16(static_cast<uint16_t>(0xC000 | offset)); }
  Wire& Label(std::string_view label) {
    U8(static_cast<uint8_t>(label.size()));
    for (char c : label) U8(static_cast<uint8_t>(c));
    return *this;
  }
  Wire& Bytes(std::initializer_list<uint8_t> bytes) {
    bytes_.insert(bytes_.end(), bytes);
    return *this;
  }
  // A resource record's fixed part after the owner name.
  Wire& Rr(uint16_t type, uint32_t ttl, uint16_t rdlength, uint16_t rclass = kDnsClassIn) {
    return U16(type).U16(rclass).U32(ttl).U16(rdlength);
  }
  size_t size() const { return bytes_.size(); }
  const std::vector<uint8_t>& bytes() const { return bytes_; }
  operator std::span<const uint8_t>() const { return bytes_; }  // NOLINT: test convenience

 private:
  std::vector<uint8_t> bytes_;
};

std::array<uint8_t, 16> Addr(int family, const char* text) {
  std::array<uint8_t, 16> bytes{};
  EXPECT_EQ(::inet_pton(family, text, bytes.data()), 1) << text;
  return bytes;
}

DnsAddress V4(const char* text, uint32_t ttl) { return {AF_INET, Addr(AF_INET, text), ttl}; }
DnsAddress V6(const char* text, uint32_t ttl) { return {AF_INET6, Addr(AF_INET6, text), ttl}; }

DnsRecord A(std::string name, const char* address, uint32_t ttl) {
  auto record = MakeDnsAddressRecord(std::move(name), address, ttl);
  EXPECT_OK(record);
  return record.ok() ? *record : DnsRecord{};
}

std::vector<uint8_t> Response(std::string_view qname, uint16_t qtype,
                              const std::vector<DnsRecord>& answers) {
  return BuildDnsResponse(BuildDnsQuery(0x1234, qname, qtype), kDnsRcodeNoError, answers);
}

// ---- ParseDnsQuery ----

TEST(ParseDnsQueryTest, ReadsWhatBuildDnsQueryWrites) {
  auto query = ParseDnsQuery(BuildDnsQuery(0xBEEF, "WWW.Example.COM.", kDnsTypeAaaa));
  ASSERT_OK(query);
  EXPECT_EQ(query->id, 0xBEEF);
  EXPECT_EQ(query->flags, kDnsFlagRd);
  EXPECT_EQ(query->name, "www.example.com");
  EXPECT_EQ(query->qtype, kDnsTypeAaaa);
  EXPECT_EQ(query->qclass, kDnsClassIn);
  EXPECT_EQ(query->max_udp_response, 512);
}

TEST(ParseDnsQueryTest, ReadsTheEdnsPayloadSize) {
  auto with_opt = [](uint16_t payload) {
    Wire w;
    w.Header(1, kDnsFlagRd, 1, 0, 0, 1).Name("a.test").U16(kDnsTypeA).U16(kDnsClassIn);
    w.U8(0).Rr(kDnsTypeOpt, 0, 0, payload);  // OPT: root owner, class = payload size
    return w;
  };
  auto big = ParseDnsQuery(with_opt(4096));
  ASSERT_OK(big);
  EXPECT_EQ(big->max_udp_response, 4096);
  // Values below 512 are read as 512 (RFC 6891 §6.2.5).
  auto small = ParseDnsQuery(with_opt(100));
  ASSERT_OK(small);
  EXPECT_EQ(small->max_udp_response, 512);
}

TEST(ParseDnsQueryTest, AcceptsOtherAdditionalRecords) {
  Wire w;
  w.Header(1, 0, 1, 0, 0, 1).Name("a.test").U16(kDnsTypeA).U16(kDnsClassIn);
  w.Name("key.test").Rr(250 /*TSIG*/, 0, 3).Bytes({1, 2, 3});
  EXPECT_OK(ParseDnsQuery(w));
}

TEST(ParseDnsQueryTest, EscapesBytesThatAreNotPlainNameCharacters) {
  struct Case {
    std::vector<std::string> labels;
    std::string text;
  };
  const std::vector<Case> cases = {
      {{"a.allowed", "test"}, "a\\.allowed.test"},  // one label holding a dot stays one label
      {{"a b", "test"}, "a\\032b.test"},
      {{"back\\slash"}, "back\\\\slash"},
      {{std::string("nul\0x", 5)}, "nul\\000x"},
      {{"\x7f\xff"}, "\\127\\255"},
      {{"UPPER", "Case"}, "upper.case"},
      {{"_dmarc", "example", "com"}, "_dmarc.example.com"},
  };
  for (const Case& c : cases) {
    Wire w;
    w.Header(7, 0, 1, 0, 0, 0);
    for (const std::string& label : c.labels) w.Label(label);
    w.U8(0).U16(kDnsTypeA).U16(kDnsClassIn);
    auto query = ParseDnsQuery(w);
    ASSERT_OK(query);
    EXPECT_EQ(query->name, c.text);
  }
}

TEST(ParseDnsQueryTest, ReadsTheRootName) {
  Wire w;
  w.Header(1, 0, 1, 0, 0, 0).U8(0).U16(2 /*NS*/).U16(kDnsClassIn);
  auto query = ParseDnsQuery(w);
  ASSERT_OK(query);
  EXPECT_EQ(query->name, "");
}

TEST(ParseDnsQueryTest, FollowsBackwardCompressionPointers) {
  // An additional record whose owner "x.a.test" is written as "x" + a pointer to the question.
  Wire w;
  w.Header(1, 0, 1, 0, 0, 1).Name("a.test").U16(kDnsTypeA).U16(kDnsClassIn);
  w.Label("x").Pointer(12).Rr(16 /*TXT*/, 0, 1).U8(0);
  EXPECT_OK(ParseDnsQuery(w));
}

TEST(ParseDnsQueryTest, RefusesMalformedQueries) {
  struct Case {
    std::string what;
    Wire wire;
    std::string message;
  };
  auto question = [](Wire w) { return w.Name("a.test").U16(kDnsTypeA).U16(kDnsClassIn); };
  std::vector<Case> cases;
  cases.push_back({"empty", Wire(), "shorter than a DNS header"});
  cases.push_back({"11 bytes", Wire().Bytes({0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0}),
                   "11 bytes is shorter than a DNS header"});
  cases.push_back({"a response", question(Wire().Header(1, kDnsFlagQr, 1, 0, 0, 0)), "QR=1"});
  cases.push_back({"opcode NOTIFY", question(Wire().Header(1, 4 << 11, 1, 0, 0, 0)), "opcode 4"});
  cases.push_back({"zero questions", Wire().Header(1, 0, 0, 0, 0, 0), "0 questions"});
  cases.push_back(
      {"two questions", question(question(Wire().Header(1, 0, 2, 0, 0, 0))), "2 questions"});
  cases.push_back({"two questions announced, one present",
                   question(Wire().Header(1, 0, 2, 0, 0, 0)), "2 questions"});
  cases.push_back(
      {"an answer record", question(Wire().Header(1, 0, 1, 1, 0, 0)), "1 answer and 0 authority"});
  cases.push_back({"an authority record", question(Wire().Header(1, 0, 1, 0, 1, 0)),
                   "0 answer and 1 authority"});
  cases.push_back(
      {"name cut off", Wire().Header(1, 0, 1, 0, 0, 0).Bytes({1, 'a', 4, 't'}), "label runs past"});
  cases.push_back({"no root byte", Wire().Header(1, 0, 1, 0, 0, 0).Label("a"), "name runs past"});
  cases.push_back(
      {"qtype cut off", Wire().Header(1, 0, 1, 0, 0, 0).Name("a.test").U8(0), "question cut off"});
  cases.push_back({"qclass cut off", Wire().Header(1, 0, 1, 0, 0, 0).Name("a.test").U16(1).U8(0),
                   "question cut off"});
  cases.push_back({"label of 64 bytes (type bits 01)",
                   Wire().Header(1, 0, 1, 0, 0, 0).U8(64).Bytes({'a'}).U8(0).U32(0x00010001),
                   "label type 0x40"});
  cases.push_back({"label type 10", Wire().Header(1, 0, 1, 0, 0, 0).U8(0x80).U8(0).U32(0x00010001),
                   "label type 0x80"});
  cases.push_back({"name over 255 bytes",
                   Wire()
                       .Header(1, 0, 1, 0, 0, 0)
                       .Label(std::string(63, 'a'))
                       .Label(std::string(63, 'b'))
                       .Label(std::string(63, 'c'))
                       .Label(std::string(63, 'd'))
                       .U8(0)
                       .U32(0x00010001),
                   "longer than 255"});
  cases.push_back({"pointer to itself", Wire().Header(1, 0, 1, 0, 0, 0).Pointer(12).U32(0x00010001),
                   "does not point backwards"});
  cases.push_back({"pointer forwards",
                   Wire().Header(1, 0, 1, 0, 0, 0).Pointer(16).U32(0x00010001).U8(0),
                   "does not point backwards"});
  cases.push_back({"pointer loop through a label",
                   Wire().Header(1, 0, 1, 0, 0, 0).Label("a").Pointer(12).U32(0x00010001),
                   "does not point backwards"});
  cases.push_back(
      {"pointer cut off", Wire().Header(1, 0, 1, 0, 0, 0).U8(0xC0), "compression pointer cut off"});
  cases.push_back({"trailing bytes", question(Wire().Header(1, 0, 1, 0, 0, 0)).Bytes({0, 0, 0}),
                   "3 bytes after the last record"});
  cases.push_back({"additional record announced, absent", question(Wire().Header(1, 0, 1, 0, 0, 1)),
                   "name runs past"});
  cases.push_back({"additional record data cut off",
                   question(Wire().Header(1, 0, 1, 0, 0, 1)).U8(0).Rr(16, 0, 10).Bytes({1, 2}),
                   "record data cut off"});
  cases.push_back({"two OPT records",
                   question(Wire().Header(1, 0, 1, 0, 0, 2))
                       .U8(0)
                       .Rr(kDnsTypeOpt, 0, 0, 1232)
                       .U8(0)
                       .Rr(kDnsTypeOpt, 0, 0, 1232),
                   "more than one OPT"});
  cases.push_back({"OPT not owned by the root",
                   question(Wire().Header(1, 0, 1, 0, 0, 1)).Name("a").Rr(kDnsTypeOpt, 0, 0, 1232),
                   "not owned by the root"});
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    auto query = ParseDnsQuery(c.wire);
    EXPECT_THAT(query, StatusIs(StatusCode::kInvalidArgument));
    if (!c.message.empty()) {
      EXPECT_THAT(query, StatusHasMessage(c.message));
    }
  }
}

TEST(ParseDnsQueryTest, ChainsOfBackwardPointersAreBounded) {
  // Each pointer points to the one before it, strictly backwards: legal, and it terminates. A
  // name made of 200 such hops exceeds the hop limit. The chain sits in the data of a first
  // additional record; the second record's owner name enters it at its end.
  constexpr int kHops = 200;
  Wire w;
  w.Header(1, 0, 1, 0, 0, 2).Name("a.test").U16(kDnsTypeA).U16(kDnsClassIn);
  w.U8(0).Rr(16 /*TXT*/, 0, static_cast<uint16_t>(1 + 2 * kHops));
  const uint16_t chain_start = static_cast<uint16_t>(w.size());
  w.U8(0);  // the root name the first pointer targets
  uint16_t previous = chain_start;
  for (int i = 0; i < kHops; ++i) {
    const auto here = static_cast<uint16_t>(w.size());
    w.Pointer(previous);
    previous = here;
  }
  w.Pointer(previous).Rr(16, 0, 0);
  EXPECT_THAT(ParseDnsQuery(w), StatusHasMessage("too many compression pointers"));

  // The same with 100 hops is a legal (if silly) name.
  Wire ok;
  ok.Header(1, 0, 1, 0, 0, 2).Name("a.test").U16(kDnsTypeA).U16(kDnsClassIn);
  ok.U8(0).Rr(16, 0, static_cast<uint16_t>(1 + 2 * 100));
  previous = static_cast<uint16_t>(ok.size());
  ok.U8(0);
  for (int i = 0; i < 100; ++i) {
    const auto here = static_cast<uint16_t>(ok.size());
    ok.Pointer(previous);
    previous = here;
  }
  ok.Pointer(previous).Rr(16, 0, 0);
  EXPECT_OK(ParseDnsQuery(ok));
}

// ---- ParseDnsResponseQuestion ----

TEST(ParseDnsResponseQuestionTest, ReadsTheQuestionOfAResponse) {
  auto parsed = ParseDnsResponseQuestion(
      Response("Allowed.Test", kDnsTypeA, {A("allowed.test", "1.2.3.4", 5)}));
  ASSERT_OK(parsed);
  EXPECT_EQ(parsed->id, 0x1234);
  EXPECT_EQ(parsed->name, "allowed.test");
  EXPECT_EQ(parsed->qtype, kDnsTypeA);
  EXPECT_NE(parsed->flags & kDnsFlagQr, 0);
}

TEST(ParseDnsResponseQuestionTest, RefusesQueriesAndOddQuestionCounts) {
  EXPECT_THAT(ParseDnsResponseQuestion(BuildDnsQuery(1, "a.test", kDnsTypeA)),
              StatusHasMessage("QR=0"));
  EXPECT_THAT(ParseDnsResponseQuestion(Wire().Header(1, kDnsFlagQr, 0, 0, 0, 0)),
              StatusHasMessage("0 questions"));
  EXPECT_THAT(ParseDnsResponseQuestion(Wire().Bytes({1, 2, 3})),
              StatusHasMessage("shorter than a DNS header"));
}

// ---- BuildDnsError ----

TEST(BuildDnsErrorTest, EchoesIdAndQuestion) {
  for (uint8_t rcode : {kDnsRcodeRefused, kDnsRcodeServFail, kDnsRcodeFormErr}) {
    const std::vector<uint8_t> query = BuildDnsQuery(0xA1B2, "Allowed.test", kDnsTypeAaaa);
    const std::vector<uint8_t> response = BuildDnsError(query, rcode);
    auto parsed = ParseDnsResponseQuestion(response);
    ASSERT_OK(parsed);
    EXPECT_EQ(parsed->id, 0xA1B2);
    EXPECT_EQ(parsed->flags, kDnsFlagQr | kDnsFlagRd | kDnsFlagRa | rcode);
    EXPECT_EQ(parsed->name, "allowed.test");
    EXPECT_EQ(parsed->qtype, kDnsTypeAaaa);
    EXPECT_EQ(parsed->qclass, kDnsClassIn);
    // Header and question, nothing else; the question is written uncompressed as received.
    EXPECT_EQ(response.size(), query.size());
    EXPECT_TRUE(std::equal(query.begin() + 12, query.end(), response.begin() + 12));
    EXPECT_THAT(ExtractAnswerAddresses(response, "allowed.test"), IsOk());
  }
}

TEST(BuildDnsErrorTest, CopiesOpcodeAndCdButNotOtherQueryBits) {
  Wire w;
  w.Header(9, static_cast<uint16_t>((2 << 11) | kDnsFlagCd | kDnsFlagAa | kDnsFlagTc), 1, 0, 0, 0)
      .Name("a.test")
      .U16(kDnsTypeA)
      .U16(kDnsClassIn);
  const std::vector<uint8_t> response = BuildDnsError(w, kDnsRcodeNotImp);
  ASSERT_GE(response.size(), 12u);
  const uint16_t flags = static_cast<uint16_t>((response[2] << 8) | response[3]);
  EXPECT_EQ(flags, kDnsFlagQr | (2 << 11) | kDnsFlagCd | kDnsFlagRa | kDnsRcodeNotImp);
}

TEST(BuildDnsErrorTest, AnswersAnUnparsableQuestionWithTheHeaderAlone) {
  struct Case {
    std::string what;
    std::vector<uint8_t> query;
    uint16_t id;
  };
  const std::vector<Case> cases = {
      {"empty", {}, 0},
      {"one byte", {0xAB}, 0},
      {"five bytes", {0xAB, 0xCD, 0x01, 0x00, 0x00}, 0xABCD},
      {"header only, QDCOUNT 1", Wire().Header(0x4242, kDnsFlagRd, 1, 0, 0, 0).bytes(), 0x4242},
      {"pointer loop", Wire().Header(0x4343, 0, 1, 0, 0, 0).Pointer(12).U32(0x00010001).bytes(),
       0x4343},
      {"zero questions", Wire().Header(0x4444, 0, 0, 0, 0, 0).bytes(), 0x4444},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    const std::vector<uint8_t> response = BuildDnsError(c.query, kDnsRcodeFormErr);
    ASSERT_EQ(response.size(), 12u);
    EXPECT_EQ((response[0] << 8) | response[1], c.id);
    EXPECT_EQ(response[2] & 0x80, 0x80);  // QR
    EXPECT_EQ(response[3] & 0x0F, kDnsRcodeFormErr);
    EXPECT_EQ(response[3] & 0x80, 0x80);             // RA
    EXPECT_EQ((response[4] << 8) | response[5], 0);  // QDCOUNT
  }
}

TEST(WithDnsIdTest, ReplacesTheFirstTwoBytes) {
  const std::vector<uint8_t> query = BuildDnsQuery(1, "a.test", kDnsTypeA);
  const std::vector<uint8_t> changed = WithDnsId(query, 0xFEDC);
  EXPECT_EQ(changed[0], 0xFE);
  EXPECT_EQ(changed[1], 0xDC);
  EXPECT_TRUE(std::equal(query.begin() + 2, query.end(), changed.begin() + 2));
  EXPECT_THAT(WithDnsId(std::vector<uint8_t>{7}, 1), ElementsAre(7));
}

// ---- ExtractAnswerAddresses ----

TEST(ExtractAnswerAddressesTest, ReadsAAndAaaaRecordsOfTheName) {
  auto response =
      Response("allowed.test", kDnsTypeA,
               {A("allowed.test", "203.0.113.7", 300), A("allowed.test", "2001:db8::7", 60)});
  EXPECT_THAT(ExtractAnswerAddresses(response, "allowed.test"),
              ::testing::Property(&Result<std::vector<DnsAddress>>::value,
                                  ElementsAre(V4("203.0.113.7", 300), V6("2001:db8::7", 60))));
}

TEST(ExtractAnswerAddressesTest, MatchesTheNameInAnyCaseWithOrWithoutTrailingDot) {
  auto response = Response("allowed.test", kDnsTypeA, {A("ALLOWED.test", "203.0.113.7", 300)});
  for (const char* name : {"allowed.test", "Allowed.Test.", "allowed.test."}) {
    auto addresses = ExtractAnswerAddresses(response, name);
    ASSERT_OK(addresses);
    EXPECT_THAT(*addresses, ElementsAre(V4("203.0.113.7", 300))) << name;
  }
}

TEST(ExtractAnswerAddressesTest, FollowsTheCnameChainAndIgnoresUnrelatedNames) {
  auto response = Response(
      "www.allowed.test", kDnsTypeA,
      {MakeDnsCnameRecord("www.allowed.test", "edge.cdn.test", 600),
       MakeDnsCnameRecord("edge.cdn.test", "node7.cdn.test", 120),
       A("node7.cdn.test", "203.0.113.9", 300), A("node7.cdn.test", "203.0.113.10", 30),
       A("evil.test", "198.51.100.66", 300), MakeDnsCnameRecord("other.test", "evil.test", 300)});
  auto addresses = ExtractAnswerAddresses(response, "www.allowed.test");
  ASSERT_OK(addresses);
  // The smallest TTL along the chain: 120 from the second CNAME, 30 from the record itself.
  EXPECT_THAT(*addresses, ElementsAre(V4("203.0.113.9", 120), V4("203.0.113.10", 30)));
}

TEST(ExtractAnswerAddressesTest, AddressesOfAnUnrelatedNameAloneGiveNothing) {
  auto response = Response("allowed.test", kDnsTypeA, {A("evil.test", "198.51.100.66", 300)});
  auto addresses = ExtractAnswerAddresses(response, "allowed.test");
  ASSERT_OK(addresses);
  EXPECT_THAT(*addresses, IsEmpty());
}

TEST(ExtractAnswerAddressesTest, StopsAfterSixteenCnameHops) {
  std::vector<DnsRecord> records;
  for (int i = 0; i < 20; ++i) {
    records.push_back(
        MakeDnsCnameRecord(fmt::format("n{}.test", i), fmt::format("n{}.test", i + 1), 100));
    records.push_back(
        A(fmt::format("n{}.test", i + 1), fmt::format("10.0.0.{}", i + 1).c_str(), 100));
  }
  auto addresses = ExtractAnswerAddresses(Response("n0.test", kDnsTypeA, records), "n0.test");
  ASSERT_OK(addresses);
  ASSERT_EQ(addresses->size(), 16u);  // n1 .. n16
  EXPECT_EQ(addresses->back(), V4("10.0.0.16", 100));
}

TEST(ExtractAnswerAddressesTest, ACnameLoopTerminates) {
  auto response = Response(
      "a.test", kDnsTypeA,
      {MakeDnsCnameRecord("a.test", "b.test", 100), MakeDnsCnameRecord("b.test", "a.test", 50),
       A("b.test", "10.0.0.2", 100), A("a.test", "10.0.0.1", 100)});
  auto addresses = ExtractAnswerAddresses(response, "a.test");
  ASSERT_OK(addresses);
  EXPECT_THAT(*addresses, ElementsAre(V4("10.0.0.1", 100), V4("10.0.0.2", 100)));
}

TEST(ExtractAnswerAddressesTest, MergesDuplicatesKeepingTheSmallestTtl) {
  auto response =
      Response("a.test", kDnsTypeA, {A("a.test", "10.0.0.1", 100), A("a.test", "10.0.0.1", 20)});
  auto addresses = ExtractAnswerAddresses(response, "a.test");
  ASSERT_OK(addresses);
  EXPECT_THAT(*addresses, ElementsAre(V4("10.0.0.1", 20)));
}

TEST(ExtractAnswerAddressesTest, IgnoresOtherClassesAndReadsHugeTtlsAsZero) {
  Wire w;
  w.Header(1, kDnsFlagQr, 1, 2, 0, 0).Name("a.test").U16(kDnsTypeA).U16(kDnsClassIn);
  w.Pointer(12).Rr(kDnsTypeA, 100, 4, 3 /*CH*/).Bytes({10, 0, 0, 9});
  w.Pointer(12).Rr(kDnsTypeA, 0x80000000u, 4).Bytes({10, 0, 0, 1});
  auto addresses = ExtractAnswerAddresses(w, "a.test");
  ASSERT_OK(addresses);
  EXPECT_THAT(*addresses, ElementsAre(V4("10.0.0.1", 0)));
}

TEST(ExtractAnswerAddressesTest, ReadsCompressedCnameTargets) {
  // The CNAME's target is "cdn." + a pointer to "test" inside the question's name.
  Wire w;
  w.Header(1, kDnsFlagQr, 1, 2, 0, 0).Name("a.test").U16(kDnsTypeA).U16(kDnsClassIn);
  const uint16_t test_offset = 12 + 2;  // "\1a" then "\4test"
  w.Pointer(12).Rr(kDnsTypeCname, 100, 6).Label("cdn").Pointer(test_offset);
  const uint16_t cdn_offset = static_cast<uint16_t>(w.size() - 6);
  w.Pointer(cdn_offset).Rr(kDnsTypeA, 100, 4).Bytes({10, 0, 0, 3});
  auto addresses = ExtractAnswerAddresses(w, "a.test");
  ASSERT_OK(addresses);
  EXPECT_THAT(*addresses, ElementsAre(V4("10.0.0.3", 100)));
}

TEST(ExtractAnswerAddressesTest, RefusesMalformedAnswers) {
  auto base = [](uint16_t ancount) {
    Wire w;
    w.Header(1, kDnsFlagQr, 1, ancount, 0, 0).Name("a.test").U16(kDnsTypeA).U16(kDnsClassIn);
    return w;
  };
  struct Case {
    std::string what;
    Wire wire;
    std::string message;
  };
  std::vector<Case> cases;
  cases.push_back({"A with 5 bytes", base(1).Pointer(12).Rr(kDnsTypeA, 1, 5).Bytes({1, 2, 3, 4, 5}),
                   "A record for a.test has 5 bytes"});
  cases.push_back({"AAAA with 4 bytes",
                   base(1).Pointer(12).Rr(kDnsTypeAaaa, 1, 4).Bytes({1, 2, 3, 4}),
                   "AAAA record for a.test has 4 bytes"});
  cases.push_back({"answer announced, absent", base(1), "name runs past"});
  cases.push_back({"record data cut off", base(1).Pointer(12).Rr(kDnsTypeA, 1, 4).Bytes({1, 2}),
                   "record data cut off"});
  cases.push_back({"record header cut off", base(1).Pointer(12).U16(1), "record header cut off"});
  cases.push_back({"CNAME target longer than its data",
                   base(1).Pointer(12).Rr(kDnsTypeCname, 1, 2).Label("b").U8(0),
                   "does not fill its data"});
  cases.push_back({"CNAME target pointing forwards",
                   base(1).Pointer(12).Rr(kDnsTypeCname, 1, 2).Pointer(200),
                   "does not point backwards"});
  cases.push_back({"question cut off", Wire().Header(1, kDnsFlagQr, 1, 0, 0, 0).Name("a.test"),
                   "question cut off"});
  cases.push_back({"short", Wire().Bytes({1, 2}), "shorter than a DNS header"});
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    EXPECT_THAT(ExtractAnswerAddresses(c.wire, "a.test"), StatusHasMessage(c.message));
  }
}

// ---- Builders ----

TEST(EncodeDnsNameTest, EncodesValidNamesAndRefusesOthers) {
  EXPECT_THAT(EncodeDnsName("a.bc"), ElementsAre(1, 'a', 2, 'b', 'c', 0));
  EXPECT_THAT(EncodeDnsName("a.bc."), ElementsAre(1, 'a', 2, 'b', 'c', 0));
  EXPECT_THAT(EncodeDnsName(""), ElementsAre(0));
  EXPECT_THAT(EncodeDnsName("."), ElementsAre(0));
  EXPECT_THAT(EncodeDnsName("a..b"), IsEmpty());
  EXPECT_THAT(EncodeDnsName(".a"), IsEmpty());
  EXPECT_THAT(EncodeDnsName("a.."), IsEmpty());
  EXPECT_THAT(EncodeDnsName(std::string(64, 'x') + ".test"), IsEmpty());
  EXPECT_EQ(EncodeDnsName(std::string(63, 'x') + ".test").size(), 63u + 1 + 5 + 1);
  std::string long_name;  // 4 × 64 wire bytes + root = 257
  for (int i = 0; i < 4; ++i) long_name += std::string(63, 'x') + ".";
  EXPECT_THAT(EncodeDnsName(long_name), IsEmpty());
  EXPECT_THAT(BuildDnsQuery(1, "a..b", kDnsTypeA), IsEmpty());
}

TEST(MakeDnsAddressRecordTest, PicksTheTypeFromTheAddress) {
  auto a = MakeDnsAddressRecord("a.test", "203.0.113.1", 5);
  ASSERT_OK(a);
  EXPECT_EQ(a->type, kDnsTypeA);
  EXPECT_THAT(a->rdata, ElementsAre(203, 0, 113, 1));
  auto aaaa = MakeDnsAddressRecord("a.test", "2001:db8::1", 5);
  ASSERT_OK(aaaa);
  EXPECT_EQ(aaaa->type, kDnsTypeAaaa);
  EXPECT_EQ(aaaa->rdata.size(), 16u);
  EXPECT_THAT(MakeDnsAddressRecord("a.test", "not-an-address", 5),
              StatusHasMessage("not an IPv4 or IPv6 address"));
}

TEST(BuildDnsResponseTest, EchoesTheQueryAndCompressesOwnerNamesEqualToTheQuestion) {
  const std::vector<uint8_t> query = BuildDnsQuery(0x0707, "A.test", kDnsTypeA);
  const std::vector<DnsRecord> answers = {A("a.test", "10.0.0.1", 7), A("b.test", "10.0.0.2", 7)};
  const std::vector<uint8_t> response = BuildDnsResponse(query, kDnsRcodeNoError, answers);
  auto parsed = ParseDnsResponseQuestion(response);
  ASSERT_OK(parsed);
  EXPECT_EQ(parsed->id, 0x0707);
  EXPECT_EQ(parsed->flags, kDnsFlagQr | kDnsFlagRd | kDnsFlagRa);
  EXPECT_EQ((response[6] << 8) | response[7], 2);  // ANCOUNT
  const size_t answers_at = query.size();
  EXPECT_EQ(response[answers_at], 0xC0);
  EXPECT_EQ(response[answers_at + 1], 12);
  // 12 + question (8 + 4) + pointer record (2 + 10 + 4) + full-name record (8 + 10 + 4).
  EXPECT_EQ(response.size(), 12u + 12 + 16 + 22);
}

TEST(BuildDnsResponseTest, CarriesTheRcode) {
  const std::vector<uint8_t> response =
      BuildDnsResponse(BuildDnsQuery(1, "gone.test", kDnsTypeA), kDnsRcodeNxDomain, {});
  auto parsed = ParseDnsResponseQuestion(response);
  ASSERT_OK(parsed);
  EXPECT_EQ(DnsRcode(parsed->flags), kDnsRcodeNxDomain);
}

TEST(BuildDnsResponseTest, RefusesRecordsItCannotEncode) {
  const std::vector<uint8_t> query = BuildDnsQuery(1, "a.test", kDnsTypeA);
  EXPECT_THAT(BuildDnsResponse(query, 0, std::vector<DnsRecord>{A("a..test", "10.0.0.1", 1)}),
              IsEmpty());
  EXPECT_THAT(BuildDnsResponse(query, 0,
                               std::vector<DnsRecord>{MakeDnsCnameRecord("a.test", "b..test", 1)}),
              IsEmpty());
}

TEST(BuildDnsResponseTest, AnswersAnUnparsableQueryLikeBuildDnsError) {
  const std::vector<uint8_t> query = {0x12, 0x34, 0x01, 0x00, 0x00, 0x01};
  EXPECT_EQ(BuildDnsResponse(query, kDnsRcodeServFail, {}),
            BuildDnsError(query, kDnsRcodeServFail));
}

// ---- Robustness ----

// 100,000 random and mutated messages through every parser. Nothing may crash or read out of
// bounds (run under ASan: the asan preset), and whatever parses must be coherent.
TEST(DnsMessageFuzzTest, RandomAndMutatedMessagesNeverCrash) {
  std::mt19937 rng(20240229);
  auto byte = [&rng] { return static_cast<uint8_t>(rng() & 0xFF); };
  std::vector<std::vector<uint8_t>> seeds = {
      BuildDnsQuery(1, "allowed.test", kDnsTypeA),
      BuildDnsQuery(2, "a.b.c.d.example.test", kDnsTypeAaaa),
      Response("www.allowed.test", kDnsTypeA,
               {MakeDnsCnameRecord("www.allowed.test", "edge.cdn.test", 600),
                A("edge.cdn.test", "203.0.113.9", 300), A("edge.cdn.test", "2001:db8::9", 300),
                A("evil.test", "198.51.100.66", 300)}),
  };
  {
    Wire w;  // a compressed CNAME target
    w.Header(1, kDnsFlagQr, 1, 2, 0, 0).Name("a.test").U16(kDnsTypeA).U16(kDnsClassIn);
    w.Pointer(12).Rr(kDnsTypeCname, 100, 6).Label("cdn").Pointer(14);
    w.Pointer(static_cast<uint16_t>(w.size() - 6)).Rr(kDnsTypeA, 100, 4).Bytes({10, 0, 0, 3});
    seeds.push_back(w.bytes());
  }
  int parsed_queries = 0;
  int parsed_answers = 0;
  for (int i = 0; i < 100'000; ++i) {
    std::vector<uint8_t> message;
    switch (i % 4) {
      case 0: {  // pure noise, mostly header-sized
        message.resize(rng() % 80);
        for (uint8_t& b : message) b = byte();
        break;
      }
      case 1: {  // a seed with a few bytes changed
        message = seeds[rng() % seeds.size()];
        const int flips = 1 + static_cast<int>(rng() % 4);
        for (int f = 0; f < flips; ++f) message[rng() % message.size()] = byte();
        break;
      }
      case 2: {  // a seed cut short, or with bytes appended
        message = seeds[rng() % seeds.size()];
        if (rng() % 2 == 0) {
          message.resize(rng() % message.size());
        } else {
          for (int n = static_cast<int>(rng() % 8); n > 0; --n) message.push_back(byte());
        }
        break;
      }
      default: {  // pointers sprinkled over a seed: loops, forward and out-of-range targets
        message = seeds[rng() % seeds.size()];
        if (message.size() > 14) {
          const size_t at = 12 + rng() % (message.size() - 13);
          message[at] = static_cast<uint8_t>(0xC0 | (rng() % 2));
          message[at + 1] = byte();
        }
        break;
      }
    }
    auto query = ParseDnsQuery(message);
    if (query.ok()) {
      ++parsed_queries;
      auto echoed = ParseDnsResponseQuestion(BuildDnsError(message, kDnsRcodeRefused));
      ASSERT_OK(echoed);
      ASSERT_EQ(echoed->name, query->name);
    }
    (void)ParseDnsResponseQuestion(message);
    (void)BuildDnsError(message, kDnsRcodeServFail);
    (void)BuildDnsResponse(message, 0, std::vector<DnsRecord>{A("x.test", "10.0.0.1", 1)});
    auto addresses = ExtractAnswerAddresses(message, "www.allowed.test");
    if (addresses.ok() && !addresses->empty()) ++parsed_answers;
    (void)ExtractAnswerAddresses(message, "a.test");
  }
  // The mutations must leave enough intact for the parsers' success paths to be exercised too.
  EXPECT_GT(parsed_queries, 1000);
  EXPECT_GT(parsed_answers, 1000);
}

}  // namespace
}  // namespace codespace
