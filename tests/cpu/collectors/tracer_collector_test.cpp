// Digest collection and retirement (collectors/tracer_collector.cpp): a retired kernel record
// teaches its pointer roles (LOCKSTEP_LEARN_READONLY).
#include <sys/wait.h>
#include <unistd.h>

#include "tests/cpu/collectors/runtime_harness.h"

namespace lockstep::collectors {
namespace {

// ---- learned read-only pointers (LOCKSTEP_LEARN_READONLY) -------------------------------------
// Launches `f` on stream S with pointer arguments `pointers` (then an int); the fake GPU sees
// other bytes from then on at each pointer in `written` (the kernel's writes).
void launch_writing(CUfunction f, std::initializer_list<CUdeviceptr> pointers,
                    std::initializer_list<CUdeviceptr> written) {
  std::vector<float*> words;
  for (CUdeviceptr p : pointers) words.push_back(reinterpret_cast<float*>(p));
  int n = 1;
  std::vector<void*> params;
  for (float*& word : words) params.push_back(&word);
  params.push_back(&n);
  KernelLaunch l;
  l.api = LaunchApi::DriverLaunch;
  l.handle_kind = FunctionHandle::DriverFunction;
  l.handle = f;
  l.stream = kStreamS;
  l.kernel_params = params.data();
  const uint64_t token = kernel_launch_begin(l);
  for (CUdeviceptr p : written) lockstep::testing::FakeGpu::instance().write(p);
  kernel_launch_end(token, CUDA_SUCCESS);
}

// kernel2(out, in): writes `out` and, when `writes_in`, `in` too; or neither when `writes` is
// false.
void launch_pair(CUdeviceptr out, CUdeviceptr in, bool writes = true, bool writes_in = false) {
  if (!writes)
    launch_writing(kTwoPointerKernel, {out, in}, {});
  else if (writes_in)
    launch_writing(kTwoPointerKernel, {out, in}, {out, in});
  else
    launch_writing(kTwoPointerKernel, {out, in}, {out});
}

// kernel3(a, b, c) writing b and c.
void launch_three(CUdeviceptr a, CUdeviceptr b, CUdeviceptr c) {
  launch_writing(kThreePointerKernel, {a, b, c}, {b, c});
}

// kernel2 learns that it does not write `in`: eight launches over two steps.
void teach_pair(CUdeviceptr out, CUdeviceptr in) {
  for (int i = 0; i < 7; ++i) launch_pair(out, in);
  lockstep_step();
  launch_pair(out, in);
}

// The collector learns from completed records: waits (bounded) until `n` pointers are learned.
bool wait_learned(uint64_t n) {
  stream_order_point();  // the last outputs go out
  for (int i = 0; i < 2000; ++i) {
    if (Tracer::existing()->stats.roles_learned.load() >= n) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return false;
}

class LearnTest : public MergeTest {
 protected:
  std::string run_learning(const std::function<void(std::string*)>& body, bool learn = true) {
    fs::remove_all(dir_);
    auto environment = env("full");
    environment["LOCKSTEP_LEARN_READONLY"] = learn ? "1" : "0";
    environment["LOCKSTEP_DEBUG"] = "1";
    const fs::path log = dir_.string() + ".log";
    ChildResult child = run_child(
        environment,
        [&] {
          on_alloc(kMergeBase, 1 << 20);
          on_alloc(kSecondBase, 1 << 20);
          std::string text;
          body(&text);
          std::ofstream(log) << text;
        },
        &fake_resolver_with_gpu);
    EXPECT_TRUE(WIFEXITED(child.status) && WEXITSTATUS(child.status) == 0) << child.stderr_text;
    std::ifstream in(log);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    fs::remove(log);
    return text + "\n" + child.stderr_text;
  }
  // Per kernel record: "o" when `in` (arg1) got an output entry, "r" when its input is flagged
  // learned read-only (and has no output entry); every present region carries a digest.
  std::string arg1_outputs(uint64_t* warnings = nullptr) {
    auto files = traces();
    EXPECT_EQ(files.size(), 1u);
    if (files.size() != 1) return "";
    auto reader = trace::TraceReader::open(files[0].string());
    std::map<uint64_t, char> by_seq;  // appended as their digests arrive: ordered by seq here
    reader->for_each_record([&](const trace::Record& r) {
      if (r.kind == trace::RecordKind::Warning && warnings != nullptr &&
          r.fields[trace::fields::Warning::code] == uint64_t(WarningCode::ReadOnlyWritten))
        *warnings += r.fields[trace::fields::Warning::count];
      if (r.kind != trace::RecordKind::Kernel) return true;
      bool output = false, read_only = false;
      for (const auto& b : r.buffers) {
        EXPECT_TRUE(b.flags & trace::kFingerprintValid) << "seq " << r.seq;
        if (b.alloc_ordinal != 2) continue;  // arg1 lives in the second allocation
        if (b.role == trace::Role::Out) output = true;
        if (b.role == trace::Role::In && (b.flags & trace::kLearnedReadOnly)) read_only = true;
      }
      EXPECT_NE(output, read_only) << "seq " << r.seq;
      by_seq[r.seq] = output ? 'o' : 'r';
      return true;
    });
    std::string out;
    for (const auto& [seq, c] : by_seq) out += c;
    return out;
  }
};

// Eight launches over two steps that wrote `out` and left `in` alone teach that kernel2 does not
// write `in`: the next launches hash it before the kernel only (its digest reused, not read
// again), until the 16th launch of the kernel, which hashes every region again.
TEST_F(LearnTest, AnUnwrittenPointerIsLearnedReadOnlyAndVerified) {
  auto body = [](std::string* text) {
    teach_pair(kMergeBase + 256, kSecondBase);
    *text = wait_learned(1) ? "learned" : "not learned";
    for (int i = 8; i < 18; ++i) launch_pair(kMergeBase + 256, kSecondBase);
  };
  const std::string text = run_learning(body);
  EXPECT_EQ(text.substr(0, text.find('\n')), "learned") << text;
  EXPECT_EQ(arg1_outputs(),
            "oooooooo"
            "rrrrrrr"
            "o"
            "rr");
  EXPECT_NE(text.find("kernel pointers learned read-only: 1 (found written later: 0); 9 "
                      "outputs not hashed"),
            std::string::npos)
      << text;
  // Each output skipped is one region fewer to hash: its input digest stays reusable.
  auto regions = [](const std::string& t) {
    const size_t at = t.find("hash launches: ");
    const size_t open = t.find('(', at);
    return at == std::string::npos ? -1L : std::stol(t.substr(open + 1));
  };
  const long learned = regions(text);
  const std::string off = run_learning(
      [](std::string*) {
        teach_pair(kMergeBase + 256, kSecondBase);
        for (int i = 8; i < 18; ++i) launch_pair(kMergeBase + 256, kSecondBase);
      },
      /*learn=*/false);
  EXPECT_EQ(arg1_outputs(), std::string(18, 'o'));
  EXPECT_EQ(learned + 9, regions(off)) << text << off;
}

// A learned word found written in a verification launch is unlearned for good and reported.
TEST_F(LearnTest, AVerificationLaunchThatFindsAWriteUnlearns) {
  const std::string text = run_learning([](std::string* text) {
    teach_pair(kMergeBase + 256, kSecondBase);
    *text = wait_learned(1) ? "learned" : "not learned";
    for (int i = 8; i < 15; ++i) launch_pair(kMergeBase + 256, kSecondBase);
    launch_pair(kMergeBase + 256, kSecondBase, true, /*writes_in=*/true);  // the 16th
    stream_order_point();
    for (int i = 0; i < 2000 && Tracer::existing()->stats.roles_contradicted.load() == 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    for (int i = 16; i < 20; ++i) launch_pair(kMergeBase + 256, kSecondBase);
  });
  EXPECT_EQ(text.substr(0, text.find('\n')), "learned") << text;
  uint64_t warnings = 0;
  EXPECT_EQ(arg1_outputs(&warnings),
            "oooooooo"
            "rrrrrrr"
            "o"
            "oooo");
  EXPECT_EQ(warnings, 1u);
  EXPECT_NE(text.find("pointer learned read-only was written: kernel kernel2(float*, float*, "
                      "int), parameter byte 8"),
            std::string::npos)
      << text;
}

// A pointer passed in two words is one region, skipped only when every word passing it is learned
// read-only: kernel3 learns that it does not write through its first word, and then writes the
// same pointer through its second.
TEST_F(LearnTest, APointerPassedTwiceIsSkippedOnlyWhenEveryWordIsReadOnly) {
  const std::string text = run_learning([](std::string* text) {
    for (int i = 0; i < 7; ++i) launch_three(kSecondBase, kMergeBase + 256, kMergeBase + 8192);
    lockstep_step();
    launch_three(kSecondBase, kMergeBase + 256, kMergeBase + 8192);
    *text = wait_learned(1) ? "learned" : "not learned";
    launch_three(kSecondBase, kMergeBase + 256, kMergeBase + 8192);  // a: read-only
    launch_three(kSecondBase, kSecondBase, kMergeBase + 8192);       // a passed as b: written
  });
  EXPECT_EQ(text.substr(0, text.find('\n')), "learned") << text;
  EXPECT_EQ(arg1_outputs(),
            "oooooooo"
            "r"
            "o");
}

// A known whole writer's output has no In entry to compare (kernel_writes.h), yet the launch
// wrote it, through a pointer the shim sees: evidence enough. So a multiply into a fresh tensor
// that leaves its inputs alone teaches that it does not write them, as a kernel whose compared
// output changed does (on the unseen job, the strided multiplies' inputs were otherwise hashed
// after every launch: 2.5 GB a step more).
TEST_F(LearnTest, AWholeWritersOutputIsEvidenceForLearningItsInputs) {
  const std::string text = run_learning([](std::string* text) {
    const CUdeviceptr x = kMergeBase, y = kSecondBase, out = kSecondBase + (2 << 20);
    on_alloc(out, 4096);  // exactly the multiply's 1024 floats
    auto mul = [&] { mul_on(kStreamS, out, x, y, /*writes=*/true); };
    for (int i = 0; i < 7; ++i) mul();
    lockstep_step();
    mul();
    *text = wait_learned(2) ? "learned" : "not learned";
  });
  EXPECT_EQ(text.substr(0, text.find('\n')), "learned") << text;
  EXPECT_NE(text.find("kernel pointers learned read-only: 2 (found written later: 0)"),
            std::string::npos)
      << text;
}

// Nothing is learned from launches that changed no region (a kernel whose writes the shim does
// not see, or that wrote what was there), nor within one step, nor with LOCKSTEP_LEARN_READONLY=0.
TEST_F(LearnTest, NoLearningWithoutEvidenceInOneStepOrWhenOff) {
  run_learning([](std::string*) {
    launch_pair(kMergeBase + 256, kSecondBase);  // `out` is written: never read-only
    for (int i = 0; i < 10; ++i) launch_pair(kMergeBase + 256, kSecondBase, /*writes=*/false);
    lockstep_step();
    for (int i = 0; i < 10; ++i) launch_pair(kMergeBase + 256, kSecondBase, /*writes=*/false);
    stream_order_point();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    for (int i = 0; i < 5; ++i) launch_pair(kMergeBase + 256, kSecondBase, /*writes=*/false);
  });
  EXPECT_EQ(arg1_outputs(), std::string(26, 'o'));
  run_learning([](std::string*) {
    for (int i = 0; i < 10; ++i) launch_pair(kMergeBase + 256, kSecondBase);
    stream_order_point();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    for (int i = 0; i < 10; ++i) launch_pair(kMergeBase + 256, kSecondBase);
  });
  EXPECT_EQ(arg1_outputs(), std::string(20, 'o'));
  const std::string text = run_learning(
      [](std::string* text) {
        teach_pair(kMergeBase + 256, kSecondBase);
        stream_order_point();
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        for (int i = 8; i < 20; ++i) launch_pair(kMergeBase + 256, kSecondBase);
        *text = "done";
      },
      /*learn=*/false);
  EXPECT_EQ(arg1_outputs(), std::string(20, 'o'));
  EXPECT_EQ(text.find("kernel pointers learned read-only"), std::string::npos) << text;
}

}  // namespace
}  // namespace lockstep::collectors
