#include "net/nftables.h"

#include <nftables/libnftables.h>

#include <cstdlib>
#include <string>

#include <fmt/format.h>

namespace codespace {

Result<std::unique_ptr<Nftables>> Nftables::Open() {
  nft_ctx* ctx = nft_ctx_new(NFT_CTX_DEFAULT);
  if (!ctx) return InternalError("nft_ctx_new failed");
  // Output and errors into buffers, never onto the worker's stdout/stderr.
  if (nft_ctx_buffer_output(ctx) != 0 || nft_ctx_buffer_error(ctx) != 0) {
    nft_ctx_free(ctx);
    return InternalError("nft_ctx_buffer_output/error failed");
  }
  return std::unique_ptr<Nftables>(new Nftables(ctx));
}

Nftables::~Nftables() { nft_ctx_free(ctx_); }

namespace {
std::string FirstLines(std::string_view text, size_t max_lines) {
  std::string out;
  size_t lines = 0;
  for (char c : text) {
    if (c == '\n') {
      if (++lines == max_lines) break;
      out += " | ";
      continue;
    }
    out += c;
  }
  while (out.size() >= 3 && out.substr(out.size() - 3) == " | ") out.resize(out.size() - 3);
  return out;
}
}  // namespace

Result<std::string> Nftables::Query(std::string_view commands) {
  std::lock_guard<std::mutex> lock(mu_);
  std::string cmd(commands);
  int rc = nft_run_cmd_from_buffer(ctx_, cmd.c_str());
  std::string out = nft_ctx_get_output_buffer(ctx_);
  std::string err = nft_ctx_get_error_buffer(ctx_);
  if (rc != 0) {
    return InternalError(fmt::format("nft: {}", err.empty() ? "failed" : FirstLines(err, 4)));
  }
  return out;
}

Status Nftables::Run(std::string_view commands) { return Query(commands).status(); }

Result<uint64_t> Nftables::CounterPackets(std::string_view family, std::string_view table,
                                          std::string_view counter) {
  ASSIGN_OR_RETURN(std::string out,
                   Query(fmt::format("list counter {} {} {}", family, table, counter)));
  size_t at = out.find("packets ");
  if (at == std::string::npos) {
    return InternalError(fmt::format("nft list counter {}: no packet count in \"{}\"", counter, out));
  }
  return std::strtoull(out.c_str() + at + 8, nullptr, 10);
}

}  // namespace codespace
