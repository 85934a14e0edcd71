#pragma once
// A small key-value store over TCP for bootstrapping processes started the way torchrun starts
// them (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT): rank 0 serves it on
// MASTER_ADDR:MASTER_PORT, every rank (0 included) is a client. Values are byte strings; get()
// waits until another rank has set the key. POSIX sockets only; every wait is bounded.

#include <memory>
#include <string>

#include "compass/core/result.hpp"

namespace compass::backends::launch {

/// The variables torchrun sets, read from the environment.
struct EnvLaunch {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  std::string master_addr;
  int master_port = 0;
};

/// Reads RANK, WORLD_SIZE, LOCAL_RANK (default: RANK), MASTER_ADDR, MASTER_PORT; the error
/// names the variable that is missing or malformed.
Result<EnvLaunch> env_launch_from_environment();

class TcpStore {
 public:
  /// Rank 0 starts the server (a background thread) on the master port, then every rank
  /// connects, retrying until `timeout_s`. Errors name the address and the reason.
  static Result<std::unique_ptr<TcpStore>> connect(const EnvLaunch& env, double timeout_s);
  ~TcpStore();
  TcpStore(const TcpStore&) = delete;
  TcpStore& operator=(const TcpStore&) = delete;

  Status set(const std::string& key, const std::string& value);
  /// Waits until the key exists (bounded); the error says which key was missing.
  Result<std::string> get(const std::string& key, double timeout_s);
  /// The local IPv4 address this process reaches the master from (for peers to connect to).
  const std::string& local_address() const { return local_address_; }

 private:
  class Server;
  TcpStore() = default;
  std::unique_ptr<Server> server_;
  int fd_ = -1;
  std::string local_address_;
};

}  // namespace compass::backends::launch
