#include "tools/why/gemm_config.h"

#include <algorithm>

#include <fmt/format.h>

#include "trace/field_format.h"
#include "trace/record.h"

namespace lockstep::tools {
namespace {

using F = trace::fields::Gemm;

uint64_t at(std::span<const uint64_t> fields, int i) {
  return i < static_cast<int>(fields.size()) ? fields[i] : 0;
}

void add(std::string& out, const std::string& part) { out += (out.empty() ? "" : ", ") + part; }

}  // namespace

std::string reduction_scheme_words(uint64_t scheme) {
  switch (scheme) {
    case 0:
      return "none";
    case 1:
      return "in-place";
    case 2:
      return "compute type";
    case 4:
      return "output type";
    default:
      return std::to_string(scheme);
  }
}

std::string gemm_fields_difference(std::string_view api, std::span<const uint64_t> a,
                                   std::span<const uint64_t> b) {
  const bool lt = api.starts_with("cublasLt");
  const trace::FieldContext context{api, 1};
  const auto* info = trace::find_record_kind(static_cast<uint8_t>(trace::RecordKind::Gemm));
  std::string out;
  const int count = static_cast<int>(std::max(a.size(), b.size()));
  for (int f = 0; f < count; ++f) {
    const uint64_t x = at(a, f), y = at(b, f);
    if (x == y) continue;
    if (lt && f == F::algo) {
      if (x == UINT64_MAX || y == UINT64_MAX) {  // one run let the heuristic choose
        add(out, fmt::format("algorithm {} vs {}",
                             trace::field_text(trace::RecordKind::Gemm, f, x, context),
                             trace::field_text(trace::RecordKind::Gemm, f, y, context)));
        continue;
      }
      // The packed parts (collectors/gemm.cpp): id | tile << 16 | stages << 32 | split-K << 48.
      static constexpr const char* kParts[] = {"algorithm", "tile", "stages", "split-K"};
      for (int part = 0; part < 4; ++part) {
        const uint64_t p = x >> (16 * part) & 0xffff, q = y >> (16 * part) & 0xffff;
        if (p != q) add(out, fmt::format("{} {} vs {}", kParts[part], p, q));
      }
      continue;
    }
    if (f == F::reduction_scheme) {
      add(out,
          fmt::format("reduction {} vs {}", reduction_scheme_words(x), reduction_scheme_words(y)));
      continue;
    }
    const std::string_view name =
        info && f < static_cast<int>(info->field_names.size()) ? info->field_names[f] : "?";
    add(out,
        fmt::format("{} {} vs {}", name, trace::field_text(trace::RecordKind::Gemm, f, x, context),
                    trace::field_text(trace::RecordKind::Gemm, f, y, context)));
  }
  return out;
}

}  // namespace lockstep::tools
