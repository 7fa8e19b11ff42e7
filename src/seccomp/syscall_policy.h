// The syscall policy every run runs under: ONE table (SyscallPolicyRows) of the kernel surface
// agents do not need, each row a syscall or an argument pattern, the answer the run gets, and
// why. A pure value: table tests pin it, seccomp_filter.h compiles it with libseccomp.
//
// A deny-list: everything not listed is allowed. Agents run arbitrary toolchains (node, python,
// compilers, package managers, the tools those download), and an allow-list precise enough to
// mean something breaks them one new syscall at a time; what a run must never reach is a short,
// known list. Plus the ABI rule: a syscall of any ABI but the native one (on x86_64: i386
// through int 0x80, x32 through numbers with bit 30 set) kills the process, because a table
// of x86_64 numbers says nothing about the other entry points.
//
// The answers: ENOSYS where software probes for a feature and falls back when the kernel lacks
// it (io_uring, clone3, openat2, userfaultfd, keys); EPERM where it is refused as it would be to
// an unprivileged caller; EAFNOSUPPORT / EPROTONOSUPPORT for socket families and netlink
// protocols, as a kernel built without them says; EOPNOTSUPP for writing extended attributes,
// as a file system without them says.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace codespace {

// What a run may opt into (named in its spec, so in its record).
struct SeccompOptions {
  // ptrace, process_vm_readv/writev and pidfd_getfd on the run's own processes (debuggers,
  // strace inside a run). Off by default.
  bool allow_ptrace = false;
  friend bool operator==(const SeccompOptions&, const SeccompOptions&) = default;
};

// A condition on one syscall argument (a 64-bit register).
struct ArgCondition {
  enum class Kind {
    kAnyBit,      // (arg & bits) != 0: flags and modes
    kLow32In,     // (arg & 0xffffffff) is one of values: an int the kernel reads as 32 bits
    kLow32NotIn,  // (arg & 0xffffffff) is none of values
  };
  unsigned arg = 0;  // 0..5
  Kind kind = Kind::kAnyBit;
  uint64_t bits = 0;             // kAnyBit
  std::vector<uint32_t> values;  // kLow32In, kLow32NotIn
  friend bool operator==(const ArgCondition&, const ArgCondition&) = default;
};

// One row of the table: `syscall`, when every condition holds (none: every call), fails with
// `errno_value`. Conditions of one row are on distinct arguments.
struct PolicyRow {
  std::string syscall;
  std::vector<ArgCondition> when;
  int errno_value = 0;
  std::string reason;
  friend bool operator==(const PolicyRow&, const PolicyRow&) = default;
};

// The table, for these options. The order is the table's; the filter's behaviour does not
// depend on it (every row denies; the first matching row's errno is the answer, and rows that
// can match the same call give the same errno).
std::vector<PolicyRow> SyscallPolicyRows(const SeccompOptions& options);

// What the kernel does with a syscall of a non-native ABI: kill the process (SIGSYS).
inline constexpr std::string_view kNonNativeAbiAction = "kill-process";

// The rows as libseccomp takes them: each comparison is (arg & mask) == value, all of one rule
// must hold, and a call matching any rule fails with its errno. A row expands into several
// rules (kAnyBit: one per bit; kLow32NotIn: the blocks covering every other 32-bit value).
struct MaskedEq {
  unsigned arg = 0;
  uint64_t mask = 0;
  uint64_t value = 0;
  friend bool operator==(const MaskedEq&, const MaskedEq&) = default;
};
struct FilterRule {
  std::string syscall;
  std::vector<MaskedEq> all;  // on distinct arguments
  int errno_value = 0;
  friend bool operator==(const FilterRule&, const FilterRule&) = default;
};
std::vector<FilterRule> ExpandPolicy(const std::vector<PolicyRow>& rows);

// What `rules` answer to one native call: the errno it fails with, or nullopt (allowed). The
// reference semantics of the compiled filter, for table tests.
std::optional<int> EvaluateRules(const std::vector<FilterRule>& rules, std::string_view syscall,
                                 const std::array<uint64_t, 6>& args);

// The filter's name, recorded with every run: "sha256:" + the digest of the canonical text of
// the expanded rules and the ABI rule. Two runs with the same name ran under the same filter.
std::string SeccompFilterName(const SeccompOptions& options);
// The canonical text the name digests (one line per rule).
std::string PolicyText(const std::vector<FilterRule>& rules);

// The table for people (`codespace seccomp`): one line per row, the syscall and its pattern,
// the answer, and why; then the default and the ABI rule.
std::string FormatPolicyTable(const std::vector<PolicyRow>& rows);

}  // namespace codespace
