#include "tools/diff/setup_phase.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "trace/field_format.h"

namespace lockstep::tools {
namespace {

using G = trace::fields::Gemm;
using K = trace::fields::Kernel;

// A GEMM's problem (everything but the algorithm and workspace), and its text.
using GemmKey = std::tuple<uint32_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t,
                           uint64_t, uint64_t, uint64_t, uint64_t, uint64_t>;
GemmKey gemm_key(const OpTable& t, const Op& op) {
  return {op.name,
          t.field(op, G::m),
          t.field(op, G::n),
          t.field(op, G::k),
          t.field(op, G::batch),
          t.field(op, G::trans_a),
          t.field(op, G::trans_b),
          t.field(op, G::type_a),
          t.field(op, G::type_b),
          t.field(op, G::type_c),
          t.field(op, G::type_d),
          t.field(op, G::compute_type)};
}
std::string algo_text(const OpTable& t, const Op& op, std::string_view name) {
  return "algo " + trace::field_text(trace::RecordKind::Gemm, G::algo, t.field(op, G::algo),
                                     {name, op.seq});
}
std::string launch_text(const OpTable& t, const Op& op) {
  return fmt::format("grid {}x{}x{} block {}x{}x{} smem {}", t.field(op, K::grid_x),
                     t.field(op, K::grid_y), t.field(op, K::grid_z), t.field(op, K::block_x),
                     t.field(op, K::block_y), t.field(op, K::block_z),
                     t.field(op, K::smem_bytes));
}

// What one run chose: the first algorithm of each GEMM problem, the first launch shape of each
// kernel name, and every kernel name it ran.
struct Choices {
  std::map<GemmKey, std::string> gemms;
  std::map<uint32_t, std::string> launches;
};
Choices choices_of(const OpTable& t, const StringPool& pool) {
  Choices c;
  // The text only for the first of each (a window holds thousands of launches of a few names).
  for (const Op& op : t.ops()) {
    if (op.kind == trace::RecordKind::Gemm) {
      GemmKey key = gemm_key(t, op);
      if (!c.gemms.contains(key)) c.gemms.emplace(key, algo_text(t, op, pool.text(op.name)));
    } else if (op.kind == trace::RecordKind::Kernel && !c.launches.contains(op.name)) {
      c.launches.emplace(op.name, launch_text(t, op));
    }
  }
  return c;
}

}  // namespace

void compare_choices(const OpTable& a, const OpTable& b, const StringPool& pool,
                     std::vector<ChoiceDifference>& out, uint64_t* total, bool kernel_sets) {
  const Choices ca = choices_of(a, pool), cb = choices_of(b, pool);
  auto add = [&](std::string what, std::string in_a, std::string in_b) {
    for (const ChoiceDifference& d : out)
      if (d.what == what) return;
    ++*total;
    if (out.size() < kMaxChoices) out.push_back({std::move(what), std::move(in_a), std::move(in_b)});
  };
  for (const auto& [key, algo] : ca.gemms) {
    auto it = cb.gemms.find(key);
    if (it == cb.gemms.end() || it->second == algo) continue;
    add(fmt::format("gemm {} m={} n={} k={} batch={}", pool.text(std::get<0>(key)),
                    std::get<1>(key), std::get<2>(key), std::get<3>(key), std::get<4>(key)),
        algo, it->second);
  }
  for (const auto& [name, launch] : ca.launches) {
    auto it = cb.launches.find(name);
    if (it != cb.launches.end() && it->second != launch)
      add(fmt::format("kernel {}", pool.text(name)), launch, it->second);
  }
  if (!kernel_sets) return;
  // Kernels only one run ran: an autotuner's benchmark kernels, or another fusion chosen.
  std::vector<std::string> only_a, only_b;
  for (const auto& [name, launch] : ca.launches)
    if (!cb.launches.contains(name)) only_a.emplace_back(pool.text(name));
  for (const auto& [name, launch] : cb.launches)
    if (!ca.launches.contains(name)) only_b.emplace_back(pool.text(name));
  auto names = [](const std::vector<std::string>& v) {
    if (v.empty()) return std::string("none");
    std::string text = fmt::format("{} kernel{}: {}", v.size(), v.size() == 1 ? "" : "s", v[0]);
    if (v.size() > 1) text += fmt::format(", {}", v[1]);
    if (v.size() > 2) text += ", ...";
    return text;
  };
  if (!only_a.empty() || !only_b.empty()) add("kernels only one run ran", names(only_a), names(only_b));
}

std::string autotune_fix(const std::vector<ChoiceDifference>& choices) {
  bool inductor = false, xla = false;
  for (const ChoiceDifference& c : choices)
    for (const std::string* text : {&c.what, &c.a, &c.b}) {
      inductor = inductor || text->find("triton_") != std::string::npos;
      xla = xla || text->find("fusion") != std::string::npos ||
            text->find("Redzone") != std::string::npos ||
            text->find("RepeatBuffer") != std::string::npos;
    }
  const std::string for_xla =
      "XLA: XLA_FLAGS=\"--xla_gpu_autotune_level=0 --xla_gpu_deterministic_ops=true\", or one "
      "autotuning result for every run (--xla_gpu_per_fusion_autotune_cache_dir=DIR, warmed "
      "once)";
  const std::string for_inductor =
      "torch.compile: no max-autotune (mode=None), or one warmed Inductor cache for every run "
      "(TORCHINDUCTOR_CACHE_DIR, TORCHINDUCTOR_FX_GRAPH_CACHE=1)";
  if (xla && !inductor) return for_xla;
  if (inductor && !xla) return for_inductor;
  return for_xla + "; " + for_inductor;
}

}  // namespace lockstep::tools
