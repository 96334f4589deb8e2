// libFuzzer target for the trace reader: any bytes, read every way the tools read a trace.
// Only TraceError may come out; a crash, hang, leak or sanitizer report is a finding.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>

#include "sample_traces.h"
#include "trace/encoding.h"
#include "trace/reader.h"

namespace {

std::string probe_path() {
  const char* dir = ::access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
  return std::string(dir) + "/lockstep-fuzz-" + std::to_string(::getpid()) + ".lstrace";
}

}  // namespace

// The probe file goes when the fuzzer exits.
struct Probe {
  std::string path = probe_path();
  ~Probe() { ::unlink(path.c_str()); }
};

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const Probe probe;
  const std::string& path = probe.path;
  ::unlink(path.c_str());
  if (FILE* file = std::fopen(path.c_str(), "wb")) {
    if (size) std::fwrite(data, 1, size, file);
    std::fclose(file);
  } else {
    return 0;
  }
  try {
    lockstep::trace::testing::read_everything(path);
  } catch (const lockstep::trace::TraceError&) {}
  // The same bytes as a block payload, past the checksums that stop most mutations above.
  static lockstep::trace::RecordDecoder decoder;
  decoder.reset();
  lockstep::trace::Record record;
  const uint8_t* in = data;
  for (int i = 0; i < 100000 && decoder.decode(in, data + size, record, nullptr); ++i) {}
  return 0;
}
