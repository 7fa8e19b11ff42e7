#include "seccomp/seccomp_filter.h"

#include <errno.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <seccomp.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <memory>

#include "base/status.h"

namespace codespace {

namespace {

// Syscalls newer than the libseccomp this builds against (Debian 12: 2.5.4) knows by name.
// Numbers from the kernel's unified syscall table (arch/*/tbl, asm-generic/unistd.h), the same
// on x86_64 and arm64; on other architectures an unknown name fails the compile.
struct NewSyscall {
  const char* name;
  int number;
};
constexpr NewSyscall kNewerSyscalls[] = {
    {"setxattrat", 463},
    {"removexattrat", 466},
    {"open_tree_attr", 467},
};

Result<int> SyscallNumber(const std::string& name) {
  int nr = seccomp_syscall_resolve_name(name.c_str());
  if (nr != __NR_SCMP_ERROR) return nr;
  uint32_t arch = seccomp_arch_native();
  if (arch == SCMP_ARCH_X86_64 || arch == SCMP_ARCH_AARCH64) {
    for (const NewSyscall& s : kNewerSyscalls) {
      if (name == s.name) return s.number;
    }
  }
  return FailedPreconditionError(fmt::format(
      "seccomp: syscall \"{}\" of the policy is unknown to libseccomp {}.{}.{} on "
      "this architecture",
      name, seccomp_version()->major, seccomp_version()->minor, seccomp_version()->micro));
}

struct CtxDeleter {
  void operator()(void* ctx) const { seccomp_release(ctx); }
};

}  // namespace

Result<std::string> CompileSeccompBpf(const SeccompOptions& options) {
  std::unique_ptr<void, CtxDeleter> ctx(seccomp_init(SCMP_ACT_ALLOW));
  if (!ctx) return InternalError("seccomp_init(SCMP_ACT_ALLOW): failed");
  // Only the native arch is in the filter; every other ABI (i386 via int 0x80, x32) hits this.
  if (int rc = seccomp_attr_set(ctx.get(), SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
      rc != 0) {
    return InternalError(
        fmt::format("seccomp_attr_set(ACT_BADARCH, KILL_PROCESS): {}", ErrnoText(-rc)));
  }
  for (const FilterRule& rule : ExpandPolicy(SyscallPolicyRows(options))) {
    ASSIGN_OR_RETURN(int nr, SyscallNumber(rule.syscall));
    std::vector<scmp_arg_cmp> cmps;
    for (const MaskedEq& m : rule.all) {
      cmps.push_back({m.arg, SCMP_CMP_MASKED_EQ, m.mask, m.value});
    }
    int rc = seccomp_rule_add_exact_array(ctx.get(),
                                          SCMP_ACT_ERRNO(static_cast<uint16_t>(rule.errno_value)),
                                          nr, static_cast<unsigned>(cmps.size()), cmps.data());
    if (rc != 0) {
      return InternalError(fmt::format("seccomp_rule_add({}, errno {}, {} comparisons): {}",
                                       rule.syscall, rule.errno_value, cmps.size(),
                                       ErrnoText(-rc)));
    }
  }
  UniqueFd mem(::memfd_create("codespace-seccomp", MFD_CLOEXEC));
  if (!mem) return ErrnoError("memfd_create(codespace-seccomp)", errno);
  if (int rc = seccomp_export_bpf(ctx.get(), mem.get()); rc != 0) {
    return InternalError(fmt::format("seccomp_export_bpf: {}", ErrnoText(-rc)));
  }
  if (::lseek(mem.get(), 0, SEEK_SET) != 0) return ErrnoError("lseek(seccomp memfd, 0)", errno);
  ASSIGN_OR_RETURN(std::string bpf, ReadAll(mem.get()));
  if (bpf.empty()) return InternalError("seccomp_export_bpf: wrote no program");
  return bpf;
}

Result<UniqueFd> SeccompBpfFd(std::string_view bpf) {
  UniqueFd mem(::memfd_create("codespace-seccomp", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!mem) return ErrnoError("memfd_create(codespace-seccomp)", errno);
  RETURN_IF_ERROR(WriteAll(mem.get(), bpf.data(), bpf.size()));
  // Nobody who holds it can change the program between here and the reader.
  if (::fcntl(mem.get(), F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL) !=
      0) {
    return ErrnoError("fcntl(seccomp memfd, F_ADD_SEALS)", errno);
  }
  if (::lseek(mem.get(), 0, SEEK_SET) != 0) return ErrnoError("lseek(seccomp memfd, 0)", errno);
  return mem;
}

std::string SeccompUnavailableReason() {
  // EINVAL: a kernel built without CONFIG_SECCOMP. (Filters need CONFIG_SECCOMP_FILTER too;
  // a kernel without it fails every launch at load time, and the launch aborts.)
  if (::prctl(PR_GET_SECCOMP, 0, 0, 0, 0) < 0) {
    return fmt::format("the kernel takes no seccomp filters: prctl(PR_GET_SECCOMP): {}",
                       ErrnoText(errno));
  }
  auto bpf = CompileSeccompBpf(SeccompOptions{});
  if (!bpf.ok()) {
    return fmt::format("the seccomp filter does not compile on this host: {}",
                       bpf.status().message());
  }
  return "";
}

}  // namespace codespace
