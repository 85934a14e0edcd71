#include "compass/backends/cpu/mpi_transport.hpp"

#include <chrono>
#include <cstring>
#include <algorithm>
#include <limits>
#include <list>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>

#if COMPASS_WITH_MPI
// The C API only: keep Open MPI and MPICH from pulling in their deprecated C++ bindings.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif

namespace compass::backends::cpu {

#if COMPASS_WITH_MPI

namespace {

using Clock = std::chrono::steady_clock;

constexpr int kControlTag = 1;   // done / pull / abort during a run
constexpr int kBarrierTag = 2;   // arrive / go
constexpr int kGatherTag = 3;    // gather payloads
constexpr int kFarewellTag = 4;  // leaving after a failure
constexpr int kDataTagBase = 16;

struct Header {
  std::int32_t kind;
  std::int32_t task;
  std::int32_t from;
};

std::vector<char> encode(const Message& m) {
  std::vector<char> out(sizeof(Header) + m.text.size());
  const Header h{static_cast<std::int32_t>(m.kind), m.task, m.from};
  std::memcpy(out.data(), &h, sizeof h);
  if (!m.text.empty()) std::memcpy(out.data() + sizeof h, m.text.data(), m.text.size());
  return out;
}

Result<Message> decode(const std::vector<char>& in) {
  if (in.size() < sizeof(Header)) return make_error("truncated control message ({} bytes)", in.size());
  Header h{};
  std::memcpy(&h, in.data(), sizeof h);
  if (h.kind < 1 || h.kind > 3) return make_error("control message of unknown kind {}", h.kind);
  Message m;
  m.kind = static_cast<MessageKind>(h.kind);
  m.task = h.task;
  m.from = h.from;
  m.text.assign(in.data() + sizeof h, in.size() - sizeof h);
  return m;
}

std::string mpi_error(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) return fmt::format("MPI error {}", code);
  return std::string(text, static_cast<std::size_t>(len));
}

// An MPI datatype for a span: contiguous when the rows are, else a vector of rows.
class RegionType {
 public:
  static Result<RegionType> make(const Span& s) {
    RegionType t;
    const std::int64_t elements = s.rows * s.cols;
    if (elements > std::numeric_limits<int>::max() || s.ld > std::numeric_limits<int>::max())
      return make_error("a region of {} x {} elements is too large for one MPI message", s.rows,
                        s.cols);
    if (s.rows <= 1 || s.ld == s.cols) {
      t.type_ = MPI_FLOAT;
      t.count_ = static_cast<int>(elements);
      return t;
    }
    if (MPI_Type_vector(static_cast<int>(s.rows), static_cast<int>(s.cols), static_cast<int>(s.ld),
                        MPI_FLOAT, &t.type_) != MPI_SUCCESS ||
        MPI_Type_commit(&t.type_) != MPI_SUCCESS)
      return make_error("MPI_Type_vector failed for a {} x {} region", s.rows, s.cols);
    t.owned_ = true;
    t.count_ = 1;
    return t;
  }
  RegionType() = default;
  RegionType(RegionType&& o) noexcept { *this = std::move(o); }
  RegionType& operator=(RegionType&& o) noexcept {
    std::swap(type_, o.type_);
    std::swap(count_, o.count_);
    std::swap(owned_, o.owned_);
    return *this;
  }
  ~RegionType() {
    if (owned_) MPI_Type_free(&type_);
  }
  MPI_Datatype type() const { return type_; }
  int count() const { return count_; }

 private:
  MPI_Datatype type_ = MPI_DATATYPE_NULL;
  int count_ = 0;
  bool owned_ = false;
};

class MpiTransport final : public Transport {
 public:
  explicit MpiTransport(const launch::MpiSession& session) {
    MPI_Comm_dup(MPI_COMM_WORLD, &comm_);
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    rank_ = session.rank();
    size_ = session.size();
    void* ub = nullptr;
    int flag = 0;
    MPI_Comm_get_attr(comm_, MPI_TAG_UB, &ub, &flag);
    tag_ub_ = flag != 0 ? *static_cast<int*>(ub) : 32767;
  }
  ~MpiTransport() override {
    drop_pending();
    MPI_Comm_free(&comm_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string name() const override { return "mpi"; }

  void post(int to, const Message& m) override {
    std::lock_guard lock(mu_);
    queue_.push_back(Outgoing{to, -1, {}, encode(m)});
  }
  void send_data(int to, int task, Span src) override {
    std::lock_guard lock(mu_);
    queue_.push_back(Outgoing{to, task, src, {}});
  }

  Status expect_data(int from, int task, Span dst) override {
    if (kDataTagBase + task > tag_ub_)
      return make_error("task {} exceeds the MPI tag range (MPI_TAG_UB = {})", task, tag_ub_);
    auto type = RegionType::make(dst);
    if (!type.ok()) return type.error();
    Recv r;
    r.task = task;
    r.type = std::move(type).value();
    const int rc = MPI_Irecv(dst.data, r.type.count(), r.type.type(), from, kDataTagBase + task,
                             comm_, &r.request);
    if (rc != MPI_SUCCESS)
      return make_error("MPI_Irecv for task {} from rank {}: {}", task, from, mpi_error(rc));
    recvs_.push_back(std::move(r));
    return Status::success();
  }

  Result<bool> poll(TransportSink& sink) override {
    bool moved = !early_.empty();
    for (const Message& m : std::exchange(early_, {})) sink.on_message(m);
    std::vector<Outgoing> queued;
    {
      std::lock_guard lock(mu_);
      queued.swap(queue_);
    }
    for (Outgoing& o : queued) {
      COMPASS_TRY(start_send(std::move(o)));
      moved = true;
    }
    for (auto it = sends_.begin(); it != sends_.end();) {
      int done = 0;
      if (const int rc = MPI_Test(&it->request, &done, MPI_STATUS_IGNORE); rc != MPI_SUCCESS)
        return make_error("rank {}: sending to rank {} failed: {}", rank_, it->to, mpi_error(rc));
      if (done) {
        it = sends_.erase(it);
        moved = true;
      } else {
        ++it;
      }
    }
    for (auto it = recvs_.begin(); it != recvs_.end();) {
      int done = 0;
      if (const int rc = MPI_Test(&it->request, &done, MPI_STATUS_IGNORE); rc != MPI_SUCCESS)
        return make_error("rank {}: receiving task {} failed: {}", rank_, it->task, mpi_error(rc));
      if (done) {
        const int task = it->task;
        it = recvs_.erase(it);
        sink.on_data(task);
        moved = true;
      } else {
        ++it;
      }
    }
    for (;;) {
      auto msg = receive_if_any(kControlTag);
      if (!msg.ok()) return msg.error();
      if (!msg->has_value()) break;
      auto m = decode(**msg);
      if (!m.ok()) return m.error();
      sink.on_message(*m);
      moved = true;
    }
    return moved;
  }

  bool quiescent() const override {
    std::lock_guard lock(mu_);
    return queue_.empty() && sends_.empty() && recvs_.empty();
  }

  void drain_after_failure(double grace_s) override {
    // Let the control messages (the abort) leave; data no longer matters.
    std::vector<Outgoing> queued;
    {
      std::lock_guard lock(mu_);
      queued.swap(queue_);
    }
    for (Outgoing& o : queued)
      if (o.task < 0) (void)start_send(std::move(o));
    const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(grace_s));
    while (Clock::now() < deadline) {
      bool pending = false;
      for (Send& s : sends_) {
        if (s.task >= 0 || s.request == MPI_REQUEST_NULL) continue;
        int done = 0;
        MPI_Test(&s.request, &done, MPI_STATUS_IGNORE);
        pending = pending || !done;
      }
      if (!pending) break;
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    drop_pending();
  }

  bool farewell(double timeout_s) override {
    static const char bye = 1;
    std::vector<MPI_Request> sent;
    for (int r = 0; r < size_; ++r) {
      if (r == rank_) continue;
      MPI_Request req;
      if (MPI_Isend(&bye, 1, MPI_CHAR, r, kFarewellTag, comm_, &req) == MPI_SUCCESS)
        sent.push_back(req);
    }
    std::vector<bool> heard(static_cast<std::size_t>(size_), false);
    heard[static_cast<std::size_t>(rank_)] = true;
    int missing = size_ - 1;
    const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
    while (missing > 0 && Clock::now() < deadline) {
      int flag = 0;
      MPI_Status st;
      MPI_Iprobe(MPI_ANY_SOURCE, kFarewellTag, comm_, &flag, &st);
      if (flag) {
        char c = 0;
        MPI_Recv(&c, 1, MPI_CHAR, st.MPI_SOURCE, kFarewellTag, comm_, MPI_STATUS_IGNORE);
        if (!heard[static_cast<std::size_t>(st.MPI_SOURCE)]) --missing;
        heard[static_cast<std::size_t>(st.MPI_SOURCE)] = true;
        continue;
      }
      // Keep draining run messages so a peer blocked on sending to us can move on.
      (void)receive_if_any(kControlTag);
      std::this_thread::sleep_for(std::chrono::microseconds(500));
    }
    for (MPI_Request& r : sent) {
      int done = 0;
      MPI_Test(&r, &done, MPI_STATUS_IGNORE);
      if (!done) MPI_Request_free(&r);
    }
    return missing == 0;
  }

  Status barrier(double timeout_s) override {
    const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
    char token = 1;
    if (rank_ == 0) {
      std::vector<bool> arrived(static_cast<std::size_t>(size_), false);
      arrived[0] = true;
      int missing = size_ - 1;
      while (missing > 0) {
        int flag = 0;
        MPI_Status st;
        MPI_Iprobe(MPI_ANY_SOURCE, kBarrierTag, comm_, &flag, &st);
        if (flag) {
          MPI_Recv(&token, 1, MPI_CHAR, st.MPI_SOURCE, kBarrierTag, comm_, MPI_STATUS_IGNORE);
          if (!arrived[static_cast<std::size_t>(st.MPI_SOURCE)]) --missing;
          arrived[static_cast<std::size_t>(st.MPI_SOURCE)] = true;
          continue;
        }
        if (Status st = stash_control(); !st.ok()) return st;
        if (Clock::now() > deadline) {
          std::string absent;
          for (int r = 0; r < size_; ++r)
            if (!arrived[static_cast<std::size_t>(r)]) absent += fmt::format(" {}", r);
          return make_error("timed out after {:.3g} s waiting for rank(s){} to start", timeout_s,
                            absent);
        }
        std::this_thread::sleep_for(std::chrono::microseconds(100));
      }
      std::vector<MPI_Request> go(static_cast<std::size_t>(size_ - 1));
      for (int r = 1; r < size_; ++r)
        MPI_Isend(&token, 1, MPI_CHAR, r, kBarrierTag, comm_, &go[static_cast<std::size_t>(r - 1)]);
      return wait_all(go, deadline + std::chrono::seconds(5), "sending the start signal");
    }
    MPI_Request req;
    MPI_Isend(&token, 1, MPI_CHAR, 0, kBarrierTag, comm_, &req);
    // Rank 0 names the missing ranks; give its abort a moment to arrive before giving up.
    const auto my_deadline = deadline + std::chrono::seconds(2);
    for (;;) {
      int flag = 0;
      MPI_Iprobe(0, kBarrierTag, comm_, &flag, MPI_STATUS_IGNORE);
      if (flag) {
        MPI_Recv(&token, 1, MPI_CHAR, 0, kBarrierTag, comm_, MPI_STATUS_IGNORE);
        return wait_all({req}, my_deadline, "arriving at the start");
      }
      if (Status st = stash_control(); !st.ok()) return st;
      if (Clock::now() > my_deadline) {
        MPI_Request_free(&req);
        return make_error("timed out after {:.3g} s waiting for rank 0's start signal", timeout_s);
      }
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }

  Result<std::vector<std::string>> all_gather(const std::string& mine, double timeout_s) override {
    const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                             std::chrono::duration<double>(timeout_s));
    auto wait = [&](MPI_Request& req, const char* what) -> Status {
      for (;;) {
        int done = 0;
        if (const int rc = MPI_Test(&req, &done, MPI_STATUS_IGNORE); rc != MPI_SUCCESS)
          return make_error("rank {}: {} failed: {}", rank_, what, mpi_error(rc));
        if (done) return Status::success();
        COMPASS_TRY(stash_control());
        if (Clock::now() > deadline)
          return make_error("rank {}: {} did not finish within {:.3g} s (is every rank running?)",
                            rank_, what, timeout_s);
        std::this_thread::sleep_for(std::chrono::microseconds(100));
      }
    };
    int my_size = static_cast<int>(mine.size());
    std::vector<int> sizes(static_cast<std::size_t>(size_), 0);
    MPI_Request req;
    MPI_Iallgather(&my_size, 1, MPI_INT, sizes.data(), 1, MPI_INT, comm_, &req);
    COMPASS_TRY(wait(req, "exchanging sizes"));
    std::vector<int> offsets(static_cast<std::size_t>(size_), 0);
    int total = 0;
    for (int r = 0; r < size_; ++r) {
      offsets[static_cast<std::size_t>(r)] = total;
      total += sizes[static_cast<std::size_t>(r)];
    }
    std::string all(static_cast<std::size_t>(total), '\0');
    MPI_Iallgatherv(mine.data(), my_size, MPI_BYTE, all.data(), sizes.data(), offsets.data(),
                    MPI_BYTE, comm_, &req);
    COMPASS_TRY(wait(req, "exchanging bytes"));
    std::vector<std::string> out;
    for (int r = 0; r < size_; ++r)
      out.push_back(all.substr(static_cast<std::size_t>(offsets[static_cast<std::size_t>(r)]),
                               static_cast<std::size_t>(sizes[static_cast<std::size_t>(r)])));
    return out;
  }

  Result<std::vector<std::vector<double>>> gather(const std::vector<double>& mine,
                                                  double timeout_s) override {
    const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
    std::vector<std::vector<double>> all;
    if (rank_ != 0) {
      MPI_Request req;
      MPI_Isend(mine.data(), static_cast<int>(mine.size()), MPI_DOUBLE, 0, kGatherTag, comm_, &req);
      COMPASS_TRY(wait_all({req}, deadline, "sending results to rank 0"));
      return all;
    }
    all.assign(static_cast<std::size_t>(size_), {});
    all[0] = mine;
    std::vector<bool> got(static_cast<std::size_t>(size_), false);
    got[0] = true;
    int missing = size_ - 1;
    while (missing > 0) {
      int flag = 0;
      MPI_Status st;
      MPI_Iprobe(MPI_ANY_SOURCE, kGatherTag, comm_, &flag, &st);
      if (flag) {
        int count = 0;
        MPI_Get_count(&st, MPI_DOUBLE, &count);
        auto& v = all[static_cast<std::size_t>(st.MPI_SOURCE)];
        v.resize(static_cast<std::size_t>(count));
        MPI_Recv(v.data(), count, MPI_DOUBLE, st.MPI_SOURCE, kGatherTag, comm_, MPI_STATUS_IGNORE);
        if (!got[static_cast<std::size_t>(st.MPI_SOURCE)]) --missing;
        got[static_cast<std::size_t>(st.MPI_SOURCE)] = true;
        continue;
      }
      if (Status abort = stash_control(); !abort.ok()) return abort.error();
      if (Clock::now() > deadline)
        return make_error("timed out after {:.3g} s waiting for the results of every rank",
                          timeout_s);
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    return all;
  }

 private:
  struct Outgoing {
    int to = 0;
    int task = -1;  // data: the transfer; -1: a control message in `bytes`
    Span span;
    std::vector<char> bytes;
  };
  struct Send {
    MPI_Request request = MPI_REQUEST_NULL;
    int to = 0;
    int task = -1;
    RegionType type;
    std::vector<char> bytes;
  };
  struct Recv {
    MPI_Request request = MPI_REQUEST_NULL;
    int task = -1;
    RegionType type;
  };

  Status start_send(Outgoing o) {
    Send s;
    s.to = o.to;
    s.task = o.task;
    int rc = MPI_SUCCESS;
    if (o.task < 0) {
      s.bytes = std::move(o.bytes);
      sends_.push_back(std::move(s));
      Send& b = sends_.back();
      rc = MPI_Isend(b.bytes.data(), static_cast<int>(b.bytes.size()), MPI_BYTE, o.to, kControlTag,
                     comm_, &b.request);
    } else {
      if (kDataTagBase + o.task > tag_ub_)
        return make_error("task {} exceeds the MPI tag range (MPI_TAG_UB = {})", o.task, tag_ub_);
      auto type = RegionType::make(o.span);
      if (!type.ok()) return type.error();
      s.type = std::move(type).value();
      sends_.push_back(std::move(s));
      Send& b = sends_.back();
      rc = MPI_Isend(o.span.data, b.type.count(), b.type.type(), o.to, kDataTagBase + o.task, comm_,
                     &b.request);
    }
    if (rc != MPI_SUCCESS) {
      sends_.pop_back();
      return make_error("rank {}: MPI_Isend to rank {} failed: {}", rank_, o.to, mpi_error(rc));
    }
    return Status::success();
  }

  // During a barrier: a peer already released may send messages of the coming run; keep them
  // for the first poll. An abort ends the barrier with the peer's error.
  Status stash_control() {
    for (;;) {
      auto msg = receive_if_any(kControlTag);
      if (!msg.ok()) return msg.error();
      if (!msg->has_value()) return Status::success();
      auto m = decode(**msg);
      if (!m.ok()) return m.error();
      if (m->kind == MessageKind::abort)
        return make_error("stopped because rank {} failed: {}", m->from, m->text);
      early_.push_back(std::move(m).value());
    }
  }

  // Receives one waiting message with `tag` from anyone, if there is one.
  Result<std::optional<std::vector<char>>> receive_if_any(int tag) {
    int flag = 0;
    MPI_Status st;
    if (const int rc = MPI_Iprobe(MPI_ANY_SOURCE, tag, comm_, &flag, &st); rc != MPI_SUCCESS)
      return make_error("rank {}: MPI_Iprobe failed: {}", rank_, mpi_error(rc));
    if (!flag) return std::optional<std::vector<char>>{};
    int count = 0;
    MPI_Get_count(&st, MPI_BYTE, &count);
    std::vector<char> buf(static_cast<std::size_t>(std::max(count, 0)));
    if (const int rc = MPI_Recv(buf.data(), count, MPI_BYTE, st.MPI_SOURCE, tag, comm_,
                                MPI_STATUS_IGNORE);
        rc != MPI_SUCCESS)
      return make_error("rank {}: MPI_Recv from rank {} failed: {}", rank_, st.MPI_SOURCE,
                        mpi_error(rc));
    return std::optional<std::vector<char>>(std::move(buf));
  }

  Status wait_all(std::vector<MPI_Request> reqs, Clock::time_point deadline, const char* what) {
    for (MPI_Request& r : reqs) {
      for (;;) {
        int done = 0;
        MPI_Test(&r, &done, MPI_STATUS_IGNORE);
        if (done) break;
        if (Clock::now() > deadline) {
          MPI_Request_free(&r);
          return make_error("rank {}: timed out {}", rank_, what);
        }
        std::this_thread::sleep_for(std::chrono::microseconds(100));
      }
    }
    return Status::success();
  }

  // Cancels receives and forgets sends (the job is ending after a failure).
  void drop_pending() {
    for (Recv& r : recvs_) {
      if (r.request == MPI_REQUEST_NULL) continue;
      MPI_Cancel(&r.request);
      MPI_Request_free(&r.request);
    }
    recvs_.clear();
    for (Send& s : sends_)
      if (s.request != MPI_REQUEST_NULL) MPI_Request_free(&s.request);
    sends_.clear();
    std::lock_guard lock(mu_);
    queue_.clear();
  }

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
  int tag_ub_ = 32767;
  mutable std::mutex mu_;        // guards queue_ (filled by executor threads)
  std::vector<Outgoing> queue_;
  std::list<Send> sends_;        // poll thread only; a list keeps buffers in place
  std::list<Recv> recvs_;
  std::vector<Message> early_;   // run messages that arrived during the barrier
};

}  // namespace

Result<std::shared_ptr<Transport>> make_mpi_transport(const launch::MpiSession& session) {
  return std::shared_ptr<Transport>(std::make_shared<MpiTransport>(session));
}

#else

Result<std::shared_ptr<Transport>> make_mpi_transport(const launch::MpiSession&) {
  return make_error("compass was built without MPI: --launch mpi is unavailable");
}

#endif

}  // namespace compass::backends::cpu
