// The real shim, preloaded into a program that prints its environment: when it loads it points
// NCCL_PROFILER_PLUGIN at itself (so that NCCL loads it as its profiler plugin), keeps a plugin
// the job set (one line on stderr says NCCL's choices will not be recorded), and touches nothing
// when LOCKSTEP_NCCL_PROFILER=0 or the level records no collective.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace {

namespace fs = std::filesystem;

struct Printed {
  std::string value;  // NCCL_PROFILER_PLUGIN as the program saw it ("" unset)
  std::string err;
};

#ifdef SHIM_PATH
Printed run_with_shim(const std::string& env) {
  const fs::path dir =
      fs::temp_directory_path() / ("lockstep-nccl-env-" + std::to_string(getpid()));
  fs::create_directories(dir);
  const fs::path err = dir / "stderr.txt";
  const std::string command =
      "env -u NCCL_PROFILER_PLUGIN LOCKSTEP_DIR=" + (dir / "trace").string() + " " + env +
      " LD_PRELOAD=" + SHIM_PATH + " printenv NCCL_PROFILER_PLUGIN 2> " + err.string();
  Printed p;
  if (FILE* pipe = popen(command.c_str(), "r")) {
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) p.value.append(buf, n);
    pclose(pipe);
  }
  while (!p.value.empty() && p.value.back() == '\n') p.value.pop_back();
  std::ifstream in(err);
  std::stringstream text;
  text << in.rdbuf();
  p.err = text.str();
  fs::remove_all(dir);
  return p;
}
#endif

#ifdef SHIM_PATH
TEST(NcclProfilerEnv, AJobWithoutAProfilerPluginGetsTheShimAsIt) {
  const Printed p = run_with_shim("");
  EXPECT_EQ(p.value, SHIM_PATH) << p.err;
  EXPECT_EQ(p.err.find("NCCL_PROFILER_PLUGIN"), std::string::npos) << p.err;
}

TEST(NcclProfilerEnv, TheJobsOwnProfilerPluginIsKeptAndSaidOnce) {
  const Printed p = run_with_shim("NCCL_PROFILER_PLUGIN=/opt/libnccl-profiler-mine.so");
  EXPECT_EQ(p.value, "/opt/libnccl-profiler-mine.so");
  const std::string line = "NCCL_PROFILER_PLUGIN=/opt/libnccl-profiler-mine.so is the job's own";
  const size_t first = p.err.find(line);
  EXPECT_NE(first, std::string::npos) << p.err;
  EXPECT_EQ(p.err.find(line, first + 1), std::string::npos) << p.err;
}

TEST(NcclProfilerEnv, AChildOfATracedProcessKeepsTheShimSilently) {
  const Printed p = run_with_shim(std::string("NCCL_PROFILER_PLUGIN=") + SHIM_PATH);
  EXPECT_EQ(p.value, SHIM_PATH);
  EXPECT_EQ(p.err.find("NCCL_PROFILER_PLUGIN"), std::string::npos) << p.err;
}

TEST(NcclProfilerEnv, NothingIsSetWhenTheSettingIsOffOrNoCollectiveIsRecorded) {
  EXPECT_EQ(run_with_shim("LOCKSTEP_NCCL_PROFILER=0").value, "");
  EXPECT_EQ(run_with_shim("LOCKSTEP_LEVEL=metrics").value, "");
  const Printed off = run_with_shim("LOCKSTEP_NCCL_PROFILER=0 NCCL_PROFILER_PLUGIN=/opt/mine.so");
  EXPECT_EQ(off.value, "/opt/mine.so");
  EXPECT_EQ(off.err.find("NCCL_PROFILER_PLUGIN"), std::string::npos) << off.err;
}
#else
TEST(NcclProfilerEnv, NeedsTheRealShim) { GTEST_SKIP() << "liblockstep.so is not built"; }
#endif

}  // namespace
