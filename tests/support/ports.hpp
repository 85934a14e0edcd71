#pragma once
// A loopback TCP port that was free a moment ago, for tests that start processes which listen
// on it (another process can still take it in between). Header-only; include as
// "support/ports.hpp".

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace compass::testing {

/// The port, or 0 where the system would not open, bind or name a socket.
inline int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof a;
  const bool named = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
                     ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0;
  ::close(fd);
  return named ? ntohs(a.sin_port) : 0;
}

}  // namespace compass::testing
