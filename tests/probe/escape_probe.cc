// escape_probe: run inside a sandbox by the lane tests. Each "wall" action tries one forbidden
// thing and exits 0 when the wall held, or its own distinct code when the forbidden action
// WORKED — so a red lane says exactly which wall fell. "reach" actions report plain facts
// (0 = yes, 1 = no) for checks where success is expected.
//
//   escape_probe caps                   10: some capability set is not empty
//   escape_probe write PATH             11: creating PATH worked
//   escape_probe env-absent NAME        12: NAME is in the environment
//   escape_probe signal PID             13: kill(PID, 0) worked (a process outside is visible)
//   escape_probe see MARKER             14: some /proc/*/cmdline contains MARKER
//   escape_probe no-connect HOST PORT   15: a TCP connection to HOST:PORT was made
//   escape_probe connect HOST PORT      0 connected, 1 not
//   escape_probe links                  prints the network interfaces, one a line
//   escape_probe listen PORT SECONDS    a TCP listener on 127.0.0.1:PORT for the lanes that
//                                       build their own network namespace (exits after SECONDS)
#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

namespace {

int Caps() {
  std::ifstream in("/proc/self/status");
  std::string line;
  int bad = 0;
  while (std::getline(in, line)) {
    for (const char* set : {"CapInh:", "CapPrm:", "CapEff:", "CapBnd:", "CapAmb:"}) {
      if (line.rfind(set, 0) == 0) {
        unsigned long long v = std::strtoull(line.c_str() + std::strlen(set), nullptr, 16);
        if (v != 0) {
          std::printf("%s\n", line.c_str());
          bad = 10;
        }
      }
    }
  }
  return bad;
}

int Write(const char* path) {
  int fd = ::open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) {
    std::printf("write %s: %s\n", path, std::strerror(errno));
    return 0;
  }
  ::close(fd);
  ::unlink(path);
  std::printf("write %s: created\n", path);
  return 11;
}

int EnvAbsent(const char* name) {
  const char* v = std::getenv(name);
  if (!v) return 0;
  std::printf("%s=%s\n", name, v);
  return 12;
}

int Signal(const char* pid) {
  if (::kill(std::atoi(pid), 0) == 0) {
    std::printf("kill(%s, 0): delivered\n", pid);
    return 13;
  }
  std::printf("kill(%s, 0): %s\n", pid, std::strerror(errno));
  return 0;
}

int See(const char* marker) {
  DIR* d = ::opendir("/proc");
  if (!d) return 0;
  int found = 0;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    std::ifstream in(std::string("/proc/") + e->d_name + "/cmdline");
    std::stringstream ss;
    ss << in.rdbuf();
    std::string cmd = ss.str();
    for (char& c : cmd) c = c == '\0' ? ' ' : c;
    if (cmd.find(marker) != std::string::npos && cmd.find("escape_probe") == std::string::npos) {
      std::printf("visible: pid %s: %s\n", e->d_name, cmd.c_str());
      found = 14;
    }
  }
  ::closedir(d);
  return found;
}

bool Connect(const char* host, const char* port) {
  sockaddr_storage ss{};
  socklen_t len;
  int family;
  auto* v4 = reinterpret_cast<sockaddr_in*>(&ss);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&ss);
  if (::inet_pton(AF_INET, host, &v4->sin_addr) == 1) {
    family = AF_INET;
    v4->sin_family = AF_INET;
    v4->sin_port = htons(static_cast<uint16_t>(std::atoi(port)));
    len = sizeof(*v4);
  } else if (::inet_pton(AF_INET6, host, &v6->sin6_addr) == 1) {
    family = AF_INET6;
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(static_cast<uint16_t>(std::atoi(port)));
    len = sizeof(*v6);
  } else {
    std::printf("connect %s:%s: not an address\n", host, port);
    return false;
  }
  int s = ::socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (s < 0) return false;
  int rc = ::connect(s, reinterpret_cast<sockaddr*>(&ss), len);
  if (rc != 0 && errno == EINPROGRESS) {
    pollfd p{s, POLLOUT, 0};
    rc = ::poll(&p, 1, 3000) == 1 ? 0 : -1;
    int err = 0;
    socklen_t elen = sizeof(err);
    if (rc == 0 && (::getsockopt(s, SOL_SOCKET, SO_ERROR, &err, &elen) != 0 || err != 0)) {
      errno = err;
      rc = -1;
    } else if (rc != 0) {
      errno = ETIMEDOUT;
    }
  }
  std::printf("connect %s:%s: %s\n", host, port, rc == 0 ? "connected" : std::strerror(errno));
  ::close(s);
  return rc == 0;
}

// /proc/self/net/dev is per network namespace (unlike a /sys bound from the host).
int Links() {
  std::ifstream in("/proc/self/net/dev");
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    if (++n <= 2) continue;  // two header lines
    size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string name = line.substr(0, colon);
    name.erase(0, name.find_first_not_of(' '));
    std::printf("%s\n", name.c_str());
  }
  return n > 0 ? 0 : 1;
}

int Listen(const char* port, const char* seconds) {
  int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(std::atoi(port)));
  int one = 1;
  ::setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || ::listen(s, 64) != 0) {
    std::perror("listen");
    return 1;
  }
  ::alarm(static_cast<unsigned>(std::atoi(seconds)));  // bounded: never outlives its lane
  for (;;) {
    int c = ::accept4(s, nullptr, nullptr, SOCK_CLOEXEC);
    if (c >= 0) ::close(c);
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IONBF, 0);
  std::string a = argc > 1 ? argv[1] : "";
  if (a == "caps") return Caps();
  if (a == "write" && argc == 3) return Write(argv[2]);
  if (a == "env-absent" && argc == 3) return EnvAbsent(argv[2]);
  if (a == "signal" && argc == 3) return Signal(argv[2]);
  if (a == "see" && argc == 3) return See(argv[2]);
  if (a == "no-connect" && argc == 4) return Connect(argv[2], argv[3]) ? 15 : 0;
  if (a == "connect" && argc == 4) return Connect(argv[2], argv[3]) ? 0 : 1;
  if (a == "links") return Links();
  if (a == "listen" && argc == 4) return Listen(argv[2], argv[3]);
  std::fprintf(stderr, "escape_probe: unknown action\n");
  return 2;
}
