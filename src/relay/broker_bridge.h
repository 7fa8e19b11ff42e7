// BrokerBridge: the worker-side half of a run's broker relay, in the run's supervisor.
//
// It listens on a per-run unix socket — the file that is bind-mounted into the sandbox (e.g. at
// /dev/.codespace-broker.sock) — and forwards every connection to the real broker, counting what
// passes: connections and bytes each way. The counting happens here, outside the sandbox, where
// the run cannot tamper with it; the in-sandbox relay (sandbox_relay.h) only moves bytes.
//
// Nothing but the broker is reachable through it: each connection goes to the one configured
// BrokerAddress (a unix path, or a loopback host:port — ParseBrokerAddress refuses others), and
// the bridge never reads what passes.
//
// The socket file is created with mode 0666: the sandboxed uid may differ from the worker's (a
// root worker's run as uid 1654, or a user namespace's overflow uid), and whoever can reach the
// file is the run itself, since only the run's sandbox sees the bind mount. Put it in a directory
// other runs cannot traverse (the worker's state dir, mode 0700).
#pragma once

#include <memory>
#include <string>

#include "base/status.h"
#include "relay/relay.h"

namespace codespace {

class BrokerBridge {
 public:
  // Creates the listening socket at `socket_path` (a stale socket file there is removed first;
  // any other kind of file is an error), chmod 0666, and starts relaying to `broker` on a thread
  // of its own.
  static Result<std::unique_ptr<BrokerBridge>> Start(const std::string& socket_path,
                                                     BrokerAddress broker,
                                                     RelayOptions options = {});

  BrokerBridge(const BrokerBridge&) = delete;
  BrokerBridge& operator=(const BrokerBridge&) = delete;
  // Stops and removes the socket file.
  ~BrokerBridge();

  // Closes every connection and the listener, joins the thread, removes the socket file.
  // Idempotent. stats() stays readable afterwards (the totals for the run's record).
  void Stop();

  RelayStats stats() const { return relay_->stats(); }
  const std::string& socket_path() const { return socket_path_; }
  const BrokerAddress& broker() const { return broker_; }

 private:
  BrokerBridge(std::string socket_path, BrokerAddress broker, std::unique_ptr<Relay> relay)
      : socket_path_(std::move(socket_path)),
        broker_(std::move(broker)),
        relay_(std::move(relay)) {}

  std::string socket_path_;
  BrokerAddress broker_;
  std::unique_ptr<Relay> relay_;
  bool unlinked_ = false;
};

}  // namespace codespace
