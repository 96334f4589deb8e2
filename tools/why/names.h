// Names as people read them: kernel names shortened (template arguments and lambda bodies
// elided, the operator kept: "_scatter_gather_elementwise_kernel<ReduceAdd>"), buffer labels in
// words ("parameter 1 at +632 B", "operand A", "receive buffer"). The one home of both: show,
// diff, hunt and export call these for text; JSON and --verbose keep the full names.
#pragma once

#include <string>
#include <string_view>

namespace lockstep::tools {

// A demangled kernel name shortened: the function's own name (no return type, namespaces or
// parameter list) and, when its template arguments name an operator (a functor, a reduction, a
// Triton or CUTLASS configuration), that one name in angle brackets: the last such identifier,
// preferring one that is not itself a kernel or an implementation helper; none (only types and
// numbers: layer1_forward<__nv_bfloat16, 128>): the function alone. A name with no
// template arguments is only stripped ("gelu_forward(float const*, float*, int)" ->
// "gelu_forward"); a name that does not parse is returned as it is. At most kShortNameBytes
// bytes and "…": the text, the JSON's name_short and every context line show it, so a
// pathological name (the trace library keeps up to a MiB of one) is printed in full only where
// the full name is asked for (JSON's "name", --verbose), not once per line that mentions it.
inline constexpr size_t kShortNameBytes = 256;
std::string short_kernel_name(std::string_view demangled);

// What the text reports print as an op's name: kernels (and graph nodes) shortened, every other
// kind's name (an API function) as it is; the full name when full_names() (--verbose) is on.
std::string display_name(std::string_view kind, std::string_view name);
// --verbose of show, diff, hunt and export: text shows full names (one switch for the process,
// set while the command line is parsed, so that every printer follows it).
void set_full_names(bool on);
bool full_names();

// A buffer label in words for a record of `kind`: kernel "arg1+632" -> "parameter 1 at +632 B",
// graph "n3.arg0" -> "node 3 parameter 0", GEMM "A" -> "operand A", "A_scale" -> "scale of A",
// collective "send" -> "send buffer"; an unknown label as it is.
std::string buffer_words(std::string_view kind, std::string_view label);

}  // namespace lockstep::tools
