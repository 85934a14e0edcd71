// Output files staged then committed, and input files read without blocking.

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "compass/core/file_io.hpp"

namespace compass {
namespace {

namespace fs = std::filesystem;

class FileIo : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string templ = (fs::temp_directory_path() / "compass_file_io_XXXXXX").string();
    ASSERT_NE(::mkdtemp(templ.data()), nullptr);
    dir_ = templ;
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (fs::path(dir_) / name).string(); }
  int entries() const {
    int n = 0;
    for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir_)) ++n;
    return n;
  }
  static std::string slurp(const std::string& p) {
    std::ifstream in(p, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
  }
  std::string dir_;
};

TEST_F(FileIo, StagedFileAppearsOnlyOnCommit) {
  Result<StagedFile> staged = StagedFile::stage(path("a.txt"), "new\n", false);
  ASSERT_TRUE(staged.ok()) << staged.error().message;
  EXPECT_FALSE(fs::exists(path("a.txt")));
  ASSERT_TRUE(staged->commit().ok());
  EXPECT_EQ(slurp(path("a.txt")), "new\n");
  EXPECT_EQ(entries(), 1) << "a temporary file was left";
}

TEST_F(FileIo, UncommittedStagedFileLeavesNothingAndKeepsTheOld) {
  { std::ofstream(path("a.txt")) << "old\n"; }
  {
    Result<StagedFile> staged = StagedFile::stage(path("a.txt"), "new\n", true);
    ASSERT_TRUE(staged.ok()) << staged.error().message;
  }
  EXPECT_EQ(slurp(path("a.txt")), "old\n");
  EXPECT_EQ(entries(), 1) << "the temporary file was not removed";
}

TEST_F(FileIo, CommitNeverOverwritesWithoutPermission) {
  Result<StagedFile> staged = StagedFile::stage(path("a.txt"), "new\n", false);
  ASSERT_TRUE(staged.ok());
  { std::ofstream(path("a.txt")) << "appeared meanwhile\n"; }
  EXPECT_FALSE(staged->commit().ok());
  EXPECT_EQ(slurp(path("a.txt")), "appeared meanwhile\n");
  EXPECT_EQ(entries(), 1);
}

TEST_F(FileIo, FullDeviceFailsAtCommit) {
  Result<StagedFile> staged = StagedFile::stage("/dev/full", "x", true);
  ASSERT_TRUE(staged.ok()) << staged.error().message;
  EXPECT_TRUE(staged->in_place());
  const Status s = staged->commit();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("/dev/full"), std::string::npos) << s.error().message;
}

TEST_F(FileIo, ReadRegularFile) {
  { std::ofstream(path("a.txt")) << "hello\n"; }
  Result<std::string> text = read_regular_file(path("a.txt"), 100);
  ASSERT_TRUE(text.ok()) << text.error().message;
  EXPECT_EQ(*text, "hello\n");
  const Result<std::string> big = read_regular_file(path("a.txt"), 5);
  ASSERT_FALSE(big.ok());
  EXPECT_NE(big.error().message.find("file too large (6 bytes; at most 5)"), std::string::npos)
      << big.error().message;
}

TEST_F(FileIo, ReadRefusesWhatIsNotARegularFileWithoutBlocking) {
  ASSERT_EQ(::mkfifo(path("fifo").c_str(), 0600), 0);
  const std::pair<std::string, std::string> cases[] = {
      {path("fifo"), "not a regular file"},  // a plain open() would wait for a writer for good
      {"/dev/zero", "not a regular file"},
      {dir_, "is a directory"},
      {path("missing"), "no such file"},
      {"", "empty file name"},
  };
  for (const auto& [p, error] : cases) {
    SCOPED_TRACE(p);
    const Result<std::string> r = read_regular_file(p, 1 << 20);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find(error), std::string::npos) << r.error().message;
  }
}

}  // namespace
}  // namespace compass
