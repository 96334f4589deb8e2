// How many workers a command may run when each holds files open: a run of thousands of rank
// files must never need more descriptors than RLIMIT_NOFILE allows (issue #34), on a machine of
// any core count. Every worker pool that opens rank files sizes itself here.
#pragma once

namespace lockstep::tools {

// Workers that each hold at most `files_per_worker` files open at once: `wanted` (0: one per
// core), fewer when the soft RLIMIT_NOFILE, less a reserve for the process's own descriptors,
// allows fewer; at least 1.
int open_file_workers(int wanted, int files_per_worker);

}  // namespace lockstep::tools
