#include "compass/backends/launch/socket_util.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

namespace compass::backends::launch {

namespace {
using Clock = std::chrono::steady_clock;

int remaining_ms(Clock::time_point deadline) {
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return ms < 0 ? 0 : static_cast<int>(std::min<long long>(ms, 1 << 30));
}
}  // namespace

void set_nodelay(int fd) {
  int one = 1;
  (void)::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

void set_nonblocking(int fd, bool on) {
  const int flags = ::fcntl(fd, F_GETFL, 0);
  (void)::fcntl(fd, F_SETFL, on ? (flags | O_NONBLOCK) : (flags & ~O_NONBLOCK));
}

Result<int> listen_on(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return make_error("socket: {}", std::strerror(errno));
  int one = 1;
  (void)::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_ANY);
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd, 128) != 0) {
    const std::string why = std::strerror(errno);
    ::close(fd);
    return make_error("cannot listen on port {}: {}", port, why);
  }
  return fd;
}

int bound_port(int fd) {
  sockaddr_in a{};
  socklen_t len = sizeof a;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) return -1;
  return ntohs(a.sin_port);
}

Result<int> connect_with_retry(const std::string& addr, int port, double timeout_s) {
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (const int rc = ::getaddrinfo(addr.c_str(), std::to_string(port).c_str(), &hints, &found);
      rc != 0)
    return make_error("cannot resolve '{}': {}", addr, ::gai_strerror(rc));
  std::string last = "no address";
  for (;;) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      ::freeaddrinfo(found);
      return make_error("socket: {}", std::strerror(errno));
    }
    if (::connect(fd, found->ai_addr, found->ai_addrlen) == 0) {
      ::freeaddrinfo(found);
      set_nodelay(fd);
      return fd;
    }
    last = std::strerror(errno);
    ::close(fd);
    if (Clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ::freeaddrinfo(found);
  return make_error("could not connect to {}:{} within {:.3g} s ({})", addr, port, timeout_s, last);
}

Result<int> accept_within(int listen_fd, double timeout_s) {
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
  for (;;) {
    pollfd p{listen_fd, POLLIN, 0};
    const int rc = ::poll(&p, 1, remaining_ms(deadline));
    if (rc > 0) {
      const int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd >= 0) {
        set_nodelay(fd);
        return fd;
      }
      if (errno != EINTR && errno != EAGAIN) return make_error("accept: {}", std::strerror(errno));
    } else if (rc < 0 && errno != EINTR) {
      return make_error("poll: {}", std::strerror(errno));
    }
    if (Clock::now() >= deadline)
      return make_error("no connection within {:.3g} s", timeout_s);
  }
}

Status send_all(int fd, const std::string& bytes, double timeout_s) {
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
  std::size_t sent = 0;
  while (sent < bytes.size()) {
    pollfd p{fd, POLLOUT, 0};
    const int rc = ::poll(&p, 1, remaining_ms(deadline));
    if (rc == 0) return make_error("send timed out after {:.3g} s", timeout_s);
    if (rc < 0) {
      if (errno == EINTR) continue;
      return make_error("poll: {}", std::strerror(errno));
    }
    const ssize_t n = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return make_error("send: {}", std::strerror(errno));
    }
    sent += static_cast<std::size_t>(n);
  }
  return Status::success();
}

Result<std::string> recv_exact(int fd, std::size_t n, double timeout_s) {
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
  std::string out(n, '\0');
  std::size_t got = 0;
  while (got < n) {
    pollfd p{fd, POLLIN, 0};
    const int rc = ::poll(&p, 1, remaining_ms(deadline));
    if (rc == 0) return make_error("timed out after {:.3g} s", timeout_s);
    if (rc < 0) {
      if (errno == EINTR) continue;
      return make_error("poll: {}", std::strerror(errno));
    }
    const ssize_t r = ::recv(fd, out.data() + got, n - got, 0);
    if (r == 0) return make_error("the peer closed the connection");
    if (r < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return make_error("recv: {}", std::strerror(errno));
    }
    got += static_cast<std::size_t>(r);
  }
  return out;
}

}  // namespace compass::backends::launch
