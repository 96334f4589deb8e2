// NCCL's choices per collective (nccl_choices.h): the thread's queue, the matching, the names,
// and the NCCL_PROFILER_PLUGIN decision made when the shim loads.
#include "collectors/nccl_choices.h"

#include <sys/stat.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "collectors/runtime.h"
#include "common/env.h"

namespace lockstep::collectors {
namespace {

using F = trace::fields::Collective;

// NcclAlgo / NcclProto rows of trace/enum_names.def, the one home of the names.
struct NamedValue {
  std::string_view table;
  int64_t value;
  std::string_view name;
};
constexpr NamedValue kNames[] = {
#define LOCKSTEP_ENUM(Table, Type)
#define LOCKSTEP_ENUM_VALUE(Table, value, Identifier) {#Table, value, #Identifier},
#include "trace/enum_names.def"
#undef LOCKSTEP_ENUM
#undef LOCKSTEP_ENUM_VALUE
};
constexpr uint64_t kOther = 255;

uint64_t value_in(std::string_view table, const char* name) {
  if (name == nullptr || *name == '\0') return 0;
  for (const NamedValue& row : kNames)
    if (row.table == table && row.name == name) return static_cast<uint64_t>(row.value);
  return kOther;
}

struct Queued {
  std::string func;  // NCCL's strings live only during its call
  const void* send = nullptr;
  const void* recv = nullptr;
  ChoiceFields fields;
};

struct ThreadChoices {
  int windows = 0;
  std::vector<Queued> queue;
};
ThreadChoices& thread_choices() {
  thread_local auto* choices = new ThreadChoices;  // survives exit-time hooks
  return *choices;
}

constexpr size_t kMaxQueued = 4096;  // a group of more collectives than this loses the rest
std::atomic<bool> g_said_outside{false};

std::string_view op_func(NcclOp op) {
  switch (op) {
    case NcclOp::AllReduce:
      return "AllReduce";
    case NcclOp::Broadcast:
    case NcclOp::Bcast:
      return "Broadcast";
    case NcclOp::Reduce:
      return "Reduce";
    case NcclOp::AllGather:
      return "AllGather";
    case NcclOp::ReduceScatter:
      return "ReduceScatter";
    case NcclOp::AlltoAll:
      return "AlltoAll";
    case NcclOp::Gather:
      return "Gather";
    case NcclOp::Scatter:
      return "Scatter";
    case NcclOp::Send:
      return "Send";
    case NcclOp::Recv:
      return "Recv";
  }
  return "";
}

bool same_file(const char* a, const char* b) {
  struct stat sa {
  }, sb{};
  if (a == nullptr || b == nullptr || ::stat(a, &sa) != 0 || ::stat(b, &sb) != 0) return false;
  return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

}  // namespace

uint64_t nccl_algo_value(const char* name) { return value_in("NcclAlgo", name); }
uint64_t nccl_proto_value(const char* name) { return value_in("NcclProto", name); }

bool nccl_func_matches(std::string_view func, NcclOp op) { return func == op_func(op); }

void choices_open() { ++thread_choices().windows; }

void choices_close() {
  ThreadChoices& t = thread_choices();
  if (t.windows > 0 && --t.windows == 0) t.queue.clear();
}

void nccl_choice(const NcclChoice& choice) {
  ThreadChoices& t = thread_choices();
  if (t.windows == 0) {
    // Not on a thread inside a traced NCCL call: NCCL planned it elsewhere (see the header).
    bool expected = false;
    if (Tracer::existing() != nullptr && g_said_outside.compare_exchange_strong(expected, true))
      std::fprintf(stderr,
                   "lockstep: NCCL planned a collective outside the call that made it (a "
                   "non-blocking communicator, or CUDA graphs of the communicator alive): "
                   "such collectives are recorded without NCCL's algorithm and protocol\n");
    return;
  }
  if (t.queue.size() >= kMaxQueued) return;
  Queued q;
  q.func = choice.func != nullptr ? choice.func : "";
  q.send = choice.send;
  q.recv = choice.recv;
  q.fields.algo = nccl_algo_value(choice.algo);
  q.fields.proto = nccl_proto_value(choice.proto);
  q.fields.channels = choice.channels;
  t.queue.push_back(std::move(q));
}

std::optional<ChoiceFields> take_choice(NcclOp op, const void* send, const void* recv,
                                        bool only_call) {
  std::vector<Queued>& queue = thread_choices().queue;
  auto take = [&](auto&& matches) -> std::optional<ChoiceFields> {
    for (auto it = queue.begin(); it != queue.end(); ++it) {
      if (!nccl_func_matches(it->func, op) || !matches(*it)) continue;
      ChoiceFields fields = it->fields;
      queue.erase(it);
      return fields;
    }
    return std::nullopt;
  };
  if (auto f = take([&](const Queued& q) { return q.send == send && q.recv == recv; })) return f;
  if (auto f = take([&](const Queued& q) { return q.recv == recv; })) return f;
  if (only_call) return take([](const Queued&) { return true; });
  return std::nullopt;
}

void apply_choice(trace::Record& record, NcclOp op, const void* send, const void* recv,
                  bool only_call) {
  if (auto f = take_choice(op, send, recv, only_call)) {
    record.fields[F::nccl_algo] = f->algo;
    record.fields[F::nccl_proto] = f->proto;
    record.fields[F::nccl_channels] = f->channels;
  }
}

void nccl_profiler_loaded(int nranks, int rank) {
  const ConfigResult& c = Tracer::configuration();
  if (c.config.debug)
    std::fprintf(stderr,
                 "lockstep: NCCL loaded the shim as its profiler plugin for a communicator of %d "
                 "ranks (rank %d)\n",
                 nranks, rank);
}

ProfilerDecision nccl_profiler_decision(const ConfigResult& config, const char* current,
                                        bool current_is_shim, size_t shim_path_length) {
  ProfilerDecision d;
  const bool traces_collectives = config.ok() && config.config.level >= Level::Broad;
  if (!traces_collectives || !config.config.nccl_profiler) return d;
  if ((current == nullptr || *current == '\0') && shim_path_length > kNcclPluginNameMax) {
    d.message = fmt::format(
        "lockstep: the shim's path is longer than the {} characters NCCL reads from "
        "NCCL_PROFILER_PLUGIN: NCCL's algorithm, protocol and channel count will not be recorded",
        kNcclPluginNameMax);
  } else if (current == nullptr || *current == '\0') {
    d.action = ProfilerDecision::Set;
  } else if (!current_is_shim) {
    d.action = ProfilerDecision::KeepJobs;
    d.message = fmt::format(
        "lockstep: NCCL_PROFILER_PLUGIN={} is the job's own profiler plugin and is kept: NCCL's "
        "algorithm, protocol and channel count will not be recorded ({}=0 silences this)",
        current, env::kNcclProfiler);
  }
  return d;
}

void nccl_profiler_setup(const char* shim_path) {
  if (shim_path == nullptr || *shim_path == '\0') return;
  static constexpr const char* kVariable = "NCCL_PROFILER_PLUGIN";
  const char* current = std::getenv(kVariable);
  const ProfilerDecision d = nccl_profiler_decision(
      Tracer::configuration(), current, same_file(current, shim_path), std::strlen(shim_path));
  if (d.action == ProfilerDecision::Set) ::setenv(kVariable, shim_path, 1);
  if (!d.message.empty()) std::fprintf(stderr, "%s\n", d.message.c_str());
}

}  // namespace lockstep::collectors
