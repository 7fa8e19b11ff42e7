// sandbox_relay_test_helper PORT SOCKET_PATH READY_FD: RunSandboxRelay in a process of its own,
// as codespace-init's child would run it (tests only).
#include <stdio.h>
#include <stdlib.h>

#include "relay/sandbox_relay.h"

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: sandbox_relay_test_helper PORT SOCKET_PATH READY_FD\n");
    return 2;
  }
  return codespace::RunSandboxRelay(static_cast<uint16_t>(atoi(argv[1])), argv[2], atoi(argv[3]));
}
