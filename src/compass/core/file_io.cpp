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

Status write_file_atomic(const std::string& path, std::string_view text, bool overwrite) {
  COMPASS_TRY(check_output_path(path, overwrite));
  COMPASS_ASSIGN(const Target t, classify(path));
  if (t == Target::special) return write_in_place(path, text);

  // A link is followed: the file it names is the one replaced, the link stays.
  std::string target = path;
  std::error_code ec;
  if (fs::is_symlink(path, ec)) {
    const fs::path resolved = fs::weakly_canonical(path, ec);
    if (ec) return make_error("{}: cannot resolve the link: {}", path, ec.message());
    target = resolved.string();
  }
  const fs::path tp(target);
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
  if (t == Target::regular && ::stat(target.c_str(), &old) == 0) ::fchmod(fd, old.st_mode & 07777);

  int err = write_all(fd, text);
  if (!err && ::fsync(fd) != 0 && errno != EINVAL && errno != EROFS) err = errno;
  if (::close(fd) != 0 && !err) err = errno;
  if (err) {
    ::unlink(tmp.c_str());
    return make_error("{}: write failed: {}", path, errno_text(err));
  }
  if (overwrite) {
    if (::rename(tmp.c_str(), target.c_str()) != 0) {
      err = errno;
      ::unlink(tmp.c_str());
      return make_error("{}: cannot replace the file: {}", path, errno_text(err));
    }
  } else {
    // link() fails if the name appeared meanwhile: an existing file is never replaced.
    if (::link(tmp.c_str(), target.c_str()) != 0) {
      err = errno;
      // File systems without hard links: check once more and rename.
      if ((err == EPERM || err == EOPNOTSUPP || err == ENOSYS) &&
          ::access(target.c_str(), F_OK) != 0 && ::rename(tmp.c_str(), target.c_str()) == 0)
        return Status::success();
      ::unlink(tmp.c_str());
      if (err == EEXIST) return make_error("{}: file exists; refusing to overwrite it (pass --force)", path);
      return make_error("{}: cannot create the file: {}", path, errno_text(err));
    }
    ::unlink(tmp.c_str());
  }
  return Status::success();
}

}  // namespace compass
