#pragma once
// Small POSIX TCP helpers for the store and the socket transport. Every wait is bounded.

#include <string>

#include "compass/core/result.hpp"

namespace compass::backends::launch {

/// A listening IPv4 socket on every interface; port 0 picks a free one (see bound_port).
Result<int> listen_on(int port);
/// The port a socket is bound to.
int bound_port(int fd);
/// Connects to addr:port, retrying while the peer is not listening yet, until timeout_s.
Result<int> connect_with_retry(const std::string& addr, int port, double timeout_s);
/// Accepts one connection within timeout_s.
Result<int> accept_within(int listen_fd, double timeout_s);
/// Sends every byte (blocking socket, bounded by timeout_s).
Status send_all(int fd, const std::string& bytes, double timeout_s);
/// Receives exactly n bytes within timeout_s; a closed peer is an error.
Result<std::string> recv_exact(int fd, std::size_t n, double timeout_s);
void set_nodelay(int fd);
void set_nonblocking(int fd, bool on);

}  // namespace compass::backends::launch
