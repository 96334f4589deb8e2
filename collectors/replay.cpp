#include "collectors/replay.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "collectors/driver_api.h"
#include "collectors/kernel_info.h"
#include "collectors/kernel_params.h"
#include "collectors/runtime.h"
#include "common/op_spec.h"

namespace lockstep::collectors {
namespace {

using F = trace::fields::Replay;

// Room left beside the snapshots: the job's own next allocations.
constexpr uint64_t kHeadroom = 256ull << 20;
constexpr uint64_t kAlign = 256;

struct Span {
  CUdeviceptr ptr = 0;
  uint64_t bytes = 0;
  uint64_t alloc_base = 0;
  std::string label;  // of the lowest pointer argument in it ("arg2", "arg0+8")
};

}  // namespace

// The one launch armed on this thread, between replay_before and replay_after.
struct ReplayArmed {
  Tracer* tracer = nullptr;
  CUstream stream = nullptr;  // as the job gave it
  bool per_thread = false;
  trace::Record record;  // the Replay record, stamped
  std::vector<Span> spans;
  uint64_t total = 0;
  CUdeviceptr snapshots = 0;  // S0 at 0, S1 at `total` (rounded)
};

namespace {

std::once_flag g_parse_once;
std::optional<settings::OpSpec> g_op;
std::mutex g_mutex;  // the counts below: launches of the named kernel only
uint32_t g_seen = 0;
bool g_done = false;

const std::optional<settings::OpSpec>& named_op(Tracer* tracer) {
  std::call_once(g_parse_once, [tracer] {
    if (!tracer->config().replay.empty()) g_op = settings::parse_op_spec(tracer->config().replay);
  });
  return g_op;
}

// The driver's stream for the job's: a null handle is the legacy or the per-thread default.
CUstream driver_stream(CUstream stream, bool per_thread) {
  if (stream != nullptr) return stream;
  return per_thread ? CU_STREAM_PER_THREAD : CU_STREAM_LEGACY;
}

std::string gib(uint64_t bytes) { return fmt::format("{:.2f} GiB", bytes / double(1ull << 30)); }

void refuse(Tracer* tracer, trace::Record record, const std::string& why) {
  record.fields[F::outcome] = 1;
  record.buffers.clear();
  record.payload.assign(why.begin(), why.end());
  std::fprintf(stderr, "lockstep[%d]: replay of the launch %s refused: %s\n",
               static_cast<int>(getpid()), tracer->config().replay.c_str(), why.c_str());
  tracer->append(record);
}

// The launch's pointer regions, to the end of each mapped run, overlapping ones merged.
std::vector<Span> spans_of(const DecodedArgs& args, const std::vector<ParamInfo>& layout) {
  std::vector<Span> spans;
  for (const PointerArg& arg : args.pointers) {
    if (arg.hit.readable == 0) continue;
    spans.push_back({static_cast<CUdeviceptr>(arg.value), arg.hit.readable, arg.hit.base,
                     arg_label(arg, layout)});
  }
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) { return a.ptr < b.ptr; });
  std::vector<Span> merged;
  for (const Span& s : spans) {
    if (!merged.empty() && s.ptr <= merged.back().ptr + merged.back().bytes) {
      Span& last = merged.back();
      last.bytes = std::max(last.ptr + last.bytes, s.ptr + s.bytes) - last.ptr;
      continue;
    }
    merged.push_back(s);
  }
  return merged;
}

}  // namespace

bool replay_names(Tracer* tracer, std::string_view demangled_name) {
  const auto& op = named_op(tracer);
  return op && op->kind == "kernel" && op->name == demangled_name;
}

void replay_before(Tracer* tracer, const trace::Record& launch_record, const KernelLaunch& launch,
                   const KernelInfo& info, bool capturing) {
  const auto& op = named_op(tracer);
  if (!op || launch_record.step != op->step || launch_record.stream != op->stream) return;
  {
    std::lock_guard lock(g_mutex);
    if (g_done || ++g_seen != op->occurrence) return;
    g_done = true;
  }
  ShimCallGuard guard;
  trace::Record record;
  tracer->stamp(&record, trace::RecordKind::Replay, "", launch.stream, launch.per_thread_stream);
  record.name = launch_record.name;
  record.step = launch_record.step;
  record.fields[F::op_seq] = launch_record.seq;
  record.fields[F::replays] = tracer->config().replays;
  if (tracer->level() != Level::Full)
    return refuse(tracer, std::move(record), "needs level full (its arguments are decoded there)");
  if (capturing)
    return refuse(tracer, std::move(record),
                  "launched into a capturing stream (a CUDA graph): graph launches are not "
                  "replayed");
  if (info.is_nccl)
    return refuse(tracer, std::move(record),
                  "an NCCL kernel: a relaunch would wait for its peers (NCCL kernels are not "
                  "replayed)");
  std::vector<uint8_t> bytes;
  if (!info.layout_known ||
      !gather_param_bytes(info.layout, launch.kernel_params, launch.extra, &bytes))
    return refuse(tracer, std::move(record), "its parameter layout is not known");
  AllocationMap& allocations = tracer->allocations();
  const DecodedArgs args =
      decode_args(info.layout, bytes, [&](uintptr_t p) { return allocations.find(p); });
  std::vector<Span> spans = spans_of(args, info.layout);
  if (spans.empty())
    return refuse(tracer, std::move(record),
                  "no pointer argument into a known allocation: what it reads and writes is not "
                  "known");
  uint64_t total = 0;
  for (const Span& s : spans) total += (s.bytes + kAlign - 1) / kAlign * kAlign;
  record.fields[F::regions] = spans.size();
  record.fields[F::region_bytes] = total;
  const Driver& d = driver();
  if (d.memAllocAsync == nullptr || d.memcpyDtoDAsync == nullptr || d.memGetInfo == nullptr ||
      d.memFreeAsync == nullptr)
    return refuse(tracer, std::move(record),
                  "the driver lacks stream-ordered allocation (cuMemAllocAsync)");
  size_t free_bytes = 0, device_bytes = 0;
  if (d.memGetInfo(&free_bytes, &device_bytes) != CUDA_SUCCESS)
    return refuse(tracer, std::move(record), "cuMemGetInfo failed");
  if (2 * total + kHeadroom > free_bytes)
    return refuse(
        tracer, std::move(record),
        fmt::format("needs {} (twice its {} regions' {}) and {} more left to the job, "
                    "{} free",
                    gib(2 * total), spans.size(), gib(total), gib(kHeadroom), gib(free_bytes)));
  const CUstream stream = driver_stream(launch.stream, launch.per_thread_stream);
  CUdeviceptr snapshots = 0;
  if (d.memAllocAsync(&snapshots, 2 * total, stream) != CUDA_SUCCESS)
    return refuse(tracer, std::move(record),
                  fmt::format("cuMemAllocAsync of {} failed", gib(2 * total)));
  uint64_t at = 0;
  for (const Span& s : spans) {
    d.memcpyDtoDAsync(snapshots + at, s.ptr, s.bytes, stream);  // S0
    at += (s.bytes + kAlign - 1) / kAlign * kAlign;
  }
  auto* armed = new ReplayArmed;
  armed->tracer = tracer;
  armed->stream = launch.stream;
  armed->per_thread = launch.per_thread_stream;
  armed->record = std::move(record);
  armed->spans = std::move(spans);
  armed->total = total;
  armed->snapshots = snapshots;
  open_api().replay_armed = armed;
  tracer->debug(fmt::format("replay: armed for seq {} ({} regions, {} each snapshot)",
                            launch_record.seq, armed->spans.size(), gib(total)));
}

void replay_after(int result, const std::function<int()>& relaunch) {
  ReplayArmed* armed = open_api().replay_armed;
  if (armed == nullptr) return;
  open_api().replay_armed = nullptr;  // a relaunch that reaches another hook of ours is no replay
  ShimCallGuard guard;
  Tracer* tracer = armed->tracer;
  const Driver& d = driver();
  const CUstream stream = driver_stream(armed->stream, armed->per_thread);
  const uint64_t s1 = armed->snapshots + armed->total;
  auto copy_all = [&](bool to_regions, CUdeviceptr base) {
    uint64_t at = 0;
    for (const Span& s : armed->spans) {
      if (to_regions)
        d.memcpyDtoDAsync(s.ptr, base + at, s.bytes, stream);
      else
        d.memcpyDtoDAsync(base + at, s.ptr, s.bytes, stream);
      at += (s.bytes + kAlign - 1) / kAlign * kAlign;
    }
  };
  auto finish = [&] {
    d.memFreeAsync(armed->snapshots, stream);
    // The regions now hold what the job's launch left, but the last digests taken of them were
    // the replays': forgotten, so that no later input takes one (region_digests.h).
    for (const Span& s : armed->spans) tracer->region_written(s.ptr, s.ptr + s.bytes, s.alloc_base);
    delete armed;
  };
  if (result != CUDA_SUCCESS) {
    refuse(tracer, std::move(armed->record),
           fmt::format("the job's own launch failed (error {})", result));
    finish();
    return;
  }
  const uint32_t n = tracer->config().replays;
  const size_t regions = armed->spans.size();
  const uint64_t cap = tracer->config().max_region;
  trace::Record& record = armed->record;
  record.fields[F::outcome] = 0;
  std::vector<PlannedRegion> plans((n + 1) * regions);
  for (uint32_t pass = 0; pass <= n; ++pass) {
    for (size_t i = 0; i < regions; ++i) {
      const Span& s = armed->spans[i];
      trace::BufferFingerprint entry;
      entry.role = trace::Role::Out;
      entry.dtype = trace::DType::Bytes;
      entry.label = tracer->intern(s.label);
      entry.bytes = std::min(s.bytes, cap);
      if (entry.bytes < s.bytes) entry.flags |= trace::kExtentClamped;
      const auto index = static_cast<uint32_t>(record.buffers.size());
      record.buffers.push_back(entry);
      plans[pass * regions + i] = {s.ptr, entry.bytes, index, s.alloc_base, s.ptr + s.bytes};
    }
  }
  PendingRecord* pending = tracer->hold(std::move(record));
  if (pending == nullptr) {
    copy_all(false, s1);  // nothing replayed: the regions are the job's already
    refuse(tracer, std::move(armed->record), "the tracer's queue of records is full");
    finish();
    return;
  }
  // The job's own output first: what each replay is compared with.
  tracer->fingerprint(pending, armed->stream, armed->per_thread, plans.data(), regions, true);
  copy_all(false, s1);
  uint32_t replayed = 0;
  int failed = CUDA_SUCCESS;
  for (uint32_t pass = 1; pass <= n && failed == CUDA_SUCCESS; ++pass) {
    copy_all(true, armed->snapshots);
    failed = relaunch();
    if (failed != CUDA_SUCCESS) break;
    tracer->fingerprint(pending, armed->stream, armed->per_thread, plans.data() + pass * regions,
                        regions, true);
    ++replayed;
  }
  copy_all(true, s1);
  if (failed != CUDA_SUCCESS) {
    const std::string why = fmt::format("relaunch {} failed (error {})", replayed + 1, failed);
    pending->record.payload.assign(why.begin(), why.end());  // under the open-call reference
  }
  tracer->debug(fmt::format("replay: {} relaunches enqueued", replayed));
  tracer->release(pending);
  finish();
}

}  // namespace lockstep::collectors
