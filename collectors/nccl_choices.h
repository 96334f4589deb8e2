// NCCL's own choices for each collective (algorithm, protocol, channel count), from its profiler
// plugin (events.h, NcclChoice), matched to the collective's record.
//
// NCCL reports a collective's plan on the thread that launches it: inside the job's
// ncclAllReduce (an ungrouped call) or inside the outermost ncclGroupEnd (grouped calls, in
// NCCL's own order, not the job's). So the hooks open a window on the thread around each traced
// collective call and each group (choices_open / choices_close); a choice that arrives inside a
// window waits in the thread's queue until the record takes it (take_choice: same NCCL
// function and buffers); one that arrives outside any window (a non-blocking communicator's
// launch thread, the host-stream callback NCCL uses while CUDA graphs of the communicator
// exist) is not recorded, and the shim says so once. Leftovers are dropped when the thread's
// outermost window closes, so the queue never outlives a call.
//
// The settings side (nccl_profiler_decision): whether the shim points NCCL_PROFILER_PLUGIN at
// itself when it loads.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "collectors/config.h"
#include "collectors/events.h"
#include "trace/record.h"

namespace lockstep::collectors {

// A choice as the record's fields hold it (record_kinds.def, Collective: nccl_algo, nccl_proto,
// nccl_channels; trace/enum_names.def NcclAlgo / NcclProto values).
struct ChoiceFields {
  uint64_t algo = 0, proto = 0, channels = 0;
};
// NCCL's names to the trace's values: 0 for none (null or empty), the table's Other (255) for a
// name this version does not know.
uint64_t nccl_algo_value(const char* name);
uint64_t nccl_proto_value(const char* name);
// Does NCCL's function name ("AllReduce", "Broadcast") name this API's collective?
bool nccl_func_matches(std::string_view func, NcclOp op);

void choices_open();
void choices_close();
// The choice queued on this thread for the collective `op` with these buffers (an exact match
// of both buffers first, then of the function and receive buffer; when `only_call` the thread
// has one collective open and any choice of that function is its own). Taken once.
std::optional<ChoiceFields> take_choice(NcclOp op, const void* send, const void* recv,
                                        bool only_call);
// Fills the record's fields from take_choice; leaves them (0, not recorded) when none.
void apply_choice(trace::Record& record, NcclOp op, const void* send, const void* recv,
                  bool only_call);

// ---- the setting ----
struct ProfilerDecision {
  enum Action { Leave, Set, KeepJobs } action = Leave;
  std::string message;  // one line for stderr (KeepJobs), empty otherwise
};
// `current`: NCCL_PROFILER_PLUGIN as the job set it (null: unset); `current_is_shim`: it names
// the shim's own file already (a child process inherits the variable from a traced parent);
// `shim_path_length`: NCCL copies the name into 255 bytes (plugin_open.cc, MAX_STR_LEN), so a
// longer path would be cut and not found: left unset, and one line says why.
inline constexpr size_t kNcclPluginNameMax = 254;
ProfilerDecision nccl_profiler_decision(const ConfigResult& config, const char* current,
                                        bool current_is_shim, size_t shim_path_length);

}  // namespace lockstep::collectors
