#include "tools/why/environment.h"

#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>

#include "tools/json_text.h"
#include "trace/header.h"

namespace lockstep::tools {
namespace {

using json = nlohmann::json;

enum class Decode { Text, Cuda, Nccl, Library, Args };

// The header's facts that can change numbers, in the order the report lists them.
struct Fact {
  const char* key;
  const char* sub;  // a member of the key's object ("gpu"."name"), or nullptr
  const char* what;
  Decode decode;
};
constexpr Fact kFacts[] = {
    {"gpu", "name", "GPU model", Decode::Text},
    {trace::kGpuCountKey, nullptr, "GPUs visible", Decode::Text},
    {"driver_version", nullptr, "driver (CUDA version)", Decode::Cuda},
    {"runtime_version", nullptr, "CUDA runtime", Decode::Cuda},
    {"cublas_version", nullptr, "cuBLAS", Decode::Library},
    {"cublaslt_version", nullptr, "cuBLASLt", Decode::Library},
    {trace::kCudnnVersionKey, nullptr, "cuDNN", Decode::Library},
    {"nccl_version", nullptr, "NCCL", Decode::Nccl},
    {"python", nullptr, "Python", Decode::Text},
    {"local_world_size", nullptr, "ranks per node", Decode::Text},
    {"command_line", nullptr, "command line", Decode::Args},
};

// People's names of the packages collectors/environment.cpp looks for.
std::string package_name(const std::string& package) {
  static const std::map<std::string, std::string> names = {
      {"torch", "PyTorch"},
      {"jax", "JAX"},
      {"jaxlib", "jaxlib"},
      {"triton", "Triton"},
      {"pytorch_triton", "Triton (pytorch_triton)"}};
  auto it = names.find(package);
  return it != names.end() ? it->second : package;
}

std::optional<std::string> value_text(const json& value, Decode decode) {
  if (value.is_null()) return std::nullopt;
  if (value.is_number_integer()) {
    const int64_t v = value.get<int64_t>();
    switch (decode) {
      case Decode::Cuda:
        return cuda_version_text(v);
      case Decode::Nccl:
        return nccl_version_text(v);
      case Decode::Library:
        return library_version_text(v);
      default:
        return std::to_string(v);
    }
  }
  if (value.is_string()) return value.get<std::string>();
  if (decode == Decode::Args && value.is_array()) {
    std::string line;
    for (const json& arg : value) {
      const std::string text = arg.is_string() ? arg.get<std::string>() : json_text(arg);
      const bool quote = text.empty() || text.find_first_of(" \t'\"") != std::string::npos;
      line += (line.empty() ? "" : " ") + (quote ? "'" + text + "'" : text);
    }
    return line;
  }
  return json_text(value);
}

// The fact in a header: nullptr when the header does not record it (an older writer).
const json* find_fact(const json* header, const char* key, const char* sub) {
  if (header == nullptr || !header->is_object()) return nullptr;
  auto it = header->find(key);
  if (it == header->end()) return nullptr;
  if (sub == nullptr) return &*it;
  static const json kNull = nullptr;
  if (it->is_null()) return &kNull;  // no GPU known: its name is none
  if (!it->is_object()) return nullptr;
  auto member = it->find(sub);
  return member == it->end() ? &kNull : &*member;
}

// Collects one fact's difference over the ranks: the first differing rank's values.
class Collector {
 public:
  void add(const std::string& key, const std::string& what, int rank,
           const std::optional<std::string>& a, const std::optional<std::string>& b) {
    if (a == b) return;
    auto [it, inserted] = index_.try_emplace(key, differences_.size());
    if (inserted) differences_.push_back({key, what, a, b, {}});
    differences_[it->second].ranks.push_back(rank);
  }
  std::vector<EnvironmentDifference> take() { return std::move(differences_); }

 private:
  std::map<std::string, size_t> index_;
  std::vector<EnvironmentDifference> differences_;
};

// Members of an object-valued fact (variables, packages) in either header; nullopt when either
// header has no such object (nothing to compare).
std::optional<std::set<std::string>> member_names(const json* a, const json* b, const char* key) {
  const json* x = find_fact(a, key, nullptr);
  const json* y = find_fact(b, key, nullptr);
  if (x == nullptr || y == nullptr || !x->is_object() || !y->is_object()) return std::nullopt;
  std::set<std::string> names;
  for (auto it = x->begin(); it != x->end(); ++it) names.insert(it.key());
  for (auto it = y->begin(); it != y->end(); ++it) names.insert(it.key());
  return names;
}

std::optional<std::string> member_text(const json* header, const char* key,
                                       const std::string& name) {
  const json* object = find_fact(header, key, nullptr);
  auto it = object->find(name);
  if (it == object->end()) return std::nullopt;
  return value_text(*it, Decode::Text);
}

size_t node_count(const std::vector<const json*>& headers) {
  std::set<std::string> hosts;
  for (const json* h : headers)
    if (h != nullptr && h->contains("host") && (*h)["host"].is_string())
      hosts.insert((*h)["host"].get<std::string>());
  return hosts.size();
}

std::string ranks_text(const std::vector<int>& ranks, size_t world) {
  if (ranks.empty()) return "";
  if (ranks.size() == world && world > 1) return " (every rank)";
  if (ranks.size() == 1) return world > 1 ? fmt::format(" (rank {})", ranks[0]) : "";
  return fmt::format(" ({} ranks, first {})", ranks.size(), ranks[0]);
}

}  // namespace

std::string cuda_version_text(int64_t v) { return fmt::format("{}.{}", v / 1000, v % 1000 / 10); }

std::string nccl_version_text(int64_t v) {
  if (v < 10000) return fmt::format("{}.{}.{}", v / 1000, v % 1000 / 100, v % 100);  // < 2.9
  return fmt::format("{}.{}.{}", v / 10000, v % 10000 / 100, v % 100);
}

std::string library_version_text(int64_t v) {
  return fmt::format("{}.{}.{}", v / 10000, v % 10000 / 100, v % 100);
}

EnvironmentComparison compare_environments(const std::vector<const json*>& a,
                                           const std::vector<const json*>& b) {
  EnvironmentComparison out;
  const size_t ranks = std::min(a.size(), b.size());
  for (size_t r = 0; r < ranks; ++r) out.compared = out.compared || (a[r] && b[r]);
  if (!out.compared) return out;
  Collector collector;
  // The world's layout: how many nodes the ranks ran on (hosts differ between runs by name,
  // which says nothing about numbers; their count does: another topology, another NCCL plan).
  const size_t nodes_a = node_count(a), nodes_b = node_count(b);
  if (nodes_a != nodes_b)
    collector.add("nodes", "nodes", -1, std::to_string(nodes_a), std::to_string(nodes_b));
  for (const Fact& fact : kFacts) {
    for (size_t r = 0; r < ranks; ++r) {
      const json* x = find_fact(a[r], fact.key, fact.sub);
      const json* y = find_fact(b[r], fact.key, fact.sub);
      if (x == nullptr || y == nullptr) continue;
      const std::string key = fact.sub ? fmt::format("{}.{}", fact.key, fact.sub) : fact.key;
      collector.add(key, fact.what, static_cast<int>(r), value_text(*x, fact.decode),
                    value_text(*y, fact.decode));
    }
  }
  for (const char* group : {trace::kPythonPackagesKey, trace::kEnvironmentKey}) {
    const bool packages = std::string(group) == trace::kPythonPackagesKey;
    for (size_t r = 0; r < ranks; ++r) {
      const auto names = member_names(a[r], b[r], group);
      if (!names) continue;
      for (const std::string& name : *names)
        collector.add(fmt::format("{}.{}", group, name), packages ? package_name(name) : name,
                      static_cast<int>(r), member_text(a[r], group, name),
                      member_text(b[r], group, name));
    }
  }
  out.differences = collector.take();
  for (EnvironmentDifference& d : out.differences)
    if (d.ranks.size() == 1 && d.ranks[0] < 0) d.ranks.clear();  // the run as a whole
  out.ranks = ranks;
  return out;
}

std::vector<std::string> environment_lines(const EnvironmentComparison& comparison) {
  std::vector<std::string> lines;
  if (comparison.differences.empty()) return lines;
  lines.push_back(fmt::format(
      "environment: {} difference{} that can change numbers (the ops decide the verdict):",
      comparison.differences.size(), comparison.differences.size() == 1 ? "" : "s"));
  size_t width = 0;
  for (const EnvironmentDifference& d : comparison.differences)
    width = std::max(width, d.what.size());
  for (const EnvironmentDifference& d : comparison.differences) {
    const std::string a = d.a.value_or("(unset)"), b = d.b.value_or("(unset)");
    const std::string ranks = ranks_text(d.ranks, comparison.ranks);
    if (a.size() + b.size() <= 48) {
      lines.push_back(fmt::format("  {:<{}}  A {}, B {}{}", d.what, width, a, b, ranks));
    } else {  // a command line: one line per run
      lines.push_back(fmt::format("  {}{}:", d.what, ranks));
      lines.push_back(fmt::format("    A {}", a));
      lines.push_back(fmt::format("    B {}", b));
    }
  }
  return lines;
}

json environment_json(const EnvironmentComparison& comparison) {
  json differences = json::array();
  for (const EnvironmentDifference& d : comparison.differences)
    differences.push_back({{"key", d.key},
                           {"what", d.what},
                           {"a", d.a ? json(*d.a) : json(nullptr)},
                           {"b", d.b ? json(*d.b) : json(nullptr)},
                           {"ranks", d.ranks}});
  return {{"compared", comparison.compared}, {"differences", differences}};
}

}  // namespace lockstep::tools
