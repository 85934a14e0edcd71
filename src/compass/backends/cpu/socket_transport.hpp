#pragma once
// The CPU executor's transport over TCP sockets, for `compass run --launch env` (processes
// started the way torchrun starts them). The ranks meet through the TCP store: each listens on
// a free port, publishes "address:port" under its rank, and connects to every lower rank, so
// every pair of ranks has one connection. Every message is a frame (a fixed header, then the
// payload: the error text of an abort, the packed rows of a transfer, the numbers of a gather);
// non-blocking sockets are driven by poll() from the thread that calls Transport::poll.

#include <memory>

#include "compass/backends/cpu/transport.hpp"
#include "compass/backends/launch/tcp_store.hpp"

namespace compass::backends::cpu {

/// Connects rank `rank` of `size` to every other rank through addresses exchanged in `store`;
/// fails after timeout_s naming the rank it could not reach.
Result<std::shared_ptr<Transport>> make_socket_transport(launch::TcpStore& store, int rank,
                                                         int size, double timeout_s);

}  // namespace compass::backends::cpu
