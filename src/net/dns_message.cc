#include "net/dns_message.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <optional>
#include <set>
#include <utility>

namespace codespace {

namespace {

constexpr size_t kMaxNameWireLength = 255;  // RFC 1035 §3.1, counting every length byte
constexpr size_t kMaxLabelLength = 63;
// A name of 255 wire bytes has at most 127 labels, so a legitimate name never needs more pointer
// hops than that; the strictly-backwards rule below already guarantees termination, this bounds
// the work as well.
constexpr int kMaxPointerHops = 128;
constexpr int kMaxCnameHops = 16;

Status Malformed(std::string what) {
  return InvalidArgumentError(fmt::format("malformed DNS message: {}", what));
}

uint16_t Get16(std::span<const uint8_t> m, size_t at) {
  return static_cast<uint16_t>((m[at] << 8) | m[at + 1]);
}

uint32_t Get32(std::span<const uint8_t> m, size_t at) {
  return (static_cast<uint32_t>(m[at]) << 24) | (static_cast<uint32_t>(m[at + 1]) << 16) |
         (static_cast<uint32_t>(m[at + 2]) << 8) | static_cast<uint32_t>(m[at + 3]);
}

void Put16(std::vector<uint8_t>& out, uint16_t v) {
  out.push_back(static_cast<uint8_t>(v >> 8));
  out.push_back(static_cast<uint8_t>(v & 0xFF));
}

void Put32(std::vector<uint8_t>& out, uint32_t v) {
  Put16(out, static_cast<uint16_t>(v >> 16));
  Put16(out, static_cast<uint16_t>(v & 0xFFFF));
}

char AsciiLower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

std::string AsciiLowerString(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), AsciiLower);
  return out;
}

// Appends one label's bytes in presentation form (see the header): printable ASCII lower-cased,
// '.' and '\' escaped with a backslash, everything else as \DDD.
void AppendLabelText(std::span<const uint8_t> label, std::string& out) {
  for (uint8_t b : label) {
    if (b == '.' || b == '\\') {
      out += '\\';
      out += static_cast<char>(b);
    } else if (b > 0x20 && b < 0x7F) {
      out += AsciiLower(static_cast<char>(b));
    } else {
      out += fmt::format("\\{:03d}", b);
    }
  }
}

// Reads the (possibly compressed) name at *offset. On success *offset is just past the name where
// it is written (past its first pointer, or its root byte). `text` gets the presentation form and
// `wire`, when not null, the uncompressed wire form.
//
// Termination: a pointer must point strictly before the start of the stretch of labels it ends
// (the name's own start, or the previous pointer's target). The stretch starts therefore strictly
// decrease, so no sequence of pointers can revisit a byte; kMaxPointerHops and the 255-byte limit
// bound the work besides.
Status ReadName(std::span<const uint8_t> m, size_t* offset, std::string* text,
                std::vector<uint8_t>* wire) {
  size_t pos = *offset;
  size_t stretch_start = pos;
  std::optional<size_t> end_in_place;
  size_t wire_length = 0;
  int hops = 0;
  text->clear();
  if (wire != nullptr) wire->clear();
  for (;;) {
    if (pos >= m.size()) return Malformed("name runs past the end of the message");
    const uint8_t len = m[pos];
    if ((len & 0xC0) == 0xC0) {
      if (pos + 1 >= m.size()) return Malformed("compression pointer cut off");
      const size_t target = (static_cast<size_t>(len & 0x3F) << 8) | m[pos + 1];
      if (target >= stretch_start) {
        return Malformed(
            fmt::format("compression pointer at offset {} to offset {} does not "
                        "point backwards",
                        pos, target));
      }
      if (++hops > kMaxPointerHops) return Malformed("too many compression pointers in a name");
      if (!end_in_place) end_in_place = pos + 2;
      pos = target;
      stretch_start = target;
      continue;
    }
    if ((len & 0xC0) != 0) {
      return Malformed(fmt::format("label type 0x{:02x} at offset {}", len & 0xC0, pos));
    }
    if (len == 0) {
      if (wire != nullptr) wire->push_back(0);
      if (!end_in_place) end_in_place = pos + 1;
      break;
    }
    // len <= 63 here (the two high bits are clear).
    if (pos + 1 + len > m.size()) return Malformed("label runs past the end of the message");
    wire_length += 1 + static_cast<size_t>(len);
    if (wire_length + 1 > kMaxNameWireLength) return Malformed("name longer than 255 bytes");
    if (wire_length > 1u + len) *text += '.';  // not the first label
    AppendLabelText(m.subspan(pos + 1, len), *text);
    if (wire != nullptr) {
      const auto with_length = m.subspan(pos, 1 + static_cast<size_t>(len));
      wire->insert(wire->end(), with_length.begin(), with_length.end());
    }
    pos += 1 + static_cast<size_t>(len);
  }
  *offset = *end_in_place;
  return OkStatus();
}

struct Header {
  uint16_t id = 0;
  uint16_t flags = 0;
  uint16_t qdcount = 0;
  uint16_t ancount = 0;
  uint16_t nscount = 0;
  uint16_t arcount = 0;
};

Result<Header> ReadHeader(std::span<const uint8_t> m) {
  if (m.size() < kDnsHeaderSize) {
    return Malformed(fmt::format("{} bytes is shorter than a DNS header", m.size()));
  }
  return Header{Get16(m, 0), Get16(m, 2), Get16(m, 4), Get16(m, 6), Get16(m, 8), Get16(m, 10)};
}

struct Question {
  std::string name;
  std::vector<uint8_t> wire_name;
  uint16_t qtype = 0;
  uint16_t qclass = 0;
};

Result<Question> ReadQuestion(std::span<const uint8_t> m, size_t* offset) {
  Question q;
  RETURN_IF_ERROR(ReadName(m, offset, &q.name, &q.wire_name));
  if (*offset + 4 > m.size()) return Malformed("question cut off");
  q.qtype = Get16(m, *offset);
  q.qclass = Get16(m, *offset + 2);
  *offset += 4;
  return q;
}

struct Record {
  std::string name;
  uint16_t type = 0;
  uint16_t rclass = 0;
  uint32_t ttl = 0;
  size_t rdata_offset = 0;
  uint16_t rdlength = 0;
};

Result<Record> ReadRecord(std::span<const uint8_t> m, size_t* offset) {
  Record r;
  RETURN_IF_ERROR(ReadName(m, offset, &r.name, nullptr));
  if (*offset + 10 > m.size()) return Malformed("resource record header cut off");
  r.type = Get16(m, *offset);
  r.rclass = Get16(m, *offset + 2);
  r.ttl = Get32(m, *offset + 4);
  r.rdlength = Get16(m, *offset + 8);
  r.rdata_offset = *offset + 10;
  if (r.rdata_offset + r.rdlength > m.size()) return Malformed("record data cut off");
  *offset = r.rdata_offset + r.rdlength;
  return r;
}

// The header and first question of any message, whatever QR says: what the error and response
// builders echo.
struct Echo {
  Header header;
  std::optional<Question> question;
};

Echo ReadEcho(std::span<const uint8_t> m) {
  Echo echo;
  if (m.size() >= 2) echo.header.id = Get16(m, 0);
  if (m.size() >= 4) echo.header.flags = Get16(m, 2);
  auto header = ReadHeader(m);
  if (!header.ok() || header->qdcount == 0) return echo;
  size_t offset = kDnsHeaderSize;
  auto question = ReadQuestion(m, &offset);
  if (question.ok()) echo.question = std::move(question).value();
  return echo;
}

constexpr uint16_t kOpcodeMask = 0x7800;

// The header of a response that echoes `echo`: id, opcode, RD and CD copied; QR and RA set.
void AppendResponseHeader(const Echo& echo, uint8_t rcode, uint16_t ancount,
                          std::vector<uint8_t>& out) {
  const uint16_t flags = static_cast<uint16_t>(
      kDnsFlagQr | (echo.header.flags & (kOpcodeMask | kDnsFlagRd | kDnsFlagCd)) | kDnsFlagRa |
      (rcode & 0xF));
  Put16(out, echo.header.id);
  Put16(out, flags);
  Put16(out, echo.question ? 1 : 0);
  Put16(out, ancount);
  Put16(out, 0);
  Put16(out, 0);
  if (echo.question) {
    out.insert(out.end(), echo.question->wire_name.begin(), echo.question->wire_name.end());
    Put16(out, echo.question->qtype);
    Put16(out, echo.question->qclass);
  }
}

// Lower-cased, one trailing dot dropped: how a caller's name compares with presentation names.
std::string NormalizeName(std::string_view name) {
  if (!name.empty() && name.back() == '.' && !(name.size() >= 2 && name[name.size() - 2] == '\\')) {
    name.remove_suffix(1);
  }
  return AsciiLowerString(name);
}

}  // namespace

Result<DnsQuery> ParseDnsQuery(std::span<const uint8_t> message) {
  ASSIGN_OR_RETURN(Header header, ReadHeader(message));
  if ((header.flags & kDnsFlagQr) != 0) return Malformed("not a query (QR=1)");
  if (DnsOpcode(header.flags) != 0) {
    return Malformed(fmt::format("opcode {} is not QUERY", DnsOpcode(header.flags)));
  }
  if (header.qdcount != 1) {
    return Malformed(fmt::format("{} questions (a query has exactly one)", header.qdcount));
  }
  if (header.ancount != 0 || header.nscount != 0) {
    return Malformed(fmt::format("a query with {} answer and {} authority records", header.ancount,
                                 header.nscount));
  }
  size_t offset = kDnsHeaderSize;
  ASSIGN_OR_RETURN(Question question, ReadQuestion(message, &offset));
  DnsQuery query{header.id,      header.flags,    std::move(question.name),
                 question.qtype, question.qclass, kDnsClassicUdpSize};
  bool seen_opt = false;
  for (int i = 0; i < header.arcount; ++i) {
    ASSIGN_OR_RETURN(Record record, ReadRecord(message, &offset));
    if (record.type != kDnsTypeOpt) continue;
    // RFC 6891 §6.1.1: one OPT record, owned by the root.
    if (seen_opt) return Malformed("more than one OPT record");
    if (!record.name.empty()) return Malformed("OPT record not owned by the root");
    seen_opt = true;
    query.max_udp_response = std::max(kDnsClassicUdpSize, record.rclass);
  }
  if (offset != message.size()) {
    return Malformed(fmt::format("{} bytes after the last record", message.size() - offset));
  }
  return query;
}

Result<DnsQuery> ParseDnsResponseQuestion(std::span<const uint8_t> response) {
  ASSIGN_OR_RETURN(Header header, ReadHeader(response));
  if ((header.flags & kDnsFlagQr) == 0) return Malformed("not a response (QR=0)");
  if (header.qdcount != 1) {
    return Malformed(fmt::format("{} questions in a response (expected one)", header.qdcount));
  }
  size_t offset = kDnsHeaderSize;
  ASSIGN_OR_RETURN(Question question, ReadQuestion(response, &offset));
  return DnsQuery{header.id,      header.flags,    std::move(question.name),
                  question.qtype, question.qclass, kDnsClassicUdpSize};
}

std::vector<uint8_t> BuildDnsError(std::span<const uint8_t> query, uint8_t rcode) {
  std::vector<uint8_t> out;
  AppendResponseHeader(ReadEcho(query), rcode, 0, out);
  return out;
}

std::vector<uint8_t> WithDnsId(std::span<const uint8_t> message, uint16_t id) {
  std::vector<uint8_t> out(message.begin(), message.end());
  if (out.size() >= 2) {
    out[0] = static_cast<uint8_t>(id >> 8);
    out[1] = static_cast<uint8_t>(id & 0xFF);
  }
  return out;
}

Result<std::vector<DnsAddress>> ExtractAnswerAddresses(std::span<const uint8_t> response,
                                                       std::string_view qname) {
  ASSIGN_OR_RETURN(Header header, ReadHeader(response));
  size_t offset = kDnsHeaderSize;
  for (int i = 0; i < header.qdcount; ++i) {
    ASSIGN_OR_RETURN(Question question, ReadQuestion(response, &offset));
    (void)question;
  }
  struct Address {
    std::string owner;
    DnsAddress address;
  };
  struct Alias {
    std::string owner;
    std::string target;
    uint32_t ttl;
  };
  std::vector<Address> addresses;
  std::vector<Alias> aliases;
  for (int i = 0; i < header.ancount; ++i) {
    ASSIGN_OR_RETURN(Record record, ReadRecord(response, &offset));
    if (record.rclass != kDnsClassIn) continue;
    // RFC 2181 §8: a TTL with the top bit set is read as zero.
    const uint32_t ttl = record.ttl > 0x7FFFFFFFu ? 0 : record.ttl;
    const auto rdata = response.subspan(record.rdata_offset, record.rdlength);
    if (record.type == kDnsTypeA || record.type == kDnsTypeAaaa) {
      const bool v4 = record.type == kDnsTypeA;
      const size_t want = v4 ? 4 : 16;
      if (rdata.size() != want) {
        return Malformed(fmt::format("{} record for {} has {} bytes of data", v4 ? "A" : "AAAA",
                                     record.name, rdata.size()));
      }
      DnsAddress address{v4 ? AF_INET : AF_INET6, {}, ttl};
      std::copy(rdata.begin(), rdata.end(), address.bytes.begin());
      addresses.push_back({std::move(record.name), address});
    } else if (record.type == kDnsTypeCname) {
      size_t name_offset = record.rdata_offset;
      std::string target;
      RETURN_IF_ERROR(ReadName(response, &name_offset, &target, nullptr));
      if (name_offset != record.rdata_offset + record.rdlength) {
        return Malformed(
            fmt::format("CNAME record for {} has a name that does not fill its data", record.name));
      }
      aliases.push_back({std::move(record.name), std::move(target), ttl});
    }
  }

  std::vector<DnsAddress> out;
  auto add = [&out](const DnsAddress& address) {
    for (DnsAddress& seen : out) {
      if (seen.family == address.family && seen.bytes == address.bytes) {
        seen.ttl = std::min(seen.ttl, address.ttl);
        return;
      }
    }
    out.push_back(address);
  };
  std::string current = NormalizeName(qname);
  std::set<std::string> visited{current};
  uint32_t chain_ttl = std::numeric_limits<uint32_t>::max();
  for (int hop = 0;; ++hop) {
    for (const Address& a : addresses) {
      if (a.owner != current) continue;
      DnsAddress address = a.address;
      address.ttl = std::min(address.ttl, chain_ttl);
      add(address);
    }
    if (hop == kMaxCnameHops) break;
    auto alias = std::find_if(aliases.begin(), aliases.end(),
                              [&current](const Alias& a) { return a.owner == current; });
    if (alias == aliases.end()) break;
    chain_ttl = std::min(chain_ttl, alias->ttl);
    current = alias->target;
    if (!visited.insert(current).second) break;  // a CNAME loop
  }
  return out;
}

std::vector<uint8_t> EncodeDnsName(std::string_view name) {
  if (!name.empty() && name.back() == '.') name.remove_suffix(1);
  std::vector<uint8_t> out;
  while (!name.empty()) {
    const size_t dot = name.find('.');
    const std::string_view label = name.substr(0, dot);
    if (label.empty() || label.size() > kMaxLabelLength) return {};
    out.push_back(static_cast<uint8_t>(label.size()));
    out.insert(out.end(), label.begin(), label.end());
    if (dot == std::string_view::npos) break;
    name.remove_prefix(dot + 1);
    if (name.empty()) return {};  // "a..": an empty label
  }
  out.push_back(0);
  if (out.size() > kMaxNameWireLength) return {};
  return out;
}

std::vector<uint8_t> BuildDnsQuery(uint16_t id, std::string_view name, uint16_t qtype) {
  std::vector<uint8_t> wire_name = EncodeDnsName(name);
  if (wire_name.empty()) return {};
  std::vector<uint8_t> out;
  Put16(out, id);
  Put16(out, kDnsFlagRd);
  Put16(out, 1);
  Put16(out, 0);
  Put16(out, 0);
  Put16(out, 0);
  out.insert(out.end(), wire_name.begin(), wire_name.end());
  Put16(out, qtype);
  Put16(out, kDnsClassIn);
  return out;
}

Result<DnsRecord> MakeDnsAddressRecord(std::string name, std::string_view address, uint32_t ttl) {
  const std::string text(address);
  uint8_t bytes[16];
  if (::inet_pton(AF_INET, text.c_str(), bytes) == 1) {
    return DnsRecord{std::move(name), kDnsTypeA, ttl, std::vector<uint8_t>(bytes, bytes + 4)};
  }
  if (::inet_pton(AF_INET6, text.c_str(), bytes) == 1) {
    return DnsRecord{std::move(name), kDnsTypeAaaa, ttl, std::vector<uint8_t>(bytes, bytes + 16)};
  }
  return InvalidArgumentError(fmt::format("{:?} is not an IPv4 or IPv6 address", address));
}

DnsRecord MakeDnsCnameRecord(std::string name, std::string_view target, uint32_t ttl) {
  return DnsRecord{std::move(name), kDnsTypeCname, ttl, EncodeDnsName(target)};
}

std::vector<uint8_t> BuildDnsResponse(std::span<const uint8_t> query, uint8_t rcode,
                                      std::span<const DnsRecord> answers) {
  const Echo echo = ReadEcho(query);
  if (!echo.question) return BuildDnsError(query, rcode);
  if (answers.size() > std::numeric_limits<uint16_t>::max()) return {};
  std::vector<uint8_t> out;
  AppendResponseHeader(echo, rcode, static_cast<uint16_t>(answers.size()), out);
  for (const DnsRecord& record : answers) {
    if (NormalizeName(record.name) == echo.question->name) {
      Put16(out, 0xC000 | kDnsHeaderSize);  // a pointer to the question's name
    } else {
      std::vector<uint8_t> wire_name = EncodeDnsName(record.name);
      if (wire_name.empty()) return {};
      out.insert(out.end(), wire_name.begin(), wire_name.end());
    }
    if (record.type == kDnsTypeCname && record.rdata.empty()) return {};
    if (record.rdata.size() > std::numeric_limits<uint16_t>::max()) return {};
    Put16(out, record.type);
    Put16(out, kDnsClassIn);
    Put32(out, record.ttl);
    Put16(out, static_cast<uint16_t>(record.rdata.size()));
    out.insert(out.end(), record.rdata.begin(), record.rdata.end());
  }
  return out;
}

}  // namespace codespace
