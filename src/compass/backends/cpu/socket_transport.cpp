#include "compass/backends/cpu/socket_transport.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <thread>
#include <utility>

#include "compass/backends/cpu/transfer_engine.hpp"
#include "compass/backends/launch/socket_util.hpp"

namespace compass::backends::cpu {

namespace {

using Clock = std::chrono::steady_clock;
namespace ln = launch;

// Frame types beyond the three message kinds (1..3).
constexpr std::uint32_t kData = 10;
constexpr std::uint32_t kArrive = 20;
constexpr std::uint32_t kGo = 21;
constexpr std::uint32_t kGather = 22;
constexpr std::uint32_t kBye = 23;
constexpr std::uint32_t kAllGather = 24;

struct FrameHeader {
  std::uint32_t type;
  std::int32_t task;
  std::int32_t from;
  std::uint32_t reserved;
  std::uint64_t length;
};
static_assert(sizeof(FrameHeader) == 24);

std::string make_frame(std::uint32_t type, int task, int from, const void* payload,
                       std::size_t length) {
  std::string f(sizeof(FrameHeader) + length, '\0');
  const FrameHeader h{type, task, from, 0, length};
  std::memcpy(f.data(), &h, sizeof h);
  if (length > 0 && payload != nullptr) std::memcpy(f.data() + sizeof h, payload, length);
  return f;
}

class SocketTransport final : public Transport {
 public:
  SocketTransport(int rank, int size) : rank_(rank), size_(size), peers_(static_cast<std::size_t>(size)) {}
  ~SocketTransport() override {
    for (Peer& p : peers_)
      if (p.fd >= 0) ::close(p.fd);
  }

  Status connect_all(ln::TcpStore& store, double timeout_s) {
    auto listener = ln::listen_on(0);
    if (!listener.ok()) return listener.error();
    const int lfd = *listener;
    const std::string me = fmt::format("{}:{}", store.local_address(), ln::bound_port(lfd));
    Status st = store.set(fmt::format("compass/addr/{}", rank_), me);
    // Lower ranks: connect and say who we are. Higher ranks: accept and learn who they are.
    for (int r = 0; st.ok() && r < rank_; ++r) {
      auto addr = store.get(fmt::format("compass/addr/{}", r), timeout_s);
      if (!addr.ok()) {
        st = make_error("rank {} never published its address: {}", r, addr.error().message);
        break;
      }
      const auto colon = addr->rfind(':');
      auto fd = ln::connect_with_retry(addr->substr(0, colon), std::atoi(addr->c_str() + colon + 1),
                                       timeout_s);
      if (!fd.ok()) {
        st = make_error("cannot reach rank {}: {}", r, fd.error().message);
        break;
      }
      peers_[static_cast<std::size_t>(r)].fd = *fd;
      const std::int32_t hello = rank_;
      st = ln::send_all(*fd, std::string(reinterpret_cast<const char*>(&hello), 4), timeout_s);
    }
    for (int n = rank_ + 1; st.ok() && n < size_; ++n) {
      auto fd = ln::accept_within(lfd, timeout_s);
      if (!fd.ok()) {
        st = make_error("waiting for the higher ranks to connect: {}", fd.error().message);
        break;
      }
      auto hello = ln::recv_exact(*fd, 4, timeout_s);
      std::int32_t who = -1;
      if (hello.ok()) std::memcpy(&who, hello->data(), 4);
      if (who <= rank_ || who >= size_ || peers_[static_cast<std::size_t>(who)].fd >= 0) {
        ::close(*fd);
        st = make_error("a peer introduced itself as rank {}", who);
        break;
      }
      peers_[static_cast<std::size_t>(who)].fd = *fd;
    }
    ::close(lfd);
    if (!st.ok()) return st;
    for (Peer& p : peers_)
      if (p.fd >= 0) ln::set_nonblocking(p.fd, true);
    return Status::success();
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string name() const override { return "sockets"; }

  void post(int to, const Message& m) override {
    std::lock_guard lock(mu_);
    queue_.push_back({to, make_frame(static_cast<std::uint32_t>(m.kind), m.task, m.from,
                                     m.text.data(), m.text.size()),
                      -1, {}});
  }
  void send_data(int to, int task, Span src) override {
    std::lock_guard lock(mu_);
    queue_.push_back({to, {}, task, src});
  }
  Status expect_data(int from, int task, Span dst) override {
    if (from < 0 || from >= size_ || from == rank_)
      return make_error("transfer {} expected from rank {}, which is not a peer", task, from);
    expected_[task] = dst;
    return Status::success();
  }

  Result<bool> poll(TransportSink& sink) override { return pump(&sink, 0); }

  bool quiescent() const override {
    std::lock_guard lock(mu_);
    if (!queue_.empty() || !expected_.empty()) return false;
    for (const Peer& p : peers_)
      if (!p.out.empty()) return false;
    return true;
  }

  void drain_after_failure(double grace_s) override {
    // Only control frames still matter (the abort); drop data.
    {
      std::lock_guard lock(mu_);
      std::erase_if(queue_, [](const Outgoing& o) { return o.task >= 0; });
    }
    const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(grace_s));
    while (Clock::now() < deadline) {
      if (!pump(nullptr, 2).ok()) break;
      bool pending = false;
      for (const Peer& p : peers_) pending = pending || !p.out.empty();
      if (!pending) break;
    }
    expected_.clear();
    for (Peer& p : peers_) p.out.clear();
    std::lock_guard lock(mu_);
    queue_.clear();
  }

  bool farewell(double timeout_s) override {
    for (int r = 0; r < size_; ++r)
      if (r != rank_) enqueue(r, make_frame(kBye, -1, rank_, nullptr, 0));
    const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
    while (Clock::now() < deadline) {
      if (!pump(nullptr, 5).ok()) return false;
      int heard = 0;
      for (const Peer& p : peers_) heard += p.bye || p.closed ? 1 : 0;
      if (heard == size_ - 1) return true;
    }
    return false;
  }

  Status barrier(double timeout_s) override {
    const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
    if (rank_ == 0) {
      for (;;) {
        COMPASS_TRY(pump(nullptr, 5));
        COMPASS_TRY(check_abort());
        std::string absent;
        for (int r = 1; r < size_; ++r) {
          const Peer& p = peers_[static_cast<std::size_t>(r)];
          if (!p.arrived && p.closed)
            return make_error("rank {}: rank {} exited before the start", rank_, r);
          if (!p.arrived) absent += fmt::format(" {}", r);
        }
        if (absent.empty()) break;
        if (Clock::now() > deadline)
          return make_error("timed out after {:.3g} s waiting for rank(s){} to start", timeout_s,
                            absent);
      }
      for (int r = 1; r < size_; ++r) {
        peers_[static_cast<std::size_t>(r)].arrived = false;
        enqueue(r, make_frame(kGo, -1, 0, nullptr, 0));
      }
      return flush(deadline + std::chrono::seconds(5));
    }
    enqueue(0, make_frame(kArrive, -1, rank_, nullptr, 0));
    const auto my_deadline = deadline + std::chrono::seconds(2);
    while (!go_) {
      COMPASS_TRY(pump(nullptr, 5));
      COMPASS_TRY(check_abort());
      if (peers_[0].closed) return make_error("rank {}: rank 0 exited before the start", rank_);
      if (Clock::now() > my_deadline)
        return make_error("timed out after {:.3g} s waiting for rank 0's start signal", timeout_s);
    }
    go_ = false;
    return Status::success();
  }

  Result<std::vector<std::string>> all_gather(const std::string& mine, double timeout_s) override {
    const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                             std::chrono::duration<double>(timeout_s));
    for (int r = 0; r < size_; ++r)
      if (r != rank_) enqueue(r, make_frame(kAllGather, -1, rank_, mine.data(), mine.size()));
    for (;;) {
      COMPASS_TRY(pump(nullptr, 5));
      COMPASS_TRY(check_abort());
      bool complete = true;
      for (int r = 0; r < size_; ++r) {
        if (r == rank_) continue;
        const Peer& p = peers_[static_cast<std::size_t>(r)];
        if (p.bytes.empty() && p.closed)
          return make_error("rank {}: rank {} exited during an exchange", rank_, r);
        complete = complete && !p.bytes.empty();
      }
      if (complete) break;
      if (Clock::now() > deadline)
        return make_error("rank {}: exchanging bytes did not finish within {:.3g} s", rank_,
                          timeout_s);
    }
    std::vector<std::string> out(static_cast<std::size_t>(size_));
    out[static_cast<std::size_t>(rank_)] = mine;
    for (int r = 0; r < size_; ++r) {
      if (r == rank_) continue;
      Peer& p = peers_[static_cast<std::size_t>(r)];
      out[static_cast<std::size_t>(r)] = p.bytes.front();
      p.bytes.pop_front();
    }
    return out;
  }

  Result<std::vector<std::vector<double>>> gather(const std::vector<double>& mine,
                                                  double timeout_s) override {
    const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
    std::vector<std::vector<double>> all;
    if (rank_ != 0) {
      enqueue(0, make_frame(kGather, -1, rank_, mine.data(), mine.size() * sizeof(double)));
      COMPASS_TRY(flush(deadline));
      return all;
    }
    for (;;) {
      COMPASS_TRY(pump(nullptr, 5));
      COMPASS_TRY(check_abort());
      bool complete = true;
      for (int r = 1; r < size_; ++r) {
        const Peer& p = peers_[static_cast<std::size_t>(r)];
        if (!p.gathered && p.closed)
          return make_error("rank {}: rank {} exited before sending its results", rank_, r);
        complete = complete && p.gathered;
      }
      if (complete) break;
      if (Clock::now() > deadline)
        return make_error("timed out after {:.3g} s waiting for the results of every rank",
                          timeout_s);
    }
    all.assign(static_cast<std::size_t>(size_), {});
    all[0] = mine;
    for (int r = 1; r < size_; ++r) {
      Peer& p = peers_[static_cast<std::size_t>(r)];
      all[static_cast<std::size_t>(r)] = std::move(p.gather);
      p.gathered = false;
    }
    return all;
  }

 private:
  struct Peer {
    int fd = -1;
    std::deque<std::string> out;
    std::size_t out_offset = 0;  // bytes of out.front() already sent
    std::string in;
    bool closed = false;
    bool arrived = false;
    bool bye = false;
    bool gathered = false;
    std::vector<double> gather;
    std::deque<std::string> bytes;  // all_gather contributions, in arrival order
  };
  struct Outgoing {
    int to = 0;
    std::string frame;  // control frames are built by post()
    int task = -1;      // data: packed when it leaves the queue
    Span span;
  };

  void enqueue(int to, std::string frame) { peers_[static_cast<std::size_t>(to)].out.push_back(std::move(frame)); }

  Status check_abort() {
    for (const Message& m : early_)
      if (m.kind == MessageKind::abort)
        return make_error("stopped because rank {} failed: {}", m.from, m.text);
    return Status::success();
  }

  Status flush(Clock::time_point deadline) {
    for (;;) {
      COMPASS_TRY(pump(nullptr, 5));
      bool pending = false;
      for (const Peer& p : peers_) pending = pending || !p.out.empty();
      if (!pending) return Status::success();
      if (Clock::now() > deadline) return make_error("timed out sending to the other ranks");
    }
  }

  // Moves bytes: queued messages into the peers' output, as much output as the sockets take,
  // every complete frame that arrived. With a sink, run messages go to it; without one they
  // wait in early_ for the next poll with a sink.
  Result<bool> pump(TransportSink* sink, int wait_ms) {
    bool moved = false;
    if (sink != nullptr && (!early_.empty() || !early_data_.empty())) {
      moved = true;
      for (const Message& m : std::exchange(early_, {})) sink->on_message(m);
      for (int task : std::exchange(early_data_, {})) sink->on_data(task);
    }
    std::vector<Outgoing> queued;
    {
      std::lock_guard lock(mu_);
      queued.swap(queue_);
    }
    for (Outgoing& o : queued) {
      if (o.task < 0) {
        enqueue(o.to, std::move(o.frame));
      } else {
        const std::size_t row_bytes = static_cast<std::size_t>(o.span.cols) * sizeof(float);
        std::string f = make_frame(kData, o.task, rank_, nullptr,
                                   row_bytes * static_cast<std::size_t>(o.span.rows));
        copy_block(o.span.data, o.span.ld, reinterpret_cast<float*>(f.data() + sizeof(FrameHeader)),
                   o.span.cols, o.span.rows, o.span.cols);
        enqueue(o.to, std::move(f));
      }
      moved = true;
    }
    std::vector<pollfd> fds;
    std::vector<int> who;
    for (int r = 0; r < size_; ++r) {
      Peer& p = peers_[static_cast<std::size_t>(r)];
      if (p.fd < 0 || p.closed) continue;
      fds.push_back({p.fd, static_cast<short>(POLLIN | (p.out.empty() ? 0 : POLLOUT)), 0});
      who.push_back(r);
    }
    if (fds.empty()) return moved;
    const int rc = ::poll(fds.data(), fds.size(), moved ? 0 : wait_ms);
    if (rc < 0 && errno != EINTR) return make_error("rank {}: poll: {}", rank_, std::strerror(errno));
    if (rc <= 0) return moved;
    for (std::size_t i = 0; i < fds.size(); ++i) {
      const int r = who[i];
      Peer& p = peers_[static_cast<std::size_t>(r)];
      if (fds[i].revents & POLLOUT) {
        while (!p.out.empty()) {
          const std::string& f = p.out.front();
          const ssize_t n = ::send(p.fd, f.data() + p.out_offset, f.size() - p.out_offset,
                                   MSG_NOSIGNAL | MSG_DONTWAIT);
          if (n < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) break;
            return make_error("rank {}: sending to rank {}: {}", rank_, r, std::strerror(errno));
          }
          moved = true;
          p.out_offset += static_cast<std::size_t>(n);
          if (p.out_offset < f.size()) break;
          p.out.pop_front();
          p.out_offset = 0;
        }
      }
      if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) {
        char buf[65536];
        for (;;) {
          const ssize_t n = ::recv(p.fd, buf, sizeof buf, MSG_DONTWAIT);
          if (n > 0) {
            p.in.append(buf, static_cast<std::size_t>(n));
            moved = true;
            continue;
          }
          if (n == 0) {
            p.closed = true;  // a process closes its connections when it exits
          } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
            return make_error("rank {}: receiving from rank {}: {}", rank_, r, std::strerror(errno));
          }
          break;
        }
        COMPASS_TRY(parse(p, r, sink));
        // During a run no process exits on success: every process ends the run before the
        // final collectives. Outside a run a peer may be done and gone; the collectives check
        // that what they wait for arrived first.
        if (p.closed && sink != nullptr && !p.bye)
          return make_error("rank {}: the connection to rank {} closed (did it exit?)", rank_, r);
      }
    }
    return moved;
  }

  Status parse(Peer& p, int from, TransportSink* sink) {
    std::size_t at = 0;
    while (p.in.size() - at >= sizeof(FrameHeader)) {
      FrameHeader h{};
      std::memcpy(&h, p.in.data() + at, sizeof h);
      if (p.in.size() - at - sizeof h < h.length) break;
      const char* payload = p.in.data() + at + sizeof h;
      switch (h.type) {
        case 1:
        case 2:
        case 3: {
          Message m{static_cast<MessageKind>(h.type), h.task, from,
                    std::string(payload, static_cast<std::size_t>(h.length))};
          if (sink != nullptr)
            sink->on_message(m);
          else
            early_.push_back(std::move(m));
          break;
        }
        case kData: {
          auto it = expected_.find(h.task);
          if (it == expected_.end())
            return make_error("rank {}: rank {} sent the bytes of task {}, which were not expected",
                              rank_, from, h.task);
          const Span dst = it->second;
          if (static_cast<std::uint64_t>(dst.rows * dst.cols) * sizeof(float) != h.length)
            return make_error("rank {}: task {} from rank {} has {} bytes, expected {}", rank_,
                              h.task, from, h.length, dst.rows * dst.cols * 4);
          copy_block(reinterpret_cast<const float*>(payload), dst.cols, dst.data, dst.ld, dst.rows,
                     dst.cols);
          expected_.erase(it);
          // A peer released from the barrier first may already send; deliver at the next poll.
          if (sink != nullptr)
            sink->on_data(h.task);
          else
            early_data_.push_back(h.task);
          break;
        }
        case kArrive: p.arrived = true; break;
        case kGo: go_ = true; break;
        case kBye: p.bye = true; break;
        case kAllGather: p.bytes.emplace_back(payload, static_cast<std::size_t>(h.length)); break;
        case kGather:
          p.gather.resize(static_cast<std::size_t>(h.length / sizeof(double)));
          std::memcpy(p.gather.data(), payload, p.gather.size() * sizeof(double));
          p.gathered = true;
          break;
        default:
          return make_error("rank {}: frame of unknown type {} from rank {}", rank_, h.type, from);
      }
      at += sizeof h + h.length;
    }
    p.in.erase(0, at);
    return Status::success();
  }

  int rank_, size_;
  std::vector<Peer> peers_;  // poll thread only
  mutable std::mutex mu_;    // guards queue_
  std::vector<Outgoing> queue_;
  std::map<int, Span> expected_;
  std::vector<Message> early_;  // run messages that arrived outside poll (during a barrier)
  std::vector<int> early_data_;
  bool go_ = false;
};

}  // namespace

Result<std::shared_ptr<Transport>> make_socket_transport(launch::TcpStore& store, int rank,
                                                         int size, double timeout_s) {
  auto t = std::make_shared<SocketTransport>(rank, size);
  COMPASS_TRY(t->connect_all(store, timeout_s));
  return std::shared_ptr<Transport>(std::move(t));
}

}  // namespace compass::backends::cpu
