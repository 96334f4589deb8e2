"""A small GPT for lockstep's examples: embedding, causal self-attention, MLP, LayerNorm.

Attention is fused by default (F.scaled_dot_product_attention, causal), as GPT training scripts
write it; under torch.use_deterministic_algorithms(True) PyTorch picks a backend whose backward
is deterministic (flash attention's). `attention="explicit"` writes it out instead (matmul,
mask, fp32 softmax, matmul): the scores of every head are materialised, a memory-bound job that
writes several times more bytes per step, each of which lockstep's full level hashes.

Also here: synthetic data generated on the device from a seed (nothing is downloaded), and the
planted nondeterministic op used to test lockstep's diff.
"""

import contextlib
import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class GPTConfig:
    vocab: int = 1024
    seq: int = 128
    dim: int = 256
    heads: int = 4
    layers: int = 4
    mlp_ratio: int = 4
    attention: str = "sdpa"  # "sdpa" (fused) or "explicit" (scores materialised)


ATTENTION_KINDS = ("sdpa", "explicit")


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        if cfg.dim % cfg.heads:
            raise ValueError(f"dim {cfg.dim} is not a multiple of heads {cfg.heads}")
        if cfg.attention not in ATTENTION_KINDS:
            raise ValueError(f"attention {cfg.attention!r} is not one of {ATTENTION_KINDS}")
        self.heads = cfg.heads
        self.explicit = cfg.attention == "explicit"
        self.qkv = nn.Linear(cfg.dim, 3 * cfg.dim)
        self.proj = nn.Linear(cfg.dim, cfg.dim)
        mask = torch.tril(torch.ones(cfg.seq, cfg.seq, dtype=torch.bool))
        self.register_buffer("mask", mask, persistent=False)

    def forward(self, x):
        B, T, C = x.shape
        hd = C // self.heads
        q, k, v = self.qkv(x).split(C, dim=2)
        q = q.view(B, T, self.heads, hd).transpose(1, 2)
        k = k.view(B, T, self.heads, hd).transpose(1, 2)
        v = v.view(B, T, self.heads, hd).transpose(1, 2)
        if self.explicit:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))
            att = att.float().masked_fill(~self.mask[:T, :T], float("-inf"))
            att = F.softmax(att, dim=-1).to(v.dtype)
            y = att @ v
        else:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.proj(y)


class MLP(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.up = nn.Linear(cfg.dim, cfg.mlp_ratio * cfg.dim)
        self.down = nn.Linear(cfg.mlp_ratio * cfg.dim, cfg.dim)

    def forward(self, x):
        return self.down(F.gelu(self.up(x)))


class Block(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.dim)
        self.attn = CausalSelfAttention(cfg)
        self.ln2 = nn.LayerNorm(cfg.dim)
        self.mlp = MLP(cfg)
        self.plant = None  # a NondeterministicPlant, set on the planted layer only

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        if self.plant is not None and self.plant.active:
            x = self.plant(x)
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.cfg = cfg
        self.tok = nn.Embedding(cfg.vocab, cfg.dim)
        self.pos = nn.Parameter(torch.zeros(1, cfg.seq, cfg.dim))
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.layers))
        self.ln_f = nn.LayerNorm(cfg.dim)
        self.head = nn.Linear(cfg.dim, cfg.vocab, bias=False)
        self.apply(self._init)
        nn.init.normal_(self.pos, std=0.02)

    @staticmethod
    def _init(module):
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, std=0.02)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, std=0.02)

    def forward(self, idx):
        T = idx.shape[1]
        x = self.tok(idx) + self.pos[:, :T]
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))


def loss_fn(logits, targets):
    return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), targets.view(-1))


def make_batches(steps, batch, seq, vocab, seed, device):
    """Token sequences with a learnable pattern (arithmetic progressions mod vocab, with 10%
    random tokens), generated on the device from `seed`. Returns inputs and targets, each of
    shape (steps, batch, seq)."""
    g = torch.Generator(device=device)
    g.manual_seed(seed)
    start = torch.randint(0, vocab, (steps, batch, 1), generator=g, device=device)
    stride = torch.randint(1, 8, (steps, batch, 1), generator=g, device=device)
    pos = torch.arange(seq + 1, device=device)
    tokens = (start + stride * pos) % vocab
    noise = torch.randint(0, vocab, tokens.shape, generator=g, device=device)
    keep = torch.rand(tokens.shape, generator=g, device=device) >= 0.1
    tokens = torch.where(keep, tokens, noise)
    return tokens[..., :-1].contiguous(), tokens[..., 1:].contiguous()


@contextlib.contextmanager
def nondeterministic_allowed():
    """Lets one op use its nondeterministic (atomic) CUDA implementation."""
    enabled = torch.are_deterministic_algorithms_enabled()
    warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    torch.use_deterministic_algorithms(False)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(enabled, warn_only=warn_only)


class NondeterministicPlant:
    """index_add_ with many duplicate indices in float32: CUDA accumulates with atomicAdd, in
    an order that follows the block schedule. The values are large pairs +v/-v that cancel
    exactly plus small ones, so the exact sums are small but the rounding of the large partial
    sums changes them by ~1e-2 from run to run. The result is added to the activations."""

    def __init__(self, dim, device, seed, pairs=1 << 18, small=1 << 18):
        g = torch.Generator(device=device)
        g.manual_seed(seed)
        big = torch.pow(10.0, torch.empty(pairs, device=device).uniform_(2.0, 4.0, generator=g))
        small_values = torch.empty(small, device=device).uniform_(-1.0, 1.0, generator=g)
        big_index = torch.randint(0, dim, (pairs,), generator=g, device=device)
        small_index = torch.randint(0, dim, (small,), generator=g, device=device)
        values = torch.cat([big, -big, small_values])
        index = torch.cat([big_index, big_index, small_index])
        order = torch.randperm(values.numel(), generator=g, device=device)
        self.values = values[order].contiguous()
        self.index = index[order].contiguous()
        self.dim = dim
        self.active = False

    @torch.compiler.disable
    def accumulate(self):
        acc = torch.zeros(self.dim, device=self.values.device, dtype=torch.float32)
        with nondeterministic_allowed():
            acc.index_add_(0, self.index, self.values)
        return acc

    def __call__(self, x):
        return x + (1e-2 * self.accumulate()).to(x.dtype)


class _PlantedGradient(torch.autograd.Function):
    """Identity in the forward (a copy: a view returned by a Function would make an in-place op on
    it fail); in the backward, adds the plant's result to the gradient."""

    @staticmethod
    def forward(ctx, x, plant):
        ctx.plant = plant
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        if not ctx.plant.active:
            return grad, None
        return grad + (1e-2 * ctx.plant.accumulate()).to(grad.dtype), None


def plant_in_module(module, phase, plant, optimizer):
    """Runs `plant` (a NondeterministicPlant, while active) inside `module`: at the end of its
    forward (added to its output), in its backward (added to the gradient of its output, by an
    autograd Function the forward passes its output through), or in the optimizer step (added
    to the module's first parameter, by the optimizer's own post-step hook, which runs inside
    the step: before the global post-step hooks)."""
    if phase == "optimizer":
        param = next(module.parameters())

        def after_step(opt, args, kwargs):
            if plant.active:
                with torch.no_grad():
                    flat = param.view(-1)
                    n = min(flat.numel(), plant.dim)
                    flat[:n].add_(1e-4 * plant.accumulate()[:n].to(param.dtype))

        optimizer.register_step_post_hook(after_step)
        return
    forward = module.forward

    def planted_forward(*args, **kwargs):
        out = forward(*args, **kwargs)
        if not plant.active:
            return out
        if phase == "forward":
            return plant(out)
        return _PlantedGradient.apply(out, plant)

    module.forward = planted_forward


def set_deterministic(seed, algorithms=True):
    """Everything PyTorch offers for bit-for-bit reruns. CUBLAS_WORKSPACE_CONFIG must already be
    in the environment (set before torch is imported). algorithms=False leaves
    torch.use_deterministic_algorithms off, as most training scripts do: ops with atomic
    accumulation (Inductor's embedding backward, index_add_, ...) then vary between runs."""
    torch.manual_seed(seed)
    torch.use_deterministic_algorithms(algorithms)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
