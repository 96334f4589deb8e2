// Host inputs (collectors/memory_ops.cpp): at level full a host-to-device copy records its host
// source as an input "host src", fingerprinted on the CPU with the LSF1 reference while the
// source is valid; capped by LOCKSTEP_HOST_HASH_BYTES; none for a captured copy, another
// direction, or below level full.
#include "hashing/fingerprint.h"
#include "tests/cpu/collectors/runtime_harness.h"

namespace lockstep::collectors {
namespace {

// The host bytes the copies read: the same in every child (a fork keeps them).
const std::vector<uint8_t>& host_bytes() {
  static const std::vector<uint8_t> bytes = [] {
    std::vector<uint8_t> b(4096);
    for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<uint8_t>(i * 7 + 3);
    return b;
  }();
  return bytes;
}

MemoryOp host_to_device(bool async, CUstream stream = kStreamS, size_t bytes = 4096) {
  MemoryOp copy;
  copy.api = async ? "cudaMemcpyAsync" : "cudaMemcpy";
  copy.is_async = async;
  copy.direction = 1;
  copy.dst = reinterpret_cast<void*>(kMergeBase + 4096);
  copy.src = host_bytes().data();
  copy.bytes = bytes;
  copy.stream = async ? stream : nullptr;
  return copy;
}

class HostInputs : public RuntimeTest {
 protected:
  // The Memcpy records of a child that made `copies` at `level` with these extra settings.
  std::vector<trace::Record> copies(const std::string& level, const std::vector<MemoryOp>& ops,
                                    const std::map<std::string, std::string>& extra = {}) {
    for (const auto& file : traces()) fs::remove(file);  // the previous child's
    auto environment = env(level);
    for (const auto& [k, v] : extra) environment[k] = v;
    ChildResult child = run_child(
        environment,
        [&] {
          on_alloc(kMergeBase, 1 << 20);
          for (const MemoryOp& op : ops) {
            if (op.stream == kCapturingStream) capture_begins();  // the capture-begin hook's
            memory_op_end(memory_op_begin(op), 0);
          }
          stream_order_point();
        },
        &fake_resolver_with_gpu);
    reader_ = only_trace(child);
    std::vector<trace::Record> out;
    if (!reader_) return out;
    reader_->for_each_record([&](const trace::Record& r) {
      if (r.kind == trace::RecordKind::Memcpy) out.push_back(r);
      return true;
    });
    std::sort(out.begin(), out.end(), [](auto& a, auto& b) { return a.seq < b.seq; });
    return out;
  }
  const trace::BufferFingerprint* host_source(const trace::Record& r) {
    return find_buffer(*reader_, r, trace::kHostSourceLabel);
  }
  std::unique_ptr<trace::TraceReader> reader_;
};

TEST_F(HostInputs, EveryKindOfHostToDeviceCopyFingerprintsItsSourceOnTheCpu) {
  const auto records = copies("full", {host_to_device(false), host_to_device(true)});
  ASSERT_EQ(records.size(), 2u);
  // The GPU's digest of the same bytes is this one (hashing/README.md: bit-identical).
  const uint64_t expected = hashing::fingerprint(host_bytes().data(), host_bytes().size());
  for (const trace::Record& r : records) {
    const trace::BufferFingerprint* src = host_source(r);
    ASSERT_NE(src, nullptr) << reader_->string(r.name);
    EXPECT_EQ(src->role, trace::Role::In);
    EXPECT_EQ(src->bytes, 4096u);
    EXPECT_TRUE(src->flags & trace::kFingerprintValid);
    EXPECT_FALSE(src->flags & trace::kExtentClamped);
    EXPECT_EQ(src->fingerprint, expected);
    EXPECT_NE(find_buffer(*reader_, r, "dst"), nullptr) << "the destination is still recorded";
  }
}

TEST_F(HostInputs, TheSettingCapsTheBytesReadAndZeroTurnsItOff) {
  auto records =
      copies("full", {host_to_device(false)}, {{"LOCKSTEP_HOST_HASH_BYTES", "1K"}});
  ASSERT_EQ(records.size(), 1u);
  const trace::BufferFingerprint* src = host_source(records[0]);
  ASSERT_NE(src, nullptr);
  EXPECT_EQ(src->bytes, 1024u);
  EXPECT_TRUE(src->flags & trace::kExtentClamped);
  EXPECT_EQ(src->fingerprint, hashing::fingerprint(host_bytes().data(), 1024));
  records = copies("full", {host_to_device(false)}, {{"LOCKSTEP_HOST_HASH_BYTES", "0"}});
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(host_source(records[0]), nullptr);
}

TEST_F(HostInputs, NoHostSourceBelowFullForACapturedCopyOrAnotherDirection) {
  auto records = copies("broad", {host_to_device(false)});
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(host_source(records[0]), nullptr) << "broad fingerprints no copy";
  MemoryOp device_to_device = host_to_device(true);
  device_to_device.direction = 3;
  device_to_device.src = reinterpret_cast<void*>(kMergeBase + 8192);
  // A copy captured into a graph reads its source at each replay, not at the call.
  records = copies("full", {host_to_device(true, kCapturingStream), device_to_device});
  ASSERT_EQ(records.size(), 2u);
  for (const trace::Record& r : records) EXPECT_EQ(host_source(r), nullptr) << r.seq;
}

}  // namespace
}  // namespace lockstep::collectors
