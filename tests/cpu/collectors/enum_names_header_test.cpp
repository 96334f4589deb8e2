// trace/enum_names.def and trace/warning_codes.def against the real headers: every row's value
// is its identifier's value in the CUDA, cuBLAS, cuBLASLt and NCCL headers or in the shim's own
// enums, checked by the compiler. Built only where the shim builds (the CUDA toolkit is there);
// elsewhere the tables are read, not checked.
#include <cublasLt.h>
#include <cublas_v2.h>
#include <driver_types.h>
#include <library_types.h>
#include <nccl.h>

#include <cstdint>
#include <type_traits>

#include <gtest/gtest.h>

#include "collectors/events.h"
#include "collectors/step_counter.h"
#include "collectors/tracer_stats.h"
#include "trace/writer.h"

namespace {

struct Self {};  // enum_names.def's type of a table with no C++ enum behind it

// Table##_type names each table's header enum.
#define LOCKSTEP_ENUM(Table, Type) using Table##_type = Type;
#define LOCKSTEP_ENUM_VALUE(Table, value, Identifier)
#include "trace/enum_names.def"
#undef LOCKSTEP_ENUM
#undef LOCKSTEP_ENUM_VALUE

// Type::Identifier names an unscoped C enumerator as well as a scoped one (C++11); a table of
// type Self has nothing to compare against and is skipped (Type::Identifier is dependent there,
// so the discarded branch is not looked up).
#define LOCKSTEP_ENUM(Table, Type)
#define LOCKSTEP_ENUM_VALUE(Table, value, Identifier)                                    \
  static_assert([]<class Type = Table##_type>() {                                        \
    if constexpr (std::is_same_v<Type, Self>)                                            \
      return true;                                                                       \
    else                                                                                 \
      return static_cast<int64_t>(Type::Identifier) == static_cast<int64_t>(value);      \
  }(), "enum_names.def: " #Table " " #Identifier " is not " #value " in its header");
#include "trace/enum_names.def"
#undef LOCKSTEP_ENUM
#undef LOCKSTEP_ENUM_VALUE

// The shim's warning codes (collectors::WarningCode) and the writer's (trace/writer.h).
#define LOCKSTEP_WARNING_CODE_Writer(Identifier) ::lockstep::trace::kWarning##Identifier
#define LOCKSTEP_WARNING_CODE_Shim(Identifier) \
  static_cast<uint64_t>(::lockstep::collectors::WarningCode::Identifier)
#define LOCKSTEP_WARNING(Source, code, Identifier, count, one, many)       \
  static_assert(LOCKSTEP_WARNING_CODE_##Source(Identifier) == (code),      \
                "warning_codes.def: " #Source " " #Identifier " is not code " #code);
#include "trace/warning_codes.def"
#undef LOCKSTEP_WARNING

}  // namespace

// The checks above are the compiler's; this test is there so that ctest lists them.
TEST(EnumNames, EveryRowMatchesItsHeaderAtCompileTime) { SUCCEED(); }
