#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>

#include "test_util.h"
#include "trace/header.h"
#include "trace/run_dir.h"

namespace lockstep::trace {
namespace {

namespace fs = std::filesystem;
using testing::ScopedEnv;

TEST(RunDir, ManifestOnceAndOtherRunsRefused) {
  testing::TempDir tmp;
  const std::string dir = tmp.file("run");
  std::string error;
  ASSERT_TRUE(prepare_run_dir({dir, "run-A", false}, &error)) << error;
  auto manifest = read_manifest(dir);
  ASSERT_TRUE(manifest);
  EXPECT_EQ((*manifest)["run_id"], "run-A");
  EXPECT_EQ((*manifest)["format_version"], kFormatVersion);
  EXPECT_EQ((*manifest)["lockstep_version"], lockstep_version());
  EXPECT_TRUE((*manifest)["command_line"].is_array());
  EXPECT_TRUE((*manifest).contains("start_time"));
  ASSERT_TRUE(prepare_run_dir({dir, "run-A", false}, &error)) << error;  // same run: welcome

  EXPECT_FALSE(prepare_run_dir({dir, "run-B", false}, &error));
  EXPECT_EQ(error, "LOCKSTEP_DIR " + dir +
                       " holds a trace of another run (run id run-A); use a new directory or "
                       "LOCKSTEP_OVERWRITE=1");

  // Overwrite: the other run's traces go, the user's other files stay, the manifest is ours.
  testing::write_bytes(dir + "/rank-00000.lstrace", {1, 2, 3});
  testing::write_bytes(dir + "/notes.txt", {1});
  ASSERT_TRUE(prepare_run_dir({dir, "run-B", true}, &error)) << error;
  EXPECT_EQ((*read_manifest(dir))["run_id"], "run-B");
  EXPECT_FALSE(fs::exists(dir + "/rank-00000.lstrace"));
  EXPECT_TRUE(fs::exists(dir + "/notes.txt"));
}

TEST(RunDir, TracesWithoutManifestAreRefused) {
  testing::TempDir tmp;
  testing::write_bytes(tmp.file("host-x-pid-1.lstrace"), {1});
  std::string error;
  EXPECT_FALSE(prepare_run_dir({tmp.path(), "run-A", false}, &error));
  EXPECT_NE(error.find("without a manifest.json"), std::string::npos) << error;
  EXPECT_NE(error.find("LOCKSTEP_OVERWRITE=1"), std::string::npos) << error;
  testing::TempDir plain;
  testing::write_bytes(plain.file("README"), {1});  // unrelated files are fine
  EXPECT_TRUE(prepare_run_dir({plain.path(), "run-A", false}, &error)) << error;
}

TEST(RunDir, NamesByRankElseHostAndPidAndCollisionsFallBack) {
  testing::TempDir tmp;
  const std::string dir = tmp.file("run");
  std::string error;
  WriterOptions options;
  {
    ScopedEnv rank("RANK", "3");
    auto first = open_run_writer({dir, "r", false}, options, build_trace_header(), &error);
    ASSERT_TRUE(first) << error;
    auto second = open_run_writer({dir, "r", false}, options, build_trace_header(), &error);
    ASSERT_TRUE(second) << error;  // rank-00003 is taken: host/pid name
  }
  {
    ScopedEnv rank("RANK", nullptr);
    ScopedEnv ompi("OMPI_COMM_WORLD_RANK", "12");
    ASSERT_TRUE(open_run_writer({dir, "r", false}, options, build_trace_header(), &error)) << error;
  }
  const std::string host_pid = host_pid_trace_name(host_name(), ::getpid());
  EXPECT_EQ(rank_trace_name(3), "rank-00003.lstrace");
  EXPECT_EQ(host_pid.rfind("host-", 0), 0u);
  auto files = list_trace_files(dir);
  ASSERT_EQ(files.size(), 3u);
  EXPECT_EQ(files[0].path, dir + "/rank-00003.lstrace");
  EXPECT_EQ(files[0].rank, 3);
  EXPECT_EQ(files[1].path, dir + "/rank-00012.lstrace");
  EXPECT_EQ(files[2].path, dir + "/" + host_pid);
  EXPECT_FALSE(files[2].rank);
  for (const auto& file : files) EXPECT_NO_THROW(TraceReader::open(file.path));
}

TEST(RunDir, ManyProcessesOfOneRunStartTogether) {
  testing::TempDir tmp;
  const std::string dir = tmp.file("job");
  constexpr int kRanks = 8;
  std::vector<pid_t> children;
  for (int rank = 0; rank < kRanks; ++rank) {
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      ::setenv("RANK", std::to_string(rank).c_str(), 1);
      ::setenv("LOCKSTEP_RUN_ID", "torchrun-42", 1);
      std::string error;
      auto writer =
          open_run_writer({dir, "", false}, WriterOptions{}, build_trace_header(), &error);
      if (!writer) ::_exit(1);
      writer->close();
      ::_exit(0);
    }
    children.push_back(child);
  }
  for (pid_t child : children) {
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  auto files = list_trace_files(dir);
  ASSERT_EQ(files.size(), size_t{kRanks});
  for (int rank = 0; rank < kRanks; ++rank) {
    EXPECT_EQ(files[rank].rank, rank);
    EXPECT_EQ(TraceReader::open(files[rank].path)->header()["rank"], rank);
  }
  EXPECT_EQ((*read_manifest(dir))["run_id"], "torchrun-42");
}

TEST(RunDir, EveryFileNamesItsRunInItsHeader) {
  testing::TempDir tmp;
  const std::string dir = tmp.file("run");
  std::string error;
  {
    auto writer = open_run_writer({dir, "run-42", false}, {}, build_trace_header(), &error);
    ASSERT_TRUE(writer) << error;
  }
  {
    ScopedEnv id("LOCKSTEP_RUN_ID", "from-env");
    auto writer = open_run_writer({tmp.file("run2"), "", false}, {}, build_trace_header(), &error);
    ASSERT_TRUE(writer) << error;
  }
  const auto files = list_trace_files(dir);
  ASSERT_EQ(files.size(), 1u);
  EXPECT_EQ(TraceReader::open(files[0].path)->header().value("run_id", ""), "run-42");
  EXPECT_EQ(read_manifest(dir)->value("run_id", ""), "run-42");  // the manifest's id
  const auto other = list_trace_files(tmp.file("run2"));
  ASSERT_EQ(other.size(), 1u);
  EXPECT_EQ(TraceReader::open(other[0].path)->header().value("run_id", ""), "from-env");
}

TEST(RunDir, RunIdFromEnvironment) {
  ScopedEnv id("LOCKSTEP_RUN_ID", "abc");
  EXPECT_EQ(run_id_from_env(), "abc");
  ScopedEnv none("LOCKSTEP_RUN_ID", nullptr);
  ScopedEnv torch("TORCHELASTIC_RUN_ID", "t1");
  EXPECT_EQ(run_id_from_env(), "torchelastic:t1");
}

}  // namespace
}  // namespace lockstep::trace
