#include "compass/measure/nccl_fit.hpp"

#include "compass/core/format.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <tuple>
#include <cctype>
#include <cmath>
#include <map>
#include <set>

#include "compass/core/units.hpp"
#include "compass/hardware/gpu_models.hpp"
#include "compass/hardware/rings.hpp"
#include "compass/model/comm_model.hpp"

namespace compass::measure {

using namespace hardware;  // the profile whose links are fitted
using namespace model;     // the collective times the fits invert

namespace {

bool all_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
}

std::optional<double> number(const std::string& s) {
  try {
    std::size_t used = 0;
    const double v = std::stod(s, &used);
    if (used != s.size() || !std::isfinite(v)) return std::nullopt;
    return v;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

/// Tokens of a line with a leading '#' (alone or glued to the first word) removed.
std::vector<std::string> content_tokens(std::string_view line) {
  auto t = split_ws(line);
  if (!t.empty() && t[0] == "#") t.erase(t.begin());
  else if (!t.empty() && t[0][0] == '#' && t[0] != "#wrong") t[0] = t[0].substr(1);
  return t;
}

std::string base_name(const std::string& path) {
  const auto slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

std::string_view to_string(NcclTest t) {
  switch (t) {
    case NcclTest::all_reduce: return "all_reduce_perf";
    case NcclTest::all_gather: return "all_gather_perf";
    case NcclTest::reduce_scatter: return "reduce_scatter_perf";
    case NcclTest::sendrecv: return "sendrecv_perf";
  }
  return "?";
}

double busbw_factor(NcclTest t, int n) {
  if (n <= 1) return t == NcclTest::sendrecv ? 1.0 : 0.0;
  switch (t) {
    case NcclTest::all_reduce: return 2.0 * (n - 1) / n;
    case NcclTest::all_gather:
    case NcclTest::reduce_scatter: return static_cast<double>(n - 1) / n;
    case NcclTest::sendrecv: return 1.0;
  }
  return 0;
}

Result<NcclLog> parse_nccl_tests_log(std::string_view text, std::string_view origin) {
  NcclLog log;
  log.origin = std::string(origin);
  if (std::all_of(text.begin(), text.end(), [](char c) { return std::isspace(static_cast<unsigned char>(c)); }))
    return make_error("{}: empty file (expected the output of an nccl-tests binary)", origin);

  // Which test: the binary's name in the text (the command line or the tests' own banner).
  std::set<NcclTest> named;
  for (NcclTest t : {NcclTest::all_reduce, NcclTest::all_gather, NcclTest::reduce_scatter, NcclTest::sendrecv})
    if (text.find(to_string(t)) != std::string_view::npos) named.insert(t);
  if (named.size() > 1)
    return make_error("{}: names several nccl-tests binaries; give one log per test", origin);
  for (const char* other : {"broadcast_perf", "alltoall_perf", "reduce_perf ", "gather_perf", "scatter_perf", "hypercube_perf"})
    if (named.empty() && text.find(other) != std::string_view::npos)
      return make_error("{}: a {} log; only all_reduce_perf, all_gather_perf, reduce_scatter_perf "
                        "and sendrecv_perf logs can be fitted",
                        origin, std::string(other).substr(0, std::string(other).find(' ')));

  std::vector<std::string> columns;
  std::size_t n_line = 0;
  std::map<int, std::pair<std::string, int>> rank_place;  // rank -> (host, device)
  for (std::size_t start = 0; start <= text.size();) {
    std::size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(start, end - start);
    start = end + 1;
    ++n_line;
    if (line.find("Test NCCL failure") != std::string_view::npos ||
        line.find("Test CUDA failure") != std::string_view::npos ||
        line.find("Test failure") != std::string_view::npos)
      return make_error("{}: line {}: the run failed ('{}')", origin, n_line,
                        std::string(line.substr(std::min(line.size(), line.find_first_not_of(" \t#")))));
    if (line.find("Out of bounds values") != std::string_view::npos &&
        line.find("FAILED") != std::string_view::npos)
      return make_error("{}: line {}: nccl-tests reports out-of-bounds values (FAILED): the results "
                        "are wrong and cannot be fitted",
                        origin, n_line);
    const auto t = content_tokens(line);
    if (t.empty()) continue;
    // "#  Rank  0 Group  0 Pid  28307 on      gpu59 device  0 [0x16] NVIDIA GeForce RTX 4090"
    if (t[0] == "Rank" && t.size() >= 2 && all_digits(t[1])) {
      const int rank = std::stoi(t[1]);
      auto on = std::find(t.begin(), t.end(), "on");
      auto dev = std::find(t.begin(), t.end(), "device");
      if (on == t.end() || on + 1 == t.end() || dev == t.end() || dev + 1 == t.end() || !all_digits(*(dev + 1)))
        return make_error("{}: line {}: cannot read the rank line", origin, n_line);
      rank_place[rank] = {*(on + 1), std::stoi(*(dev + 1))};
      if (log.device_name.empty() && dev + 3 <= t.end()) {
        std::vector<std::string> name(dev + 3, t.end());
        log.device_name = fmt::format("{}", fmt::join(name, " "));
      }
      continue;
    }
    const bool is_header = std::find(t.begin(), t.end(), "size") != t.end() &&
                           std::find(t.begin(), t.end(), "count") != t.end() &&
                           std::find(t.begin(), t.end(), "busbw") != t.end();
    if (is_header) {
      columns = t;
      continue;
    }
    if (line.find_first_not_of(" \t") != std::string_view::npos && line[line.find_first_not_of(" \t")] == '#')
      continue;
    if (!all_digits(t[0])) continue;
    if (columns.empty()) {
      // A table pasted without its column header: read it in the layout current nccl-tests
      // print, when the row has exactly that many columns.
      const std::vector<std::string> current = {"size", "count", "type", "redop", "root",
                                                "time", "algbw", "busbw", "#wrong", "time",
                                                "algbw", "busbw", "#wrong"};
      if (t.size() != current.size()) continue;
      columns = current;
      log.notes.push_back(
          "no column header in the log: rows read as the 13 columns current nccl-tests print");
    }
    if (t.size() < columns.size())
      return make_error("{}: line {}: truncated row: {} of {} columns", origin, n_line, t.size(), columns.size());
    if (t.size() > columns.size()) continue;  // not a row of this table
    auto col = [&](const std::string& name, int occurrence) -> int {
      int seen = 0;
      for (std::size_t c = 0; c < columns.size(); ++c)
        if (columns[c] == name && seen++ == occurrence) return static_cast<int>(c);
      return -1;
    };
    NcclRow row;
    row.line = static_cast<int>(n_line);
    const auto size = number(t[0]);
    if (!size || *size < 1 || *size > kMaxNcclSizeBytes || *size != std::floor(*size))
      return make_error("{}: line {}: size '{}' is not a whole number of bytes in 1..{:.0f}",
                        origin, n_line, t[0], kMaxNcclSizeBytes);
    row.size_bytes = *size;
    for (int place = 0; place < 2; ++place) {
      const int ti = col("time", place), ai = col("algbw", place), bi = col("busbw", place);
      if (ti < 0 || ai < 0 || bi < 0) {
        if (place == 1) break;
        return make_error("{}: line {}: the column header lacks time/algbw/busbw", origin, n_line);
      }
      const auto tv = number(t[ti]), av = number(t[ai]), bv = number(t[bi]);
      if (!tv || !av || !bv)
        return make_error("{}: line {}: size {}: cannot read time/algbw/busbw ('{}', '{}', '{}')",
                          origin, n_line, t[0], t[ti], t[ai], t[bi]);
      if (!(*tv >= 0 && *tv <= kMaxNcclTimeUs))
        return make_error("{}: line {}: size {}: time {} us is outside 0..{:.0f} us", origin,
                          n_line, t[0], t[ti], kMaxNcclTimeUs);
      for (const auto& [name, text, v] :
           {std::tuple{"algbw", t[ai], *av}, std::tuple{"busbw", t[bi], *bv}})
        if (!(v >= 0 && v <= kMaxNcclBandwidthGbps))
          return make_error("{}: line {}: size {}: {} {} GB/s is outside 0..{:.0f} GB/s", origin,
                            n_line, t[0], name, text, kMaxNcclBandwidthGbps);
      row.time_us[place] = *tv;
      row.algbw[place] = *av;
      row.busbw[place] = *bv;
      const int wi = col("#wrong", place);
      if (wi >= 0 && t[wi] != "N/A") {
        const auto wv = number(t[wi]);
        if (!wv || *wv != 0)
          return make_error("{}: line {}: size {}: #wrong is {} ({}): the run produced wrong results "
                            "and cannot be fitted",
                            origin, n_line, t[0], t[wi], place == 0 ? "out-of-place" : "in-place");
      }
    }
    if (!(row.time_us[0] > 0))
      return make_error("{}: line {}: size {}: time must be positive", origin, n_line, t[0]);
    log.rows.push_back(row);
  }
  if (log.rows.empty())
    return make_error("{}: no result rows (expected the size/count/type/.../busbw table nccl-tests prints)", origin);

  if (!rank_place.empty()) {
    log.ranks = static_cast<int>(rank_place.size());
    for (int r = 0; r < log.ranks; ++r) {
      auto it = rank_place.find(r);
      if (it == rank_place.end())
        return make_error("{}: the rank lines skip rank {}", origin, r);
      log.hosts.push_back(it->second.first);
      log.devices.push_back(it->second.second);
    }
  }
  // The busbw/algbw ratio on the largest row tells the test family and the rank count.
  const NcclRow& big = *std::max_element(log.rows.begin(), log.rows.end(),
                                         [](const NcclRow& a, const NcclRow& b) { return a.size_bytes < b.size_bytes; });
  const double ratio = big.algbw[0] > 0 ? big.busbw[0] / big.algbw[0] : 0;
  if (named.empty()) {
    if (log.ranks == 0)
      return make_error("{}: neither the test's name nor the rank lines ('# Using devices') are in "
                        "the log: keep the header nccl-tests prints",
                        origin);
    const int n = log.ranks;
    std::vector<NcclTest> fits;
    for (NcclTest t : {NcclTest::all_reduce, NcclTest::all_gather, NcclTest::sendrecv})
      if (std::abs(busbw_factor(t, n) - ratio) < 0.02) fits.push_back(t);
    if (fits.size() != 1 || fits[0] == NcclTest::all_gather)
      return make_error("{}: cannot tell which nccl-tests binary wrote this log (busbw/algbw = {:.3f} "
                        "on {} ranks); keep its command line in the file",
                        origin, ratio, n);
    log.test = fits[0];
    log.notes.push_back(fmt::format("test inferred from busbw/algbw = {:.3f} on {} ranks", ratio, n));
  } else {
    log.test = *named.begin();
  }
  if (log.ranks == 0) {
    // busbw = algbw x factor(n): solve for n.
    double n = 0;
    if (log.test == NcclTest::all_reduce && ratio < 2) n = 2 / (2 - ratio);
    if ((log.test == NcclTest::all_gather || log.test == NcclTest::reduce_scatter) && ratio < 1) n = 1 / (1 - ratio);
    if (!(n >= 1.5) || std::abs(n - std::round(n)) > 0.1)
      return make_error("{}: no rank lines ('# Using devices') and the rank count cannot be told from "
                        "busbw/algbw = {:.3f}",
                        origin, ratio);
    log.ranks = static_cast<int>(std::lround(n));
    log.notes.push_back(fmt::format("{} ranks inferred from busbw/algbw = {:.3f} (no rank lines)", log.ranks, ratio));
  }
  return log;
}

namespace {

struct Setup {
  std::vector<int> gpus;   ///< rank -> GPU ordinal
  std::vector<int> order;  ///< the ring the collective runs on (sendrecv: rank order)
};

Result<Setup> setup_for(const hardware::Profile& p, const NcclLog& log) {
  Setup s;
  std::set<std::string> hosts(log.hosts.begin(), log.hosts.end());
  if (hosts.size() > 1)
    return make_error("{}: the ranks run on {} hosts; only single-machine logs can be fitted to a profile",
                      log.origin, hosts.size());
  if (log.ranks > p.gpu_count())
    return make_error("{}: {} ranks but profile '{}' has {} GPUs", log.origin, log.ranks, p.name, p.gpu_count());
  std::set<int> distinct(log.devices.begin(), log.devices.end());
  const bool by_device = !log.devices.empty() && distinct.size() == log.devices.size() &&
                         *distinct.rbegin() < p.gpu_count();
  for (int r = 0; r < log.ranks; ++r) s.gpus.push_back(by_device ? log.devices[r] : r);
  if (log.test == NcclTest::sendrecv) {
    s.order = s.gpus;
  } else {
    COMPASS_ASSIGN(hardware::Ring ring, hardware::find_ring(p, s.gpus));
    s.order = ring.order;
  }
  return s;
}

Collective collective_of(NcclTest t) {
  switch (t) {
    case NcclTest::all_gather: return Collective::all_gather;
    case NcclTest::reduce_scatter: return Collective::reduce_scatter;
    default: return Collective::all_reduce;
  }
}

double predict(const hardware::Profile& p, const NcclLog& log, const Setup& s, double size) {
  if (log.test == NcclTest::sendrecv)
    return ring_step_time(p, s.order, size).time_s + p.overheads.collective_launch_s;
  return ring_collective_time_s(p, s.order, size, collective_of(log.test), true);
}

double predicted_busbw(const hardware::Profile& p, const NcclLog& log, const Setup& s, double size) {
  const double t = predict(p, log, s, size);
  return t > 0 ? busbw_factor(log.test, log.ranks) * size / t / kGB : 0;
}

/// The per-step flows' bytes for a size (one shard per rank; sendrecv: the whole size).
double step_bytes(const NcclLog& log, double size) {
  return log.test == NcclTest::sendrecv ? size : size / log.ranks;
}

std::optional<double> physical_peak(const hardware::Profile& p, const hardware::Link& l,
                                    std::string* what) {
  if (p.devices.empty()) return std::nullopt;
  auto model = hardware::find_gpu_model(p.devices[0].name);
  if (!model.ok()) return std::nullopt;
  if (l.kind == hardware::LinkKind::pcie) {
    auto raw = hardware::pcie_raw_bytes_per_s(model->pcie_gen, model->pcie_width);
    if (!raw.ok()) return std::nullopt;
    *what = fmt::format("the PCIe {}.0 x{} peak {:.1f} GB/s", model->pcie_gen, model->pcie_width, *raw / kGB);
    return *raw;
  }
  if ((l.kind == hardware::LinkKind::nvlink || l.kind == hardware::LinkKind::nvswitch) && model->nvlink_links > 0) {
    const double peak = model->nvlink_links * model->nvlink_link_bytes_per_s;
    *what = fmt::format("the {} NVLink peak {:.1f} GB/s ({} links)", model->device.name, peak / kGB, model->nvlink_links);
    return peak;
  }
  return std::nullopt;
}

double& direction_bw(hardware::Link& l, bool forward) {
  return forward ? l.bandwidth_bytes_per_s : l.reverse_bandwidth_bytes_per_s;
}

}  // namespace

double predicted_time_s(const hardware::Profile& p, const NcclLog& log, double size_bytes) {
  auto s = setup_for(p, log);
  COMPASS_CHECK(s.ok(), "{}", s.ok() ? "" : s.error().message);
  return predict(p, log, *s, size_bytes);
}

Result<FitResult> fit_to_nccl_tests(const hardware::Profile& base, const std::vector<NcclLog>& logs) {
  FitResult out;
  out.profile = base;
  hardware::Profile& p = out.profile;
  std::map<int, std::set<std::string>> why;  // link -> reasons
  std::vector<Setup> setups;
  for (const NcclLog& log : logs) {
    COMPASS_ASSIGN(Setup s, setup_for(base, log));
    setups.push_back(std::move(s));
  }
  std::vector<std::vector<std::string>> unexplained(logs.size());

  auto large_rows = [](const NcclLog& log) {
    double biggest = 0;
    for (const NcclRow& r : log.rows) biggest = std::max(biggest, r.size_bytes);
    std::vector<const NcclRow*> rows;
    for (const NcclRow& r : log.rows)
      if (r.size_bytes >= biggest / 16 && r.busbw[0] > 0) rows.push_back(&r);
    return rows;
  };

  // The model of one log: T(S) = launch + steps x (L + S x c / r), L the longest route latency
  // of a step and r the rate the step's bottleneck gives each flow. Over the large sizes a
  // least-squares fit (relative errors) of T = alpha + beta x S gives the wanted L and r; the
  // links bounding the step are then scaled to give r, and the latencies on the used routes
  // to give L.
  struct Wanted {
    double alpha = 0, beta = 0;
  };
  auto wanted = [&](std::size_t li) -> std::optional<Wanted> {
    const auto rows = large_rows(logs[li]);
    if (rows.empty()) return std::nullopt;
    double sw = 0, sws = 0, swss = 0, swt = 0, swst = 0;
    for (const NcclRow* r : rows) {
      const double t = r->time_us[0] * 1e-6, x = r->size_bytes, w = 1 / (t * t);
      sw += w;
      sws += w * x;
      swss += w * x * x;
      swt += w * t;
      swst += w * x * t;
    }
    Wanted out;
    const double det = sw * swss - sws * sws;
    const bool distinct = rows.front()->size_bytes != rows.back()->size_bytes;
    if (distinct && det > 0) {
      out.alpha = (swss * swt - sws * swst) / det;
      out.beta = (sw * swst - sws * swt) / det;
    }
    if (!distinct || !(det > 0) || out.alpha < 0 || out.beta <= 0) {
      // One size (or a negative intercept): keep the launch overhead as the intercept.
      out.alpha = p.overheads.collective_launch_s;
      out.beta = (swst - out.alpha * sws) / swss;
    }
    if (!(out.beta > 0)) return std::nullopt;
    return out;
  };

  auto fit_bandwidth = [&](std::size_t li, const Wanted& w) {
    const NcclLog& log = logs[li];
    const Setup& s = setups[li];
    const double size = large_rows(log).back()->size_bytes;
    const double target = w.beta * size;  // wanted time of the bandwidth part at `size`
    for (int iter = 0; iter < 40; ++iter) {
      const double lat = predict(p, log, s, 1.0);
      const double now = predict(p, log, s, size) - lat;
      const double scale = now / target;
      if (std::abs(scale - 1) < 1e-6) return;
      const StepTime step = ring_step_time(p, s.order, step_bytes(log, size));
      double busiest = 0;
      for (const auto& l : step.loads) busiest = std::max(busiest, l.busy_s);
      bool moved = false;
      for (const auto& load : step.loads) {
        if (load.busy_s < busiest * (1 - 1e-9)) continue;
        hardware::Link& link = p.links[load.hop.link];
        double& bw = direction_bw(link, load.hop.forward);
        double want = bw * scale;
        std::string peak_text;
        const auto peak = physical_peak(p, link, &peak_text);
        if (peak && want > *peak * (1 + 1e-9)) {
          const std::string msg = fmt::format(
              "the measured busbw at large sizes needs {} at {:.1f} GB/s per direction, above {}: "
              "the layout cannot explain the measurement",
              base.hop_name(load.hop), want / kGB, peak_text);
          if (std::find(unexplained[li].begin(), unexplained[li].end(), msg) == unexplained[li].end())
            unexplained[li].push_back(msg);
          want = *peak;
        }
        if (want != bw) {
          why[load.hop.link].insert(fmt::format("bandwidth: bounds the ring step of {} at large sizes",
                                                base_name(log.origin)));
          bw = want;
          moved = true;
        }
      }
      if (!moved) return;
    }
  };

  auto fit_latency = [&](std::size_t li, const Wanted& w) {
    const NcclLog& log = logs[li];
    const Setup& s = setups[li];
    const int steps = log.test == NcclTest::sendrecv ? 1 : collective_steps(collective_of(log.test), log.ranks);
    if (steps == 0) return;
    const double launch = p.overheads.collective_launch_s;
    std::set<int> used;
    double route_latency = 0;
    std::size_t most_hops = 1;
    for (std::size_t i = 0; i < s.order.size(); ++i) {
      const int a = s.order[i], b = s.order[(i + 1) % s.order.size()];
      if (a == b) continue;
      for (const auto& h : p.route(a, b).hops) used.insert(h.link);
      route_latency = std::max(route_latency, p.route_latency_s(a, b));
      most_hops = std::max(most_hops, p.route(a, b).hops.size());
    }
    double target = (w.alpha - launch) / steps;
    if (target < 0) {
      out.notes.push_back(fmt::format(
          "{}: the fitted intercept {:.1f} us is below the modelled launch overhead {:.1f} us: "
          "latencies on its routes set to 0",
          log.origin, w.alpha * 1e6, launch * 1e6));
      target = 0;
    }
    for (int l : used) {
      double& lat = p.links[l].latency_s;
      const double next = route_latency > 0 ? lat * target / route_latency : target / most_hops;
      if (std::abs(next - lat) > 1e-12) {
        why[l].insert(fmt::format("latency: on the routes of {} (fitted intercept {:.1f} us)",
                                  base_name(log.origin), w.alpha * 1e6));
        lat = next;
      }
    }
  };

  for (std::size_t li = 0; li < logs.size(); ++li) {
    const auto w = wanted(li);
    if (!w) {
      out.notes.push_back(fmt::format("{}: no usable large sizes; nothing fitted", logs[li].origin));
      continue;
    }
    fit_latency(li, *w);
    fit_bandwidth(li, *w);
  }

  for (std::size_t li = 0; li < logs.size(); ++li) {
    const NcclLog& log = logs[li];
    LogFit f;
    f.origin = log.origin;
    f.test = log.test;
    f.ranks = log.ranks;
    f.gpus = setups[li].gpus;
    f.unexplained = unexplained[li];
    const auto large = large_rows(log);
    for (const NcclRow& r : log.rows) {
      FitPoint pt;
      pt.size_bytes = r.size_bytes;
      pt.measured_busbw = r.busbw[0];
      pt.before_busbw = predicted_busbw(base, log, setups[li], r.size_bytes);
      pt.after_busbw = predicted_busbw(p, log, setups[li], r.size_bytes);
      pt.large = std::find(large.begin(), large.end(), &r) != large.end();
      if (pt.large && pt.measured_busbw > 0)
        f.large_max_error = std::max(f.large_max_error, std::abs(pt.after_busbw - pt.measured_busbw) / pt.measured_busbw);
      f.points.push_back(pt);
    }
    out.logs.push_back(std::move(f));
  }
  for (std::size_t l = 0; l < p.links.size(); ++l) {
    const hardware::Link &a = base.links[l], &b = p.links[l];
    if (a == b) continue;
    LinkChange c;
    c.link = a.name;
    c.bandwidth_before = a.bandwidth_bytes_per_s;
    c.bandwidth_after = b.bandwidth_bytes_per_s;
    c.latency_before = a.latency_s;
    c.latency_after = b.latency_s;
    if (b.reverse_bandwidth_bytes_per_s != b.bandwidth_bytes_per_s)
      why[static_cast<int>(l)].insert(fmt::format("reverse direction {:.1f} -> {:.1f} GB/s",
                                                  a.reverse_bandwidth_bytes_per_s / kGB,
                                                  b.reverse_bandwidth_bytes_per_s / kGB));
    c.why = fmt::format("{}", fmt::join(why[static_cast<int>(l)], "; "));
    p.links[l].source = fmt::format("fitted to nccl-tests ({}); was: {}", c.why, a.source);
    out.changes.push_back(std::move(c));
  }
  std::vector<std::string> names;
  for (const NcclLog& log : logs) names.push_back(log.origin);
  p.notes.push_back(fmt::format("link bandwidths and latencies fitted to nccl-tests logs: {}", fmt::join(names, ", ")));
  return out;
}

}  // namespace compass::measure
