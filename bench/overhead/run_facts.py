"""What a measurement was taken on, for every results JSON (tests/gpu's results file,
overhead.py --json, bench/hashing/run_bench.py --json): commit, GPU, driver, date. Their one
home; a new fact goes in facts()."""

import datetime
import os
import subprocess

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def commit_of(root=ROOT):
    """The checkout's commit (short hash, '+dirty' when tracked files changed), or the env
    LOCKSTEP_COMMIT, or 'unknown' (a copy of the tree without .git)."""
    if os.environ.get("LOCKSTEP_COMMIT"):
        return os.environ["LOCKSTEP_COMMIT"]
    try:
        head = subprocess.run(["git", "-C", root, "rev-parse", "--short=7", "HEAD"],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                              timeout=30)
        if head.returncode != 0:
            return "unknown"
        dirty = subprocess.run(["git", "-C", root, "diff", "--quiet", "HEAD", "--"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=30)
        return head.stdout.strip() + ("+dirty" if dirty.returncode == 1 else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def gpu_facts():
    """(name, driver, memory) of the first GPU from nvidia-smi, or None."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total",
                              "--format=csv,noheader"], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    lines = out.stdout.strip().splitlines()
    parts = [p.strip() for p in lines[0].split(",")] if lines else []
    return tuple(parts[:3]) if out.returncode == 0 and len(parts) >= 3 else None


def utc_now():
    return datetime.datetime.now(datetime.timezone.utc)


def facts(when=None):
    """{commit, gpu, driver, gpu_memory, date}: date in UTC, ISO 8601 (when: a datetime)."""
    gpu = gpu_facts()
    return {"commit": commit_of(), "gpu": gpu[0] if gpu else None,
            "driver": gpu[1] if gpu else None, "gpu_memory": gpu[2] if gpu else None,
            "date": (when or utc_now()).strftime("%Y-%m-%dT%H:%M:%SZ")}
