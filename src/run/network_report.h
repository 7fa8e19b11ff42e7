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

  bool empty() const { return dns_admitted.empty() && dns_refused.empty() && dropped_packets == 0; }
  friend bool operator==(const NetworkReport&, const NetworkReport&) = default;
};

}  // namespace codespace
