"""The steps a call is about, as the CLI takes them: None (all), an int, a (first, last) pair
(inclusive; last None: to the end), a range, or the CLI's text 'A-B', 'A-' or 'A'. Everything
goes through the CLI's own parser (lockstep._core.parse_steps)."""

from lockstep._native import core


def text(steps):
    """The CLI's 'A-B'; '' for all steps."""
    if steps is None:
        return ""
    if isinstance(steps, str):
        return steps
    if isinstance(steps, bool):
        raise TypeError("steps: a bool is not a step")
    if isinstance(steps, int):
        return str(steps)
    if isinstance(steps, range):
        if steps.step != 1 or len(steps) == 0:
            raise ValueError(f"steps: {steps!r} is not a non-empty range of consecutive steps")
        return f"{steps.start}-{steps.stop - 1}"
    first, last = steps
    return f"{first}-" if last is None else f"{first}-{last}"


def window(steps):
    """(first, last), inclusive, checked by the CLI's parser."""
    if steps is None:
        return 0, 2**32 - 1
    return tuple(core().parse_steps(text(steps)))
