#include "tools/why/names.h"

#include <cctype>
#include <regex>
#include <vector>

#include <fmt/format.h>

namespace lockstep::tools {
namespace {

bool ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// Identifiers that never name an operator: types, keywords, the standard library's and the
// launch machinery's wrappers.
bool generic(std::string_view id) {
  static const std::string_view kGeneric[] = {"void",
                                              "bool",
                                              "char",
                                              "short",
                                              "int",
                                              "long",
                                              "unsigned",
                                              "signed",
                                              "float",
                                              "double",
                                              "const",
                                              "true",
                                              "false",
                                              "anonymous",
                                              "namespace",
                                              "std",
                                              "c10",
                                              "at",
                                              "native",
                                              "detail",
                                              "cuda",
                                              "Half",
                                              "BFloat16",
                                              "complex",
                                              "array",
                                              "Array",
                                              "tuple",
                                              "pair",
                                              "OffsetCalculator",
                                              "TrivialOffsetCalculator",
                                              "IntDivider",
                                              "LoadWithCast",
                                              "StoreWithCast",
                                              "LoadWithoutCast",
                                              "StoreWithoutCast",
                                              "TensorInfo",
                                              "PhiloxCudaState",
                                              "operator",
                                              "lambda",
                                              "size_t",
                                              "__nv_bfloat16",
                                              "__half",
                                              "__nv_fp8_e4m3",
                                              "__nv_fp8_e5m2",
                                              "Float8_e4m3fn",
                                              "Float8_e5m2",
                                              "func_wrapper_t",
                                              "memory",
                                              "policies",
                                              "vectorized",
                                              "unroll"};
  for (std::string_view g : kGeneric)
    if (id == g) return true;
  if (std::isdigit(static_cast<unsigned char>(id[0]))) return true;  // a number: 128, 3ul
  return id.size() <= 1;  // T, N: template parameters in a signature
}

bool helper(std::string_view id) {
  return id.find("kernel") != std::string_view::npos || id.find("_impl") != std::string_view::npos;
}

// The top-level function name of `s` (after the return type and namespaces) and where its
// template argument list starts (npos: none).
struct Head {
  std::string_view name;
  size_t template_open = std::string_view::npos;
};

Head head_of(std::string_view s) {
  // The name ends at the first '<' or '(' at depth 0 that follows an identifier character.
  int depth = 0;
  size_t name_end = std::string_view::npos;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (depth == 0 && (c == '<' || c == '(') && i > 0 && ident_char(s[i - 1])) {
      // "operator()": part of the name, not its parameter list.
      name_end = i;
      break;
    }
    if (c == '(' || c == '<' || c == '[' || c == '{') ++depth;
    if (c == ')' || c == '>' || c == ']' || c == '}') --depth;
  }
  if (name_end == std::string_view::npos) name_end = s.size();
  // The last identifier before name_end, after the last "::" or space at depth 0.
  size_t start = name_end;
  while (start > 0 && ident_char(s[start - 1])) --start;
  Head head;
  head.name = s.substr(start, name_end - start);
  if (name_end < s.size() && s[name_end] == '<') head.template_open = name_end;
  return head;
}

// The identifiers inside the template argument list that starts at `open`, in order, leaving
// out what is inside parentheses (a nested function's parameters) and braces (lambdas).
std::vector<std::string_view> template_identifiers(std::string_view s, size_t open) {
  std::vector<std::string_view> ids;
  int angle = 0, paren = 0, brace = 0;
  for (size_t i = open; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '<')
      ++angle;
    else if (c == '>' && --angle == 0)
      break;
    else if (c == '(')
      ++paren;
    else if (c == ')')
      --paren;
    else if (c == '{')
      ++brace;
    else if (c == '}')
      --brace;
    else if (ident_char(c) && (i == 0 || !ident_char(s[i - 1])) && paren == 0 && brace == 0) {
      size_t end = i;
      while (end < s.size() && ident_char(s[end])) ++end;
      // A qualifier (at::, binary_internal::) names a namespace or class, not the operator.
      if (s.substr(end, 2) != "::") ids.push_back(s.substr(i, end - i));
      i = end - 1;
    }
  }
  return ids;
}

// `text` cut to kShortNameBytes and an ellipsis, not inside a UTF-8 sequence.
std::string bounded(std::string_view text) {
  if (text.size() <= kShortNameBytes) return std::string(text);
  size_t cut = kShortNameBytes;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return std::string(text.substr(0, cut)) + "\u2026";
}

}  // namespace

std::string short_kernel_name(std::string_view demangled) {
  const Head head = head_of(demangled);
  if (head.name.empty()) return bounded(demangled);
  if (head.template_open == std::string_view::npos) return bounded(head.name);
  std::string_view chosen, fallback;
  for (std::string_view id : template_identifiers(demangled, head.template_open)) {
    if (generic(id) || id == head.name) continue;
    if (helper(id))
      fallback = id;
    else
      chosen = id;
  }
  if (chosen.empty()) chosen = fallback;
  if (chosen.empty()) return bounded(head.name);  // only types and numbers: elided
  return bounded(fmt::format("{}<{}>", head.name, chosen));
}

namespace {
bool g_full_names = false;
}  // namespace

void set_full_names(bool on) { g_full_names = on; }
bool full_names() { return g_full_names; }

std::string display_name(std::string_view kind, std::string_view name) {
  if (g_full_names || (kind != "kernel" && kind != "graph")) return std::string(name);
  return short_kernel_name(name);
}

std::string buffer_words(std::string_view kind, std::string_view label) {
  static const std::regex kArg(R"(^(?:n(\d+)\.)?arg(\d+)(?:\+(\d+))?$)");
  const std::string text(label);
  std::smatch m;
  // The collectors' labels ("n3.arg12+64") are short: a longer one is no parameter's, and is not
  // handed to std::regex (tools/regex_text.h).
  if ((kind == "kernel" || kind == "graph") && text.size() <= 64 && std::regex_match(text, m, kArg)) {
    std::string out = m[1].matched ? fmt::format("node {} parameter {}", m[1].str(), m[2].str())
                                   : fmt::format("parameter {}", m[2].str());
    if (m[3].matched) out += fmt::format(" at +{} B", m[3].str());
    return out;
  }
  if (kind == "gemm") {
    if (label == "A" || label == "B" || label == "C" || label == "D")
      return fmt::format("operand {}", label);
    if (label.ends_with("_ptrs")) return fmt::format("operand {} pointers", label.substr(0, 1));
    if (label == "D_out_scale") return "output scale of D";
    if (label.ends_with("_scale"))
      return fmt::format("scale of {}", label.substr(0, label.size() - 6));
    if (label.ends_with("_amax"))
      return fmt::format("amax of {}", label.substr(0, label.size() - 5));
    if (label == "bias_grad") return "bias gradient";
    if (label == "aux") return "epilogue auxiliary output";
  }
  if (kind == "collective") {
    if (label == "send") return "send buffer";
    if (label == "recv") return "receive buffer";
  }
  if (kind == "memcpy" || kind == "memset") {
    if (label == "dst") return "destination";
    if (label == "src") return "source";
    if (label == "host src") return "host source";
  }
  return text;
}

}  // namespace lockstep::tools
