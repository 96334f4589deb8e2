"""torch.profiler over a job's last steps, written as device time per kernel with lockstep's own
hash kernels (lsf1_*) apart: what tracing adds on the GPU, with no run-to-run noise in it.

  profile = StepProfile(args.profile, args.steps)   # None: does nothing
  for step in range(1, args.steps + 1):
      profile.before_step(step)
      ...
  profile.finish()
"""

import time

PROFILED_STEPS = 4


class StepProfile:
    def __init__(self, path, steps):
        self.path = path
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


def write_profile(path, profiler, steps, wall_s):
    """Device time per kernel name over the profiled steps, lockstep's hash kernels apart."""
    rows = []
    for e in profiler.key_averages():
        us = getattr(e, "self_device_time_total", None)
        if us is None:
            us = getattr(e, "self_cuda_time_total", 0)
        if us > 0 and getattr(e, "device_type", None) is not None and "CUDA" in str(e.device_type):
            rows.append((us, e.count, e.key))
    rows.sort(reverse=True)
    hash_us = sum(us for us, _, key in rows if key.startswith("lsf1_"))
    hash_n = sum(n for _, n, key in rows if key.startswith("lsf1_"))
    job_us = sum(us for us, _, key in rows if not key.startswith("lsf1_"))
    job_n = sum(n for _, n, key in rows if not key.startswith("lsf1_"))
    with open(path, "w") as f:
        f.write(f"profiled steps {steps}, wall {1e3 * wall_s / steps:.3f} ms/step\n")
        f.write(f"job device time {job_us / 1e3 / steps:.3f} ms/step in {job_n / steps:.0f} "
                f"kernels/copies per step\n")
        f.write(f"hash device time {hash_us / 1e3 / steps:.3f} ms/step in {hash_n / steps:.0f} "
                f"launches per step\n")
        for us, n, key in rows[:30]:
            f.write(f"{us / steps:10.1f} us/step {n / steps:7.1f}/step  {key[:100]}\n")
