// CUDA graphs. A graph seen captured is numbered by its capture; at instantiation its kernel
// nodes are walked once (node order, child graphs included): their identity, and the regions
// their pointer arguments reach. Each launch then records the graph (GraphLaunch, with those
// regions fingerprinted before and after the replay at level full, on the launch stream) and
// one Kernel record per kernel node, so that a graph replay lines up like the eager launches
// it replaced. Fingerprints run outside the graph: per replay, not per node.
//
// Never read: allocations a graph owns (cudaMallocAsync into the capturing stream makes a
// memory node, mapped only while the graph runs), and anything when the launch stream is
// itself capturing.
#include <algorithm>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

#include "collectors/call_stack.h"
#include "collectors/driver_api.h"
#include "collectors/events.h"
#include "collectors/kernel_info.h"

namespace lockstep::collectors {
namespace {

constexpr size_t kMaxGraphRegions = 8192;  // a whole training step holds a few thousand
constexpr int kMaxChildDepth = 8;

struct NodeKernel {
  trace::StringId name = 0;
  uint32_t grid[3] = {1, 1, 1}, block[3] = {1, 1, 1};
  uint32_t smem = 0;
  uint64_t args_digest = 0;
};

struct GraphRegion {
  CUdeviceptr ptr = 0;
  uint64_t bytes = 0;
  std::string label;  // n<node index>.<argument>, of the first node that reaches it
};

struct ExecInfo {
  uint64_t graph_id = 0;
  uint64_t launches = 0;
  std::vector<NodeKernel> nodes;  // kernel nodes, in node order
  std::vector<GraphRegion> regions;
};

std::mutex g_graph_mutex;
std::unordered_map<const void*, uint64_t> g_graph_capture;  // graph -> capture id
std::unordered_map<const void*, std::shared_ptr<ExecInfo>> g_execs;
uint64_t g_uncaptured_graphs = 0;

class NodeWalker {
 public:
  NodeWalker(Tracer* tracer, ExecInfo* exec) : tracer_(tracer), exec_(exec), d_(driver()) {}

  void walk(CUgraph graph, int depth) {
    if (d_.graphGetNodes == nullptr || d_.graphNodeGetType == nullptr) return;
    size_t n = 0;
    if (d_.graphGetNodes(graph, nullptr, &n) != CUDA_SUCCESS || n == 0) return;
    std::vector<CUgraphNode> nodes(n);
    if (d_.graphGetNodes(graph, nodes.data(), &n) != CUDA_SUCCESS) return;
    nodes.resize(n);
    for (CUgraphNode node : nodes) {
      CUgraphNodeType type;
      if (d_.graphNodeGetType(node, &type) != CUDA_SUCCESS) continue;
      if (type == CU_GRAPH_NODE_TYPE_GRAPH && depth < kMaxChildDepth &&
          d_.graphChildGraphNodeGetGraph != nullptr) {
        CUgraph child = nullptr;
        if (d_.graphChildGraphNodeGetGraph(node, &child) == CUDA_SUCCESS && child != nullptr)
          walk(child, depth + 1);
      } else if (type == CU_GRAPH_NODE_TYPE_KERNEL) {
        kernel_node(node);
      }
    }
  }

 private:
  void kernel_node(CUgraphNode node) {
    if (d_.graphKernelNodeGetParams == nullptr) return;
    CUDA_KERNEL_NODE_PARAMS p{};
    if (d_.graphKernelNodeGetParams(node, &p) != CUDA_SUCCESS) return;
    const bool by_function = p.func != nullptr;
    const void* handle =
        by_function ? static_cast<const void*>(p.func) : static_cast<const void*>(p.kern);
    if (handle == nullptr) return;
    const KernelInfo& info = kernel_info(
        tracer_, by_function ? FunctionHandle::DriverFunction : FunctionHandle::DriverKernel,
        handle);
    NodeKernel k;
    k.name = info.name_id;
    k.grid[0] = p.gridDimX, k.grid[1] = p.gridDimY, k.grid[2] = p.gridDimZ;
    k.block[0] = p.blockDimX, k.block[1] = p.blockDimY, k.block[2] = p.blockDimZ;
    k.smem = p.sharedMemBytes;
    const uint32_t index = static_cast<uint32_t>(exec_->nodes.size());
    if (info.layout_known && gather_param_bytes(info.layout, p.kernelParams, p.extra, &bytes_)) {
      AllocationMap& allocations = tracer_->allocations();
      DecodedArgs args =
          decode_args(info.layout, bytes_, [&](uintptr_t v) { return allocations.find(v); });
      k.args_digest = args.scalar_digest;
      if (info.selected) {
        for (const PointerArg& arg : args.pointers) {
          if (arg.hit.graph_owned || arg.hit.readable == 0 ||
              exec_->regions.size() >= kMaxGraphRegions || !seen_.insert(arg.value).second)
            continue;
          const uint64_t bytes = std::min(arg.hit.readable, tracer_->config().max_region);
          exec_->regions.push_back({static_cast<CUdeviceptr>(arg.value), bytes,
                                    fmt::format("n{}.{}", index, arg_label(arg, info.layout))});
        }
      }
    }
    exec_->nodes.push_back(k);
  }

  Tracer* tracer_;
  ExecInfo* exec_;
  const Driver& d_;
  std::vector<uint8_t> bytes_;
  std::unordered_set<uintptr_t> seen_;  // a region once, labelled by its first node
};

}  // namespace

void note_captured_kernel(uint64_t capture_id, CUgraph graph) {
  if (graph == nullptr) return;
  std::lock_guard lock(g_graph_mutex);
  // The latest capture's: a graph destroyed and another captured at its address (the driver
  // hands handles out again) is the new capture, whose id the next run gives it too.
  g_graph_capture.insert_or_assign(graph, capture_id);
}

void graph_instantiated(const void* graph, const void* graph_exec) {
  if (!active()) return;
  Tracer* tracer = Tracer::get();
  auto exec = std::make_shared<ExecInfo>();
  {
    std::lock_guard lock(g_graph_mutex);
    if (auto it = g_graph_capture.find(graph); it != g_graph_capture.end()) {
      exec->graph_id = it->second;
    } else {
      // Not seen captured (built node by node): numbered by instantiation order.
      exec->graph_id = (1ull << 62) + ++g_uncaptured_graphs;
    }
  }
  if (tracer != nullptr && tracer->level() >= Level::Broad) {
    ShimCallGuard guard;  // the walk's driver calls are ours
    NodeWalker(tracer, exec.get()).walk(reinterpret_cast<CUgraph>(const_cast<void*>(graph)), 0);
  }
  std::lock_guard lock(g_graph_mutex);
  g_execs[graph_exec] = std::move(exec);
}

uint64_t graph_launch_begin(const void* graph_exec, CUstream stream, bool per_thread_default) {
  if (!active()) return 0;
  Tracer* tracer = Tracer::get();
  if (tracer == nullptr || tracer->level() < Level::Broad) return 0;
  std::shared_ptr<ExecInfo> exec;
  uint64_t replay = 0;
  {
    std::lock_guard lock(g_graph_mutex);
    auto it = g_execs.find(graph_exec);
    if (it != g_execs.end()) {
      exec = it->second;
      replay = ++exec->launches;
    }
  }
  uint64_t token = 0;
  CallState& call = push_call(CallKind::Graph, &token, stream, per_thread_default);
  call.tracer = tracer;
  call.stream = stream;
  call.per_thread_stream = per_thread_default;
  trace::Record& r = call.record;
  tracer->stamp(&r, trace::RecordKind::GraphLaunch, "graph", stream, per_thread_default);
  using F = trace::fields::GraphLaunch;
  r.fields[F::graph_id] = exec ? exec->graph_id : 0;
  r.fields[F::node_count] = exec ? exec->nodes.size() : 0;
  r.fields[F::replay_index] = replay;
  call.graph_exec = graph_exec;
  if (exec == nullptr || exec->regions.empty()) return token;
  uint64_t capture_id = 0;
  const bool hash = tracer->level() == Level::Full && tracer->fingerprint_step(r.step) &&
                    !tracer->capturing(stream, per_thread_default, &capture_id);
  if (!hash) return token;  // the regions are only worth their bytes with fingerprints
  std::vector<PlannedRegion> inputs;
  const uint64_t cap = tracer->config().max_region;
  AllocationMap& allocations = tracer->allocations();
  for (const GraphRegion& region : exec->regions) {
    // Looked up again: since instantiation the memory may have been freed, or handed to a
    // graph memory node of another graph (mapped only while that graph runs).
    const auto now = allocations.find(static_cast<uintptr_t>(region.ptr));
    if (!now || now->graph_owned) continue;
    const void* ptr = reinterpret_cast<const void*>(region.ptr);
    tracer->add_buffer(&r, &inputs, region.label, trace::Role::In, trace::DType::Bytes, ptr,
                       region.bytes, false, true, cap);
    tracer->add_buffer(&r, &call.outputs, region.label, trace::Role::Out, trace::DType::Bytes, ptr,
                       region.bytes, false, true, cap);
  }
  start_fingerprints(call, inputs);
  return token;
}

void graph_launch_end(uint64_t token, int result) {
  CallState* call = returned_call(token);
  if (call == nullptr) return;
  Tracer* tracer = call->tracer;
  if (tracer != nullptr) {
    const uint64_t graph_id = call->live_record().fields[trace::fields::GraphLaunch::graph_id];
    if (call->pending != nullptr) {
      if (result == CUDA_SUCCESS)
        tracer->fingerprint(call->pending, call->stream, call->per_thread_stream,
                            call->outputs.data(), call->outputs.size());
      tracer->release(call->pending, result == CUDA_SUCCESS);
    } else if (result == CUDA_SUCCESS) {
      tracer->append(call->record);
    }
    std::shared_ptr<ExecInfo> exec;
    if (result == CUDA_SUCCESS && call->graph_exec != nullptr) {
      std::lock_guard lock(g_graph_mutex);
      if (auto it = g_execs.find(call->graph_exec); it != g_execs.end()) exec = it->second;
    }
    // The replay's kernels, in node order, by identity (their fingerprints are the graph's).
    if (exec != nullptr) {
      using F = trace::fields::Kernel;
      for (const NodeKernel& k : exec->nodes) {
        trace::Record r;
        tracer->stamp(&r, trace::RecordKind::Kernel, "", call->stream, call->per_thread_stream);
        r.name = k.name;
        r.fields[F::grid_x] = k.grid[0], r.fields[F::grid_y] = k.grid[1];
        r.fields[F::grid_z] = k.grid[2];
        r.fields[F::block_x] = k.block[0], r.fields[F::block_y] = k.block[1];
        r.fields[F::block_z] = k.block[2];
        r.fields[F::smem_bytes] = k.smem;
        r.fields[F::args_digest] = k.args_digest;
        r.fields[F::launch_api] = static_cast<uint64_t>(LaunchApi::GraphNode);
        r.fields[F::capture_id] = graph_id;
        tracer->append(r);
      }
    }
  }
  finish_call(call);
}

}  // namespace lockstep::collectors
