"""The module scopes' cost by part (issue #34): what python/lockstep/_module_scopes.py's hooks add
to a training step's host time, on the unseen job's model (bench/overhead/unseen_model.py: 148
module calls a forward), piece by piece.

At level full the scopes are on by default (LOCKSTEP_SCOPES=auto), and on the unseen job they
cost ~10% of the untraced step (overhead.py's full against full-noscopes): every module call goes
through torch's hooked call path and two Python hooks, every module's output and input nodes get
an autograd pre-hook, and each of those runs in the backward. Run it under the shim, so that the
scope calls are the real ones, with the run's own scopes off (this script arms each variant):

  LOCKSTEP_SCOPES=0 lockstep run --level metrics -- python3 bench/overhead/scope_parts.py

Each variant arms its hooks, runs --steps forward and backward passes of a small batch (the GPU
finishes each pass quickly: the time is the host's), and disarms them; variants take turns over
--rounds rounds, and each one's median round (ms a step) is printed with its excess over the
unhooked pass of the same round per module call, with its interval. Variants:
  no hooks           the model alone
  empty hooks        torch's global forward pre- and post-hooks doing nothing: the hooked call
                     path of every module (nn.Module._call_impl's slow branch)
  forward scopes     ModuleScopes (the Python hooks) with no autograd node hooks
  module scopes      ModuleScopes: every hook in Python
  module scopes (C)  as `lockstep run` arms them where lockstep._scope_hooks is built
                     (python/src/scope_hooks.cpp): the same rules in C
"""

import argparse
import json
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "examples", "pytorch"))
sys.path.append(os.path.join(ROOT, "python"))  # after the staged package `lockstep run` put first
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run_facts  # noqa: E402
from hook_parts import timed as timed_rounds  # noqa: E402
from paired import median_interval  # noqa: E402


def timed(fn, reps):
    return timed_rounds(fn, reps, 7)


def time_parts(torch, model, idx, reps):
    """The pieces of one module call's hooks, each timed alone (ns a call): what the variants'
    differences are made of."""
    from lockstep import _module_scopes, _shim

    scopes = _module_scopes.ModuleScopes(torch)
    block = model.blocks[0]
    x = model.embed(idx)  # a tensor with a grad_fn, as a block's input
    args = (x, model.rope_cos, model.rope_sin)
    out = block(*args)
    node = out.grad_fn
    scopes.name_of(model)  # names the tree

    def register_and_remove():
        node.register_prehook(lambda grads: None).remove()

    def pre_post():
        scopes.forward_pre(block, args)
        scopes.forward_post(block, args, out)
        node.metadata.pop(_module_scopes._KEY)[1].remove()
        x.grad_fn.metadata.pop(_module_scopes._KEY)[1].remove()

    figures = {}
    c_scopes, c_pre, c_post = _module_scopes.hooks(torch)
    if c_scopes.fast is not None:
        def c_pre_post():
            c_pre(block, args)
            c_post(block, args, out)
            for tensor in (x, out):
                tensor.grad_fn.metadata.pop(_module_scopes._KEY)
        # (the C hooks are never removed from the two nodes: each round registers anew)
        figures["forward_pre + forward_post in C (the same)"] = timed(c_pre_post, reps)
    return {
        **figures,
        "torch.compiler.is_compiling()": timed(scopes.compiling, reps),
        "tensor.grad_fn": timed(lambda: x.grad_fn, reps),
        "node.metadata": timed(lambda: node.metadata, reps),
        "node.register_prehook + remove": timed(register_and_remove, reps),
        "_shim.scope_push + scope_pop": timed(lambda: (_shim.scope_push(b"a (forward)"),
                                                       _shim.scope_pop()), reps),
        "set_backward(a), set_backward(b)": timed(lambda: (scopes.set_backward(b"a"),
                                                          scopes.set_backward(b"b")), reps),
        "forward_pre + forward_post (3 inputs, 1 output)": timed(pre_post, reps),
    }


def arm_and_remove(torch, name):
    """Whether variant `name` can be armed here."""
    handles = arm_variant(torch, name)
    for handle in handles or []:
        handle.remove()
    return handles is not None


def arm_variant(torch, name):
    """Arms variant `name`; returns the handles to remove."""
    from torch.nn.modules import module as nn_module
    from lockstep import _module_scopes

    if name == "no hooks":
        return []
    if name == "empty hooks":
        def pre(module, args):
            return None

        def post(module, args, output):
            return None
        return [nn_module.register_module_forward_pre_hook(pre),
                nn_module.register_module_forward_hook(post, always_call=True)]
    if name not in VARIANTS:
        raise ValueError(name)
    scopes, pre, post = _module_scopes.hooks(torch, in_c=name == "module scopes (C)")
    if name == "module scopes (C)" and scopes.fast is None:
        return None  # not built, or no shim in the process
    if name == "forward scopes":
        scopes.on_node = lambda node, scope, output: None
    return [nn_module.register_module_forward_pre_hook(pre),
            nn_module.register_module_forward_hook(post, always_call=True)]


VARIANTS = ("no hooks", "empty hooks", "forward scopes", "module scopes", "module scopes (C)")


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--steps", type=int, default=10, help="passes a variant's turn (default 10)")
    # A turn's passes spread by ~10% from one round to the next on an H100 host (a module
    # call's cost is ~1% of a pass): 7 rounds could not tell +15 from +30 us a module call, their
    # interval the rounds' whole range; 25 give an interval of the 8th to 18th values (~50 s).
    p.add_argument("--rounds", type=int, default=25, help="turns of each variant (default 25)")
    p.add_argument("--profile", choices=VARIANTS,
                   help="instead of the timings: cProfile over --steps passes of this variant")
    p.add_argument("--reps", type=int, default=2000, help="calls a round of each piece")
    p.add_argument("--json", help="write the figures here, with run_facts' commit, GPU, driver, date")
    args = p.parse_args()
    try:
        import torch
    except ImportError as error:
        print(f"scope_parts.py: needs PyTorch with CUDA ({error})", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("scope_parts.py: needs a CUDA GPU (torch.cuda.is_available() is False)",
              file=sys.stderr)
        return 2
    from lockstep import _shim
    from unseen_model import UnseenConfig, UnseenLM

    cfg = UnseenConfig(seq=args.seq)
    model = UnseenLM(cfg).cuda()
    idx = torch.randint(0, cfg.vocab, (args.batch, args.seq), device="cuda")

    def one_pass():
        with torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=False):
            loss = model(idx).float().square().mean()
        loss.backward()
        model.zero_grad(set_to_none=True)

    from torch.nn.modules import module as nn_module
    calls = []
    counter = nn_module.register_module_forward_pre_hook(lambda m, a: calls.append(1))
    one_pass()
    counter.remove()
    module_calls = len(calls)
    torch.cuda.synchronize()

    if args.profile:
        # cProfile over passes of one variant: where its Python time goes, by function.
        import cProfile
        import pstats
        handles = arm_variant(torch, args.profile)
        one_pass()
        profiler = cProfile.Profile()
        profiler.enable()
        for _ in range(args.steps):
            one_pass()
        torch.cuda.synchronize()
        profiler.disable()
        for handle in handles:
            handle.remove()
        print(f"cProfile of '{args.profile}', {args.steps} passes (by own time):")
        pstats.Stats(profiler, stream=sys.stdout).sort_stats("tottime").print_stats(28)
        return 0

    variants = [name for name in VARIANTS if name != "module scopes (C)" or
                arm_and_remove(torch, name)]
    rounds = {name: [] for name in variants}
    for r in range(args.rounds):
        order = variants[r % len(variants):] + variants[:r % len(variants)]
        for name in order:
            handles = arm_variant(torch, name)
            one_pass()  # warm: the hooks' first calls
            torch.cuda.synchronize()
            start = time.perf_counter_ns()
            for _ in range(args.steps):
                one_pass()
            torch.cuda.synchronize()
            rounds[name].append((time.perf_counter_ns() - start) / args.steps / 1e6)
            for handle in handles:
                handle.remove()
    ms = {name: statistics.median(v) for name, v in rounds.items()}
    parts = time_parts(torch, model, idx, args.reps)
    # Each variant against the unhooked pass of the same round (a slow phase of the host falls
    # on both), per module call: the median and its interval (paired.median_interval).
    over = {}
    for name in variants:
        diffs = [(mine - base) * 1e3 / module_calls
                 for mine, base in zip(rounds[name], rounds["no hooks"])]
        low, high = median_interval(diffs)
        over[name] = {"median": statistics.median(diffs), "interval": [low, high]}
    out = {"module_calls_per_pass": module_calls, "traced": _shim.traced(), "batch": args.batch,
           "seq": args.seq, "steps": args.steps, "rounds": args.rounds, "ms_per_pass": ms,
           "round_ms": rounds, "us_per_module_call_over_no_hooks": over,
           "ns_per_call": parts, **run_facts.facts()}
    print(f"module scopes by part: {module_calls} module calls a pass, traced={out['traced']} "
          f"(median of {args.rounds} turns of {args.steps} passes, batch {args.batch} x "
          f"{args.seq}; over the unhooked pass of each round, a module call: median [95% "
          f"interval]):")
    if len(variants) < len(VARIANTS):
        print("  (module scopes (C): lockstep._scope_hooks not built or no shim in the process)")
    for name in variants:
        low, high = over[name]["interval"]
        print(f"  {name:17s} {ms[name]:8.3f} ms a pass  {over[name]['median']:+7.2f} us "
              f"[{low:+.2f}, {high:+.2f}]")
    print(f"  by piece (ns a call, median of 7 rounds of {args.reps}):")
    for name, ns in parts.items():
        print(f"    {name:44s} {ns:9.0f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
