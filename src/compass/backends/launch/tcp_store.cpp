#include "compass/backends/launch/tcp_store.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <thread>
#include <vector>

#include "compass/backends/launch/socket_util.hpp"

namespace compass::backends::launch {

namespace {

using Clock = std::chrono::steady_clock;

Result<int> env_int(const char* name, bool required, int fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') {
    if (required) return make_error("--launch env: the environment variable {} is not set", name);
    return fallback;
  }
  char* end = nullptr;
  const long x = std::strtol(v, &end, 10);
  if (*end != '\0' || x < 0 || x > 1000000)
    return make_error("--launch env: {}='{}' is not a non-negative integer", name, v);
  return static_cast<int>(x);
}

enum Op : std::uint8_t { kSet = 1, kGet = 2, kValue = 3 };

std::string frame(std::uint8_t op, const std::string& key, const std::string& value) {
  std::string f(1, static_cast<char>(op));
  const auto klen = static_cast<std::uint32_t>(key.size());
  const auto vlen = static_cast<std::uint32_t>(value.size());
  f.append(reinterpret_cast<const char*>(&klen), 4);
  f += key;
  f.append(reinterpret_cast<const char*>(&vlen), 4);
  f += value;
  return f;
}


}  // namespace

Result<EnvLaunch> env_launch_from_environment() {
  EnvLaunch e;
  auto rank = env_int("RANK", true, 0);
  if (!rank.ok()) return rank.error();
  auto world = env_int("WORLD_SIZE", true, 0);
  if (!world.ok()) return world.error();
  auto local = env_int("LOCAL_RANK", false, *rank);
  if (!local.ok()) return local.error();
  auto port = env_int("MASTER_PORT", true, 0);
  if (!port.ok()) return port.error();
  const char* addr = std::getenv("MASTER_ADDR");
  if (addr == nullptr || *addr == '\0')
    return make_error("--launch env: the environment variable MASTER_ADDR is not set");
  if (*world < 1) return make_error("--launch env: WORLD_SIZE must be at least 1");
  if (*rank >= *world)
    return make_error("--launch env: RANK={} is not below WORLD_SIZE={}", *rank, *world);
  if (*port < 1 || *port > 65535)
    return make_error("--launch env: MASTER_PORT={} is not a TCP port", *port);
  e.rank = *rank;
  e.world_size = *world;
  e.local_rank = *local;
  e.master_addr = addr;
  e.master_port = *port;
  return e;
}

// The server: one thread polling the listening socket and every client. A GET of a missing
// key is parked until a SET provides it.
class TcpStore::Server {
 public:
  static Result<std::unique_ptr<Server>> start(int port) {
    auto fd = listen_on(port);
    if (!fd.ok()) return fd.error();
    std::unique_ptr<Server> s(new Server());
    s->listen_fd_ = *fd;
    s->thread_ = std::thread([p = s.get()] { p->loop(); });
    return s;
  }
  ~Server() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    for (auto& c : clients_) ::close(c.fd);
    ::close(listen_fd_);
  }

 private:
  struct Client {
    int fd = -1;
    std::vector<char> in;
  };
  Server() = default;

  void loop() {
    while (!stop_) {
      std::vector<pollfd> fds;
      fds.push_back({listen_fd_, POLLIN, 0});
      for (auto& c : clients_) fds.push_back({c.fd, POLLIN, 0});
      if (::poll(fds.data(), fds.size(), 50) <= 0) continue;
      if (fds[0].revents & POLLIN) {
        const int c = ::accept(listen_fd_, nullptr, nullptr);
        if (c >= 0) {
          set_nodelay(c);
          clients_.push_back({c, {}});
        }
      }
      for (std::size_t i = 1; i < fds.size(); ++i) {
        if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        Client& c = clients_[i - 1];
        char buf[4096];
        const ssize_t n = ::recv(c.fd, buf, sizeof buf, 0);
        if (n <= 0) {
          ::close(c.fd);
          c.fd = -1;
          continue;
        }
        c.in.insert(c.in.end(), buf, buf + n);
        handle(c);
      }
      std::erase_if(clients_, [](const Client& c) { return c.fd < 0; });
    }
  }

  // Frames: op (1 byte), key length (u32), key, value length (u32), value.
  void handle(Client& c) {
    for (;;) {
      if (c.in.size() < 9) return;
      std::uint32_t klen = 0, vlen = 0;
      std::memcpy(&klen, c.in.data() + 1, 4);
      if (c.in.size() < 9 + klen) return;
      std::memcpy(&vlen, c.in.data() + 5 + klen, 4);
      if (c.in.size() < 9 + klen + vlen) return;
      const auto op = static_cast<std::uint8_t>(c.in[0]);
      std::string key(c.in.data() + 5, klen);
      std::string value(c.in.data() + 9 + klen, vlen);
      c.in.erase(c.in.begin(), c.in.begin() + 9 + klen + vlen);
      if (op == kSet) {
        data_[key] = value;
        auto waiting = waiting_.equal_range(key);
        for (auto it = waiting.first; it != waiting.second; ++it) reply(it->second, key, value);
        waiting_.erase(key);
      } else if (op == kGet) {
        if (auto it = data_.find(key); it != data_.end())
          reply(c.fd, key, it->second);
        else
          waiting_.emplace(key, c.fd);
      }
    }
  }

  static void reply(int fd, const std::string& key, const std::string& value) {
    (void)send_all(fd, frame(kValue, key, value), 10.0);
  }

  int listen_fd_ = -1;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::vector<Client> clients_;
  std::map<std::string, std::string> data_;
  std::multimap<std::string, int> waiting_;
};

Result<std::unique_ptr<TcpStore>> TcpStore::connect(const EnvLaunch& env, double timeout_s) {
  std::unique_ptr<TcpStore> store(new TcpStore());
  if (env.rank == 0) {
    auto server = Server::start(env.master_port);
    if (!server.ok())
      return make_error("rank 0 cannot serve the store on port {}: {}", env.master_port,
                        server.error().message);
    store->server_ = std::move(server).value();
  }
  auto fd = connect_with_retry(env.master_addr, env.master_port, timeout_s);
  if (!fd.ok()) return fd.error();
  store->fd_ = *fd;
  sockaddr_in local{};
  socklen_t len = sizeof local;
  if (::getsockname(store->fd_, reinterpret_cast<sockaddr*>(&local), &len) == 0) {
    char text[INET_ADDRSTRLEN] = {};
    inet_ntop(AF_INET, &local.sin_addr, text, sizeof text);
    store->local_address_ = text;
  }
  return store;
}

TcpStore::~TcpStore() {
  if (fd_ >= 0) ::close(fd_);
  server_.reset();
}

Status TcpStore::set(const std::string& key, const std::string& value) {
  return send_all(fd_, frame(kSet, key, value), 10.0);
}

Result<std::string> TcpStore::get(const std::string& key, double timeout_s) {
  COMPASS_TRY(send_all(fd_, frame(kGet, key, ""), timeout_s));
  // The reply: op, key length, key, value length, value.
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
  auto remaining = [&] { return std::chrono::duration<double>(deadline - Clock::now()).count(); };
  auto head = recv_exact(fd_, 5, remaining());
  if (!head.ok()) return make_error("waiting for key '{}' in the store: {}", key, head.error().message);
  std::uint32_t klen = 0;
  std::memcpy(&klen, head->data() + 1, 4);
  auto k = recv_exact(fd_, klen + 4, remaining());
  if (!k.ok()) return make_error("waiting for key '{}' in the store: {}", key, k.error().message);
  std::uint32_t vlen = 0;
  std::memcpy(&vlen, k->data() + klen, 4);
  auto v = recv_exact(fd_, vlen, remaining());
  if (!v.ok()) return make_error("waiting for key '{}' in the store: {}", key, v.error().message);
  return *v;
}

}  // namespace compass::backends::launch
