"""The package's errors. lockstep._core raises these for the C++ errors (TraceError, InputError),
with the CLI's one-line message, "FILE: problem"."""


class Error(ValueError):
    """Bad input: a path that is not a run, a corrupt trace, a bad argument."""


class TraceError(Error):
    """A file that is not a valid trace (foreign, newer format, corrupt block)."""


class InputError(Error):
    """Input the user must fix: a missing rank, two runs in one directory, a bad step range."""
