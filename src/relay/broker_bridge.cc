#include "relay/broker_bridge.h"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

namespace codespace {

namespace {

// A socket file left by a worker that crashed would make bind() fail with EADDRINUSE.
Status RemoveStaleSocket(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return OkStatus();
    return ErrnoError(fmt::format("lstat({})", path), errno);
  }
  if (!S_ISSOCK(st.st_mode)) {
    return FailedPreconditionError(
        fmt::format("broker socket path {} exists and is not a socket: not removing it", path));
  }
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    return ErrnoError(fmt::format("unlink({})", path), errno);
  }
  return OkStatus();
}

}  // namespace

Result<std::unique_ptr<BrokerBridge>> BrokerBridge::Start(const std::string& socket_path,
                                                          BrokerAddress broker,
                                                          RelayOptions options) {
  // Check the target before touching the file system.
  RETURN_IF_ERROR(ResolveBrokerAddress(broker));
  RETURN_IF_ERROR(RemoveStaleSocket(socket_path));
  ASSIGN_OR_RETURN(UniqueFd listener, ListenUnix(socket_path));
  // Not fchmod: on a socket descriptor it changes the socket's own inode, not the file bind()
  // made. Until this chmod the file has the umask's (narrower) mode: nothing leaks meanwhile.
  if (::chmod(socket_path.c_str(), 0666) != 0) {
    Status s = ErrnoError(fmt::format("chmod({}, 0666)", socket_path), errno);
    ::unlink(socket_path.c_str());
    return s;
  }
  auto relay = Relay::Create(std::move(listener), broker, options);
  if (!relay.ok()) {
    ::unlink(socket_path.c_str());
    return relay.status();
  }
  std::unique_ptr<BrokerBridge> bridge(
      new BrokerBridge(socket_path, std::move(broker), std::move(*relay)));
  Status started = bridge->relay_->Start();
  if (!started.ok()) return started;  // the destructor unlinks
  return bridge;
}

BrokerBridge::~BrokerBridge() { Stop(); }

void BrokerBridge::Stop() {
  relay_->Stop();
  if (!unlinked_) {
    unlinked_ = true;
    ::unlink(socket_path_.c_str());
  }
}

}  // namespace codespace
