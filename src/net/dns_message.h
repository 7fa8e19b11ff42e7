// DNS messages on the wire (RFC 1035): the little of them that the DNS gate needs.
//
// Pure functions over byte spans; nothing here does I/O. Every parser treats its input as hostile
// (it comes from the sandboxed run, or from whatever answers at the upstream address):
//   - no read ever goes past the end of the span;
//   - a compression pointer must point strictly backwards, to an earlier offset than the pointer
//     itself, so following pointers always terminates; a hop limit bounds the work on top;
//   - names are limited to 255 bytes on the wire and labels to 63, and extended label types
//     (0x40, 0x80) are malformed;
//   - nothing recurses, so no input can exhaust the stack.
//
// Names are handled in presentation form: labels joined by '.', ASCII letters lower-cased, no
// trailing dot, the root name "". A byte that is not printable ASCII, and '.' or '\' inside a
// label, is escaped as dig prints it ("\DDD", "\.", "\\"), so one label that contains a dot can
// never pass for two labels: "a\.allowed.test" is not a name below "allowed.test".
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace codespace {

inline constexpr size_t kDnsHeaderSize = 12;
// The largest DNS message a UDP client takes without EDNS(0) (RFC 1035 §4.2.1).
inline constexpr uint16_t kDnsClassicUdpSize = 512;

inline constexpr uint16_t kDnsTypeA = 1;
inline constexpr uint16_t kDnsTypeCname = 5;
inline constexpr uint16_t kDnsTypeAaaa = 28;
inline constexpr uint16_t kDnsTypeOpt = 41;
inline constexpr uint16_t kDnsTypeIxfr = 251;
inline constexpr uint16_t kDnsTypeAxfr = 252;
inline constexpr uint16_t kDnsClassIn = 1;

inline constexpr uint8_t kDnsRcodeNoError = 0;
inline constexpr uint8_t kDnsRcodeFormErr = 1;
inline constexpr uint8_t kDnsRcodeServFail = 2;
inline constexpr uint8_t kDnsRcodeNxDomain = 3;
inline constexpr uint8_t kDnsRcodeNotImp = 4;
inline constexpr uint8_t kDnsRcodeRefused = 5;

// Bits of the 16-bit flags word (header bytes 2-3).
inline constexpr uint16_t kDnsFlagQr = 0x8000;  // a response
inline constexpr uint16_t kDnsFlagAa = 0x0400;  // authoritative answer
inline constexpr uint16_t kDnsFlagTc = 0x0200;  // truncated: ask again over TCP
inline constexpr uint16_t kDnsFlagRd = 0x0100;  // recursion desired
inline constexpr uint16_t kDnsFlagRa = 0x0080;  // recursion available
inline constexpr uint16_t kDnsFlagAd = 0x0020;  // authentic data (DNSSEC)
inline constexpr uint16_t kDnsFlagCd = 0x0010;  // checking disabled (DNSSEC)

inline constexpr int DnsOpcode(uint16_t flags) { return (flags >> 11) & 0xF; }
inline constexpr uint8_t DnsRcode(uint16_t flags) { return static_cast<uint8_t>(flags & 0xF); }

// A query, or the header and the question of a response.
struct DnsQuery {
  uint16_t id = 0;
  uint16_t flags = 0;  // the header's flags word, as received
  std::string name;    // presentation form (see above): lower-case, no trailing dot
  uint16_t qtype = 0;
  uint16_t qclass = 0;
  // The largest UDP response the sender accepts: its EDNS(0) payload size when the message
  // carries an OPT record (never less than 512), else 512. Meaningful for queries only.
  uint16_t max_udp_response = kDnsClassicUdpSize;

  friend bool operator==(const DnsQuery&, const DnsQuery&) = default;
};

// Parses a client's query: QR=0, opcode 0 (QUERY), exactly one question, no answer or authority
// records, additional records (EDNS OPT, cookies) well formed, nothing after the last record.
// Anything else is an error (kInvalidArgument) saying what is wrong.
Result<DnsQuery> ParseDnsQuery(std::span<const uint8_t> message);

// Parses the header and the one question of a response (QR=1, exactly one question). The answer,
// authority and additional sections are not looked at: ExtractAnswerAddresses reads the answers.
Result<DnsQuery> ParseDnsResponseQuestion(std::span<const uint8_t> response);

// A response to `query` carrying only a response code (REFUSED, SERVFAIL, FORMERR, ...): the
// query's id, opcode, RD and CD bits and its first question echoed, QR=1, RA=1, and `rcode`. When
// the question cannot be parsed the response is the header alone (QDCOUNT 0); when `query` is
// shorter than a header the id is 0.
std::vector<uint8_t> BuildDnsError(std::span<const uint8_t> query, uint8_t rcode);

// `message` with its id replaced (the first two bytes). A message shorter than two bytes comes
// back unchanged.
std::vector<uint8_t> WithDnsId(std::span<const uint8_t> message, uint16_t id);

// One address record of an answer.
struct DnsAddress {
  int family = 0;                   // AF_INET or AF_INET6
  std::array<uint8_t, 16> bytes{};  // network order; IPv4 in the first 4 bytes, the rest zero
  uint32_t ttl = 0;

  friend bool operator==(const DnsAddress&, const DnsAddress&) = default;
};

// The A and AAAA records of `response`'s answer section that belong to `qname` (any case, with or
// without a trailing dot): those owned by qname itself, or by a name reached from qname through
// the CNAME records of the answer section (at most 16 CNAME hops; a longer chain or a loop stops
// there). Each address carries the smallest TTL along its chain: its own and every CNAME's before
// it. Records of class other than IN, and records owned by names off the chain, are ignored: an
// upstream (or anyone who can spoof it) cannot get an unrelated name's address admitted by adding
// it to an answer. An error means the message is malformed (truncated, a bad name, an A record
// whose data is not 4 bytes...); nothing from it should be used.
Result<std::vector<DnsAddress>> ExtractAnswerAddresses(std::span<const uint8_t> response,
                                                       std::string_view qname);

// ---- Builders: for tests and the test harness's fake DNS server. ----
//
// Names are given in presentation form without escapes ("allowed.test", a trailing dot allowed).
// A name that cannot be encoded (an empty label, a label over 63 bytes, over 255 bytes on the
// wire) makes a builder return an empty message.

// The wire form of `name` (uncompressed labels and the root byte); empty when not encodable.
std::vector<uint8_t> EncodeDnsName(std::string_view name);

// A standard query: the given id, RD=1, one question of class IN.
std::vector<uint8_t> BuildDnsQuery(uint16_t id, std::string_view name, uint16_t qtype);

// One resource record of class IN.
struct DnsRecord {
  std::string name;
  uint16_t type = 0;
  uint32_t ttl = 0;
  std::vector<uint8_t> rdata;
};

// A (4 bytes) or AAAA (16 bytes) record, by the address text's family; an error when `address`
// is neither an IPv4 nor an IPv6 address.
Result<DnsRecord> MakeDnsAddressRecord(std::string name, std::string_view address, uint32_t ttl);
// A CNAME record; its rdata is empty (and so any message built with it) when `target` cannot be
// encoded.
DnsRecord MakeDnsCnameRecord(std::string name, std::string_view target, uint32_t ttl);

// A response to `query` (its id, opcode, RD and CD bits and question echoed; QR=1, RA=1) with
// `rcode` and `answers` in the answer section. An owner name equal to the question's name is
// written as a compression pointer to the question, as real servers do. When the question of
// `query` cannot be parsed the result is BuildDnsError(query, rcode).
std::vector<uint8_t> BuildDnsResponse(std::span<const uint8_t> query, uint8_t rcode,
                                      std::span<const DnsRecord> answers);

}  // namespace codespace
