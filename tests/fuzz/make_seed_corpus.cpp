// Writes the fuzzer's seed corpus: one valid trace of each sample shape into DIR.
#include <cstdio>
#include <filesystem>
#include <string>

#include "sample_traces.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  for (int variant = 0; variant < lockstep::trace::testing::kSampleVariants; ++variant) {
    const std::string path = dir + "/seed-" + std::to_string(variant) + ".lstrace";
    std::filesystem::remove(path, ec);
    std::string error;
    if (!lockstep::trace::testing::write_sample_trace(path, variant, &error)) {
      std::fprintf(stderr, "%s\n", error.c_str());
      return 1;
    }
  }
  return 0;
}
