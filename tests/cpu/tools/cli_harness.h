// The built `lockstep` binary driven from a test: a temporary directory per test, synthetic runs
// written into it (tools/synth), and the binary run with a shell command line.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tools/synth/synthetic_trace.h"
#include "trace/format.h"
#include "trace/reader.h"

namespace fs = std::filesystem;
namespace synth = lockstep::tools::synth;
using nlohmann::json;

namespace {  // each test binary has its own copy

struct Result {
  int code = -1;
  std::string out, err;
  json parsed() const { return json::parse(out); }
};

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class Cli : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/lockstep-cli-test-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    tmp_ = pattern;
  }
  void TearDown() override {
    if (!HasFailure()) fs::remove_all(tmp_);
  }

  fs::path path(const std::string& name) const { return tmp_ / name; }

  std::string write(const std::string& name, const synth::Spec& spec) {
    std::string dir = path(name);
    std::string error = synth::write_run(dir, spec, name);
    EXPECT_EQ(error, "");
    return dir;
  }

  // Runs the binary with a shell command line (arguments already quoted where needed).
  Result lockstep(const std::string& args, const std::string& env = "") {
    Result r;
    fs::path out = tmp_ / "stdout.txt", err = tmp_ / "stderr.txt";
    std::string command =
        env + " " + LOCKSTEP_CLI + " " + args + " > " + out.string() + " 2> " + err.string();
    int status = std::system(command.c_str());
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.out = slurp(out);
    r.err = slurp(err);
    return r;
  }

  std::string pair(const std::string& a, const std::string& b) { return a + " " + b; }

  fs::path tmp_;
};

synth::Spec small(int world = 2) {
  synth::Spec spec;
  spec.world_size = world;
  spec.steps = 6;
  spec.ops_per_step = 8;
  return spec;
}

int line_count(const std::string& text) {
  return static_cast<int>(std::count(text.begin(), text.end(), '\n'));
}

// A length that cuts the file inside its last records block (that of the last step).
uint64_t inside_last_records_block(const fs::path& file) {
  uint64_t offset = 0;
  for (const auto& block : lockstep::trace::TraceReader::open(file)->blocks())
    if (block.type == lockstep::trace::BlockType::Records) offset = block.offset;
  return offset + sizeof(lockstep::trace::BlockHeader) + 5;
}

}  // namespace
