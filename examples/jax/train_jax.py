#!/usr/bin/env python3
"""A jitted JAX training loop for lockstep: a small MLP on random data (nothing is downloaded),
deterministic by default, with a switch that plants a nondeterministic float scatter-add.

  python3 examples/jax/train_jax.py --steps 6
  lockstep run -o /tmp/run1 -- python3 examples/jax/train_jax.py --steps 6

Prints one line per step: "step N loss L loss_hex H" (H = the float32 loss bytes, big-endian
hex), so two runs compare as bytes. Steps are numbered from 1, each inside
jax.profiler.StepTraceAnnotation("train", step_num=N): under `lockstep run` that annotation
ends the step and numbers the next (lockstep's JAX hook; no lockstep call in this file). The
step functions are compiled ahead of time, before step 1, so compilation, autotuning and
initialisation are the set-up phase that `lockstep diff` compares and reports apart.

Deterministic configuration (unless --autotune): XLA_FLAGS gets
--xla_gpu_deterministic_ops=true --xla_gpu_autotune_level=0 before jax is imported (flags
already in XLA_FLAGS are kept). With autotuning on (XLA's default), XLA times candidate GEMM
algorithms and fusion configurations while compiling and keeps the fastest: two runs may choose
differently, and their numbers differ from the first step.

--plant-step S: from step S on, a float scatter-add with colliding indices
(`.at[idx].add(...)`) feeds the first layer's activations. Scatters are the one op XLA makes
deterministic only under --xla_gpu_deterministic_ops, so that flag is left off (autotuning
stays off): the atomic adds' order varies, and two planted runs differ from step S on.
"""

import argparse
import os
import struct
import sys

DETERMINISTIC_FLAGS = ("--xla_gpu_deterministic_ops=true", "--xla_gpu_autotune_level=0")
NO_AUTOTUNE_FLAGS = ("--xla_gpu_autotune_level=0",)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--batch", type=int, default=1024)
    p.add_argument("--dim", type=int, default=512)
    p.add_argument("--hidden", type=int, default=2048)
    p.add_argument("--lr", type=float, default=1e-2)
    p.add_argument("--autotune", action="store_true",
                   help="leave XLA's autotuning on (its default): runs may differ")
    p.add_argument("--plant-step", type=int, default=0, metavar="S",
                   help="from step S, a nondeterministic float scatter-add (0: never)")
    p.add_argument("--optimizer", choices=["auto", "adam", "sgd"], default="auto",
                   help="auto: optax's Adam when optax is installed, else plain SGD")
    return p.parse_args(argv)


def xla_flags(args, existing):
    """XLA_FLAGS for the job: the user's, then the deterministic configuration's flags that
    the user did not set (a flag the user gave wins: its name is already there)."""
    wanted = () if args.autotune else (NO_AUTOTUNE_FLAGS if args.plant_step else
                                       DETERMINISTIC_FLAGS)
    flags = existing.split()
    names = {f.split("=")[0] for f in flags}
    flags += [f for f in wanted if f.split("=")[0] not in names]
    return " ".join(flags)


def float_hex(value):
    return struct.pack(">f", value).hex()


def main(argv=None):
    args = parse_args(argv)
    os.environ["XLA_FLAGS"] = xla_flags(args, os.environ.get("XLA_FLAGS", ""))
    try:
        import jax
        import jax.numpy as jnp
        import jax.profiler  # noqa: F401 (StepTraceAnnotation)
        import numpy as np
    except ImportError:
        print("train_jax.py: JAX is not installed", file=sys.stderr)
        return 2
    if not any(d.platform == "gpu" for d in jax.devices()):
        print("train_jax.py: no GPU visible to JAX", file=sys.stderr)
        return 2
    optimizer = args.optimizer
    if optimizer in ("auto", "adam"):
        try:
            import optax
            optimizer = "adam"
        except ImportError:
            if optimizer == "adam":
                print("train_jax.py: --optimizer adam needs optax", file=sys.stderr)
                return 2
            optimizer = "sgd"
    print(f"train_jax.py: {jax.devices()[0].device_kind}, jax {jax.__version__}, "
          f"{optimizer}, XLA_FLAGS={os.environ['XLA_FLAGS']!r}", flush=True)

    key = jax.random.PRNGKey(args.seed)
    k1, k2 = jax.random.split(key)
    params = {
        "w1": jax.random.normal(k1, (args.dim, args.hidden), jnp.float32) / np.sqrt(args.dim),
        "b1": jnp.zeros((args.hidden,), jnp.float32),
        "w2": jax.random.normal(k2, (args.hidden, args.dim), jnp.float32) / np.sqrt(args.hidden),
        "b2": jnp.zeros((args.dim,), jnp.float32),
    }

    def forward(p, x, bins):
        h = jax.nn.relu(x @ p["w1"] + p["b1"])
        if bins is not None:
            # The planted op: every activation added into one of `batch` bins, many per bin,
            # in whatever order the GPU's atomic adds land; the bins feed back into h.
            flat = h.reshape(-1)
            sums = jnp.zeros((args.batch,), jnp.float32).at[bins].add(flat)
            h = h + 1e-3 * sums[:, None]
        return h @ p["w2"] + p["b2"]

    def loss_fn(p, x, y, bins):
        return jnp.mean((forward(p, x, bins) - y) ** 2)

    if optimizer == "adam":
        tx = optax.adam(args.lr)
        opt_state = tx.init(params)

        def update(p, s, grads):
            updates, s = tx.update(grads, s, p)
            return optax.apply_updates(p, updates), s
    else:
        opt_state = None

        def update(p, s, grads):
            return jax.tree_util.tree_map(lambda w, g: w - args.lr * g, p, grads), s

    def make_step(planted):
        def step(p, s, x, y, bins):
            loss, grads = jax.value_and_grad(loss_fn)(p, x, y, bins if planted else None)
            p, s = update(p, s, grads)
            return p, s, loss
        return jax.jit(step)

    data = np.random.RandomState(args.seed)

    def batch():
        x = data.standard_normal((args.batch, args.dim)).astype(np.float32)
        y = data.standard_normal((args.batch, args.dim)).astype(np.float32)
        bins = data.randint(0, args.batch, size=args.batch * args.hidden).astype(np.int32)
        return x, y, bins

    # Compiled before the first step (ahead of time, on arrays of the batch's shapes), so that
    # compilation and autotuning are set-up work, not step 1's.
    shapes = [jax.ShapeDtypeStruct((args.batch, args.dim), jnp.float32)] * 2 + [
        jax.ShapeDtypeStruct((args.batch * args.hidden,), jnp.int32)]
    clean_step = make_step(False).lower(params, opt_state, *shapes).compile()
    planted_step = (make_step(True).lower(params, opt_state, *shapes).compile()
                    if args.plant_step > 0 else None)
    for step in range(1, args.steps + 1):
        with jax.profiler.StepTraceAnnotation("train", step_num=step):
            x, y, bins = batch()
            planted = args.plant_step > 0 and step >= args.plant_step
            run = planted_step if planted else clean_step
            params, opt_state, loss = run(params, opt_state, x, y, bins)
            value = float(loss)  # the loss read back: the step's metric copy
        print(f"step {step} loss {value:.6f} loss_hex {float_hex(value)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
