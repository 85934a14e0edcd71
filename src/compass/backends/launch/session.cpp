#include "compass/backends/launch/session.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <limits>
#include <mutex>
#include <thread>

namespace compass::backends::launch {

std::string_view to_string(LaunchKind k) {
  return k == LaunchKind::mpi ? "mpi" : "env";
}

Result<LaunchKind> parse_launch_kind(std::string_view s) {
  if (s == "mpi") return LaunchKind::mpi;
  if (s == "env") return LaunchKind::env;
  return make_error("launch '{}' is not one of: mpi, env", s);
}

namespace {

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

Result<std::string> unescape(std::string_view s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\') {
      out += s[i];
      continue;
    }
    if (++i == s.size()) return make_error("a run description ends inside an escape");
    if (s[i] == '\\')
      out += '\\';
    else if (s[i] == 'n')
      out += '\n';
    else
      return make_error("a run description has an unknown escape '\\{}'", s[i]);
  }
  return out;
}

// How a pair reads in an error: "--m 128" for a flag, "name 'value'" otherwise.
std::string pair_text(const std::pair<std::string, std::string>& p) {
  return p.first.rfind("--", 0) == 0
             ? fmt::format("{} {}", p.first, p.second.empty() ? "''" : p.second)
             : fmt::format("{} '{}'", p.first, p.second);
}

}  // namespace

std::string encode_description(const RunDescription& d) {
  std::string out;
  for (const auto& [name, value] : d) out += escape(name) + "=" + escape(value) + "\n";
  return out;
}

Result<RunDescription> decode_description(const std::string& text) {
  RunDescription d;
  std::size_t at = 0;
  while (at < text.size()) {
    const std::size_t end = text.find('\n', at);
    if (end == std::string::npos) return make_error("a run description's last line is cut off");
    const std::string_view line(text.data() + at, end - at);
    const std::size_t eq = line.find('=');
    if (eq == std::string_view::npos) return make_error("a run description line has no '='");
    COMPASS_ASSIGN(std::string name, unescape(line.substr(0, eq)));
    COMPASS_ASSIGN(std::string value, unescape(line.substr(eq + 1)));
    d.emplace_back(std::move(name), std::move(value));
    at = end + 1;
  }
  return d;
}

std::string description_hash(const RunDescription& d) {
  std::uint64_t h = 14695981039346656037ull;
  for (unsigned char c : encode_description(d)) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return fmt::format("{:016x}", h);
}

Status compare_descriptions(const std::vector<RunDescription>& ranks) {
  if (ranks.empty()) return Status::success();
  const RunDescription& first = ranks.front();
  for (std::size_t r = 1; r < ranks.size(); ++r) {
    const RunDescription& other = ranks[r];
    const std::size_t n = std::min(first.size(), other.size());
    for (std::size_t i = 0; i < n; ++i) {
      if (first[i] == other[i]) continue;
      if (first[i].first == other[i].first)
        return make_error(
            "the ranks were given different runs: rank {} was given {} where rank 0 "
            "was given {}",
            r, pair_text(other[i]), pair_text(first[i]));
      return make_error(
          "the ranks were given different runs: rank {} describes '{}' where rank 0 "
          "describes '{}' (different compass versions?)",
          r, other[i].first, first[i].first);
    }
    if (first.size() != other.size()) {
      const bool longer = other.size() > first.size();
      return make_error(
          "the ranks were given different runs: rank {} describes '{}', which rank {} "
          "does not (different compass versions?)",
          longer ? r : 0, (longer ? other : first)[n].first, longer ? 0 : r);
    }
  }
  return Status::success();
}

std::string agreement_message(const RunDescription& d) {
  return description_hash(d) + "\n" + encode_description(d);
}

Status check_agreement(const std::vector<std::string>& messages) {
  std::vector<RunDescription> ranks;
  std::string first_hash;
  bool same = true;
  for (std::size_t r = 0; r < messages.size(); ++r) {
    const std::size_t nl = messages[r].find('\n');
    if (nl == std::string::npos) return make_error("rank {} sent no run description", r);
    const std::string hash = messages[r].substr(0, nl);
    if (r == 0) first_hash = hash;
    same = same && hash == first_hash;
    COMPASS_ASSIGN(RunDescription d, decode_description(messages[r].substr(nl + 1)));
    if (description_hash(d) != hash)
      return make_error("rank {} sent a run description that does not match its hash", r);
    ranks.push_back(std::move(d));
  }
  if (same) return Status::success();
  COMPASS_TRY(compare_descriptions(ranks));
  return make_error("the ranks' run descriptions have different hashes but equal pairs");
}

std::vector<double> encode_numbers(const RankNumbers& n) {
  std::vector<double> v = n.times_s;
  v.insert(v.end(), {n.max_abs_error, n.max_ref_abs, static_cast<double>(n.threads)});
  return v;
}

Result<RankNumbers> combine_numbers(const std::vector<std::vector<double>>& ranks,
                                    std::size_t iterations) {
  if (ranks.empty()) return make_error("no rank sent its results");
  RankNumbers out;
  out.times_s.assign(iterations, 0.0);
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    const std::vector<double>& v = ranks[r];
    if (v.size() != iterations + 3)
      return make_error("rank {} sent {} numbers where {} timed runs give {}", r, v.size(),
                        iterations, iterations + 3);
    for (std::size_t i = 0; i < iterations; ++i) out.times_s[i] = std::max(out.times_s[i], v[i]);
    // An error that is not finite (a NaN output) stays one: infinity, which max keeps.
    const double err =
        std::isfinite(v[iterations]) ? v[iterations] : std::numeric_limits<double>::infinity();
    out.max_abs_error = std::max(out.max_abs_error, err);
    out.max_ref_abs = std::max(out.max_ref_abs, v[iterations + 1]);
    // A thread count arrives as a double: a peer that sends anything but a small whole number
    // is refused rather than converted (converting an out-of-range double is undefined).
    const double threads = v[iterations + 2];
    if (!(threads >= 0 && threads <= 1 << 20) || threads != std::floor(threads))
      return make_error("rank {} sent a thread count of {}", r, threads);
    out.threads += static_cast<int>(threads);
  }
  return out;
}

int rank_from_launcher_env() {
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "RANK"})
    if (const char* v = std::getenv(name)) return std::atoi(v);
  return -1;
}

bool started_by_mpi_launcher() {
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"})
    if (std::getenv(name)) return true;
  return false;
}

namespace {

// MPI_Init waits for every process of the job; a watchdog calls `on_timeout` when it has not
// returned in time (a process that never starts would otherwise hang the others for good).
Result<std::unique_ptr<MpiSession>> init_mpi(double timeout_s,
                                             const std::function<void()>& on_timeout) {
  if (!on_timeout) return MpiSession::init();
  std::mutex mu;
  std::condition_variable cv;
  bool started = false;
  std::jthread watchdog([&] {
    std::unique_lock lock(mu);
    if (!cv.wait_for(lock, std::chrono::duration<double>(timeout_s), [&] { return started; }))
      on_timeout();
  });
  auto session = MpiSession::init();
  {
    std::lock_guard lock(mu);
    started = true;
  }
  cv.notify_all();
  return session;
}

}  // namespace

Result<std::unique_ptr<Session>> Session::start(const SessionOptions& options) {
  if (!(options.start_timeout_s > 0))
    return make_error("the start timeout must be a positive number of seconds, got {}",
                      options.start_timeout_s);
  std::unique_ptr<Session> s(new Session());
  s->kind_ = options.kind;
  s->start_timeout_s_ = options.start_timeout_s;
  if (options.kind == LaunchKind::mpi) {
    if (!mpi_compiled_in())
      return make_error(
          "--launch mpi: compass was built without MPI (install libopenmpi-dev and rebuild)");
    COMPASS_ASSIGN(s->mpi_, init_mpi(options.start_timeout_s, options.on_start_timeout));
    s->rank_ = s->mpi_->rank();
    s->size_ = s->mpi_->size();
    s->local_rank_ = s->mpi_->local_rank();
  } else {
    COMPASS_ASSIGN(const EnvLaunch env, env_launch_from_environment());
    s->rank_ = env.rank;
    s->size_ = env.world_size;
    s->local_rank_ = env.local_rank;
    COMPASS_ASSIGN(s->store_, TcpStore::connect(env, options.start_timeout_s));
  }
  return s;
}

Session::~Session() = default;

Status Session::agree(const RunDescription& mine) {
  if (!collectives_) return make_error("the session has no transport attached");
  COMPASS_ASSIGN(const std::vector<std::string> all,
                 collectives_->all_gather(agreement_message(mine), start_timeout_s_));
  return check_agreement(all);
}

Result<std::optional<RankNumbers>> Session::gather_numbers(const RankNumbers& mine,
                                                           double bound_s) {
  if (!collectives_) return make_error("the session has no transport attached");
  COMPASS_TRY(collectives_->barrier(bound_s));
  COMPASS_ASSIGN(const std::vector<std::vector<double>> all,
                 collectives_->gather(encode_numbers(mine), bound_s));
  if (rank_ != 0) return std::optional<RankNumbers>();
  COMPASS_ASSIGN(RankNumbers combined, combine_numbers(all, mine.times_s.size()));
  return std::optional<RankNumbers>(std::move(combined));
}

void Session::leave_after_failure() {
  // When every process has said goodbye, all of them have reported and each ends normally
  // (MPI_Finalize, exit 2). MPI_Abort is kept for a peer that did not answer: it would
  // otherwise wait forever, but it may also cut off output the launcher has not forwarded.
  const bool all_left = collectives_ && collectives_->farewell(kStopBound_s - kAnnounceBound_s);
  collectives_.reset();
  if (mpi_ && !all_left) mpi_->abort_job(2);
}

}  // namespace compass::backends::launch
