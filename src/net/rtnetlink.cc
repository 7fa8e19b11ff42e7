#include "net/rtnetlink.h"

#include <arpa/inet.h>
#include <libmnl/libmnl.h>
#include <linux/if.h>
#include <linux/if_addr.h>
#include <linux/if_link.h>
#include <linux/rtnetlink.h>
#include <linux/veth.h>
#include <sys/socket.h>
#include <time.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include <fmt/format.h>

namespace codespace {

std::string IpAddress::ToString() const {
  char buf[INET6_ADDRSTRLEN] = "";
  ::inet_ntop(family, bytes.data(), buf, sizeof(buf));
  return buf;
}

Result<IpAddress> ParseIpAddress(std::string_view text) {
  std::string s(text);
  IpAddress a;
  if (::inet_pton(AF_INET, s.c_str(), a.bytes.data()) == 1) {
    a.family = AF_INET;
    return a;
  }
  if (::inet_pton(AF_INET6, s.c_str(), a.bytes.data()) == 1) {
    a.family = AF_INET6;
    return a;
  }
  return InvalidArgumentError(fmt::format("\"{}\" is not an IP address", text));
}

namespace {
size_t AddressSize(int family) { return family == AF_INET ? 4 : 16; }

// mnl_attr_for_each, typed for C++: calls fn(attr) for each attribute after `offset` bytes of
// family header.
template <typename Fn>
void ForEachAttr(const nlmsghdr* m, size_t offset, Fn fn) {
  const char* tail = static_cast<const char*>(mnl_nlmsg_get_payload_tail(m));
  for (auto* attr = static_cast<const nlattr*>(mnl_nlmsg_get_payload_offset(m, offset));
       mnl_attr_ok(attr, static_cast<int>(tail - reinterpret_cast<const char*>(attr)));
       attr = mnl_attr_next(attr)) {
    fn(attr);
  }
}
}  // namespace

Result<std::unique_ptr<Rtnetlink>> Rtnetlink::Open() {
  mnl_socket* s = mnl_socket_open2(NETLINK_ROUTE, SOCK_CLOEXEC);
  if (!s) return ErrnoError("socket(AF_NETLINK, NETLINK_ROUTE)", errno);
  if (mnl_socket_bind(s, 0, MNL_SOCKET_AUTOPID) < 0) {
    int err = errno;
    mnl_socket_close(s);
    return ErrnoError("bind(NETLINK_ROUTE)", err);
  }
  return std::unique_ptr<Rtnetlink>(new Rtnetlink(s));
}

Rtnetlink::Rtnetlink(mnl_socket* sock)
    : sock_(sock), port_id_(mnl_socket_get_portid(sock)), seq_(static_cast<unsigned>(time(nullptr))) {}

Rtnetlink::~Rtnetlink() { mnl_socket_close(sock_); }

Status Rtnetlink::Request(void* raw, const std::string& what) {
  auto* nlh = static_cast<nlmsghdr*>(raw);
  nlh->nlmsg_flags |= NLM_F_REQUEST | NLM_F_ACK;
  nlh->nlmsg_seq = ++seq_;
  if (mnl_socket_sendto(sock_, nlh, nlh->nlmsg_len) < 0) return ErrnoError(what, errno);
  std::vector<char> buf(MNL_SOCKET_BUFFER_SIZE);
  for (;;) {
    ssize_t n = mnl_socket_recvfrom(sock_, buf.data(), buf.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoError(what, errno);
    }
    int rc = mnl_cb_run(buf.data(), static_cast<size_t>(n), seq_, port_id_, nullptr, nullptr);
    if (rc < 0) return ErrnoError(what, errno);
    if (rc == MNL_CB_STOP) return OkStatus();
  }
}

Status Rtnetlink::Dump(void* raw, const std::string& what, int (*cb)(const void*, void*),
                       void* data, const std::function<void()>& reset) {
  auto* nlh = static_cast<nlmsghdr*>(raw);
  nlh->nlmsg_flags |= NLM_F_REQUEST | NLM_F_DUMP;
  std::vector<char> buf(MNL_SOCKET_BUFFER_SIZE);
  // A dump that the kernel marks interrupted (NLM_F_DUMP_INTR: the table changed under it,
  // as it does when other runs add addresses at the same time) surfaces as EINTR: the callback
  // may have seen a torn list, so the caller's data is only good from a dump that completes.
  // Callers' callbacks append: `reset` gives them a fresh start before each retry.
  for (int attempt = 0;; ++attempt) {
    nlh->nlmsg_seq = ++seq_;
    if (mnl_socket_sendto(sock_, nlh, nlh->nlmsg_len) < 0) return ErrnoError(what, errno);
    int rc;
    for (;;) {
      ssize_t n = mnl_socket_recvfrom(sock_, buf.data(), buf.size());
      if (n < 0) {
        if (errno == EINTR) continue;
        return ErrnoError(what, errno);
      }
      rc = mnl_cb_run(buf.data(), static_cast<size_t>(n), seq_, port_id_,
                      reinterpret_cast<mnl_cb_t>(cb), data);
      if (rc <= MNL_CB_STOP) break;
    }
    if (rc == MNL_CB_STOP) return OkStatus();
    if (errno != EINTR || attempt >= 20) return ErrnoError(what, errno);
    // Drain what is left of the interrupted dump (up to its NLMSG_DONE) before asking again.
    bool done = false;
    while (!done) {
      ssize_t n = mnl_socket_recvfrom(sock_, buf.data(), buf.size());
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return ErrnoError(what, errno);
      int left = static_cast<int>(n);
      for (auto* m = reinterpret_cast<const nlmsghdr*>(buf.data()); mnl_nlmsg_ok(m, left);
           m = mnl_nlmsg_next(m, &left)) {
        if (m->nlmsg_seq == seq_ && (m->nlmsg_type == NLMSG_DONE || m->nlmsg_type == NLMSG_ERROR)) {
          done = true;
        }
      }
    }
    if (reset) reset();
  }
}

Status Rtnetlink::CreateVethPair(const std::string& name, const std::string& peer_name,
                                 int peer_netns_fd) {
  std::vector<char> buf(MNL_SOCKET_BUFFER_SIZE);
  nlmsghdr* nlh = mnl_nlmsg_put_header(buf.data());
  nlh->nlmsg_type = RTM_NEWLINK;
  nlh->nlmsg_flags = NLM_F_CREATE | NLM_F_EXCL;
  auto* ifm = static_cast<ifinfomsg*>(mnl_nlmsg_put_extra_header(nlh, sizeof(ifinfomsg)));
  ifm->ifi_family = AF_UNSPEC;
  mnl_attr_put_strz(nlh, IFLA_IFNAME, name.c_str());
  nlattr* linkinfo = mnl_attr_nest_start(nlh, IFLA_LINKINFO);
  mnl_attr_put_strz(nlh, IFLA_INFO_KIND, "veth");
  nlattr* data = mnl_attr_nest_start(nlh, IFLA_INFO_DATA);
  nlattr* peer = mnl_attr_nest_start(nlh, VETH_INFO_PEER);
  auto* peer_ifm = static_cast<ifinfomsg*>(mnl_nlmsg_put_extra_header(nlh, sizeof(ifinfomsg)));
  peer_ifm->ifi_family = AF_UNSPEC;
  mnl_attr_put_strz(nlh, IFLA_IFNAME, peer_name.c_str());
  mnl_attr_put_u32(nlh, IFLA_NET_NS_FD, static_cast<uint32_t>(peer_netns_fd));
  mnl_attr_nest_end(nlh, peer);
  mnl_attr_nest_end(nlh, data);
  mnl_attr_nest_end(nlh, linkinfo);
  return Request(nlh, fmt::format("RTM_NEWLINK(veth {} peer {})", name, peer_name));
}

Result<int> Rtnetlink::LinkIndex(const std::string& name) {
  // Asked over our own socket: if_nametoindex() would ask the calling thread's namespace.
  std::vector<char> buf(MNL_SOCKET_BUFFER_SIZE);
  nlmsghdr* nlh = mnl_nlmsg_put_header(buf.data());
  nlh->nlmsg_type = RTM_GETLINK;
  nlh->nlmsg_flags = NLM_F_REQUEST;
  nlh->nlmsg_seq = ++seq_;
  auto* ifm = static_cast<ifinfomsg*>(mnl_nlmsg_put_extra_header(nlh, sizeof(ifinfomsg)));
  ifm->ifi_family = AF_UNSPEC;
  mnl_attr_put_strz(nlh, IFLA_IFNAME, name.c_str());
  std::string what = fmt::format("RTM_GETLINK({})", name);
  if (mnl_socket_sendto(sock_, nlh, nlh->nlmsg_len) < 0) return ErrnoError(what, errno);
  std::vector<char> rbuf(MNL_SOCKET_BUFFER_SIZE);
  ssize_t n;
  do {
    n = mnl_socket_recvfrom(sock_, rbuf.data(), rbuf.size());
  } while (n < 0 && errno == EINTR);
  if (n < 0) return ErrnoError(what, errno);
  int index = -1;
  auto cb = [](const nlmsghdr* m, void* out) -> int {
    auto* i = static_cast<const ifinfomsg*>(mnl_nlmsg_get_payload(m));
    *static_cast<int*>(out) = i->ifi_index;
    return MNL_CB_OK;
  };
  int rc = mnl_cb_run(rbuf.data(), static_cast<size_t>(n), seq_, port_id_, cb, &index);
  if (rc < 0) {
    if (errno == ENODEV) return NotFoundError(fmt::format("{}: no such link", what));
    return ErrnoError(what, errno);
  }
  if (index < 0) return NotFoundError(fmt::format("{}: no such link", what));
  return index;
}

Status Rtnetlink::SetLinkUp(int ifindex) {
  std::vector<char> buf(MNL_SOCKET_BUFFER_SIZE);
  nlmsghdr* nlh = mnl_nlmsg_put_header(buf.data());
  nlh->nlmsg_type = RTM_NEWLINK;
  auto* ifm = static_cast<ifinfomsg*>(mnl_nlmsg_put_extra_header(nlh, sizeof(ifinfomsg)));
  ifm->ifi_family = AF_UNSPEC;
  ifm->ifi_index = ifindex;
  ifm->ifi_flags = IFF_UP;
  ifm->ifi_change = IFF_UP;
  return Request(nlh, fmt::format("RTM_NEWLINK(ifindex {} up)", ifindex));
}

Status Rtnetlink::AddAddress(int ifindex, const IpAddress& address, int prefix_length) {
  std::vector<char> buf(MNL_SOCKET_BUFFER_SIZE);
  nlmsghdr* nlh = mnl_nlmsg_put_header(buf.data());
  nlh->nlmsg_type = RTM_NEWADDR;
  nlh->nlmsg_flags = NLM_F_CREATE | NLM_F_EXCL;
  auto* ifa = static_cast<ifaddrmsg*>(mnl_nlmsg_put_extra_header(nlh, sizeof(ifaddrmsg)));
  ifa->ifa_family = static_cast<uint8_t>(address.family);
  ifa->ifa_prefixlen = static_cast<uint8_t>(prefix_length);
  ifa->ifa_index = static_cast<uint32_t>(ifindex);
  ifa->ifa_scope = RT_SCOPE_UNIVERSE;
  const size_t len = AddressSize(address.family);
  mnl_attr_put(nlh, IFA_LOCAL, len, address.bytes.data());
  mnl_attr_put(nlh, IFA_ADDRESS, len, address.bytes.data());
  if (address.family == AF_INET6) {
    ifa->ifa_flags = IFA_F_NODAD;
    mnl_attr_put_u32(nlh, IFA_FLAGS, IFA_F_NODAD);
  }
  return Request(nlh, fmt::format("RTM_NEWADDR({}/{} on ifindex {})", address.ToString(),
                                  prefix_length, ifindex));
}

Status Rtnetlink::AddDefaultRoute(const IpAddress& gateway) {
  std::vector<char> buf(MNL_SOCKET_BUFFER_SIZE);
  nlmsghdr* nlh = mnl_nlmsg_put_header(buf.data());
  nlh->nlmsg_type = RTM_NEWROUTE;
  nlh->nlmsg_flags = NLM_F_CREATE | NLM_F_EXCL;
  auto* rtm = static_cast<rtmsg*>(mnl_nlmsg_put_extra_header(nlh, sizeof(rtmsg)));
  rtm->rtm_family = static_cast<uint8_t>(gateway.family);
  rtm->rtm_dst_len = 0;
  rtm->rtm_table = RT_TABLE_MAIN;
  rtm->rtm_protocol = RTPROT_STATIC;
  rtm->rtm_scope = RT_SCOPE_UNIVERSE;
  rtm->rtm_type = RTN_UNICAST;
  mnl_attr_put(nlh, RTA_GATEWAY, AddressSize(gateway.family), gateway.bytes.data());
  return Request(nlh, fmt::format("RTM_NEWROUTE(default via {})", gateway.ToString()));
}

Status Rtnetlink::DeleteLink(const std::string& name) {
  std::vector<char> buf(MNL_SOCKET_BUFFER_SIZE);
  nlmsghdr* nlh = mnl_nlmsg_put_header(buf.data());
  nlh->nlmsg_type = RTM_DELLINK;
  auto* ifm = static_cast<ifinfomsg*>(mnl_nlmsg_put_extra_header(nlh, sizeof(ifinfomsg)));
  ifm->ifi_family = AF_UNSPEC;
  mnl_attr_put_strz(nlh, IFLA_IFNAME, name.c_str());
  Status s = Request(nlh, fmt::format("RTM_DELLINK({})", name));
  if (!s.ok() && s.message().find(ErrnoText(ENODEV)) != std::string::npos) {
    return NotFoundError(fmt::format("RTM_DELLINK({}): no such link", name));
  }
  return s;
}

Result<std::vector<InterfaceAddress>> Rtnetlink::ListAddresses() {
  std::vector<char> buf(MNL_SOCKET_BUFFER_SIZE);
  nlmsghdr* nlh = mnl_nlmsg_put_header(buf.data());
  nlh->nlmsg_type = RTM_GETADDR;
  auto* ifa = static_cast<ifaddrmsg*>(mnl_nlmsg_put_extra_header(nlh, sizeof(ifaddrmsg)));
  ifa->ifa_family = AF_UNSPEC;
  std::vector<InterfaceAddress> out;
  auto cb = [](const void* raw, void* data) -> int {
    auto* m = static_cast<const nlmsghdr*>(raw);
    auto* a = static_cast<const ifaddrmsg*>(mnl_nlmsg_get_payload(m));
    if (a->ifa_family != AF_INET && a->ifa_family != AF_INET6) return MNL_CB_OK;
    InterfaceAddress ia;
    ia.ifindex = static_cast<int>(a->ifa_index);
    ia.prefix_length = a->ifa_prefixlen;
    ia.address.family = a->ifa_family;
    bool found = false;
    ForEachAttr(m, sizeof(*a), [&](const nlattr* attr) {
      int type = mnl_attr_get_type(attr);
      if ((type == IFA_LOCAL || (type == IFA_ADDRESS && !found)) &&
          mnl_attr_get_payload_len(attr) == AddressSize(a->ifa_family)) {
        std::memcpy(ia.address.bytes.data(), mnl_attr_get_payload(attr), AddressSize(a->ifa_family));
        found = true;
      }
    });
    if (found) static_cast<std::vector<InterfaceAddress>*>(data)->push_back(ia);
    return MNL_CB_OK;
  };
  RETURN_IF_ERROR(Dump(nlh, "RTM_GETADDR(dump)", cb, &out, [&] { out.clear(); }));
  return out;
}

Result<std::vector<std::string>> Rtnetlink::ListLinkNames() {
  std::vector<char> buf(MNL_SOCKET_BUFFER_SIZE);
  nlmsghdr* nlh = mnl_nlmsg_put_header(buf.data());
  nlh->nlmsg_type = RTM_GETLINK;
  auto* ifm = static_cast<ifinfomsg*>(mnl_nlmsg_put_extra_header(nlh, sizeof(ifinfomsg)));
  ifm->ifi_family = AF_UNSPEC;
  std::vector<std::string> out;
  auto cb = [](const void* raw, void* data) -> int {
    auto* m = static_cast<const nlmsghdr*>(raw);
    ForEachAttr(m, sizeof(ifinfomsg), [&](const nlattr* attr) {
      if (mnl_attr_get_type(attr) == IFLA_IFNAME) {
        static_cast<std::vector<std::string>*>(data)->push_back(mnl_attr_get_str(attr));
      }
    });
    return MNL_CB_OK;
  };
  RETURN_IF_ERROR(Dump(nlh, "RTM_GETLINK(dump)", cb, &out, [&] { out.clear(); }));
  return out;
}

Result<bool> Rtnetlink::HasDefaultRoute(int family) {
  std::vector<char> buf(MNL_SOCKET_BUFFER_SIZE);
  nlmsghdr* nlh = mnl_nlmsg_put_header(buf.data());
  nlh->nlmsg_type = RTM_GETROUTE;
  auto* rtm = static_cast<rtmsg*>(mnl_nlmsg_put_extra_header(nlh, sizeof(rtmsg)));
  rtm->rtm_family = static_cast<uint8_t>(family);
  bool found = false;
  auto cb = [](const void* raw, void* data) -> int {
    auto* m = static_cast<const nlmsghdr*>(raw);
    auto* r = static_cast<const rtmsg*>(mnl_nlmsg_get_payload(m));
    if (r->rtm_dst_len == 0 && r->rtm_table == RT_TABLE_MAIN && r->rtm_type == RTN_UNICAST) {
      *static_cast<bool*>(data) = true;
    }
    return MNL_CB_OK;
  };
  RETURN_IF_ERROR(Dump(nlh, "RTM_GETROUTE(dump)", cb, &found, [&] { found = false; }));
  return found;
}

}  // namespace codespace
