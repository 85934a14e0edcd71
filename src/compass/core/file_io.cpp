#include "compass/core/file_io.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>

namespace compass {

namespace {

namespace fs = std::filesystem;

std::string errno_text(int err) { return std::strerror(err); }

// Writes everything to fd, retrying short writes; the errno of the failure, or 0.
int write_all(int fd, std::string_view text) {
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    if (n == 0) return EIO;
    done += static_cast<std::size_t>(n);
  }
  return 0;
}

enum class Target { missing, regular, special, directory };

Result<Target> classify(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) {
      // A dangling link would be created at its target by open(); treat it like a new file.
      return Target::missing;
    }
    return make_error("{}: {}", path, errno_text(errno));
  }
  if (S_ISDIR(st.st_mode)) return Target::directory;
  if (S_ISREG(st.st_mode)) return Target::regular;
  return Target::special;
}

Status write_in_place(const std::string& path, std::string_view text) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
  if (fd < 0) return make_error("{}: cannot open for writing: {}", path, errno_text(errno));
  const int err = write_all(fd, text);
  const int close_err = ::close(fd) != 0 ? errno : 0;
  if (err) return make_error("{}: write failed: {}", path, errno_text(err));
  if (close_err) return make_error("{}: write failed: {}", path, errno_text(close_err));
  return Status::success();
}

}  // namespace

Status check_output_path(const std::string& path, bool overwrite) {
  if (path.empty()) return make_error("empty file name");
  COMPASS_ASSIGN(const Target t, classify(path));
  if (t == Target::directory) return make_error("{}: is a directory", path);
  if (t == Target::regular && !overwrite)
    return make_error("{}: file exists; refusing to overwrite it (pass --force)", path);
  if (t == Target::missing) {
    const fs::path parent = fs::path(path).parent_path();
    std::error_code ec;
    if (!parent.empty() && !fs::is_directory(parent, ec))
      return make_error("{}: no such directory '{}'", path, parent.string());
  }
  return Status::success();
}

Result<StagedFile> StagedFile::stage(const std::string& path, std::string_view text,
                                     bool overwrite) {
  COMPASS_TRY(check_output_path(path, overwrite));
  COMPASS_ASSIGN(const Target t, classify(path));
  StagedFile staged;
  staged.path_ = path;
  staged.target_ = path;
  staged.overwrite_ = overwrite;
  if (t == Target::special) {
    staged.in_place_ = true;
    staged.text_ = std::string(text);
    return staged;
  }

  // A link is followed: the file it names is the one replaced, the link stays.
  std::error_code ec;
  if (fs::is_symlink(path, ec)) {
    const fs::path resolved = fs::weakly_canonical(path, ec);
    if (ec) return make_error("{}: cannot resolve the link: {}", path, ec.message());
    staged.target_ = resolved.string();
  }
  const fs::path tp(staged.target_);
  const fs::path dir = tp.has_parent_path() ? tp.parent_path() : fs::path(".");

  // A fresh name in the same directory (same file system, so rename is atomic); O_EXCL and
  // O_NOFOLLOW: never an existing file, never through a link.
  static std::atomic<unsigned> counter{0};
  std::string tmp;
  int fd = -1;
  for (int attempt = 0; attempt < 100 && fd < 0; ++attempt) {
    const auto tick = std::chrono::steady_clock::now().time_since_epoch().count();
    tmp = (dir / fmt::format(".{}.tmp-{}-{}-{:x}", tp.filename().string(), ::getpid(),
                             counter.fetch_add(1), static_cast<unsigned long long>(tick) & 0xffffff))
              .string();
    fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd < 0 && errno != EEXIST)
      return make_error("{}: cannot create a temporary file in '{}': {}", path, dir.string(),
                        errno_text(errno));
  }
  if (fd < 0) return make_error("{}: cannot create a temporary file in '{}'", path, dir.string());

  // A replaced file keeps its permissions.
  struct stat old {};
  if (t == Target::regular && ::stat(staged.target_.c_str(), &old) == 0)
    ::fchmod(fd, old.st_mode & 07777);

  int err = write_all(fd, text);
  if (!err && ::fsync(fd) != 0 && errno != EINVAL && errno != EROFS) err = errno;
  if (::close(fd) != 0 && !err) err = errno;
  if (err) {
    ::unlink(tmp.c_str());
    return make_error("{}: write failed: {}", path, errno_text(err));
  }
  staged.tmp_ = std::move(tmp);
  return staged;
}

StagedFile::StagedFile(StagedFile&& other) noexcept
    : path_(std::move(other.path_)),
      target_(std::move(other.target_)),
      tmp_(std::move(other.tmp_)),
      text_(std::move(other.text_)),
      in_place_(other.in_place_),
      overwrite_(other.overwrite_) {
  other.tmp_.clear();
  other.in_place_ = false;
}

StagedFile::~StagedFile() {
  if (!tmp_.empty()) ::unlink(tmp_.c_str());
}

Status StagedFile::commit() {
  if (in_place_) {
    in_place_ = false;
    return write_in_place(path_, text_);
  }
  if (tmp_.empty()) return make_error("{}: nothing staged", path_);
  const std::string tmp = std::move(tmp_);
  tmp_.clear();
  int err = 0;
  if (overwrite_) {
    if (::rename(tmp.c_str(), target_.c_str()) != 0) {
      err = errno;
      ::unlink(tmp.c_str());
      return make_error("{}: cannot replace the file: {}", path_, errno_text(err));
    }
    return Status::success();
  }
  // link() fails if the name appeared meanwhile: an existing file is never replaced.
  if (::link(tmp.c_str(), target_.c_str()) != 0) {
    err = errno;
    // File systems without hard links: check once more and rename.
    if ((err == EPERM || err == EOPNOTSUPP || err == ENOSYS) &&
        ::access(target_.c_str(), F_OK) != 0 && ::rename(tmp.c_str(), target_.c_str()) == 0)
      return Status::success();
    ::unlink(tmp.c_str());
    if (err == EEXIST)
      return make_error("{}: file exists; refusing to overwrite it (pass --force)", path_);
    return make_error("{}: cannot create the file: {}", path_, errno_text(err));
  }
  ::unlink(tmp.c_str());
  return Status::success();
}

Status write_file_atomic(const std::string& path, std::string_view text, bool overwrite) {
  COMPASS_ASSIGN(StagedFile staged, StagedFile::stage(path, text, overwrite));
  return staged.commit();
}

Result<std::string> read_regular_file(const std::string& path, std::uint64_t max_bytes) {
  if (path.empty()) return make_error("empty file name");
  // O_NONBLOCK: opening a FIFO with no writer (or a terminal) returns at once instead of waiting.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) {
    const int e = errno;
    if (e == ENOENT) return make_error("{}: no such file", path);
    return make_error("{}: cannot open for reading: {}", path, errno_text(e));
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) return make_error("{}: {}", path, errno_text(errno));
  if (S_ISDIR(st.st_mode)) return make_error("{}: is a directory", path);
  if (!S_ISREG(st.st_mode)) return make_error("{}: not a regular file", path);
  const auto size = static_cast<std::uint64_t>(st.st_size);
  if (size > max_bytes)
    return make_error("{}: file too large ({} bytes; at most {})", path, size, max_bytes);
  std::string text;
  text.resize(static_cast<std::size_t>(size));
  std::size_t done = 0;
  char extra = 0;
  while (true) {
    // One byte past the size seen: a file that grew while it was read is refused, never cut.
    char* dst = done < text.size() ? text.data() + done : &extra;
    const std::size_t want = done < text.size() ? text.size() - done : 1;
    const ssize_t n = ::read(fd, dst, want);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return make_error("{}: read failed: {}", path, errno_text(errno));
    if (n == 0) break;
    if (done >= text.size())
      return make_error("{}: the file changed while it was read", path);
    done += static_cast<std::size_t>(n);
  }
  text.resize(done);
  return text;
}

}  // namespace compass
