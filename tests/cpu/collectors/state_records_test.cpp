// State records (collectors/state_records.cpp): what lockstep_fingerprint_many records, on the
// fake GPU behind the hash engine (runtime_harness.h), and at which levels.
#include <sys/wait.h>

#include <chrono>
#include <map>
#include <thread>

#include "collectors/lockstep.h"
#include "tests/cpu/collectors/runtime_harness.h"

namespace lockstep::collectors {
namespace {

// Three parameters, as the PyTorch hook sends them after an optimizer step.
void send_three_parameters() {
  const void* ptrs[] = {reinterpret_cast<void*>(kMergeBase), reinterpret_cast<void*>(kMergeBase + 4096),
                        reinterpret_cast<void*>(kMergeBase + 8192)};
  const unsigned long long bytes[] = {4096, 1024, 64};
  const char* names[] = {"tok.weight", "blocks.0.mlp.up.weight", "blocks.0.mlp.up.bias"};
  lockstep_fingerprint_many(3, ptrs, bytes, names, kStreamS, 0);
}

std::vector<trace::Record> state_records(trace::TraceReader& reader) {
  return records_of_kind(reader, trace::RecordKind::State);
}

// The fake GPU's digest of exactly the entry's region: the tensor's own bytes were read.
void expect_digest_of_its_bytes(const trace::BufferFingerprint& b, const std::string& what) {
  EXPECT_TRUE(b.flags & trace::kFingerprintValid) << what;
  EXPECT_EQ(b.fingerprint, (kMergeBase + b.alloc_offset) ^ b.bytes) << what;
}

TEST_F(MergeTest, StateOfManyTensorsIsHashedInOneLaunchOnTheJobsStream) {
  const std::string log = run([](std::string* text) {
    send_three_parameters();
    *text = hash_launches();
  });
  EXPECT_EQ(log, "S3");
  auto reader = the_trace();
  ASSERT_TRUE(reader);
  const auto records = state_records(*reader);
  ASSERT_EQ(records.size(), 3u);
  const char* names[] = {"tok.weight", "blocks.0.mlp.up.weight", "blocks.0.mlp.up.bias"};
  const uint64_t bytes[] = {4096, 1024, 64};
  for (size_t i = 0; i < 3; ++i) {
    const trace::Record& r = records[i];
    EXPECT_EQ(reader->string(r.name), names[i]);
    EXPECT_EQ(r.fields[trace::fields::State::bytes], bytes[i]);
    EXPECT_EQ(r.fields[trace::fields::State::state_kind], 0u);
    ASSERT_EQ(r.buffers.size(), 1u);
    const trace::BufferFingerprint& b = r.buffers[0];
    EXPECT_EQ(b.role, trace::Role::Out);
    expect_digest_of_its_bytes(b, names[i]);
  }
}

// Broad's one hash launch a step (issue #34): the state call does not wake the idle collector
// (a futex call and a cross-core wake on the job's thread every step); the collector's next look
// delivers its digests.
TEST_F(MergeTest, AStateCallOnceAStepLeavesTheIdleCollectorAsleep) {
  const std::string log = run([](std::string* text) {
    for (int step = 0; step < 3; ++step) {
      send_three_parameters();  // the first starts the collector, which then idles
      std::this_thread::sleep_for(std::chrono::milliseconds(60));
    }
    *text = std::to_string(Tracer::get()->stats.collector_wakes.load());
  });
  EXPECT_EQ(log, "0");
  auto reader = the_trace();
  ASSERT_TRUE(reader);
  const auto records = state_records(*reader);
  ASSERT_EQ(records.size(), 9u);
  for (const trace::Record& r : records) {
    ASSERT_EQ(r.buffers.size(), 1u);
    expect_digest_of_its_bytes(r.buffers[0], std::string(reader->string(r.name)));
  }
}

// Once the collector's thread runs (the first state call starts it), a marker leaves the step it
// ended to that thread: the job's thread takes no lock the collector holds and makes no futex
// call (the writer's wake) at a step's end (issue #34). Every step still gets its summary, which
// counts the step's records, the state records the collector appended after the marker too.
TEST_F(MergeTest, MarkersLeaveTheirStepEndsToTheCollectorOnceItRuns) {
  const std::string log = run([](std::string* text) {
    for (int step = 0; step < 3; ++step) {
      send_three_parameters();
      lockstep_step();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // its look: kIdlePoll, 20 ms
    *text = std::to_string(Tracer::get()->stats.steps_handed.load());
  });
  EXPECT_EQ(log, "3");
  auto reader = the_trace();
  ASSERT_TRUE(reader);
  std::map<uint32_t, uint64_t> per_step;
  reader->for_each_record([&](const trace::Record& r) {
    ++per_step[r.step];
    return true;
  });
  std::map<uint32_t, uint64_t> summarized;
  for (const trace::StepSummary& s : reader->step_summaries()) summarized[s.step] = s.record_count;
  EXPECT_EQ(summarized, per_step);
  for (uint32_t step = 0; step < 3; ++step) EXPECT_GE(per_step[step], 3u) << step;
}

// Past a few regions a launch finds its repeated ones through an index (region_index.h): a
// tensor passed twice in one call of 40 is hashed once and both records get its digest.
TEST_F(MergeTest, StateOfFortyTensorsHashesARepeatedOneOnce) {
  constexpr int kTensors = 40;
  const std::string log = run([](std::string* text) {
    const void* ptrs[kTensors];
    unsigned long long bytes[kTensors];
    const char* names[kTensors];
    for (int i = 0; i < kTensors; ++i) {
      ptrs[i] = reinterpret_cast<void*>(kMergeBase + 4096 * static_cast<uint64_t>(i));
      bytes[i] = 1024;
      names[i] = "p";
    }
    ptrs[31] = ptrs[4];  // the same region again
    ptrs[35] = ptrs[7], bytes[35] = 512;  // the same start, another extent: its own region
    lockstep_fingerprint_many(kTensors, ptrs, bytes, names, kStreamS, 0);
    // Again, as the next optimizer step: the call the last one made, taken as it was.
    lockstep_fingerprint_many(kTensors, ptrs, bytes, names, kStreamS, 0);
    *text = hash_launches();
  });
  EXPECT_EQ(log, "S39 S39");
  auto reader = the_trace();
  ASSERT_TRUE(reader);
  const auto records = state_records(*reader);
  ASSERT_EQ(records.size(), static_cast<size_t>(2 * kTensors));
  for (int call = 0; call < 2; ++call) {
    const trace::Record* first = &records[static_cast<size_t>(call * kTensors)];
    for (int i = 0; i < kTensors; ++i) {
      const trace::Record& r = first[i];
      // One identity for the call's records, and consecutive seqs.
      EXPECT_EQ(r.seq, first->seq + static_cast<uint64_t>(i));
      EXPECT_EQ(r.stream, first->stream);
      EXPECT_EQ(r.thread, first->thread);
      ASSERT_EQ(r.buffers.size(), 1u);
      expect_digest_of_its_bytes(r.buffers[0], std::to_string(r.seq));
    }
    EXPECT_EQ(first[31].buffers[0].alloc_offset, first[4].buffers[0].alloc_offset);
    EXPECT_EQ(first[35].buffers[0].bytes, 512u);
  }
  EXPECT_GT(records[kTensors].seq, records[kTensors - 1].seq);
}

// A call that repeats the last one (the PyTorch hook's, every step) takes the entries the last
// one built; one that differs in a size, a pointer or a name builds them again: no record may
// carry the last call's extent, offset or name.
TEST_F(MergeTest, AStateCallThatDiffersFromTheLastOneIsDescribedAnew) {
  run([](std::string*) {
    const void* ptrs[] = {reinterpret_cast<void*>(kMergeBase), reinterpret_cast<void*>(kMergeBase + 4096)};
    unsigned long long bytes[] = {4096, 1024};
    const char* names[] = {"a", "b"};
    lockstep_fingerprint_many(2, ptrs, bytes, names, kStreamS, 0);
    lockstep_fingerprint_many(2, ptrs, bytes, names, kStreamS, 0);  // the same
    bytes[1] = 512;
    lockstep_fingerprint_many(2, ptrs, bytes, names, kStreamS, 0);  // another size
    ptrs[1] = reinterpret_cast<void*>(kMergeBase + 8192);
    lockstep_fingerprint_many(2, ptrs, bytes, names, kStreamS, 0);  // another pointer
    names[0] = "c";
    lockstep_fingerprint_many(2, ptrs, bytes, names, kStreamS, 0);  // another name
  });
  auto reader = the_trace();
  ASSERT_TRUE(reader);
  const auto records = state_records(*reader);
  ASSERT_EQ(records.size(), 10u);
  const uint64_t sizes[] = {1024, 1024, 512, 512, 512};
  const uint64_t offsets[] = {4096, 4096, 4096, 8192, 8192};
  const char* first_names[] = {"a", "a", "a", "a", "c"};
  for (size_t call = 0; call < 5; ++call) {
    const trace::Record& a = records[2 * call];
    const trace::Record& b = records[2 * call + 1];
    EXPECT_EQ(reader->string(a.name), first_names[call]) << call;
    EXPECT_EQ(reader->string(b.name), "b") << call;
    EXPECT_EQ(b.fields[trace::fields::State::bytes], sizes[call]) << call;
    ASSERT_EQ(b.buffers.size(), 1u) << call;
    EXPECT_EQ(b.buffers[0].bytes, sizes[call]) << call;
    EXPECT_EQ(b.buffers[0].alloc_offset, offsets[call]) << call;
    expect_digest_of_its_bytes(b.buffers[0], std::to_string(call));
    if (call > 0) EXPECT_GT(a.seq, records[2 * call - 1].seq) << call;
  }
}

// LOCKSTEP_SAME_NAMES (lockstep.h): with the very array of the thread's last call the names are
// not read again (here written in place between calls, against the promise, to show it), and
// with any other array, or without the flag, they are; the flag is not part of the kind.
TEST_F(MergeTest, SameNamesLeavesTheLastCallsArrayUnreadAndReadsAnyOther) {
  run([](std::string*) {
    const void* ptrs[] = {reinterpret_cast<void*>(kMergeBase),
                          reinterpret_cast<void*>(kMergeBase + 4096)};
    unsigned long long bytes[] = {4096, 1024};
    static char first[] = "a";
    const char* names[] = {first, "b"};
    const char* others[] = {"c", "d"};
    const int same = LOCKSTEP_SAME_NAMES;
    lockstep_fingerprint_many(2, ptrs, bytes, names, kStreamS, 1);         // a b
    first[0] = 'z';
    lockstep_fingerprint_many(2, ptrs, bytes, names, kStreamS, 1 | same);  // a b: not read
    lockstep_fingerprint_many(2, ptrs, bytes, names, kStreamS, 1);         // z b: read
    lockstep_fingerprint_many(2, ptrs, bytes, others, kStreamS, 1 | same);  // c d: another array
    first[0] = 'y';
    lockstep_fingerprint_many(2, ptrs, bytes, names, kStreamS, 1 | same);  // y b: not the last
  });
  auto reader = the_trace();
  ASSERT_TRUE(reader);
  const auto records = state_records(*reader);
  ASSERT_EQ(records.size(), 10u);
  const char* expected[] = {"a", "b", "a", "b", "z", "b", "c", "d", "y", "b"};
  for (size_t i = 0; i < records.size(); ++i) {
    EXPECT_EQ(reader->string(records[i].name), expected[i]) << i;
    EXPECT_EQ(records[i].fields[trace::fields::State::state_kind], 1u) << i;
    ASSERT_EQ(records[i].buffers.size(), 1u) << i;
    expect_digest_of_its_bytes(records[i].buffers[0], std::to_string(i));
  }
}

// A call's records come from one held record (its entries, one per tensor that has bytes),
// split on the collector's thread: an empty tensor among them keeps its place and its seq, with
// no entry, and the others' entries stay theirs.
TEST_F(MergeTest, StateOfAnEmptyTensorKeepsItsPlaceWithoutAnEntry) {
  const std::string log = run([](std::string* text) {
    const void* ptrs[] = {reinterpret_cast<void*>(kMergeBase), reinterpret_cast<void*>(kMergeBase + 4096),
                          reinterpret_cast<void*>(kMergeBase + 8192)};
    const unsigned long long bytes[] = {4096, 0, 64};
    const char* names[] = {"a", "empty", "c"};
    lockstep_fingerprint_many(3, ptrs, bytes, names, kStreamS, 2);
    *text = hash_launches();
  });
  EXPECT_EQ(log, "S2");
  auto reader = the_trace();
  ASSERT_TRUE(reader);
  const auto records = state_records(*reader);
  ASSERT_EQ(records.size(), 3u);
  const char* names[] = {"a", "empty", "c"};
  const size_t entries[] = {1, 0, 1};
  for (size_t i = 0; i < 3; ++i) {
    const trace::Record& r = records[i];
    EXPECT_EQ(reader->string(r.name), names[i]);
    EXPECT_EQ(r.seq, records[0].seq + i);
    EXPECT_EQ(r.fields[trace::fields::State::state_kind], 2u);
    ASSERT_EQ(r.buffers.size(), entries[i]) << names[i];
  }
  EXPECT_EQ(records[0].buffers[0].bytes, 4096u);
  EXPECT_EQ(records[2].buffers[0].bytes, 64u);
  for (size_t i : {0, 2}) expect_digest_of_its_bytes(records[i].buffers[0], names[i]);
}

TEST_F(MergeTest, StateOutsideTheStepWindowIsRecordedByIdentityOnly) {
  const fs::path log = dir_.string() + ".state-window";
  auto environment = env("broad");
  environment["LOCKSTEP_STEPS"] = "5-6";
  ChildResult child = run_child(
      environment,
      [&] {
        on_alloc(kMergeBase, 1 << 20);
        send_three_parameters();
        std::ofstream(log) << hash_launches();
      },
      &fake_resolver_with_gpu);
  ASSERT_TRUE(WIFEXITED(child.status) && WEXITSTATUS(child.status) == 0) << child.stderr_text;
  std::ifstream in(log);
  std::string launches((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  fs::remove(log);
  EXPECT_EQ(launches, "");
  auto reader = only_trace(child);
  ASSERT_TRUE(reader);
  const auto records = state_records(*reader);
  ASSERT_EQ(records.size(), 3u);
  for (const auto& r : records) {
    ASSERT_EQ(r.buffers.size(), 1u);
    EXPECT_FALSE(r.buffers[0].flags & trace::kFingerprintValid);
  }
}

TEST_F(RuntimeTest, StateIsRecordedAtBroadAndFullButNotAtMetrics) {
  for (const auto& [level, expected] :
       std::vector<std::pair<std::string, size_t>>{{"metrics", 0}, {"broad", 3}, {"full", 3}}) {
    for (const auto& file : traces()) fs::remove(file);  // the previous level's
    ChildResult child = run_child(env(level), [] {
      on_alloc(kMergeBase, 1 << 20);
      // The trace opens on the first CUDA event; a metric copy is one at every level.
      static float loss = 0;
      MemoryOp copy;
      copy.api = "cudaMemcpy";
      copy.direction = 2;
      copy.src = reinterpret_cast<void*>(kMergeBase);
      copy.dst = &loss;
      copy.bytes = 4;
      memory_op_end(memory_op_begin(copy), 0);
      send_three_parameters();
    });
    auto reader = only_trace(child);
    ASSERT_TRUE(reader) << level << ": " << child.stderr_text;
    EXPECT_EQ(state_records(*reader).size(), expected) << level;
  }
}

// The same arrays every step (the PyTorch hook's): a call remembers the last one's name ids and
// allocations (state_records.cpp, Lookups), which must never outlive a renamed tensor or a
// freed and reallocated allocation.
TEST_F(MergeTest, StateRemembersTheLastCallsLookupsOnlyWhileTheyHold) {
  run([](std::string*) {
    static char name[] = "blocks.0.attn.weight";
    const void* ptrs[] = {reinterpret_cast<void*>(kSecondBase + 256)};
    const unsigned long long bytes[] = {1024};
    const char* names[] = {name};
    on_alloc(kSecondBase, 4096);
    lockstep_fingerprint_many(1, ptrs, bytes, names, kStreamS, 0);  // allocation 2, offset 256
    lockstep_fingerprint_many(1, ptrs, bytes, names, kStreamS, 0);  // the same, remembered
    name[7] = '1';  // the same pointer, another name
    lockstep_fingerprint_many(1, ptrs, bytes, names, kStreamS, 0);
    on_free(kSecondBase);
    on_alloc(kSecondBase, 8192);  // the same address, another allocation (ordinal 3)
    lockstep_fingerprint_many(1, ptrs, bytes, names, kStreamS, 0);
  });
  auto reader = the_trace();
  ASSERT_TRUE(reader);
  const auto records = state_records(*reader);
  ASSERT_EQ(records.size(), 4u);
  const char* names[] = {"blocks.0.attn.weight", "blocks.0.attn.weight", "blocks.1.attn.weight",
                         "blocks.1.attn.weight"};
  const uint32_t ordinals[] = {2, 2, 2, 3};
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(reader->string(records[i].name), names[i]) << i;
    ASSERT_EQ(records[i].buffers.size(), 1u);
    EXPECT_EQ(records[i].buffers[0].alloc_ordinal, ordinals[i]) << i;
    EXPECT_EQ(records[i].buffers[0].alloc_offset, 256u) << i;
  }
}

// A pointer no allocation held is looked up again at the next call: an allocation made in
// between (elsewhere than any known one, so the map's generation stays) places it.
TEST_F(MergeTest, StateLooksAgainForAPointerNoAllocationHeld) {
  run([](std::string*) {
    const void* ptrs[] = {reinterpret_cast<void*>(kSecondBase + 256)};
    const unsigned long long bytes[] = {1024};
    const char* names[] = {"late"};
    lockstep_fingerprint_many(1, ptrs, bytes, names, kStreamS, 0);  // in no allocation
    on_alloc(kSecondBase, 4096);
    lockstep_fingerprint_many(1, ptrs, bytes, names, kStreamS, 0);
  });
  auto reader = the_trace();
  ASSERT_TRUE(reader);
  const auto records = state_records(*reader);
  ASSERT_EQ(records.size(), 2u);
  ASSERT_EQ(records[1].buffers.size(), 1u);
  EXPECT_NE(records[1].buffers[0].alloc_ordinal, 0u);
  EXPECT_EQ(records[1].buffers[0].alloc_offset, 256u);
  EXPECT_TRUE(records[1].buffers[0].flags & trace::kFingerprintValid);
  if (!records[0].buffers.empty()) EXPECT_EQ(records[0].buffers[0].alloc_ordinal, 0u);
}

TEST_F(RuntimeTest, StateCallsWithNothingToRecordAreIgnored) {
  ChildResult child = run_child(env("broad"), [] {
    lockstep_fingerprint_many(0, nullptr, nullptr, nullptr, nullptr, 0);
    lockstep_fingerprint_many(2, nullptr, nullptr, nullptr, nullptr, 0);
    std::_Exit(0);
  });
  EXPECT_TRUE(WIFEXITED(child.status) && WEXITSTATUS(child.status) == 0) << child.stderr_text;
}

}  // namespace
}  // namespace lockstep::collectors
