// The shim exports exactly the hooked symbols plus its C API, and needs nothing but the C
// library at run time. Read with nm -D / readelf -d, as a user would check it.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace {

const std::set<std::string> kHooked = {
#define LOCKSTEP_HOOK(library, name, signature) #name,
#include "interpose/hooked_symbols.def"
#undef LOCKSTEP_HOOK
    "dlsym",
    "dlvsym",
    "dlmopen",
};

// The NCCL profiler plugin's entry table (interpose/nccl_profiler.cpp): data, not a hook, looked
// up by NCCL with dlsym in the library NCCL_PROFILER_PLUGIN names.
const std::string kNcclProfiler = "ncclProfiler_v5";

std::string run(const std::string& command) {
  std::string out;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) out.append(buf, n);
  pclose(pipe);
  return out;
}

// A command's output, line by line.
std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

// name -> nm type letter, for defined dynamic symbols.
std::set<std::pair<std::string, char>> exports(const std::string& library) {
  std::set<std::pair<std::string, char>> out;
  const std::string text = run("nm -D --defined-only --format=posix '" + library + "'");
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(start, end - start);
    const size_t space = line.find(' ');
    if (space != std::string::npos && space + 1 < line.size()) {
      out.emplace(line.substr(0, space), line[space + 1]);
    }
    start = end + 1;
  }
  return out;
}

void check_exports(const std::string& library, bool (*is_c_api)(const std::string&)) {
  const auto symbols = exports(library);
  ASSERT_FALSE(symbols.empty()) << "nm found nothing in " << library;
  std::set<std::string> names;
  for (const auto& [name, type] : symbols) {
    names.insert(name);
    if (kHooked.count(name) != 0) {
      EXPECT_EQ(type, 'T') << name << " should be a plain (non-weak) function";
    } else {
      EXPECT_TRUE(is_c_api(name)) << library << " exports " << name
                                  << ", neither a hook nor the documented C API";
    }
  }
  for (const std::string& hook : kHooked) {
    EXPECT_EQ(names.count(hook), 1u) << library << " does not export hook " << hook;
  }
  EXPECT_EQ(names.count(kNcclProfiler), 1u) << library << " does not export " << kNcclProfiler;
}

void check_needed(const std::string& library) {
  const std::string dynamic = run("readelf -d '" + library + "'");
  ASSERT_FALSE(dynamic.empty());
  size_t pos = 0;
  int needed = 0;
  while ((pos = dynamic.find("Shared library: [", pos)) != std::string::npos) {
    pos += 17;
    const std::string name = dynamic.substr(pos, dynamic.find(']', pos) - pos);
    ++needed;
    const bool allowed = name.rfind("libc.so", 0) == 0 || name.rfind("libdl.so", 0) == 0 ||
                         name.rfind("libpthread.so", 0) == 0 || name.rfind("libm.so", 0) == 0 ||
                         name.rfind("ld-linux", 0) == 0 || name.rfind("librt.so", 0) == 0;
    EXPECT_TRUE(allowed) << library << " needs " << name;
  }
  EXPECT_GT(needed, 0);
  EXPECT_EQ(dynamic.find("VERDEF"), std::string::npos) << "the shim must not version its symbols";
}

TEST(ShimExports, TestShimExportsHooksAndTestApiOnly) {
  check_exports(TESTSHIM_PATH, [](const std::string& name) {
    return name == "lockstep_fake_log" || name == "lockstep_fake_clear" ||
           name == "lockstep_fake_resolve" || name == "lockstep_fake_arm_replay" ||
           name == kNcclProfiler;
  });
  check_needed(TESTSHIM_PATH);
}

TEST(ShimExports, RealShimExportsHooksAndCApiOnly) {
#ifdef SHIM_PATH
  // The collectors' documented C API: lockstep_* functions and the NVTX injection entry.
  check_exports(SHIM_PATH, [](const std::string& name) {
    return name.rfind("lockstep_", 0) == 0 || name.rfind("InitializeInjectionNvtx", 0) == 0 ||
           name == kNcclProfiler;
  });
  check_needed(SHIM_PATH);
#else
  GTEST_SKIP() << "liblockstep.so is not built (no lockstep_collectors target)";
#endif
}

// A kernel launch at broad runs these functions; between two launches the job evicts them, so
// they are laid out in one run (LOCKSTEP_LAUNCH_PATH, common/hot.h: one section sorted across
// object files) and come back in few lines and pages (the gates, open_api, Tracer::get and
// Tracer::stage are inline: events.h, hot_thread.h, runtime.h). Once open_api, the step tables,
// launches_traced, inside_shim_call and the interposer's traced_call sat 0x20000-0x9c000 bytes
// from the rest; as hot functions grouped per object file, 48 KiB apart (four pages or more per
// launch). Read with nm, as a user would; an internal template the compiler inlined is simply not
// there to check.
TEST(ShimExports, RealShimLaysOutALaunchsPathTogether) {
#ifdef SHIM_PATH
  const std::string text = run(std::string("nm -C --defined-only '") + SHIM_PATH + "'");
  struct Wanted {
    std::string prefix;
    bool required;
  };
  const std::vector<Wanted> path = {
      {"__cudaLaunchKernel", true},
      {"cuLaunchKernel", true},
      {"lockstep::collectors::kernel_launch_begin(", true},
      {"lockstep::collectors::kernel_launch_end(", true},
      {"lockstep::collectors::open_scope(", true},
      {"auto lockstep::interpose::traced_call<(anonymous namespace)::traced_launch<", false},
  };
  std::map<std::string, std::vector<uint64_t>> found;  // prefix -> addresses
  for (const std::string& line : lines_of(text)) {
    if (line.size() < 20 || (line[17] != 't' && line[17] != 'T') || line[16] != ' ') continue;
    const std::string name = line.substr(19);
    if (name.find("[clone .cold]") != std::string::npos) continue;  // the unlikely branches
    // A lambda of one of them (the general path's, at full): its own function, not this path.
    if (name.ends_with("::operator()() const")) continue;
    for (const Wanted& wanted : path) {
      const bool exact = wanted.prefix.back() != '(' && wanted.prefix.back() != '<';
      if (exact ? name == wanted.prefix : name.rfind(wanted.prefix, 0) == 0)
        found[wanted.prefix].push_back(std::stoull(line.substr(0, 16), nullptr, 16));
    }
  }
  if (found.empty()) GTEST_SKIP() << "the shim has no symbol table (stripped)";
  uint64_t low = UINT64_MAX, high = 0;
  std::string lowest, highest;
  for (const Wanted& wanted : path) {
    const auto it = found.find(wanted.prefix);
    if (it == found.end()) {
      EXPECT_FALSE(wanted.required) << wanted.prefix << " not in the shim's symbols";
      continue;
    }
    for (uint64_t address : it->second) {
      if (address < low) low = address, lowest = wanted.prefix;
      if (address > high) high = address, highest = wanted.prefix;
    }
  }
  // 16 KiB: the path with room to grow (about 7.5 KiB today: the collectors' and the writer's
  // 3.3 KiB, then __cudaLaunchKernel's 4 KiB, whose rarely taken paths are inlined at its end,
  // then cuLaunchKernel; their _ptsz twins come after, common/hot.h. The general launch path,
  // at full, is out of line: kernels.cpp, general_launch_begin).
  EXPECT_LT(high - low, uint64_t{16} << 10)
      << lowest << " at 0x" << std::hex << low << ", " << highest << " at 0x" << high;
#else
  GTEST_SKIP() << "liblockstep.so is not built (no lockstep_collectors target)";
#endif
}

// A broad launch's commit asks for the next staging slot's line (trace/staging.h,
// prefetch_for_write): the drain's core had it last, and the job's work between two launches
// hides the fetch. GCC dropped the prefetch once, silently, as the call of a function without
// effect: nothing but the built code shows it. The commit is inline in the launch's begin
// (trace/writer.h, commit_staged), whose general path is out of line. Read with objdump, as a
// user would.
TEST(ShimExports, RealShimPrefetchesTheNextStagingSlotAtALaunchsCommit) {
#ifdef SHIM_PATH
  const std::string text =
      run(std::string("objdump -d --no-show-raw-insn '--disassemble=_ZN8lockstep10collectors19"
                      "kernel_launch_beginERKNS0_12KernelLaunchE' '") +
          SHIM_PATH + "'");
  if (text.find("kernel_launch_begin") == std::string::npos)
    GTEST_SKIP() << "the shim has no symbol table (stripped), or objdump cannot disassemble one";
  EXPECT_NE(text.find("prefetch"), std::string::npos) << text;
#else
  GTEST_SKIP() << "liblockstep.so is not built (no lockstep_collectors target)";
#endif
}

// What every traced call reads of its thread's state lies in one 128-byte-aligned pair of lines
// (collectors/hot_thread.h): once it was seven lines of the shim's TLS block, each a miss of its
// own after the job's work evicted them. Read with readelf, as a user would: the pair is one
// symbol at an aligned offset of a block aligned as much, and the thread-locals it replaced are
// gone (one of them back as a thread_local of its own would be a line again).
TEST(ShimExports, RealShimKeepsWhatEveryCallReadsOfItsThreadInOneAlignedPairOfLines) {
#ifdef SHIM_PATH
  const std::string symbols = run(std::string("readelf -sW '") + SHIM_PATH + "' | c++filt");
  const std::string segments = run(std::string("readelf -lW '") + SHIM_PATH + "'");
  if (symbols.find(" TLS ") == std::string::npos) GTEST_SKIP() << "no TLS symbols listed";
  bool found = false;
  for (const std::string& line : lines_of(symbols)) {
    if (line.find(" TLS ") == std::string::npos) continue;
    for (const char* gone :
         {"::g_scope_depth", "::shim_depth", "thread_ordinal()::ordinal", "::t_last_stream",
          "::t_scopes", "::t_replay_armed", "open_api()::state"})
      EXPECT_FALSE(line.ends_with(gone)) << "a thread_local of its own again: " << line;
    if (!line.ends_with("lockstep::collectors::t_hot")) continue;
    found = true;
    // "   Num:    Value          Size Type    Bind   Vis      Ndx Name"
    unsigned long long value = 0, size = 0;
    ASSERT_EQ(std::sscanf(line.c_str(), "%*s %llx %llu", &value, &size), 2) << line;
    EXPECT_EQ(size, 128u) << line;
    EXPECT_EQ(value % 128, 0u) << line;
  }
  EXPECT_TRUE(found) << "no TLS symbol lockstep::collectors::t_hot in the shim";
  const size_t tls = segments.find("\n  TLS ");
  ASSERT_NE(tls, std::string::npos) << segments;
  const std::string row = segments.substr(tls + 1, segments.find('\n', tls + 1) - tls - 1);
  const unsigned long long align = std::stoull(row.substr(row.rfind(' ') + 1), nullptr, 16);
  EXPECT_GE(align, 128u) << row;
#else
  GTEST_SKIP() << "liblockstep.so is not built (no lockstep_collectors target)";
#endif
}

}  // namespace
