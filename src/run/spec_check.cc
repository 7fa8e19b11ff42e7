#include "run/spec_check.h"

#include <fmt/format.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <cerrno>
#include <memory>

#include "run/broker_address.h"
#include "run/fs_view.h"

namespace codespace {

SpecError CheckSpec(const RunSpec& spec) {
  if (spec.argv.empty()) return SpecError{"argv must name a command", "argv"};
  if (spec.argv[0].empty()) return SpecError{"argv[0] must not be empty", "argv[0]"};
  for (size_t i = 0; i < spec.argv.size(); ++i) {
    if (spec.argv[i].find('\0') != std::string::npos) {
      return SpecError{"argument holds a NUL byte", fmt::format("argv[{}]", i)};
    }
  }
  for (size_t i = 0; i < spec.env.size(); ++i) {
    const std::string& kv = spec.env[i];
    size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0 || kv.find('\0') != std::string::npos) {
      return SpecError{fmt::format("\"{}\": expected KEY=VALUE", kv), fmt::format("env[{}]", i)};
    }
  }
  const std::string& ws = spec.workspace;
  if (ws.empty() || ws.front() != '/') {
    return SpecError{fmt::format("workspace \"{}\" is not an absolute path", ws), "workspace"};
  }
  if (ws.find('\0') != std::string::npos)
    return SpecError{"workspace holds a NUL byte", "workspace"};
  // Component by component: "..", "." and empty components (a//b, a trailing /) are refused,
  // so the path given is the path used.
  for (size_t pos = 1; pos <= ws.size();) {
    size_t next = ws.find('/', pos);
    if (next == std::string::npos) next = ws.size();
    std::string_view part(ws.data() + pos, next - pos);
    if (part == "..") {
      return SpecError{fmt::format("workspace \"{}\" escapes through \"..\"", ws), "workspace"};
    }
    if ((part.empty() && ws != "/") || part == ".") {
      return SpecError{fmt::format("workspace \"{}\" is not a normalized path", ws), "workspace"};
    }
    pos = next + 1;
  }
  if (!spec.broker.empty()) {
    auto addr = ParseBrokerAddress(spec.broker.address);
    if (!addr.ok()) return SpecError{addr.status().message(), "broker.address"};
  }
  if (auto e = ValidateFsView(spec.fs, spec.workspace)) return SpecError{e->message, e->field};
  return SpecError{};
}

namespace {

// A unix broker path holds a socket, or nothing: no socket there (yet, or any more) is a broker
// that is down, and the run still runs, its connections refused and counted (broker_failed), as
// when it goes down mid-run. Anything else in its place is a mistake in the spec.
SpecError CheckBrokerOnHost(const BrokerSpec& broker) {
  if (broker.empty()) return SpecError{};
  auto addr = ParseBrokerAddress(broker.address);
  if (!addr.ok()) return SpecError{addr.status().message(), "broker.address"};
  if (addr->kind != BrokerAddress::Kind::kUnix) return SpecError{};
  struct stat bst {};
  if (::stat(addr->path.c_str(), &bst) != 0) {
    if (errno == ENOENT) return SpecError{};
    return SpecError{fmt::format("broker \"{}\": {}", addr->path, ErrnoText(errno)),
                     "broker.address"};
  }
  if (!S_ISSOCK(bst.st_mode)) {
    return SpecError{fmt::format("broker \"{}\" is not a socket", addr->path), "broker.address"};
  }
  return SpecError{};
}

}  // namespace

SpecError CheckSpecOnHost(const RunSpec& spec, const std::string& state_dir) {
  std::unique_ptr<char, decltype(&::free)> resolved(::realpath(spec.workspace.c_str(), nullptr),
                                                    &::free);
  if (!resolved) {
    return SpecError{
        fmt::format("workspace \"{}\": realpath: {}", spec.workspace, ErrnoText(errno)),
        "workspace"};
  }
  if (spec.workspace != resolved.get()) {
    return SpecError{fmt::format("workspace \"{}\" resolves to \"{}\" (a symlink on the path)",
                                 spec.workspace, resolved.get()),
                     "workspace"};
  }
  struct stat st {};
  if (::stat(resolved.get(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return SpecError{fmt::format("workspace \"{}\" is not a directory", spec.workspace),
                     "workspace"};
  }
  if (SpecError e = CheckBrokerOnHost(spec.broker); !e.ok()) return e;
  if (auto e = CheckFsViewOnHost(spec.fs, state_dir)) return SpecError{e->message, e->field};
  return SpecError{};
}

Status CheckSpecStatus(const RunSpec& spec, const std::string& state_dir) {
  SpecError e = CheckSpec(spec);
  if (e.ok()) e = CheckSpecOnHost(spec, state_dir);
  if (e.ok()) return OkStatus();
  return InvalidArgumentError(e.message);
}

}  // namespace codespace
