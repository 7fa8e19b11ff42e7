#include "seccomp/syscall_policy.h"

// SHA256_*, deprecated in OpenSSL 3 (as in supervisor/log_file.cc): before any OpenSSL header.
#define OPENSSL_SUPPRESS_DEPRECATED

#include <errno.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <linux/netlink.h>
#include <linux/sched.h>
#include <openssl/sha.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <algorithm>

namespace codespace {

namespace {

// The kernel's own bit for O_TMPFILE (glibc's __O_TMPFILE also carries O_DIRECTORY, which a
// plain O_DIRECTORY open has too: matching that would refuse every setuid-looking mode there).
constexpr uint64_t kOTmpfileBit = 020000000;
constexpr uint64_t kSetIdBits = S_ISUID | S_ISGID;
constexpr uint32_t kTiocsti = 0x5412;
constexpr uint32_t kTioclinux = 0x541C;
constexpr uint32_t kPerLinux = 0;
constexpr uint32_t kPersonalityQuery = 0xffffffff;
constexpr uint64_t kNamespaceFlags = CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC |
                                     CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET;

ArgCondition AnyBit(unsigned arg, uint64_t bits) {
  return {arg, ArgCondition::Kind::kAnyBit, bits, {}};
}
ArgCondition Low32In(unsigned arg, std::vector<uint32_t> values) {
  return {arg, ArgCondition::Kind::kLow32In, 0, std::move(values)};
}
ArgCondition Low32NotIn(unsigned arg, std::vector<uint32_t> values) {
  return {arg, ArgCondition::Kind::kLow32NotIn, 0, std::move(values)};
}

// Every (mask, value) block of the 32-bit space that holds none of `taken` (sorted), largest
// blocks first: the values a kLow32NotIn condition matches, as masked equalities.
void CoverOthers(const std::vector<uint32_t>& taken, uint32_t prefix, unsigned len,
                 std::vector<std::pair<uint64_t, uint64_t>>* out) {
  const uint32_t span = len == 0 ? 0xffffffffu : (len == 32 ? 0u : (0xffffffffu >> len));
  const uint32_t lo = prefix, hi = prefix | span;
  auto first = std::lower_bound(taken.begin(), taken.end(), lo);
  bool any = first != taken.end() && *first <= hi;
  if (!any) {
    uint64_t mask = len == 0 ? 0 : (0xffffffffull << (32 - len)) & 0xffffffffull;
    out->emplace_back(mask, prefix);
    return;
  }
  if (len == 32) return;  // the block is the taken value itself
  CoverOthers(taken, prefix, len + 1, out);
  CoverOthers(taken, prefix | (1u << (31 - len)), len + 1, out);
}

// The alternatives for one condition: any one of them makes it hold.
std::vector<MaskedEq> Alternatives(const ArgCondition& c) {
  std::vector<MaskedEq> alts;
  switch (c.kind) {
    case ArgCondition::Kind::kAnyBit:
      for (unsigned b = 0; b < 64; ++b) {
        uint64_t bit = uint64_t{1} << b;
        if (c.bits & bit) alts.push_back({c.arg, bit, bit});
      }
      break;
    case ArgCondition::Kind::kLow32In:
      for (uint32_t v : c.values) alts.push_back({c.arg, 0xffffffffull, v});
      break;
    case ArgCondition::Kind::kLow32NotIn: {
      std::vector<uint32_t> taken = c.values;
      std::sort(taken.begin(), taken.end());
      taken.erase(std::unique(taken.begin(), taken.end()), taken.end());
      std::vector<std::pair<uint64_t, uint64_t>> blocks;
      CoverOthers(taken, 0, 0, &blocks);
      for (auto [mask, value] : blocks) alts.push_back({c.arg, mask, value});
      break;
    }
  }
  return alts;
}

}  // namespace

// THE TABLE. One row per syscall (or argument pattern), its answer, and why.
std::vector<PolicyRow> SyscallPolicyRows(const SeccompOptions& options) {
  const std::string kMount =
      "the run's file-system view is the sandbox's to make: mounting, moving, idmapping or "
      "pivoting mounts is never the run's";
  const std::string kSetId =
      "no run creates a setuid/setgid file: its workspace may be owned on disk by the "
      "submitter (root), so such a file would be a way out for whoever runs it next";
  const std::string kXattr =
      "security.capability (file capabilities) cannot be told apart from other names (the "
      "name is behind a pointer); EOPNOTSUPP, as a file system without xattrs says, is what "
      "cp -a, tar and rsync already skip quietly";
  std::vector<PolicyRow> rows = {
      // Probed-for features: ENOSYS, so callers take the path they take on kernels without them.
      {"io_uring_setup",
       {},
       ENOSYS,
       "io_uring: a large kernel surface with a long exploit history; libuv (node) and liburing "
       "users fall back to threads on ENOSYS"},
      {"io_uring_enter", {}, ENOSYS, "io_uring (see io_uring_setup)"},
      {"io_uring_register", {}, ENOSYS, "io_uring (see io_uring_setup)"},
      {"userfaultfd",
       {},
       ENOSYS,
       "user-space page-fault handling widens kernel race windows for exploits; its users "
       "(QEMU, CRIU) fall back on ENOSYS"},
      {"clone3",
       {},
       ENOSYS,
       "its flags are behind a pointer the filter cannot read; glibc falls back to clone on "
       "ENOSYS, whose flags it can"},
      {"openat2",
       {},
       ENOSYS,
       "its mode is behind a pointer (struct open_how) the filter cannot read; glibc and "
       "callers fall back to openat on ENOSYS"},
      {"add_key",
       {},
       ENOSYS,
       "kernel keyrings: state shared beyond the sandbox and a history of bugs; keyutils users "
       "treat ENOSYS as a kernel without keys"},
      {"keyctl", {}, ENOSYS, "kernel keyrings (see add_key)"},
      {"request_key", {}, ENOSYS, "kernel keyrings (see add_key)"},
      // Refused as to an unprivileged caller.
      {"bpf", {}, EPERM, "eBPF programs and maps: verifier and JIT surface no agent needs"},
      {"perf_event_open",
       {},
       EPERM,
       "performance counters: side channels into other processes and a history of bugs"},
      {"kexec_load", {}, EPERM, "loads a new kernel"},
      {"kexec_file_load", {}, EPERM, "loads a new kernel"},
      {"init_module", {}, EPERM, "loads kernel code"},
      {"finit_module", {}, EPERM, "loads kernel code"},
      {"delete_module", {}, EPERM, "unloads kernel code"},
      {"open_by_handle_at",
       {},
       EPERM,
       "opens any inode of a file system by its handle, past the sandbox's mount view"},
      {"mount", {}, EPERM, kMount},
      {"umount2", {}, EPERM, kMount},
      {"pivot_root", {}, EPERM, kMount},
      {"move_mount", {}, EPERM, kMount},
      {"open_tree", {}, EPERM, kMount},
      {"open_tree_attr", {}, EPERM, kMount},
      {"fsopen", {}, EPERM, kMount},
      {"fsconfig", {}, EPERM, kMount},
      {"fsmount", {}, EPERM, kMount},
      {"fspick", {}, EPERM, kMount},
      {"mount_setattr", {}, EPERM, kMount},
      {"unshare",
       {},
       EPERM,
       "new namespaces (a user namespace above all) open kernel surface that otherwise needs "
       "privilege; the sandbox already gave the run the namespaces it has"},
      {"setns", {}, EPERM, "joins another namespace (see unshare)"},
      {"clone",
       {AnyBit(0, kNamespaceFlags)},
       EPERM,
       "clone with a namespace flag is unshare by another name (see unshare); plain clone "
       "(fork, threads) is allowed"},
      {"swapon", {}, EPERM, "host administration"},
      {"swapoff", {}, EPERM, "host administration"},
      {"reboot", {}, EPERM, "host administration"},
      {"acct", {}, EPERM, "host-wide process accounting"},
      {"quotactl", {}, EPERM, "host file-system quotas"},
      {"quotactl_fd", {}, EPERM, "host file-system quotas"},
      {"syslog", {}, EPERM, "the kernel log holds other tenants' and the host's messages"},
      {"vhangup", {}, EPERM, "hangs up the terminal"},
      {"iopl", {}, EPERM, "raw I/O-port access"},
      {"ioperm", {}, EPERM, "raw I/O-port access"},
      {"personality",
       {Low32NotIn(0, {kPerLinux, kPersonalityQuery})},
       EPERM,
       "other personas turn off address-space randomisation (ADDR_NO_RANDOMIZE) or map page "
       "zero; PER_LINUX and the query (0xffffffff) stay allowed"},
      {"ioctl",
       {Low32In(1, {kTiocsti, kTioclinux})},
       EPERM,
       "TIOCSTI/TIOCLINUX push keystrokes into, or read, a terminal the run may share"},
      {"socket",
       {Low32NotIn(0, {AF_UNIX, AF_INET, AF_INET6, AF_NETLINK})},
       EAFNOSUPPORT,
       "families other than unix, IPv4 and IPv6 (packet, vsock, bluetooth, alg, xdp, ...) are "
       "kernel surface and side doors no agent needs; EAFNOSUPPORT, as a kernel without them"},
      {"socket",
       {Low32In(0, {AF_NETLINK}), Low32NotIn(2, {NETLINK_ROUTE})},
       EPROTONOSUPPORT,
       "netlink: only NETLINK_ROUTE (ip addr reads it; it changes nothing without a capability "
       "over the run's network namespace); audit, netfilter, uevent and the rest are not "
       "the run's"},
      // Setuid/setgid files.
      {"chmod", {AnyBit(1, kSetIdBits)}, EPERM, kSetId},
      {"fchmod", {AnyBit(1, kSetIdBits)}, EPERM, kSetId},
      {"fchmodat", {AnyBit(2, kSetIdBits)}, EPERM, kSetId},
      {"fchmodat2", {AnyBit(2, kSetIdBits)}, EPERM, kSetId},
      {"open", {AnyBit(1, O_CREAT | kOTmpfileBit), AnyBit(2, kSetIdBits)}, EPERM, kSetId},
      {"openat", {AnyBit(2, O_CREAT | kOTmpfileBit), AnyBit(3, kSetIdBits)}, EPERM, kSetId},
      {"creat", {AnyBit(1, kSetIdBits)}, EPERM, kSetId},
      {"mknod", {AnyBit(1, kSetIdBits)}, EPERM, kSetId},
      {"mknodat", {AnyBit(2, kSetIdBits)}, EPERM, kSetId},
      {"setxattr", {}, EOPNOTSUPP, kXattr},
      {"lsetxattr", {}, EOPNOTSUPP, kXattr},
      {"fsetxattr", {}, EOPNOTSUPP, kXattr},
      {"setxattrat", {}, EOPNOTSUPP, kXattr},
      {"removexattr", {}, EOPNOTSUPP, "consistent with setxattr: no writable xattrs"},
      {"lremovexattr", {}, EOPNOTSUPP, "consistent with setxattr: no writable xattrs"},
      {"fremovexattr", {}, EOPNOTSUPP, "consistent with setxattr: no writable xattrs"},
      {"removexattrat", {}, EOPNOTSUPP, "consistent with setxattr: no writable xattrs"},
  };
  if (!options.allow_ptrace) {
    const std::string kTrace =
        "reads and writes another process's memory and registers; a run opts in with "
        "allow_ptrace (--allow-ptrace) to debug inside it";
    for (const char* name : {"ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd"}) {
      rows.push_back({name, {}, EPERM, kTrace});
    }
  }
  return rows;
}

std::vector<FilterRule> ExpandPolicy(const std::vector<PolicyRow>& rows) {
  std::vector<FilterRule> rules;
  for (const PolicyRow& row : rows) {
    // The cartesian product of each condition's alternatives (conditions are on distinct args).
    std::vector<std::vector<MaskedEq>> partial = {{}};
    for (const ArgCondition& c : row.when) {
      std::vector<std::vector<MaskedEq>> next;
      for (const auto& p : partial) {
        for (const MaskedEq& alt : Alternatives(c)) {
          next.push_back(p);
          next.back().push_back(alt);
        }
      }
      partial = std::move(next);
    }
    for (auto& all : partial) rules.push_back({row.syscall, std::move(all), row.errno_value});
  }
  return rules;
}

std::optional<int> EvaluateRules(const std::vector<FilterRule>& rules, std::string_view syscall,
                                 const std::array<uint64_t, 6>& args) {
  for (const FilterRule& r : rules) {
    if (r.syscall != syscall) continue;
    bool all = std::all_of(r.all.begin(), r.all.end(),
                           [&](const MaskedEq& m) { return (args[m.arg] & m.mask) == m.value; });
    if (all) return r.errno_value;
  }
  return std::nullopt;
}

std::string PolicyText(const std::vector<FilterRule>& rules) {
  std::string text = fmt::format("codespace seccomp policy 1\ndefault allow\nnon-native-abi {}\n",
                                 kNonNativeAbiAction);
  for (const FilterRule& r : rules) {
    text += fmt::format("{} errno={}", r.syscall, r.errno_value);
    for (const MaskedEq& m : r.all) {
      text += fmt::format(" a{}&{:#x}=={:#x}", m.arg, m.mask, m.value);
    }
    text += '\n';
  }
  return text;
}

std::string FormatPolicyTable(const std::vector<PolicyRow>& rows) {
  std::string out;
  for (const PolicyRow& row : rows) {
    std::string when;
    for (const ArgCondition& c : row.when) {
      std::string values;
      for (uint32_t v : c.values) values += fmt::format("{}{:#x}", values.empty() ? "" : ",", v);
      switch (c.kind) {
        case ArgCondition::Kind::kAnyBit:
          when += fmt::format(" arg{}&{:#x}", c.arg, c.bits);
          break;
        case ArgCondition::Kind::kLow32In:
          when += fmt::format(" arg{} in {{{}}}", c.arg, values);
          break;
        case ArgCondition::Kind::kLow32NotIn:
          when += fmt::format(" arg{} not in {{{}}}", c.arg, values);
          break;
      }
    }
    std::string call = row.syscall + when;
    const char* name = strerrorname_np(row.errno_value);
    out += fmt::format("{:<40} {:<16} {}\n", call, name ? name : "?", row.reason);
  }
  out += fmt::format("{:<40} {:<16} {}\n", "(any other syscall)", "allow",
                     "a deny-list: agents run arbitrary toolchains");
  out += fmt::format("{:<40} {:<16} {}\n", "(any non-native ABI: i386, x32)", kNonNativeAbiAction,
                     "a table of native numbers says nothing about the other entry points");
  return out;
}

std::string SeccompFilterName(const SeccompOptions& options) {
  std::string text = PolicyText(ExpandPolicy(SyscallPolicyRows(options)));
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(text.data()), text.size(), digest);
  std::string hex;
  for (unsigned char b : digest) hex += fmt::format("{:02x}", b);
  return "sha256:" + hex;
}

}  // namespace codespace
