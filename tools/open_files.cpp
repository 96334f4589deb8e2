#include "tools/open_files.h"

#include <sys/resource.h>

#include <algorithm>
#include <thread>

namespace lockstep::tools {
namespace {
// Descriptors left to the rest of the process: standard streams, the report, a salvage copy, a
// culprit's stack lookup, and what libraries hold.
constexpr rlim_t kReserve = 16;
}  // namespace

int open_file_workers(int wanted, int files_per_worker) {
  if (wanted <= 0) wanted = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return wanted;
  const rlim_t room = limit.rlim_cur > kReserve ? limit.rlim_cur - kReserve : 1;
  const rlim_t fit = std::max<rlim_t>(1, room / static_cast<rlim_t>(std::max(1, files_per_worker)));
  return static_cast<int>(std::min<rlim_t>(static_cast<rlim_t>(wanted), fit));
}

}  // namespace lockstep::tools
