// Reused input digests, chained calls, recalled fills, enclosing regions and known kernels'
// writes (collectors/tracer_hashing.cpp, tracer_digest_reuse.cpp, kernels.cpp).
#include <sys/wait.h>
#include <unistd.h>

#include "tests/cpu/collectors/cat_metadata.h"
#include "tests/cpu/collectors/offset_calculator.h"
#include "tests/cpu/collectors/runtime_harness.h"

namespace lockstep::collectors {
namespace {

// ---- reused input digests (LOCKSTEP_REUSE_DIGESTS, LOCKSTEP_SKIP_UNWRITTEN) -----------------------
// A kernel's input that an earlier launch hashed, with no write seen since, takes that digest:
// here the third kernel's input p1 is the first kernel's output, hashed in the second launch.
// The third kernel then needs no hash launch (its input known, the deferred out p2 not among
// what it writes): its outputs join the deferred set (chained).
TEST_F(MergeTest, AReusedDigestSavesTheInputsHash) {
  auto body = [](std::string* text) {
    on_alloc(kSecondBase, 1 << 20);
    launch_on(kStreamS, kMergeBase + 256);  // S1: in p1
    launch_on(kStreamS, kSecondBase);       // S2: out p1, in p2
    launch_on(kStreamS, kMergeBase + 256);  // nothing (in p1: the digest of out p1)
    stream_order_point();                   // S2: out p2, out p1
    *text = hash_launches();
  };
  std::string err;
  EXPECT_EQ(run(body, true, /*reuse=*/true, &err, /*skip_unwritten=*/false), "S1 S2 S2");
  expect_kernel_fingerprints(3);
  EXPECT_NE(err.find("0 inputs not written since their allocation"), std::string::npos) << err;
  // S2 launched because its input p2 had no digest yet (the debug line says why).
  EXPECT_NE(err.find("launched instead of chaining: input not known 1\n"), std::string::npos)
      << err;
}

// With LOCKSTEP_SKIP_UNWRITTEN=1 an input in an allocation nothing wrote since it was made is
// not hashed at all (flagged); the remaining tests run so.
TEST_F(MergeTest, AnInputNothingWroteSinceIsNotHashedAgain) {
  auto body = [](std::string* text) {
    on_alloc(kSecondBase, 1 << 20);
    launch_on(kStreamS, kMergeBase + 256);  // in p1: fresh, nothing launched
    launch_on(kStreamS, kSecondBase);       // in p2: fresh, nothing launched (chained)
    launch_on(kStreamS, kMergeBase + 256);  // S2: out p1, out p2 (it writes p1; its in p1 is
                                            // out p1's bytes: hashed once for both)
    stream_order_point();                   // S1: out p1
    *text = hash_launches();
  };
  std::string err;
  EXPECT_EQ(run(body, true, /*reuse=*/true, &err), "S2 S1");
  expect_kernel_fingerprints(3, /*unwritten=*/2);
  EXPECT_NE(err.find("1 regions hashed once for two records; 1 calls chained"), std::string::npos)
      << err;
  EXPECT_NE(err.find("2 inputs not written since their allocation, not hashed"), std::string::npos)
      << err;
  fs::remove_all(dir_);
  EXPECT_EQ(run(body, true, /*reuse=*/false), "S1 S2 S2 S1");
  expect_kernel_fingerprints(3);
}

// Chained sets: a call that needs no hash launch of its own (its inputs are known, unwritten or
// deferred outputs, and it writes none of the deferred regions) launches nothing; the regions
// it reads from the set join it and its outputs follow, so one launch serves several calls.
// Here async memsets write b and c, and async copies read them back to the host: one launch at
// the order point hashes out b and out c, each copy's source being the same bytes (hashed once
// for both records). A call that writes a deferred region sends the set first. With
// LOCKSTEP_MERGE_HASHES=adjacent every call with a deferred set before it launches.
MemoryOp async_set(CUdeviceptr dst) {
  MemoryOp set;
  set.api = "cudaMemsetAsync";
  set.is_set = true;
  set.is_async = true;
  set.set_value = 7;
  set.dst = reinterpret_cast<void*>(dst);
  set.bytes = 4096;
  set.stream = kStreamS;
  return set;
}
MemoryOp async_read_back(CUdeviceptr src) {
  static std::vector<char> host(4096);
  MemoryOp copy;
  copy.api = "cudaMemcpyAsync";
  copy.is_async = true;
  copy.direction = 2;  // device to host
  copy.dst = host.data();
  copy.src = reinterpret_cast<const void*>(src);
  copy.bytes = 4096;
  copy.stream = kStreamS;
  return copy;
}

TEST_F(MergeTest, CallsThatNeedNoHashLaunchChain) {
  const CUdeviceptr b = kSecondBase, c = b + 65536;
  auto body = [&](std::string* text) {
    for (CUdeviceptr p : {b, c}) on_alloc(p, 4096);
    memory_op_end(memory_op_begin(async_set(b)), 0);        // nothing: out b deferred
    memory_op_end(memory_op_begin(async_read_back(b)), 0);  // in b: out b's bytes, nothing
    memory_op_end(memory_op_begin(async_read_back(b)), 0);  // a third record of those bytes
    memory_op_end(memory_op_begin(async_set(c)), 0);        // writes c only: nothing
    memory_op_end(memory_op_begin(async_read_back(c)), 0);  // in c: nothing
    stream_order_point();                                   // S2: out b, out c
    *text = hash_launches() + " |";
    memory_op_end(memory_op_begin(async_set(b)), 0);        // nothing
    memory_op_end(memory_op_begin(async_read_back(b)), 0);  // nothing
    memory_op_end(memory_op_begin(async_set(b)), 0);        // writes b: S1 (out b) first
    stream_order_point();                                   // S1: out b
    *text += " " + hash_launches();
  };
  std::string err;
  EXPECT_EQ(run(body, true, /*reuse=*/true, &err), "S2 | S2 S1 S1");
  EXPECT_NE(err.find("; 5 calls chained"), std::string::npos) << err;
  // The one call that launched instead of chaining: the last memset, writing b (in the set).
  EXPECT_NE(err.find("launched instead of chaining: writes the set 1\n"), std::string::npos)
      << err;
  // Out b filled three records (the third waits on the slot), out c two, b again two.
  EXPECT_NE(err.find("; 4 regions hashed once for two records"), std::string::npos) << err;
  // Every region's digest is the fake GPU's digest of it (no writes were simulated): the
  // copies that read from the set got theirs too.
  auto files = traces();
  ASSERT_EQ(files.size(), 1u);
  size_t records = 0, regions = 0;
  trace::TraceReader::open(files[0].string())->for_each_record([&](const trace::Record& r) {
    if (r.kind != trace::RecordKind::Memcpy && r.kind != trace::RecordKind::Memset) return true;
    ++records;
    for (const auto& buffer : r.buffers) {
      ++regions;
      EXPECT_TRUE(buffer.flags & trace::kFingerprintValid) << "seq " << r.seq;
      const CUdeviceptr base = buffer.alloc_ordinal == 2 ? b : c;
      EXPECT_EQ(buffer.fingerprint, (base + buffer.alloc_offset) ^ 4096u) << "seq " << r.seq;
    }
    return true;
  });
  EXPECT_EQ(records, 8u);
  EXPECT_EQ(regions, 8u);
  fs::remove_all(dir_);
  merge_mode_ = "adjacent";
  // (The log is cumulative; the second read-back of b waits for the digest in flight.)
  EXPECT_EQ(run(body, true, /*reuse=*/true), "S1 S1 | S1 S1 S1 S1");
}

// A chain holds at most Tracer::kChainRegions regions: the call that would pass it sends the set
// out first, alone.
TEST_F(MergeTest, AChainHoldsAtMostKChainRegionsRegions) {
  constexpr size_t kCap = Tracer::kChainRegions;
  auto body = [&](std::string* text) {
    // Each memset writes an allocation of its own: nothing to read, nothing of the set written.
    for (size_t i = 0; i <= kCap; ++i) on_alloc(kSecondBase + i * 65536, 4096);
    for (size_t i = 0; i <= kCap; ++i)
      memory_op_end(memory_op_begin(async_set(kSecondBase + i * 65536)), 0);
    stream_order_point();
    *text = hash_launches();
  };
  std::string err;
  EXPECT_EQ(run(body, true, /*reuse=*/true, &err), "S" + std::to_string(kCap) + " S1");
  EXPECT_NE(err.find("deferred sets enqueued on their own (chain full 1, order point 1)"),
            std::string::npos)
      << err;
}

// A known whole-region writer (PyTorch's fill, kernel_writes.h) that overwrites its region
// entirely takes no input entry: it needs no hash launch of its own and chains; its output is
// hashed with the next launch. A fill of part of its region hashes the input as any kernel.
TEST_F(MergeTest, AFillOfAWholeRegionTakesNoInputHash) {
  const CUdeviceptr b = kSecondBase, c = b + 65536;
  auto body = [&](std::string* text) {
    for (CUdeviceptr p : {b, c}) on_alloc(p, 4096);
    fill_on(kStreamS, b, 1024);  // all 4096 bytes: no input, nothing launched (out b deferred)
    fill_on(kStreamS, c, 1000);  // 4000 of 4096: S2 = in c + out b
    launch_on(kStreamS, b);      // in b: out b's digest in flight; writes b, not c: nothing
    stream_order_point();        // S2 = out c + out b
    *text = hash_launches();
  };
  std::string err;
  EXPECT_EQ(run(body, true, /*reuse=*/true, &err, /*skip_unwritten=*/false), "S2 S2");
  // The kernel chains onto out c; the first fill had no set to chain onto (it starts one).
  EXPECT_NE(err.find("; 1 calls chained"), std::string::npos) << err;
  EXPECT_NE(err.find("overwritten whole by known writers (fills, contiguous elementwise outputs, "
                     "reductions' outputs), input not hashed: 1 (4096 bytes)"),
            std::string::npos)
      << err;
  const Entries entries = kernel_entries([](const trace::BufferFingerprint& b) {
    EXPECT_TRUE(b.flags & trace::kFingerprintValid);
    return (b.role == trace::Role::In ? "in " : "out ") + std::to_string(b.bytes);
  });
  EXPECT_EQ(entries, (Entries{{"out 4096"}, {"in 4096", "out 4096"}, {"in 4096", "out 4096"}}));
}

// A fill of the same value and size as an earlier one, whose digest arrived, takes that digest
// for its output without a hash (recalled); a later reader of its region takes it too. (The
// fake GPU's digest of a region is its address ^ its length: the recalled digest is the first
// fill's, which is how the test tells it from a hash.)
bool wait_for_fill_digest(float value, uint64_t bytes) {
  FillKind kind;
  std::memcpy(kind.value.data(), &value, sizeof(value));
  kind.element_bytes = 4;
  kind.bytes = bytes;
  for (int i = 0; i < 5000; ++i) {
    Tracer* tracer = Tracer::existing();
    if (tracer != nullptr && tracer->fill_digests().known(kind)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return false;
}

TEST_F(MergeTest, ARepeatedFillTakesTheEarlierFillsDigest) {
  const CUdeviceptr b = kSecondBase, c = b + 65536, d = c + 65536;
  auto body = [&](std::string* text) {
    for (CUdeviceptr p : {b, c, d}) on_alloc(p, 4096);
    fill_on(kStreamS, b, 1024);  // the first of its kind: out b deferred
    stream_order_point();        // S1: out b
    if (!wait_for_fill_digest(0.f, 4096)) *text = "no digest ";
    fill_on(kStreamS, c, 1024);       // recalled: nothing hashed, the set stays empty
    fill_on(kStreamS, d, 1024, 1.f);  // another value: out d deferred
    launch_on(kStreamS, c);           // in c: the recalled digest, nothing to hash; chains
    stream_order_point();             // S2: out d + out c
    *text += hash_launches();
  };
  std::string err;
  EXPECT_EQ(run(body, true, /*reuse=*/true, &err, /*skip_unwritten=*/false), "S1 S2");
  EXPECT_NE(err.find("fill outputs recalled, not hashed: 1 (4096 bytes); fills that differed "
                     "from an earlier same fill: 0"),
            std::string::npos)
      << err;
  // "in|out <digest> [recalled]" per entry.
  const Entries entries = kernel_entries([](const trace::BufferFingerprint& buffer) {
    EXPECT_TRUE(buffer.flags & trace::kFingerprintValid);
    std::ostringstream entry;
    entry << (buffer.role == trace::Role::In ? "in " : "out ") << std::hex << buffer.fingerprint
          << (buffer.flags & trace::kFingerprintRecalled ? " recalled" : "");
    return entry.str();
  });
  const auto digest = [](CUdeviceptr p) {
    std::ostringstream hex;
    hex << std::hex << (p ^ 4096u);
    return hex.str();
  };
  EXPECT_EQ(entries, (Entries{{"out " + digest(b)},
                              {"out " + digest(b) + " recalled"},
                              {"out " + digest(d)},
                              {"in " + digest(b), "out " + digest(c)}}));
}

// A call with nothing to hash other than a kernel flushes the deferred set, as before recalled
// fills: here a synchronous host-to-host copy (its writes known: host memory).
TEST_F(MergeTest, ACopyWithNothingToHashStillFlushes) {
  auto body = [&](std::string* text) {
    on_alloc(kSecondBase, 4096);
    launch_on(kStreamS, kSecondBase);  // S1: in p2; out p2 deferred
    static char from[64], to[64];
    MemoryOp copy;
    copy.api = "cudaMemcpy";
    copy.direction = 0;  // host to host
    copy.src = from;
    copy.dst = to;
    copy.bytes = sizeof(to);
    memory_op_end(memory_op_begin(copy), 0);  // S1: out p2, flushed
    *text = hash_launches();
  };
  EXPECT_EQ(run(body, true, /*reuse=*/true, nullptr, /*skip_unwritten=*/false), "S1 S1");
}

// Every 16th fill of a kind is hashed all the same. Here the fills alternate between two
// regions of the same size, so the fake GPU's digest of the 16th differs from the first's: it is
// reported (a trace warning) and the kind is hashed from then on.
TEST_F(MergeTest, AVerifyingFillThatDiffersIsReportedAndEndsRecalling) {
  const CUdeviceptr b = kSecondBase, c = b + 65536;
  auto body = [&](std::string* text) {
    for (CUdeviceptr p : {b, c}) on_alloc(p, 4096);
    fill_on(kStreamS, b, 1024);
    stream_order_point();
    if (!wait_for_fill_digest(0.f, 4096)) *text = "no digest ";
    for (int fill = 2; fill <= 16; ++fill) fill_on(kStreamS, fill % 2 ? b : c, 1024);
    stream_order_point();  // fill 16's output (on c)
    for (int i = 0; i < 5000 && Tracer::existing()->stats.fills_differed.load() == 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    for (int fill = 17; fill <= 20; ++fill) fill_on(kStreamS, fill % 2 ? b : c, 1024);
    stream_order_point();
    *text += hash_launches();
  };
  std::string err;
  // Fills 2-15 recalled; 16 verifies and differs; 17-20 hashed.
  run(body, true, /*reuse=*/true, &err, /*skip_unwritten=*/false);
  EXPECT_NE(err.find("fill outputs recalled, not hashed: 14 (57344 bytes); fills that differed "
                     "from an earlier same fill: 1"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("a fill wrote other bytes than an earlier fill of the same value and size"),
            std::string::npos)
      << err;
  auto files = traces();
  ASSERT_EQ(files.size(), 1u);
  size_t recalled = 0, warned = 0;
  trace::TraceReader::open(files[0].string())->for_each_record([&](const trace::Record& r) {
    if (r.kind == trace::RecordKind::Warning && r.fields[0] == 7) warned = r.fields[1];
    for (const auto& buffer : r.buffers)
      recalled += (buffer.flags & trace::kFingerprintRecalled) != 0;
    return true;
  });
  EXPECT_EQ(recalled, 14u);
  EXPECT_EQ(warned, 1u);
}

// A kernel region inside a larger region of the same launch's own pointers, hashed at the same
// point of the stream (k and v views of one qkv tensor inside q's region, each running to the
// allocation's end), takes that region's digest: its entry describes the enclosing region and
// says so. In the same hash launch, or from a digest known from an earlier one (reused
// digests). A kernel whose own pointers hold no such region hashes its region itself.
void launch_qkv(CUdeviceptr qkv) {  // kernel3(q, k, v, n)
  float* words[] = {reinterpret_cast<float*>(qkv), reinterpret_cast<float*>(qkv + 256),
                    reinterpret_cast<float*>(qkv + 512)};
  int n = 1;
  void* params[] = {&words[0], &words[1], &words[2], &n};
  launch_function(kThreePointerKernel, kStreamS, params, 1);
}

TEST_F(MergeTest, ARegionInsideAnotherTakesItsDigest) {
  const CUdeviceptr qkv = kSecondBase;
  auto body = [&](std::string* text) {
    on_alloc(qkv, 4096);
    launch_on(kStreamS, qkv);        // S1: in qkv
    launch_qkv(qkv);                 // S1: out qkv = in qkv (one region); in +256, +512 inside it
    stream_order_point();            // S1: out qkv; out +256, +512 inside it
    launch_qkv(qkv);                 // in qkv known; in +256, +512 inside it: nothing launched
    launch_on(kStreamS, qkv + 256);  // S2: the qkv kernel's outs (two inside) + in +256 itself
    stream_order_point();            // S1: out +256
    *text = hash_launches();
  };
  std::string err;
  EXPECT_EQ(run(body, true, /*reuse=*/true, &err, /*skip_unwritten=*/false), "S1 S1 S1 S2 S1");
  EXPECT_NE(err.find("kernel regions inside a larger region of their allocation hashed at the "
                     "same point (its digest taken): 8 (29696 bytes not read)"),
            std::string::npos)
      << err;
  const Entries entries = kernel_entries([&](const trace::BufferFingerprint& b) {
    EXPECT_TRUE(b.flags & trace::kFingerprintValid);
    // The fake GPU's digest of the region the entry describes.
    EXPECT_EQ(b.fingerprint, (qkv + b.alloc_offset) ^ b.bytes);
    std::ostringstream text;
    text << (b.role == trace::Role::In ? "in+" : "out+") << b.alloc_offset << ":" << b.bytes
         << ((b.flags & trace::kDigestOfEnclosing) ? " enclosing" : "");
    return text.str();
  });
  // Both qkv kernels: every entry the whole region's, the inner two flagged. The reader of k
  // alone: its own region.
  const std::vector<std::string> qkv_entries{"in+0:4096",           "out+0:4096",
                                             "in+0:4096 enclosing", "out+0:4096 enclosing",
                                             "in+0:4096 enclosing", "out+0:4096 enclosing"};
  EXPECT_EQ(
      entries,
      (Entries{
          {"in+0:4096", "out+0:4096"}, qkv_entries, qkv_entries, {"in+256:3840", "out+256:3840"}}));
}

// A known kernel's operand (an elementwise kernel's data[k]: a pointer for sure) whose region is
// a view inside a region of its allocation with a known digest takes that digest, even where the
// enclosing region is not among the launch's own (a slice read from a tensor hashed whole, a
// view written into a recalled fill): no hash launch for it. A word of an unknown kernel keeps
// the rule above: the view inside another op's region is hashed itself.
TEST_F(MergeTest, AKnownOperandInsideAKnownRegionTakesItsDigest) {
  const CUdeviceptr a = kSecondBase, b = a + 65536, out = b + 65536;
  auto body = [&](std::string* text) {
    on_alloc(a, 8192), on_alloc(b, 4096), on_alloc(out, 4096);
    launch_on(kStreamS, a);           // S1 = in a
    launch_on(kStreamS, b);           // S2 = out a, in b
    stream_order_point();             // S1 = out b
    mul_on(kStreamS, out, a + 4096, b);  // a + 4096 inside a's known digest: nothing launched
    stream_order_point();             // S3 = out out, out a + 4096, out b
    launch_on(kStreamS, a + 2048);    // not an operand: S1 = in a + 2048
    stream_order_point();             // S1 = out a + 2048
    *text = hash_launches();
  };
  std::string err;
  EXPECT_EQ(run(body, true, /*reuse=*/true, &err, /*skip_unwritten=*/false), "S1 S2 S1 S3 S1 S1");
  const Entries entries = kernel_entries([&](const trace::BufferFingerprint& b) {
    EXPECT_TRUE(b.flags & trace::kFingerprintValid);
    std::ostringstream text;
    text << (b.role == trace::Role::In ? "in+" : "out+") << b.alloc_offset << ":" << b.bytes
         << ((b.flags & trace::kDigestOfEnclosing) ? " enclosing" : "");
    return text.str();
  });
  // The multiply's view of a: a's whole digest, flagged; its own bytes after it.
  EXPECT_EQ(entries[2], (std::vector<std::string>{"out+0:4096", "in+0:8192 enclosing",
                                                  "out+4096:4096", "in+0:4096", "out+0:4096"}));
  EXPECT_EQ(entries[3], (std::vector<std::string>{"in+2048:6144", "out+2048:6144"}));
}

// A concatenation whose inputs tile its fresh output (rotate_half's cat of two halves) overwrites
// it whole: with both inputs known it launches nothing. Words left in its metadata past the inputs
// it copies (a live tensor's address there) are no pointers of it. Where one launch copies only
// part of the inputs (a long list's first batch), the output is read first.
TEST_F(MergeTest, AConcatenationThatTilesItsFreshOutputTakesNoInputHash) {
  const CUdeviceptr x1 = kSecondBase, x2 = x1 + 65536, out = x2 + 65536, half = out + 65536,
                    stale = half + 65536;
  auto cat = [](const testing::CatLaunch& l, unsigned inputs) {
    std::vector<uint8_t> bytes = testing::cat_bytes(l);
    void* params[] = {bytes.data(), bytes.data() + 8, bytes.data() + 3400, bytes.data() + 3432,
                      bytes.data() + 3436};
    launch_function(kCatKernel, kStreamS, params, 64, inputs);
  };
  auto body = [&](std::string* text) {
    on_alloc(x1, 2048), on_alloc(x2, 2048), on_alloc(out, 4096), on_alloc(half, 4096);
    on_alloc(stale, 1024);
    launch_on(kStreamS, x1);  // S1 = in x1
    launch_on(kStreamS, x2);  // S2 = out x1, in x2
    stream_order_point();     // S1 = out x2
    testing::CatLaunch l = testing::halves_cat(out, x2, x1, 32, 32);
    l.leftovers = {{16, stale}};
    cat(l, 2);                // x1, x2 known, out overwritten: nothing launched
    stream_order_point();     // S3 = out out, out x2, out x1
    cat(testing::halves_cat(half, x2, x1, 32, 32), 1);  // one input of two: S1 = in half
    stream_order_point();     // S2 = out half, out x2
    *text = hash_launches();
  };
  std::string err;
  EXPECT_EQ(run(body, true, /*reuse=*/true, &err, /*skip_unwritten=*/false),
            "S1 S2 S1 S3 S1 S2");
  EXPECT_NE(err.find("input not hashed: 1 (4096 bytes)"), std::string::npos) << err;
  // The stale tensor's address in the first, the second input's in the one-input launch.
  EXPECT_NE(err.find("past its inputs), dropped: 2\n"), std::string::npos) << err;
}

// A multi-tensor-apply launch's address words of tensors none of its blocks works on (stale
// entries of the previous launch) are not pointers of the launch: no entries. A table that does
// not read as PyTorch's (blocks going back) keeps every word.
void tensor_list_on(CUstream stream, std::initializer_list<CUdeviceptr> addresses,
                    std::initializer_list<uint8_t> blocks) {
  std::vector<uint8_t> table(3368, 0);  // addresses[1][110], numel[110], block_to_tensor[320]...
  size_t t = 0;
  for (CUdeviceptr address : addresses) {
    const int64_t numel = 1024;
    std::memcpy(table.data() + 8 * t, &address, 8);
    std::memcpy(table.data() + 880 + 8 * t, &numel, 8);
    ++t;
  }
  std::copy(blocks.begin(), blocks.end(), table.begin() + 1760);
  void* params[] = {table.data()};
  launch_function(kTensorListKernel, stream, params, static_cast<unsigned>(blocks.size()));
}

TEST_F(MergeTest, StaleTensorListWordsAreNotPointersOfTheLaunch) {
  const CUdeviceptr a = kSecondBase, b = a + 65536, c = b + 65536;
  auto body = [&](std::string*) {
    for (CUdeviceptr p : {a, b, c}) on_alloc(p, 4096);
    tensor_list_on(kStreamS, {a, b, c}, {0, 0, 1});  // works on a and b; c is stale
    tensor_list_on(kStreamS, {a, b, c}, {1, 0});     // not PyTorch's: every word
    stream_order_point();
  };
  std::string err;
  run(body, true, /*reuse=*/true, &err, /*skip_unwritten=*/false);
  EXPECT_NE(err.find("multi-tensor-apply address words of tensors the launch does not work on "
                     "(not pointers of the launch): 1"),
            std::string::npos)
      << err;
  // Allocation ordinals: a 2, b 3, c 4 (kMergeBase is 1); an In and an Out entry each.
  const Entries ordinals = kernel_entries(
      [](const trace::BufferFingerprint& b) { return std::to_string(b.alloc_ordinal); });
  EXPECT_EQ(ordinals, (Entries{{"2", "2", "3", "3"}, {"2", "2", "3", "3", "4", "4"}}));
}

// A PyTorch reduction's staging buffer (cta_buf, allocated right before the semaphores) is
// neither hashed before nor after the launch, but noted as written: a later reader of it hashes
// it (it is no longer an allocation nothing wrote). Allocated in another order, it is hashed as
// any region.
void reduce_on(CUstream stream, CUdeviceptr src, CUdeviceptr dst, CUdeviceptr cta,
               CUdeviceptr semaphores) {
  uint64_t op[8] = {src, dst, 0, 0, cta, semaphores, 0, 0};
  void* params[] = {op};
  launch_function(kReduceKernel, stream, params, 4);
}

// A reduction to one element into a region of exactly that element (4 bytes of float here):
// the bytes there before are overwritten, so no input entry and no hash launch of its own. One
// into a longer region, one that accumulates into its output, and one with two outputs read the
// output's region first, as usual: a launch each for their fresh allocations.
TEST_F(MergeTest, AOneElementReductionsOutputTakesNoInputHash) {
  const CUdeviceptr src = kSecondBase, dst = src + 65536, wide = dst + 65536, acc = wide + 65536,
                    two = acc + 65536;
  auto reduce = [](CUdeviceptr from, CUdeviceptr to, uint8_t accumulate, int32_t noutputs) {
    uint64_t op[8] = {from, to, 0, 0, 0, 0, 0, 0};  // ReduceOp's tail (runtime_harness.h)
    auto* tail = reinterpret_cast<uint8_t*>(&op[7]);
    tail[0] = accumulate, tail[1] = 1;    // accumulate, final_output
    std::memcpy(tail + 4, &noutputs, 4);  // noutputs
    void* params[] = {op};
    launch_function(kReduceKernel, kStreamS, params, 4);
  };
  auto body = [&](std::string* text) {
    on_alloc(src, 4096), on_alloc(dst, 4), on_alloc(wide, 8), on_alloc(acc, 4), on_alloc(two, 4);
    launch_on(kStreamS, src);  // S1 = in src
    stream_order_point();      // S1 = out src
    reduce(src, dst, 0, 1);    // in src known, dst overwritten: nothing launched
    stream_order_point();      // S2 = out src + out dst
    reduce(src, wide, 0, 1);   // S1 = in wide
    stream_order_point();      // S2
    reduce(src, acc, 1, 1);    // S1 = in acc
    stream_order_point();      // S2
    reduce(src, two, 0, 2);    // S1 = in two
    stream_order_point();      // S2
    *text = hash_launches();
  };
  std::string err;
  EXPECT_EQ(run(body, true, /*reuse=*/true, &err, /*skip_unwritten=*/false),
            "S1 S1 S2 S1 S2 S1 S2 S1 S2");
  EXPECT_NE(err.find("reductions' outputs), input not hashed: 1 (4 bytes)"), std::string::npos)
      << err;
  const Entries entries = kernel_entries([](const trace::BufferFingerprint& b) {
    EXPECT_TRUE(b.flags & trace::kFingerprintValid);
    return (b.role == trace::Role::In ? "in " : "out ") + std::to_string(b.bytes);
  });
  EXPECT_EQ(entries, (Entries{{"in 4096", "out 4096"},
                              {"in 4096", "out 4096", "out 4"},
                              {"in 4096", "out 4096", "in 8", "out 8"},
                              {"in 4096", "out 4096", "in 4", "out 4"},
                              {"in 4096", "out 4096", "in 4", "out 4"}}));
}

// kWideReduceKernel's whole ReduceOp (runtime_harness.h: its config at 8, its tail at 984)
// reducing into 768 outputs from `from` to `to` (final output, one output), launched with block
// (block_x, 16); `leftover` (offset, value): an 8-byte word the host's stack left in the struct.
void wide_reduce_on(CUdeviceptr from, CUdeviceptr to, unsigned block_x,
                    std::pair<uint32_t, uint64_t> leftover = {0, 0}) {
  std::vector<uint8_t> op(1048, 0);
  const int32_t config[16] = {4, 16, 768, 1, 1, 1, 0, 0, 0, 0, 0, 32, 16, 512, 0, 1};
  std::memcpy(op.data() + 8, config, sizeof config);
  std::memcpy(op.data() + leftover.first, &leftover.second, 8);
  std::memcpy(op.data() + 984, &from, 8);
  std::memcpy(op.data() + 992, &to, 8);
  op[1041] = 1;  // final_output
  const int32_t noutputs = 1;
  std::memcpy(op.data() + 1044, &noutputs, 4);
  void* params[] = {op.data()};
  launch_function(kWideReduceKernel, kStreamS, params, 768, 1, block_x, 16);
}

// A reduction into a vector whose region is exactly the outputs its config counts (768 floats
// here; the config found by the launch's block and grid, kernel_writes.h): overwritten whole, no
// input entry and no hash launch of its own. Into a longer region, or with a config that is not
// the launch's, its output's region is read first, as usual: a launch each.
TEST_F(MergeTest, AVectorReductionsOutputTakesNoInputHashWhereItsConfigCoversIt) {
  const CUdeviceptr src = kSecondBase, dst = src + 65536, wide = dst + 65536, other = wide + 65536;
  const auto reduce = [](CUdeviceptr from, CUdeviceptr to, unsigned block_x) {
    wide_reduce_on(from, to, block_x);
  };
  auto body = [&](std::string* text) {
    on_alloc(src, 4096), on_alloc(dst, 3072), on_alloc(wide, 4096), on_alloc(other, 3072);
    launch_on(kStreamS, src);  // S1 = in src
    stream_order_point();      // S1 = out src
    reduce(src, dst, 32);      // in src known, dst overwritten: nothing launched
    stream_order_point();      // S2 = out src + out dst
    reduce(src, wide, 32);     // S1 = in wide (4096 bytes, not 768 floats)
    stream_order_point();      // S2
    reduce(src, other, 64);    // S1 = in other (the config's block is not the launch's)
    stream_order_point();      // S2
    *text = hash_launches();
  };
  std::string err;
  EXPECT_EQ(run(body, true, /*reuse=*/true, &err, /*skip_unwritten=*/false),
            "S1 S1 S2 S1 S2 S1 S2");
  EXPECT_NE(err.find("reductions' outputs), input not hashed: 1 (3072 bytes)"), std::string::npos)
      << err;
  const Entries entries = kernel_entries([](const trace::BufferFingerprint& b) {
    return (b.role == trace::Role::In ? "in " : "out ") + std::to_string(b.bytes);
  });
  EXPECT_EQ(entries, (Entries{{"in 4096", "out 4096"},
                              {"in 4096", "out 4096", "out 3072"},
                              {"in 4096", "out 4096", "in 4096", "out 4096"},
                              {"in 4096", "out 4096", "in 3072", "out 3072"}}));
}

// A reduction's offset calculators (between its config and src) hold host-stack leftovers in
// their unused dimensions, as a strided elementwise launch's do: a word there that equals a live
// tensor's address is no pointer of the launch (no entry, the drop counted). Where the launch's
// config is not found (its block is not the config's), nothing marks those bytes: the word is
// taken for a pointer, as before.
TEST_F(MergeTest, AnAddressLeftInAReductionsCalculatorIsNoPointerOfIt) {
  const CUdeviceptr src = kSecondBase, dst = src + 65536, stale = dst + 65536;
  // The stale tensor's address in input_calc's unused dimensions.
  const auto reduce = [&](unsigned block_x) {
    wide_reduce_on(src, dst, block_x, {8 + 64 + 200, stale});
  };
  auto body = [&](std::string*) {
    on_alloc(src, 4096), on_alloc(dst, 3072), on_alloc(stale, 2048);
    reduce(32);
    stream_order_point();
    reduce(64);
    stream_order_point();
  };
  std::string err;
  run(body, true, /*reuse=*/true, &err, /*skip_unwritten=*/false);
  EXPECT_NE(err.find("past its inputs), dropped: 1\n"), std::string::npos) << err;
  const Entries entries = kernel_entries([](const trace::BufferFingerprint& b) {
    return (b.role == trace::Role::In ? "in " : "out ") + std::to_string(b.bytes);
  });
  ASSERT_EQ(entries.size(), 2u);
  const auto stale_entries = [](const std::vector<std::string>& record) {
    return std::count(record.begin(), record.end(), "in 2048") +
           std::count(record.begin(), record.end(), "out 2048");
  };
  EXPECT_EQ(stale_entries(entries[0]), 0) << ::testing::PrintToString(entries[0]);
  EXPECT_EQ(stale_entries(entries[1]), 2) << ::testing::PrintToString(entries[1]);
}

// A contiguous multiply into a fresh tensor of exactly its N elements (kernel_writes.h): its
// output's bytes before the launch are overwritten, so with both inputs known it launches
// nothing and its output joins the set. Into a longer region it reads the output first.
TEST_F(MergeTest, AContiguousMultiplyIntoAFreshTensorTakesNoInputHash) {
  const CUdeviceptr a = kSecondBase, b = a + 65536, out = b + 65536, big = out + 65536;
  auto mul = [](CUdeviceptr to, CUdeviceptr x, CUdeviceptr y) { mul_on(kStreamS, to, x, y); };
  auto body = [&](std::string* text) {
    on_alloc(a, 4096), on_alloc(b, 4096), on_alloc(out, 4096), on_alloc(big, 8192);
    launch_on(kStreamS, a);  // S1 = in a
    launch_on(kStreamS, b);  // S2 = out a, in b
    stream_order_point();    // S1 = out b
    mul(out, a, b);          // a and b known, out overwritten: nothing launched
    stream_order_point();    // S3 = out out, out a, out b
    mul(big, a, b);          // S1 = in big (8192 bytes, not 1024 floats)
    stream_order_point();    // S3
    *text = hash_launches();
  };
  std::string err;
  EXPECT_EQ(run(body, true, /*reuse=*/true, &err, /*skip_unwritten=*/false), "S1 S2 S1 S3 S1 S3");
  EXPECT_NE(err.find("elementwise outputs, reductions' outputs), input not hashed: 1 (4096 bytes)"),
            std::string::npos)
      << err;
}

// The same multiply on strided tensors (a transposed output): where the launch's offset
// calculator lays its N outputs densely over exactly the region, the bytes before are
// overwritten and nothing is launched. Where its rows overlap (an as_strided view: N x 4 bytes
// as many as the region's, yet not all of them written) or into a longer region, the output is
// read first.
TEST_F(MergeTest, AStridedMultiplyThatCoversItsFreshTensorTakesNoInputHash) {
  const CUdeviceptr a = kSecondBase, b = a + 65536, out = b + 65536, big = out + 65536,
                    other = big + 65536;
  auto mul = [](CUdeviceptr to, CUdeviceptr x, CUdeviceptr y, uint32_t out_row) {
    // 32 x 32 floats, transposed: the output's rows out_row bytes apart. The output's address
    // left in an unused dimension of the calculator (as on the H100: at +272) is no pointer.
    const std::vector<uint8_t> bytes = testing::strided_bytes(
        {1024, {{32, {out_row, 4, 4}}, {32, {4, 128, 128}}}, {to, x, y}, false, 640, {{272, to}}});
    std::vector<uint8_t> closure(bytes.begin() + 8, bytes.end());
    int32_t n = 1024;
    void* params[] = {&n, closure.data()};
    launch_function(kStridedMulKernel, kStreamS, params, 1);
  };
  auto body = [&](std::string* text) {
    on_alloc(a, 4096), on_alloc(b, 4096), on_alloc(out, 4096), on_alloc(big, 8192);
    on_alloc(other, 4096);
    launch_on(kStreamS, a);  // S1 = in a
    launch_on(kStreamS, b);  // S2 = out a, in b
    stream_order_point();    // S1 = out b
    mul(out, a, b, 128);     // a and b known, out covered: nothing launched
    stream_order_point();    // S3 = out out, out a, out b
    mul(other, a, b, 4);     // rows overlapping: S1 = in other
    stream_order_point();    // S3
    mul(big, a, b, 128);     // S1 = in big (8192 bytes, not 1024 floats)
    stream_order_point();    // S3
    *text = hash_launches();
  };
  std::string err;
  EXPECT_EQ(run(body, true, /*reuse=*/true, &err, /*skip_unwritten=*/false),
            "S1 S2 S1 S3 S1 S3 S1 S3");
  EXPECT_NE(err.find("elementwise outputs, reductions' outputs), input not hashed: 1 (4096 bytes)"),
            std::string::npos)
      << err;
}

TEST_F(MergeTest, AReductionsStagingBufferIsNotHashed) {
  const CUdeviceptr src = kSecondBase, dst = src + 65536, cta = dst + 65536, sem = cta + 65536;
  auto body = [&](std::string* text) {
    for (CUdeviceptr p : {src, dst, cta, sem}) on_alloc(p, 4096);  // cta, then sem: consecutive
    reduce_on(kStreamS, src, dst, cta, sem);
    launch_on(kStreamS, cta);  // reads cta: written by the reduction, so hashed
    stream_order_point();
    on_free(cta), on_free(sem);
    for (CUdeviceptr p : {sem, cta}) on_alloc(p, 4096);  // now sem first: not consecutive
    reduce_on(kStreamS, src, dst, cta, sem);
    stream_order_point();
    *text = hash_launches();
  };
  std::string err;
  run(body, true, /*reuse=*/true, &err);
  EXPECT_NE(err.find("kernel scratch buffers not hashed (reduce_kernel's cta_buf): 1 (4096 bytes)"),
            std::string::npos)
      << err;
  auto files = traces();
  ASSERT_EQ(files.size(), 1u);
  // Per kernel record in launch order (records are written as their digests arrive): its
  // entries' roles and labels, and the labels flagged unwritten.
  std::map<uint64_t, std::pair<std::string, std::vector<std::string>>> by_seq;
  auto reader = trace::TraceReader::open(files[0].string());
  reader->for_each_record([&](const trace::Record& r) {
    if (r.kind != trace::RecordKind::Kernel) return true;
    auto& [shape, flagged] = by_seq[r.seq];
    for (const auto& buffer : r.buffers) {
      const std::string label(reader->string(buffer.label));
      shape += std::string(shape.empty() ? "" : " ") +
               (buffer.role == trace::Role::In ? "in " : "out ") + label;
      if (buffer.flags & trace::kNotWrittenSinceAlloc) flagged.push_back(label);
    }
    return true;
  });
  std::vector<std::string> labels, unwritten;
  for (const auto& [seq, entry] : by_seq) {
    labels.push_back(entry.first);
    unwritten.insert(unwritten.end(), entry.second.begin(), entry.second.end());
  }
  EXPECT_EQ(labels,
            (std::vector<std::string>{
                "in arg0 out arg0 in arg0+8 out arg0+8 in arg0+40 out arg0+40", "in arg0 out arg0",
                "in arg0 out arg0 in arg0+8 out arg0+8 in arg0+32 out arg0+32 in "
                "arg0+40 out arg0+40"}));
  // Only what nothing wrote before is flagged: the first reduction's src, dst and semaphores,
  // the second's new staging buffer and semaphores. The kernel's read of the first staging
  // buffer was hashed: the reduction's write of it was noted.
  EXPECT_EQ(unwritten,
            (std::vector<std::string>{"arg0", "arg0+8", "arg0+40", "arg0+32", "arg0+40"}));
}

// On the per-thread default stream a digest in flight serves the thread that hashed it, also
// when a call chains: the second copy reads b, whose digest is still in flight on this thread's
// stream, and joins c's deferred set instead of hashing b again.
TEST_F(MergeTest, PerThreadStreamDigestsInFlightServeChainedCalls) {
  const CUdeviceptr b = kSecondBase, c = b + 65536;
  auto per_thread = [](MemoryOp op) {
    op.stream = nullptr;
    op.per_thread_stream = true;
    return op;
  };
  std::string err;
  const std::string log = run(
      [&](std::string* text) {
        for (CUdeviceptr p : {b, c}) on_alloc(p, 4096);
        lockstep::testing::FakeGpu::instance().hold(true);
        memory_op_end(memory_op_begin(per_thread(async_set(b))), 0);        // out b deferred
        stream_order_point();                                               // ?1: out b, in flight
        memory_op_end(memory_op_begin(per_thread(async_set(c))), 0);        // out c deferred
        memory_op_end(memory_op_begin(per_thread(async_read_back(b))), 0);  // waits: chained
        stream_order_point();                                               // ?1: out c
        *text = hash_launches();
        lockstep::testing::FakeGpu::instance().release();
      },
      true, /*reuse=*/true, &err);
  EXPECT_EQ(log, "?1 ?1");
  EXPECT_NE(err.find("input digests reused: 0 arrived, 1 in flight"), std::string::npos) << err;
  EXPECT_NE(err.find("; 1 calls chained"), std::string::npos) << err;
}

// Every write the shim sees takes the reuse away: a copy into the allocation, a graph launch
// (its writes are not known: everything is forgotten), a free and a new allocation there.
TEST_F(MergeTest, WritesFreesAndUnknownWritesForgetDigests) {
  const std::string copied = run(
      [](std::string* text) {
        on_alloc(kSecondBase, 1 << 20);
        launch_on(kStreamS, kMergeBase + 256);                    // fresh: nothing
        launch_on(kStreamS, kSecondBase);                         // fresh: nothing (chained)
        memory_op_end(memory_op_begin(async_copy(kStreamS)), 0);  // S2: out p1, out p2; it
                                                                  // writes p1's bytes
        launch_on(kStreamS, kMergeBase + 256);                    // S2: the copy's dst + in p1
        stream_order_point();                                     // S1
        *text = hash_launches();
      },
      true, true);
  EXPECT_EQ(copied, "S2 S2 S1");
  expect_kernel_fingerprints(3, 2);
  fs::remove_all(dir_);
  const std::string graph = run(
      [](std::string* text) {
        on_alloc(kSecondBase, 1 << 20);
        launch_on(kStreamS, kMergeBase + 256);  // fresh: nothing
        launch_on(kStreamS, kSecondBase);       // fresh: nothing (chained)
        const void* exec = reinterpret_cast<const void*>(0x9000);
        graph_launch_end(graph_launch_begin(exec, kStreamS, false),
                         CUDA_SUCCESS);         // S2: out p1, p2
        launch_on(kStreamS, kMergeBase + 256);  // S1: in p1, hashed again
        stream_order_point();                   // S1
        *text = hash_launches();
      },
      true, true);
  EXPECT_EQ(graph, "S2 S1 S1");
  expect_kernel_fingerprints(3, 2);
  fs::remove_all(dir_);
  const std::string freed = run(
      [](std::string* text) {
        on_alloc(kSecondBase, 1 << 20);
        launch_on(kStreamS, kSecondBase);  // fresh: nothing
        stream_order_point();              // S1: out p2
        on_free(kSecondBase);
        on_alloc(kSecondBase, 1 << 20);
        launch_on(kStreamS, kSecondBase);  // fresh again, not the old digest: nothing
        stream_order_point();              // S1
        *text = hash_launches();
      },
      true, true);
  EXPECT_EQ(freed, "S1 S1");
  expect_kernel_fingerprints(2, 2);
}

// Without skipping unwritten inputs (the default): a free forgets the freed memory's digests,
// also when the free was held back behind deferred output hashes (forgotten again once those are
// enqueued); a kernel with no pointer into a known allocation writes what nobody knows.
TEST_F(MergeTest, FreesAndKernelsWithoutKnownPointersForgetDigests) {
  auto run_reuse = [&](const std::function<void(std::string*)>& body) {
    fs::remove_all(dir_);
    return run(body, true, /*reuse=*/true, nullptr, /*skip_unwritten=*/false);
  };
  EXPECT_EQ(run_reuse([](std::string* text) {
              on_alloc(kSecondBase, 1 << 20);
              launch_on(kStreamS, kSecondBase);  // S1: in p2
              stream_order_point();              // S1: out p2
              on_free(kSecondBase);
              on_alloc(kSecondBase, 1 << 20);
              launch_on(kStreamS, kSecondBase);  // S1: in p2, hashed again
              stream_order_point();              // S1
              *text = hash_launches();
            }),
            "S1 S1 S1 S1");
  expect_kernel_fingerprints(2);
  EXPECT_EQ(run_reuse([](std::string* text) {
              on_alloc(kSecondBase, 1 << 20);
              launch_on(kStreamS, kSecondBase);  // S1: in p2
              *text = on_stream_free(kSecondBase, kStreamS, false) ? "taken" : "forwarded";
              stream_order_point();  // S1: out p2, then the free
              on_alloc(kSecondBase, 1 << 20);
              launch_on(kStreamS, kSecondBase);  // S1: in p2, hashed again
              stream_order_point();              // S1
              *text += " " + hash_launches();
            }),
            "taken S1 S1 free@S S1 S1");
  expect_kernel_fingerprints(2);
  EXPECT_EQ(run_reuse([](std::string* text) {
              on_alloc(kSecondBase, 1 << 20);
              launch_on(kStreamS, kSecondBase);  // S1: in p2
              stream_order_point();              // S1: out p2
              launch_on(kStreamS,
                        0xdead000);  // no pointer the shim knows: nothing hashed, all forgotten
              launch_on(kStreamS, kSecondBase);  // S1: in p2, hashed again
              stream_order_point();              // S1
              *text = hash_launches();
            }),
            "S1 S1 S1 S1");
}

// With LOCKSTEP_CARRY_FREED=1 a stream-ordered free keeps the whole allocation's digest aside and
// the next pool allocation of the same address and size takes it: the new tensor's input needs
// no hash, so its kernel launches nothing of its own (chained). Held back behind the deferred
// output hash or not, the same. A plain cudaFree (memory back to the driver), another size, or
// a write over the freed range in between leave the input hashed again.
TEST_F(MergeTest, AFreedAllocationsDigestGoesToTheNextAllocationOfItsRange) {
  auto run_carry = [&](const std::function<void(std::string*)>& body, bool carry,
                       std::string* err = nullptr) {
    fs::remove_all(dir_);
    return run(body, true, /*reuse=*/true, err, /*skip_unwritten=*/false, carry);
  };
  const auto freed_and_again = [](std::string* text) {
    on_stream_alloc(kSecondBase, 1 << 20, kStreamS, false);
    launch_on(kStreamS, kSecondBase);  // S1: in p2
    stream_order_point();              // S1: out p2
    *text = on_stream_free(kSecondBase, kStreamS, false) ? "taken " : "forwarded ";
    on_stream_alloc(kSecondBase, 1 << 20, kStreamS, false);
    launch_on(kStreamS, kSecondBase);  // carried: nothing; else S1: in p2
    stream_order_point();              // S1: out p2
    *text += hash_launches();
  };
  std::string err;
  EXPECT_EQ(run_carry(freed_and_again, true, &err), "forwarded S1 S1 S1");
  expect_kernel_fingerprints(2);
  EXPECT_NE(err.find("freed allocations whose digest went to the next allocation of the same "
                     "range (LOCKSTEP_CARRY_FREED): 1 (1048576 bytes)"),
            std::string::npos)
      << err;
  EXPECT_EQ(run_carry(freed_and_again, false), "forwarded S1 S1 S1 S1");
  expect_kernel_fingerprints(2);
  // Held back behind the deferred output hash: kept when the job frees, and again once the
  // held-back free is made.
  EXPECT_EQ(run_carry(
                [](std::string* text) {
                  on_stream_alloc(kSecondBase, 1 << 20, kStreamS, false);
                  launch_on(kStreamS, kSecondBase);  // S1: in p2
                  *text = on_stream_free(kSecondBase, kStreamS, false) ? "taken " : "forwarded ";
                  stream_order_point();  // S1: out p2, then the free
                  on_stream_alloc(kSecondBase, 1 << 20, kStreamS, false);
                  launch_on(kStreamS, kSecondBase);  // carried: nothing
                  stream_order_point();              // S1
                  *text += hash_launches();
                },
                true),
            "taken S1 S1 free@S S1");
  expect_kernel_fingerprints(2);
  // Not carried: memory back to the driver, a smaller allocation at the same address, a write
  // over the freed range before it comes back.
  EXPECT_EQ(run_carry(
                [](std::string* text) {
                  on_alloc(kSecondBase, 1 << 20);
                  launch_on(kStreamS, kSecondBase);  // S1: in p2
                  stream_order_point();              // S1: out p2
                  on_free(kSecondBase);
                  on_stream_alloc(kSecondBase, 1 << 20, kStreamS, false);
                  launch_on(kStreamS, kSecondBase);  // S1: in p2, hashed again
                  stream_order_point();              // S1
                  on_stream_free(kSecondBase, kStreamS, false);
                  on_stream_alloc(kSecondBase, 1 << 19, kStreamS, false);
                  launch_on(kStreamS, kSecondBase);  // S1: another size, hashed again
                  stream_order_point();              // S1
                  on_stream_free(kSecondBase, kStreamS, false);
                  on_stream_alloc(kSecondBase - (1 << 20), 2 << 20, kStreamS, false);
                  on_stream_free(kSecondBase - (1 << 20), kStreamS, false);  // overlapped
                  on_stream_alloc(kSecondBase, 1 << 19, kStreamS, false);
                  launch_on(kStreamS, kSecondBase);  // S1: hashed again
                  stream_order_point();              // S1
                  *text = hash_launches();
                },
                true),
            "S1 S1 S1 S1 S1 S1 S1 S1");
}

// A device-to-host copy of the whole second allocation (its source is an input only).
MemoryOp read_back(CUstream stream, void* host) {
  MemoryOp copy;
  copy.api = "cudaMemcpyAsync";
  copy.is_async = true;
  copy.direction = 2;  // device to host
  copy.dst = host;
  copy.src = reinterpret_cast<const void*>(kSecondBase);
  copy.bytes = 1 << 20;
  copy.stream = stream;
  return copy;
}

// The fake GPU holds its digests: the first copy waits for the digest still in flight on its
// own stream (nothing launched); the copy on another stream hashes the bytes itself. At the
// exit a waiter whose digest never came is flagged dropped, its record still written.
TEST_F(MergeTest, InFlightDigestsServeTheirOwnStreamOnly) {
  auto memcpy_sources = [&]() {
    std::vector<std::pair<uint64_t, uint8_t>> out;  // fingerprint, flags of each Memcpy src
    auto files = traces();
    EXPECT_EQ(files.size(), 1u);
    if (files.empty()) return out;
    auto reader = trace::TraceReader::open(files[0].string());
    reader->for_each_record([&](const trace::Record& r) {
      if (r.kind == trace::RecordKind::Memcpy && !r.buffers.empty())
        out.emplace_back(r.buffers[0].fingerprint, r.buffers[0].flags);
      return true;
    });
    return out;
  };
  std::string err;
  const std::string log = run(
      [](std::string* text) {
        static std::vector<char> host(1 << 20);
        on_alloc(kSecondBase, 1 << 20);
        lockstep::testing::FakeGpu::instance().hold(true);
        launch_on(kStreamS, kSecondBase);  // S1: in p2
        stream_order_point();              // S1: out p2, held in flight
        memory_op_end(memory_op_begin(read_back(kStreamS, host.data())), 0);  // waits: nothing
        memory_op_end(memory_op_begin(read_back(kStreamT, host.data())), 0);  // T1
        *text = hash_launches();
        lockstep::testing::FakeGpu::instance().release();
      },
      true, true, &err, /*skip_unwritten=*/false);
  EXPECT_EQ(log, "S1 S1 T1");
  EXPECT_NE(err.find("input digests reused: 0 arrived, 1 in flight"), std::string::npos) << err;
  const uint64_t digest = kSecondBase ^ (1u << 20);
  for (const auto& [fingerprint, flags] : memcpy_sources()) {
    EXPECT_TRUE(flags & trace::kFingerprintValid);
    EXPECT_EQ(fingerprint, digest);
  }
  EXPECT_EQ(memcpy_sources().size(), 2u);

  fs::remove_all(dir_);
  run(
      [](std::string*) {
        static std::vector<char> host(1 << 20);
        on_alloc(kSecondBase, 1 << 20);
        lockstep::testing::FakeGpu::instance().hold(true);
        launch_on(kStreamS, kSecondBase);
        stream_order_point();
        memory_op_end(memory_op_begin(read_back(kStreamS, host.data())), 0);  // never released
      },
      true, true, &err, false);
  const auto sources = memcpy_sources();
  ASSERT_EQ(sources.size(), 1u);
  EXPECT_FALSE(sources[0].second & trace::kFingerprintValid);
  EXPECT_TRUE(sources[0].second & trace::kFingerprintDropped);
}

// Once a digest has arrived it serves every stream. (In flight it serves only its own stream:
// region_digests_test.cpp; here the collector may or may not have polled it in time.)
TEST_F(MergeTest, ArrivedDigestsServeEveryStream) {
  const std::string log = run(
      [](std::string* text) {
        on_alloc(kSecondBase, 1 << 20);
        launch_on(kStreamS, kSecondBase);  // fresh: nothing
        stream_order_point();              // S1: out p2
        launch_on(kStreamT, kSecondBase);  // T1 unless the digest had arrived (the collector polls)
        stream_order_point();              // T1
        *text = hash_launches() + " |";
        std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the collector polls each ms
        launch_on(kStreamS, kSecondBase);  // arrived: reused from T's digest, nothing launched
        stream_order_point();              // S1
        *text += " " + hash_launches();
      },
      true, true);
  const std::string after = log.substr(log.find('|'));
  EXPECT_EQ(after, "| " + log.substr(0, log.find(" |")) + " S1") << log;
  expect_kernel_fingerprints(3, 1);
}

}  // namespace
}  // namespace lockstep::collectors
