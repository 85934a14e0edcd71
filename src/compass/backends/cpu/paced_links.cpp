#include "compass/backends/cpu/paced_links.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "compass/hardware/flows.hpp"

namespace compass::backends::cpu {

namespace hd = hardware::sharing;

Result<LinkPacer> LinkPacer::create(const hardware::Profile& p, std::vector<int> rank_gpus,
                                    double link_scale) {
  if (!(link_scale > 0) || !std::isfinite(link_scale))
    return make_error("link scale must be positive, got {}", link_scale);
  const int gpus = p.gpu_count();
  for (int g : rank_gpus)
    if (g < 0 || g >= gpus)
      return make_error("GPU {} not in profile '{}' ({} GPUs)", g, p.name, gpus);
  LinkPacer lp;
  lp.cap_ = hd::dir_capacities(p);
  for (double& c : lp.cap_) c *= link_scale;
  const std::size_t n = rank_gpus.size();
  lp.dirs_.assign(n, std::vector<std::vector<int>>(n));
  lp.latency_s_.assign(n, std::vector<double>(n, 0.0));
  for (std::size_t a = 0; a < n; ++a)
    for (std::size_t b = 0; b < n; ++b) {
      if (rank_gpus[a] == rank_gpus[b]) continue;
      lp.dirs_[a][b] = hd::route_dirs(p, rank_gpus[a], rank_gpus[b]);
      lp.latency_s_[a][b] = p.route_latency_s(rank_gpus[a], rank_gpus[b]);
      for (int d : lp.dirs_[a][b])
        if (!(lp.cap_[static_cast<std::size_t>(d)] > 0))
          return make_error("route GPU {} -> GPU {}: link '{}' has no bandwidth", rank_gpus[a],
                            rank_gpus[b], p.hop_name(hd::dir_hop(d)));
    }
  return lp;
}

void LinkPacer::advance(double now_s) {
  if (now_s <= last_s_) return;
  for (Flow& f : flows_) {
    if (!f.live || f.rate <= 0) continue;
    // Bytes move only after the latency phase; rates are constant between events.
    const double from = std::max(last_s_, f.byte_start_s);
    if (now_s > from) f.remaining = std::max(0.0, f.remaining - f.rate * (now_s - from));
  }
  last_s_ = now_s;
}

void LinkPacer::reshare(double now_s) {
  advance(now_s);
  // A flow in its latency phase holds no bandwidth yet. Its own start of the byte phase is not
  // an event: it is only a few microseconds, so it shares as if it were already moving bytes.
  std::vector<hd::FlowPath> paths(flows_.size());
  for (std::size_t i = 0; i < flows_.size(); ++i) {
    paths[i].dirs = flows_[i].dirs;
    paths[i].active = flows_[i].live && !flows_[i].dirs.empty() && flows_[i].remaining > 0;
  }
  const std::vector<double> rates = hd::maxmin(cap_, paths);
  for (std::size_t i = 0; i < flows_.size(); ++i) flows_[i].rate = paths[i].active ? rates[i] : 0;
}

int LinkPacer::start(double now_s, int src_rank, int dst_rank, double bytes) {
  Flow f;
  const auto a = static_cast<std::size_t>(src_rank), b = static_cast<std::size_t>(dst_rank);
  COMPASS_CHECK(a < dirs_.size() && b < dirs_.size(), "rank {} -> {} out of range", src_rank,
                dst_rank);
  f.dirs = dirs_[a][b];
  f.byte_start_s = std::max(now_s, last_s_) + latency_s_[a][b];
  f.remaining = f.dirs.empty() ? 0 : std::max(0.0, bytes);
  f.live = true;
  // Reuse a finished slot so ids stay small over a long run.
  int id = -1;
  for (std::size_t i = 0; i < flows_.size(); ++i)
    if (!flows_[i].live) {
      id = static_cast<int>(i);
      break;
    }
  advance(now_s);
  if (id < 0) {
    flows_.push_back(std::move(f));
    id = static_cast<int>(flows_.size() - 1);
  } else {
    flows_[static_cast<std::size_t>(id)] = std::move(f);
  }
  reshare(now_s);
  return id;
}

double LinkPacer::finish_time_s(int id) const {
  const Flow& f = flows_.at(static_cast<std::size_t>(id));
  if (f.remaining <= 0) return f.byte_start_s;
  if (f.rate <= 0) return std::numeric_limits<double>::infinity();
  return std::max(last_s_, f.byte_start_s) + f.remaining / f.rate;
}

void LinkPacer::finish(double now_s, int id) {
  advance(now_s);
  Flow& f = flows_.at(static_cast<std::size_t>(id));
  f.live = false;
  f.remaining = 0;
  f.rate = 0;
  reshare(now_s);
}

double LinkPacer::rate(int id) const {
  return flows_.at(static_cast<std::size_t>(id)).rate;
}

int LinkPacer::active() const {
  return static_cast<int>(
      std::count_if(flows_.begin(), flows_.end(), [](const Flow& f) { return f.live; }));
}

PacedLinkEngine::PacedLinkEngine(LinkPacer pacer)
    : pacer_(std::move(pacer)), epoch_(std::chrono::steady_clock::now()) {}

Result<std::shared_ptr<PacedLinkEngine>> PacedLinkEngine::create(const hardware::Profile& p,
                                                                 std::vector<int> rank_gpus,
                                                                 double link_scale) {
  COMPASS_ASSIGN(LinkPacer pacer, LinkPacer::create(p, std::move(rank_gpus), link_scale));
  return std::make_shared<PacedLinkEngine>(std::move(pacer));
}

double PacedLinkEngine::now_s() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - epoch_).count();
}

void PacedLinkEngine::transfer(const TransferRequest& r, std::stop_token stop) {
  int id = 0;
  {
    std::lock_guard lock(mutex_);
    id = pacer_.start(now_s(), r.src_rank, r.dst_rank, static_cast<double>(r.bytes));
    ++generation_;
  }
  changed_.notify_all();  // others' completion times moved
  // The copy runs while the transfer holds its share of the links.
  copy_block(r.src, r.src_ld, r.dst, r.dst_ld, r.rows, r.cols);
  std::unique_lock lock(mutex_);
  for (;;) {
    const double now = now_s();
    const double end = pacer_.finish_time_s(id);
    if (now >= end || stop.stop_requested()) break;
    const auto deadline = epoch_ + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                       std::chrono::duration<double>(std::min(end, now + 3600.0)));
    // Woken early when another transfer starts or finishes (the sharing changed).
    const std::uint64_t seen = generation_;
    changed_.wait_until(lock, stop, deadline, [&] { return generation_ != seen; });
  }
  pacer_.finish(now_s(), id);
  ++generation_;
  lock.unlock();
  changed_.notify_all();
}

hardware::Profile scale_links(const hardware::Profile& p, double factor) {
  hardware::Profile out = p;
  for (auto& l : out.links) {
    l.bandwidth_bytes_per_s *= factor;
    l.reverse_bandwidth_bytes_per_s *= factor;
  }
  return out;
}

}  // namespace compass::backends::cpu
