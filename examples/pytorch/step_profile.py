"""torch.profiler over a job's last steps, written as device time per kernel with lockstep's own
hash kernels (lsf1_*) apart: what tracing adds on the GPU, with no run-to-run noise in it.

  profile = StepProfile(args.profile, args.steps)   # a path of None: does nothing
  profile = StepProfile(args.profile, args.steps, rank)   # one file per rank (rank_path)
  for step in range(1, args.steps + 1):
      profile.before_step(step)
      ...
  profile.finish()
"""

import time

PROFILED_STEPS = 4


def add_profile_argument(parser, per_rank=False):
    parser.add_argument(
        "--profile", metavar="FILE",
        help=f"profile the last {PROFILED_STEPS} steps with torch.profiler and write device time "
             "per kernel (lockstep's own hash kernels lsf1_* apart) to FILE" +
             (" ('{rank}' in the name is replaced, else .rankR is appended)" if per_rank else ""))


def rank_path(path, rank):
    """One file per rank: '{rank}' in PATH replaced, else .rankR appended; None stays None."""
    if path is None:
        return None
    return path.replace("{rank}", str(rank)) if "{rank}" in path else f"{path}.rank{rank}"


class StepProfile:
    def __init__(self, path, steps, rank=None):
        self.path = path if rank is None else rank_path(path, rank)
        self.first = max(2, steps - PROFILED_STEPS + 1)  # never step 1 (set-up, autotuning)
        self.steps = steps - self.first + 1
        self.profiler = None

    def before_step(self, step):
        if self.path is None or step != self.first:
            return
        import torch
        torch.cuda.synchronize()  # the profile starts with the GPU idle: only these steps' work
        self.profiler = torch.profiler.profile(activities=[
            torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA])
        self.profiler.__enter__()
        self.started = time.perf_counter()

    def finish(self):
        if self.profiler is None:
            return
        import torch
        torch.cuda.synchronize()
        wall = time.perf_counter() - self.started
        self.profiler.__exit__(None, None, None)
        write_profile(self.path, self.profiler, self.steps, wall)


def is_annotation(event):
    """A record_function range mirrored on the GPU timeline (nccl:all_reduce, Optimizer.step#...):
    it spans kernels that are counted on their own, so it is left out of the sums."""
    return bool(getattr(event, "is_user_annotation", False)) or \
        event.key.startswith(("nccl:", "Optimizer.", "ProfilerStep"))


def write_profile(path, profiler, steps, wall_s):
    """Device time per kernel name over the profiled steps, lockstep's hash kernels apart, and
    NCCL's kernels apart (their time includes waiting for the other ranks)."""
    rows = []
    for e in profiler.key_averages():
        us = getattr(e, "self_device_time_total", None)
        if us is None:
            us = getattr(e, "self_cuda_time_total", 0)
        if us > 0 and getattr(e, "device_type", None) is not None and "CUDA" in str(e.device_type):
            rows.append((us, e.count, e.key, is_annotation(e)))
    rows.sort(reverse=True)
    # The host's time inside the runtime calls that wait for the device (.item()'s copy, a
    # synchronize): the step's wall time less these is the host's own time, so a profile shows
    # whether a traced step grew on the device or on the host.
    waits = [e for e in profiler.key_averages()
             if e.key in ("cudaMemcpyAsync", "cudaMemcpy", "cudaStreamSynchronize",
                          "cudaDeviceSynchronize", "cudaEventSynchronize")]
    wait_ms = sum(getattr(e, "self_cpu_time_total", 0) for e in waits) / 1e3 / steps
    wait_n = sum(e.count for e in waits) / steps

    def total(pick):
        picked = [(us, n) for us, n, key, note in rows if not note and pick(key)]
        return sum(us for us, _ in picked) / 1e3 / steps, sum(n for _, n in picked) / steps

    hash_ms, hash_n = total(lambda key: key.startswith("lsf1_"))
    job_ms, job_n = total(lambda key: not key.startswith("lsf1_"))
    nccl_ms, nccl_n = total(lambda key: key.startswith(("ncclDevKernel", "ncclKernel")))
    with open(path, "w") as f:
        f.write(f"profiled steps {steps}, wall {1e3 * wall_s / steps:.3f} ms/step\n")
        f.write(f"job device time {job_ms:.3f} ms/step in {job_n:.0f} kernels/copies per step\n")
        f.write(f"hash device time {hash_ms:.3f} ms/step in {hash_n:.0f} launches per step\n")
        f.write(f"host in device-waiting runtime calls {wait_ms:.3f} ms/step in {wait_n:.0f} "
                "calls per step (copies to the host, synchronizations)\n")
        f.write(f"of the job's, NCCL kernels {nccl_ms:.3f} ms/step in {nccl_n:.0f} launches per "
                "step (waiting for other ranks included)\n")
        for us, n, key, note in rows[:30]:
            f.write(f"{us / steps:10.1f} us/step {n / steps:7.1f}/step  {key[:100]}"
                    f"{'  (annotation, not summed)' if note else ''}\n")
