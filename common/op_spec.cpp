#include "common/op_spec.h"

#include <charconv>

namespace lockstep::settings {
namespace {

std::optional<uint32_t> number(std::string_view text) {
  uint32_t value = 0;
  if (text.empty()) return std::nullopt;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

}  // namespace

std::optional<OpSpec> parse_op_spec(std::string_view text) {
  OpSpec op;
  std::string_view rest = text;
  std::string_view head[3];
  for (std::string_view& field : head) {
    const size_t colon = rest.find(':');
    if (colon == std::string_view::npos) return std::nullopt;
    field = rest.substr(0, colon);
    rest.remove_prefix(colon + 1);
  }
  const size_t last = rest.rfind(':');
  if (last == std::string_view::npos) return std::nullopt;
  const auto step = number(head[0]), stream = number(head[1]),
             occurrence = number(rest.substr(last + 1));
  if (!step || !stream || !occurrence || *occurrence == 0 || head[2].empty() || last == 0)
    return std::nullopt;
  for (char c : head[2])
    if (c < 'a' || c > 'z') return std::nullopt;
  op.step = *step;
  op.stream = *stream;
  op.kind = head[2];
  op.name = rest.substr(0, last);
  op.occurrence = *occurrence;
  return op;
}

std::string op_spec_text(const OpSpec& op) {
  return std::to_string(op.step) + ":" + std::to_string(op.stream) + ":" + op.kind + ":" + op.name +
         ":" + std::to_string(op.occurrence);
}

}  // namespace lockstep::settings
