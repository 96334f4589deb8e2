"""A gate between steps, for bench/overhead/overhead.py's chunk interleaving (--gate DIR).

The overhead benchmark keeps one process per mode (untraced, off, broad, ...) alive and lets them
run a few steps each in turn, so that the machine's slow phases (seconds long on a shared host)
fall on every mode alike instead of on whichever mode's run they happened to hit. Between chunks
the job waits here, outside its step timing.

Protocol, one pair of FIFOs per rank, made by the driver: the job reads a line "N" from
DIR/go.<rank>, runs N steps, then writes the number of its last step to DIR/done.<rank>. Without
--gate, every call returns at once.
"""

import os


def add_gate_argument(parser):
    parser.add_argument("--gate", metavar="DIR",
                        help="wait between chunks of steps for a driver (bench/overhead/"
                             "overhead.py --interleave chunks; see step_gate.py)")


class StepGate:
    def __init__(self, directory=None, rank=0):
        self._go = self._done = None
        self._left = 0  # steps the driver allowed that have not run yet
        if directory:
            # The driver holds both FIFOs open read-write, so neither open() blocks for long.
            self._go = open(os.path.join(directory, f"go.{rank}"), "r")
            self._done = open(os.path.join(directory, f"done.{rank}"), "w")

    def before_step(self):
        """Waits, at the start of a chunk, for the driver to allow the next steps."""
        if self._go is None or self._left > 0:
            return
        line = self._go.readline()
        if not line.strip():
            raise SystemExit("step gate: the driver closed the gate (no more steps allowed)")
        self._left = int(line)
        if self._left < 1:
            raise SystemExit(f"step gate: {self._left} steps asked for")

    def after_step(self, step):
        """Tells the driver, at the end of a chunk, that its steps are done (and synced)."""
        if self._go is None:
            return
        self._left -= 1
        if self._left == 0:
            self._done.write(f"{step}\n")
            self._done.flush()
