// libnftables in-process: no `nft` process per step. A context is bound, for its whole life, to
// the network namespace of the thread that opened it (its netlink socket is made then).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "base/status.h"

struct nft_ctx;

namespace codespace {

class Nftables {
 public:
  static Result<std::unique_ptr<Nftables>> Open();
  ~Nftables();
  Nftables(const Nftables&) = delete;
  Nftables& operator=(const Nftables&) = delete;

  // Runs nft commands (one transaction per call). Errors carry nft's own message.
  [[nodiscard]] Status Run(std::string_view commands);
  // Runs and returns what nft printed (for `list ...`).
  [[nodiscard]] Result<std::string> Query(std::string_view commands);
  // The packet count of a named counter.
  [[nodiscard]] Result<uint64_t> CounterPackets(std::string_view family, std::string_view table,
                                                std::string_view counter);

 private:
  explicit Nftables(nft_ctx* ctx) : ctx_(ctx) {}
  std::mutex mu_;
  nft_ctx* ctx_;
};

}  // namespace codespace
