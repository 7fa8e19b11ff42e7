// NetworkReport: what a filtered run's network did, for its record.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace codespace {

struct NetworkReport {
  std::vector<std::string> dns_admitted;  // "name address" or "name address:port", once each
  std::vector<std::string> dns_refused;   // names the DNS gate refused, once each
  uint64_t dropped_packets = 0;           // the run firewall's drop counter at teardown
  // The broker relay, counted on the worker side (where the run cannot tamper with it).
  uint64_t broker_connections = 0;
  uint64_t broker_failed = 0;             // connections the broker refused or dropped at connect
  uint64_t broker_bytes_to = 0;           // run → broker
  uint64_t broker_bytes_from = 0;         // broker → run

  bool empty() const { return *this == NetworkReport{}; }
  friend bool operator==(const NetworkReport&, const NetworkReport&) = default;
};

}  // namespace codespace
