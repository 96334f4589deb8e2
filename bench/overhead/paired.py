"""How far a median is pinned down, and whether two builds measured side by side differ: the
statistics the benchmarks judge with (overhead.py's ratios and self times, the A/B of two builds
there and in bench/collectors/shim_launch_bench.py). Distribution-free: runs of a shim on a
shared host are neither normal nor alike from one process to the next."""

import math
import statistics

CONFIDENCE = 0.95


def median_interval(values, confidence=CONFIDENCE):
    """A distribution-free confidence interval for the median of values, (low, high): the order
    statistics x(k) and x(n+1-k) (sorted, 1-based) with the largest k whose coverage,
    P(k <= B <= n-k) for B ~ Binomial(n, 1/2), is at least `confidence`. It assumes only that
    the values are independent draws of one distribution. With 5 values or fewer no k reaches
    95%: their whole range, the most they can say. None without values."""
    xs = sorted(values)
    n = len(xs)
    if n == 0:
        return None
    k = 1
    while k + 1 <= (n + 1) // 2:
        below = sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n  # P(B <= k)
        if 1 - 2 * below < confidence:
            break
        k += 1
    return xs[k - 1], xs[n - k]


def paired_difference(mine, theirs):
    """Two builds' runs taken in turns, round by round (mine[i] and theirs[i] of one round): the
    median of mine - theirs, its interval (median_interval of the differences: a slow phase of the
    host falls on both runs of a round), how many rounds mine was lower, and whether the interval
    excludes 0 (told apart). None without a pair."""
    diffs = [a - b for a, b in zip(mine, theirs)]
    if not diffs:
        return None
    low, high = median_interval(diffs)
    return {"runs": len(diffs), "median": statistics.median(diffs), "interval": [low, high],
            "lower": sum(1 for d in diffs if d < 0), "told_apart": low > 0 or high < 0}


def paired_text(mine, theirs, pair, unit):
    """'broad - broad@base: median -30.7 us [-80.9, +27.1], broad lower in 5 of 6 rounds: not told
    apart' for paired_difference's `pair`."""
    low, high = pair["interval"]
    verdict = "told apart" if pair["told_apart"] else "not told apart"
    return (f"{mine} - {theirs}: median {pair['median']:+.1f} {unit} [{low:+.1f}, {high:+.1f}], "
            f"{mine} lower in {pair['lower']} of {pair['runs']} rounds: {verdict}")


def paired_ratio(mine, theirs):
    """The same pairing for quantities that scale with the host's speed: each round's mine /
    theirs - 1 (a fraction: -0.04 is 4% lower), its median and interval, how many rounds mine was
    lower, and whether the interval excludes 0. Rounds with a non-positive value are left out.
    None without a pair."""
    ratios = [a / b - 1 for a, b in zip(mine, theirs) if a > 0 and b > 0]
    if not ratios:
        return None
    low, high = median_interval(ratios)
    return {"runs": len(ratios), "median": statistics.median(ratios), "interval": [low, high],
            "lower": sum(1 for r in ratios if r < 0), "told_apart": low > 0 or high < 0}


def paired_ratio_text(mine, theirs, pair):
    """'broad / broad@base: median -3.9% [-13.8%, +2.9%], broad lower in 5 of 7 rounds: not told
    apart' for paired_ratio's `pair`."""
    low, high = pair["interval"]
    verdict = "told apart" if pair["told_apart"] else "not told apart"
    return (f"{mine} / {theirs}: median {100 * pair['median']:+.1f}% [{100 * low:+.1f}%, "
            f"{100 * high:+.1f}%], {mine} lower in {pair['lower']} of {pair['runs']} rounds: "
            f"{verdict}")
