// Writes the run-set fuzzer's seed corpus into DIR: synthetic runs (tools/synth, the real
// writer) of a few shapes, each packed as one input (run_dir_container.h).
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "run_dir_container.h"
#include "tools/synth/synthetic_trace.h"
#include "trace/run_dir.h"

namespace fs = std::filesystem;
namespace synth = lockstep::tools::synth;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  const fs::path out = argv[1];
  std::error_code ec;
  fs::create_directories(out, ec);
  std::vector<synth::Spec> specs(4);
  specs[0].world_size = 1;
  specs[1].world_size = 2;
  specs[1].plants.push_back({synth::Plant::Output, 1, 2, 3});
  specs[2].world_size = 2;  // blocks spanning steps, as the shim writes them
  specs[2].flush_every_step = false;
  specs[2].block_bytes = 4096;
  specs[2].ops_per_step = 24;
  specs[3].world_size = 3;
  specs[3].level = "broad";
  for (size_t i = 0; i < specs.size(); ++i) {
    specs[i].steps = 3;
    fs::path run = fs::temp_directory_path() / ("lockstep-seed-run-" + std::to_string(i));
    fs::remove_all(run, ec);
    if (std::string error = synth::write_run(run, specs[i], "seed"); !error.empty()) {
      std::fprintf(stderr, "%s\n", error.c_str());
      return 1;
    }
    std::vector<std::string> files;
    for (int rank = 0; rank < specs[i].world_size; ++rank) {
      std::ifstream in(run / lockstep::trace::rank_trace_name(rank), std::ios::binary);
      std::stringstream bytes;
      bytes << in.rdbuf();
      files.push_back(bytes.str());
    }
    std::ifstream manifest(run / "manifest.json");
    std::stringstream text;
    text << manifest.rdbuf();
    files.push_back(text.str());
    std::ofstream(out / ("seed-run-" + std::to_string(i)), std::ios::binary)
        << lockstep::fuzz::join_files(files);
    fs::remove_all(run, ec);
  }
  return 0;
}
