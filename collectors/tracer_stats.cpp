// The Tracer's counters at close: LOCKSTEP_DEBUG's lines and the Warning records
// (tracer_stats.h), and Tracer::report_at_close, which writes them with the shim's self time.
#include "collectors/tracer_stats.h"

#include <algorithm>
#include <iterator>

#include <fmt/format.h>

#include "collectors/runtime.h"
#include "common/self_time.h"

namespace lockstep::collectors {

std::vector<std::string> TracerStats::debug_lines(const hashing::EngineStats& engines,
                                                  const Parts& parts) const {
  static constexpr const char* kCauseNames[] = {
      "next kernel unhashed", "other stream", "other thread", "other call", "chain full", "free",
      "order point",          "step",         "close"};
  static_assert(std::size(kCauseNames) == size_t(FlushCause::kCount));
  std::string causes;
  uint64_t alone = 0;
  for (size_t i = 0; i < size_t(FlushCause::kCount); ++i) {
    const uint64_t n = deferred_flushes[i].load();
    alone += n;
    if (n != 0) causes += fmt::format("{}{} {}", causes.empty() ? "" : ", ", kCauseNames[i], n);
  }
  static constexpr const char* kRefusalNames[] = {"writes not known", "chain full",
                                                  "writes the set", "input not known"};
  static_assert(std::size(kRefusalNames) == size_t(ChainRefusal::kCount));
  std::string refusals;
  for (size_t i = 0; i < size_t(ChainRefusal::kCount); ++i)
    if (const uint64_t n = chain_refusals[i].load(); n != 0)
      refusals += fmt::format("{}{} {}", refusals.empty() ? "" : ", ", kRefusalNames[i], n);
  std::vector<std::string> lines;
  lines.push_back(fmt::format(
      "hash launches: {} ({} regions, {} bytes); {} carried two kernels' "
      "regions, {} deferred sets enqueued on their own ({}); {} regions "
      "hashed once for two records; {} calls chained (no hash launch of "
      "their own)",
      engines.launches, engines.regions_enqueued, engines.bytes_enqueued, merged_launches.load(),
      alone, causes.empty() ? "none" : causes, regions_shared.load(), chained_calls.load()));
  lines.push_back(fmt::format("calls on the deferred set's stream that launched instead of "
                              "chaining: {}",
                              refusals.empty() ? "none" : refusals));
  lines.push_back(fmt::format(
      "deferred sets held across a host wait: {}, issued with an event after them {}, "
      "other streams made to wait on it {}, failed event calls {}",
      sets_held_across_sync.load(), synced_sets_issued.load(), synced_waits.load(),
      synced_failures.load()));
  if (parts.reuse_digests)
    lines.push_back(
        fmt::format("input digests reused: {} arrived, {} in flight ({} bytes not "
                    "read again); every reuse forgotten {} times (writes not known); "
                    "{} inputs not written since their allocation, not hashed ({} "
                    "bytes)",
                    digests_reused.load(), digests_awaited.load(), bytes_not_reread.load(),
                    digests_forgotten.load(), inputs_unwritten.load(), bytes_unwritten.load()));
  if (parts.carry_freed)
    lines.push_back(fmt::format("freed allocations whose digest went to the next allocation of "
                                "the same range (LOCKSTEP_CARRY_FREED): {} ({} bytes)",
                                digests_carried.load(), bytes_carried.load()));
  lines.push_back(
      fmt::format("kernel regions inside a larger region of their allocation hashed "
                  "at the same point (its digest taken): {} ({} bytes not read)",
                  regions_enclosed.load(), bytes_enclosed.load()));
  if (parts.learn_roles)
    lines.push_back(
        fmt::format("kernel pointers learned read-only: {} (found written later: {}); "
                    "{} outputs not hashed ({} bytes)",
                    roles_learned.load(), roles_contradicted.load(), outputs_read_only.load(),
                    bytes_read_only.load()));
  lines.push_back(
      fmt::format("kernel regions overwritten whole by known writers (fills, contiguous "
                  "elementwise outputs, reductions' outputs), input not hashed: {} ({} bytes)",
                  inputs_overwritten.load(), bytes_overwritten.load()));
  lines.push_back(
      fmt::format("kernel scratch buffers not hashed (reduce_kernel's cta_buf): {} "
                  "({} bytes)",
                  scratch_regions.load(), bytes_scratch.load()));
  lines.push_back(
      fmt::format("multi-tensor-apply address words of tensors the launch does not "
                  "work on (not pointers of the launch): {}",
                  stale_tensor_words.load()));
  lines.push_back(
      fmt::format("parameter words that read as pointers where the kernel's struct holds none "
                  "(stack leftovers: offset calculators' unused dimensions of strided elementwise "
                  "and reduction launches, a concatenation's metadata past its inputs), "
                  "dropped: {}",
                  calculator_words.load()));
  if (parts.recall_fills)
    lines.push_back(
        fmt::format("fill outputs recalled, not hashed: {} ({} bytes); fills that "
                    "differed from an earlier same fill: {}",
                    fills_recalled.load(), bytes_recalled.load(), fills_differed.load()));
  lines.push_back(fmt::format("frees held back until their deferred hashes were enqueued: {}",
                              frees_deferred.load()));
  lines.push_back(
      fmt::format("cuBLASLt layouts and algorithms known by their bytes: {}, read "
                  "from the library: {}; GEMMs read on the launching thread, their copies' ring "
                  "busy: {}",
                  lt_reads_cached.load(), lt_reads_missed.load(), lt_copies_ring_full.load()));
  return lines;
}

std::vector<TracerStats::Warning> TracerStats::warnings() const {
  const Warning all[] = {
      {WarningCode::NestedKernels, nested_kernels.load(),
       "kernels attributed to the enclosing library call"},
      {WarningCode::CaptureNotFingerprinted, capture_skipped.load(),
       "buffers on capturing streams not fingerprinted"},
      {WarningCode::FingerprintsDropped, fingerprints_dropped.load(),
       "fingerprints dropped (hash ring full or no engine)"},
      {WarningCode::ReadOnlyWritten, roles_contradicted.load(),
       "kernel pointer arguments learned read-only were written later (outputs of launches "
       "before that may be missing; LOCKSTEP_LEARN_READONLY=0 hashes every output)"},
      {WarningCode::FillDiffered, fills_differed.load(),
       "fills wrote other bytes than an earlier fill of the same value and size (bad memory or "
       "a bad SM? LOCKSTEP_RECALL_FILLS=0 hashes every fill)"},
      {WarningCode::LtCacheMismatch, lt_cache_mismatches.load(),
       "cuBLASLt layouts or algorithms with the bytes of an earlier one read other attributes: "
       "GEMM records before that may carry the earlier one's shape or algorithm"},
      {WarningCode::LtCopyMismatch, lt_copy_mismatches.load(),
       "cuBLASLt GEMMs whose copied descriptor, layouts or algorithm read other attributes than "
       "the objects themselves: GEMM records before that may carry wrong shapes, types or "
       "algorithms"},
      {WarningCode::FailedLaunchRecorded, failed_launches_recorded.load(),
       "kernel launches or GEMMs failed after the writer encoded their records (at broad a launch "
       "or a cuBLASLt GEMM is recorded before the call)"},
  };
  std::vector<Warning> out;
  for (const Warning& w : all)
    if (w.count != 0) out.push_back(w);
  return out;
}

void Tracer::report_at_close() {
  if (config_.debug) {
    hashing::EngineStats total;
    {
      std::lock_guard lock(pending_mutex_);  // engines_ (the map) is guarded by it
      for (auto& [ctx, state] : engines_) {
        if (!state.engine) continue;
        const hashing::EngineStats s = state.engine->stats();
        total.launches += s.launches;
        total.regions_enqueued += s.regions_enqueued;
        total.bytes_enqueued += s.bytes_enqueued;
      }
    }
    for (const std::string& line :
         stats.debug_lines(total, {reuse_digests_, learn_roles_, recall_fills_, carry_freed_}))
      debug(line);
    if (const SideHashes* side = side_hashes_.load(std::memory_order_acquire)) {
      const SideHashes::Stats s = side->stats();
      // Every hash launch counted once: the rest were never candidates (order points, steps,
      // sets with frees held back, captures, the per-thread stream, sets of several launches).
      const uint64_t candidates = s.launches + s.stayed;
      const uint64_t others = total.launches > candidates ? total.launches - candidates : 0;
      debug(fmt::format("side streams (LOCKSTEP_SIDE_HASHES): {} hash launches beside the job's "
                        "kernels, {} kept on its stream (the next call may write what they "
                        "read), {} not candidates (order points, frees held back, captures); a "
                        "writer waited {} times, {} joined at an order point, {} when newer "
                        "ones came; {} failed driver calls",
                        s.launches, s.stayed, others, s.writer_waits, s.joins, s.evictions,
                        s.failures));
    }
    debug("shim self time: " + self_time::report());
    // What the job's threads spent in the shim per step, steady state: the overhead of off,
    // metrics and broad measured without the noise of comparing whole runs.
    const uint32_t steps = std::max<uint32_t>(1, Tracer::steps().current());
    debug(fmt::format(
        "shim self time per step: {:.1f} us steady ({} steps), {:.1f} ms in "
        "slow first calls",
        self_time::steady_total_ns() / 1e3 / steps, steps, self_time::slow_total_ns() / 1e6));
  }
  for (const TracerStats::Warning& w : stats.warnings()) warn(w.code, w.count, w.message);
  if (uint64_t n = hot_.writer->stats().dropped)
    warn(WarningCode::RecordsDropped, n, "records dropped by the trace writer");
}

}  // namespace lockstep::collectors
