// DnsGate: a filtered run's resolver. It answers only allowlisted names, and admits the answered
// addresses to the run's firewall before the answer reaches the run.
//
// What it does, per query from the run (over UDP or TCP at the listen addresses):
//   - a name that no name entry of the allowlist matches (exact, or "*." wildcard through
//     AllowlistEntry::MatchesName), a class other than IN, or a zone transfer: REFUSED, and
//     on_refused(name, qtype) is called so the caller can log it with the run id. The upstream
//     never sees such a query.
//   - a malformed query: FORMERR; an opcode other than QUERY: NOTIMP; a message with QR=1: dropped.
//   - an allowed name: forwarded to the upstream resolver, each attempt from its own connected UDP
//     socket with a fresh random id (mapped back to the client's id on the way out), timing out
//     after `upstream_timeout` with one retry; a truncated (TC) UDP answer is asked again over
//     TCP. An upstream that fails, times out or answers with garbage: SERVFAIL.
//   - the upstream's answer: the A/AAAA addresses of the query name and its CNAME chain
//     (ExtractAnswerAddresses) are handed to `admit`, one AdmittedAddress per (address, matching
//     allowlist entry), *before* the answer is sent. When admit fails the run gets SERVFAIL: it
//     never learns an address the firewall did not admit. Other query types (TXT, MX, ...) of
//     allowed names are answered with nothing admitted: their addresses, if any, stay unreachable.
//
// Why an in-process gate and not dnsmasq (the issue allowed either):
//   - speed: no process to spawn and wait for per run, no configuration file to write; Start() is
//     a handful of socket() and bind() calls, and the launch measured against plain bwrap
//     (issue 3: within 3x) pays nothing for it;
//   - robustness: admission-before-answer is a direct function call whose Status decides the
//     reply, so a failed admission reaches the run as SERVFAIL. dnsmasq's nftset update is a side
//     effect of caching the reply: when it fails, dnsmasq logs and answers anyway, and the run
//     holds an address the firewall never admitted;
//   - ownership: the gate is an object owned by its run; it stops and its sockets close when the
//     run's owner destroys it: no daemon per run to track by pid, find and kill after a crash.
//
// Threads: one event-loop thread per gate (epoll, non-blocking sockets, an eventfd to stop).
// `admit` and `on_refused` are called on that thread, one at a time, and block it: keep them
// short (an in-process nftables set update is). stats() may be called from any thread.
//
// Limits: at most `max_tcp_clients` TCP connections (more are closed on accept), at most
// `max_in_flight` queries waiting for the upstream (more get SERVFAIL), TCP connections idle for
// `tcp_idle_timeout` are closed. A UDP client gets at most its advertised payload size (512, or
// its EDNS(0) size); a bigger answer (one the gate fetched over TCP) reaches it as an empty
// response with TC set, so that it asks again over TCP. Its addresses are admitted all the same.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "base/status.h"
#include "policy/egress_policy.h"

namespace codespace {

// An address to listen on or to forward to: IPv4 or IPv6 text ("10.201.0.1", "::1") and a port.
// A listen port of 0 picks a free port (the same for UDP and TCP); see DnsGate::listen_addresses.
struct DnsEndpoint {
  std::string address;
  uint16_t port = 53;

  // "10.201.0.1:53", "[::1]:53".
  std::string ToString() const;
  friend bool operator==(const DnsEndpoint&, const DnsEndpoint&) = default;
};

// One address the run may now reach: an answered address under one matching allowlist entry.
struct AdmittedAddress {
  std::string name;                 // the query name (not the CNAME target), presentation form
  int family = 0;                   // AF_INET or AF_INET6
  std::array<uint8_t, 16> bytes{};  // network order; IPv4 in the first 4 bytes
  // Seconds, the smallest along the CNAME chain; may be 0. Clients cache an answer this long, so
  // the admission should last at least as long (with a floor: a TTL of 0 is still used once).
  uint32_t ttl = 0;
  std::optional<uint16_t> port;  // the matching entry's port; nullopt: every port

  friend bool operator==(const AdmittedAddress&, const AdmittedAddress&) = default;
};

struct DnsGateConfig {
  std::string run_id;  // for the caller's logs; the gate only names it in errors
  // The run's allowlist; only name entries count here (addresses and CIDRs are the firewall's).
  std::vector<AllowlistEntry> allowlist;
  // Where the run's resolver answers: the run side's IPv4 address, and its IPv6 one if any.
  std::vector<DnsEndpoint> listen;
  DnsEndpoint upstream;  // the worker's resolver
  // Called with every address about to be answered, before the answer is sent. A failure makes
  // the answer SERVFAIL. Required: a gate without it would answer addresses nobody admitted.
  std::function<Status(const std::vector<AdmittedAddress>&)> admit;
  // Called for every REFUSED query. Optional.
  std::function<void(std::string_view name, uint16_t qtype)> on_refused;

  std::chrono::milliseconds upstream_timeout{2000};  // per attempt; one retry over UDP
  std::chrono::milliseconds tcp_idle_timeout{10000};
  size_t max_tcp_clients = 64;
  size_t max_in_flight = 256;
};

class DnsGate {
 public:
  struct Stats {
    uint64_t queries = 0;             // well-formed queries received (UDP and TCP)
    uint64_t refused = 0;             // answered REFUSED
    uint64_t forwarded = 0;           // sent to the upstream (once per query, not per attempt)
    uint64_t admitted_addresses = 0;  // AdmittedAddress values admit() accepted
    uint64_t admit_failures = 0;      // answers turned into SERVFAIL because admit() failed
    uint64_t upstream_failures = 0;   // answers turned into SERVFAIL because the upstream failed
    uint64_t dropped = 0;             // malformed or excess messages and connections
  };

  // Validates the config, opens and binds every socket, and starts the event-loop thread. Errors
  // name the failing call, e.g. "bind(10.201.0.1:53/udp): Address already in use".
  [[nodiscard]] static Result<std::unique_ptr<DnsGate>> Start(DnsGateConfig config);

  DnsGate(const DnsGate&) = delete;
  DnsGate& operator=(const DnsGate&) = delete;
  // Stop().
  ~DnsGate();

  // Stops the event loop, joins its thread and closes every socket (the listen addresses are
  // free again when it returns); queries in flight are abandoned. Idempotent.
  void Stop();

  // The bound addresses, in config order, with the ports actually bound (for port 0).
  const std::vector<DnsEndpoint>& listen_addresses() const { return bound_; }

  Stats stats() const;

 private:
  class Loop;  // the event loop and its sockets (dns_gate.cc)

  DnsGate(std::unique_ptr<Loop> loop, std::vector<DnsEndpoint> bound);

  std::unique_ptr<Loop> loop_;
  std::vector<DnsEndpoint> bound_;
  std::thread thread_;
};

}  // namespace codespace
