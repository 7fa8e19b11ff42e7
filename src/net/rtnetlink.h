// A small rtnetlink client (libmnl underneath) for the few link, address and route operations a
// filtered run needs. The socket is bound to the network namespace of the thread that opened
// it, for its whole life: open it inside a namespace (RunInNetns) to configure that namespace.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"

struct mnl_socket;

namespace codespace {

struct IpAddress {
  int family = 0;  // AF_INET or AF_INET6
  std::array<uint8_t, 16> bytes{};
  std::string ToString() const;
  friend bool operator==(const IpAddress&, const IpAddress&) = default;
};
Result<IpAddress> ParseIpAddress(std::string_view text);

struct InterfaceAddress {
  int ifindex = 0;
  IpAddress address;
  int prefix_length = 0;
};

class Rtnetlink {
 public:
  // A NETLINK_ROUTE socket in the calling thread's network namespace.
  static Result<std::unique_ptr<Rtnetlink>> Open();
  ~Rtnetlink();
  Rtnetlink(const Rtnetlink&) = delete;
  Rtnetlink& operator=(const Rtnetlink&) = delete;

  // A veth pair: `name` here, its peer `peer_name` created directly in the namespace `peer_netns_fd`.
  [[nodiscard]] Status CreateVethPair(const std::string& name, const std::string& peer_name,
                                      int peer_netns_fd);
  // kNotFound when there is no such link.
  [[nodiscard]] Result<int> LinkIndex(const std::string& name);
  [[nodiscard]] Status SetLinkUp(int ifindex);
  // IPv6 addresses are added with IFA_F_NODAD: usable at once, no duplicate detection wait.
  [[nodiscard]] Status AddAddress(int ifindex, const IpAddress& address, int prefix_length);
  [[nodiscard]] Status AddDefaultRoute(const IpAddress& gateway);
  // kNotFound when there is no such link.
  [[nodiscard]] Status DeleteLink(const std::string& name);
  [[nodiscard]] Result<std::vector<InterfaceAddress>> ListAddresses();
  [[nodiscard]] Result<std::vector<std::string>> ListLinkNames();
  // Whether this namespace has a default route of `family`.
  [[nodiscard]] Result<bool> HasDefaultRoute(int family);

 private:
  explicit Rtnetlink(mnl_socket* sock);
  // Sends one request with NLM_F_ACK and waits for its ack. `what` names it in errors.
  Status Request(void* nlh, const std::string& what);
  // Sends a dump request, calling `cb` for each message; an interrupted dump is retried after
  // `reset` clears what `cb` gathered.
  Status Dump(void* nlh, const std::string& what, int (*cb)(const void*, void*), void* data,
              const std::function<void()>& reset);

  mnl_socket* sock_;
  unsigned port_id_;
  unsigned seq_;
};

}  // namespace codespace
