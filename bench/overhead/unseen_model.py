"""The model of bench/overhead/train_unseen.py: a decoder-only LM built unlike
examples/pytorch/gpt_model.py in every part the shim sees, so that the overhead benchmark has a
job lockstep was not tuned on (issue #34).

  gpt_model.py                          here
  LayerNorm (with biases)               RMSNorm (torch.nn.RMSNorm), no biases anywhere
  learned absolute positions            rotary position embeddings on q and k
  multi-head attention, one qkv GEMM    grouped-query attention: separate q, k, v projections,
                                        fewer key/value heads, through
                                        F.scaled_dot_product_attention(enable_gqa=True)
  GELU MLP, 4 x dim                     SwiGLU MLP (gate, up, down), hidden ~8/3 x dim
  tied-size head                        untied embedding and head, a vocabulary of 32000
  AdamW                                 Adafactor (train_unseen.py), cosine schedule, clipping

Needs PyTorch 2.5 or later (nn.RMSNorm, enable_gqa); train_unseen.py says so and exits 2 on an
older one, and checks the shapes (train_unseen.config_problem) before torch is imported.
"""

import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class UnseenConfig:
    vocab: int = 32000
    seq: int = 1024
    dim: int = 768
    layers: int = 12
    heads: int = 12
    kv_heads: int = 4
    hidden: int = 2048  # SwiGLU's hidden width: 8/3 x 768
    rope_theta: float = 10000.0
    kv_repeat: bool = False  # True: repeat k/v heads before a plain sdpa call (no enable_gqa)


def rope_tables(seq, head_dim, theta):
    """cos and sin of every position's rotation angles, (seq, head_dim) each, in fp32: the
    rotate-half layout (the first half of a head pairs with its second half)."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
    angles = torch.outer(torch.arange(seq, dtype=torch.float32), inv_freq)
    angles = torch.cat([angles, angles], dim=-1)
    return angles.cos(), angles.sin()


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat([-x[..., half:], x[..., :half]], dim=-1)


def apply_rope(x, cos, sin):
    """x: (batch, heads, T, head_dim); cos, sin: (T, head_dim), cast to x's dtype (bf16 under
    autocast: sdpa wants q, k and v in one dtype)."""
    cos, sin = cos.to(x.dtype), sin.to(x.dtype)
    return x * cos + rotate_half(x) * sin


class GroupedQueryAttention(nn.Module):
    def __init__(self, cfg: UnseenConfig):
        super().__init__()
        self.heads, self.kv_heads = cfg.heads, cfg.kv_heads
        self.head_dim = cfg.dim // cfg.heads
        self.kv_repeat = cfg.kv_repeat
        self.wq = nn.Linear(cfg.dim, cfg.heads * self.head_dim, bias=False)
        self.wk = nn.Linear(cfg.dim, cfg.kv_heads * self.head_dim, bias=False)
        self.wv = nn.Linear(cfg.dim, cfg.kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(cfg.heads * self.head_dim, cfg.dim, bias=False)

    def forward(self, x, cos, sin):
        B, T, _ = x.shape
        hd = self.head_dim
        q = self.wq(x).view(B, T, self.heads, hd).transpose(1, 2)
        k = self.wk(x).view(B, T, self.kv_heads, hd).transpose(1, 2)
        v = self.wv(x).view(B, T, self.kv_heads, hd).transpose(1, 2)
        q, k = apply_rope(q, cos[:T], sin[:T]), apply_rope(k, cos[:T], sin[:T])
        if self.kv_repeat:
            # The fallback (--kv-repeat): each key/value head copied to its query heads.
            group = self.heads // self.kv_heads
            k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            # Causal, no mask tensor, bf16, head size 64: the flash backend takes grouped
            # heads as they are; its backward is deterministic under
            # torch.use_deterministic_algorithms (cuDNN's is excluded there).
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        y = y.transpose(1, 2).reshape(B, T, self.heads * hd)
        return self.wo(y)


class SwiGLU(nn.Module):
    def __init__(self, cfg: UnseenConfig):
        super().__init__()
        self.gate = nn.Linear(cfg.dim, cfg.hidden, bias=False)
        self.up = nn.Linear(cfg.dim, cfg.hidden, bias=False)
        self.down = nn.Linear(cfg.hidden, cfg.dim, bias=False)

    def forward(self, x):
        return self.down(F.silu(self.gate(x)) * self.up(x))


class Block(nn.Module):
    def __init__(self, cfg: UnseenConfig):
        super().__init__()
        self.attn_norm = nn.RMSNorm(cfg.dim, eps=1e-6)
        self.attn = GroupedQueryAttention(cfg)
        self.mlp_norm = nn.RMSNorm(cfg.dim, eps=1e-6)
        self.mlp = SwiGLU(cfg)

    def forward(self, x, cos, sin):
        x = x + self.attn(self.attn_norm(x), cos, sin)
        return x + self.mlp(self.mlp_norm(x))


class UnseenLM(nn.Module):
    def __init__(self, cfg: UnseenConfig):
        super().__init__()
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.vocab, cfg.dim)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.layers))
        self.norm = nn.RMSNorm(cfg.dim, eps=1e-6)
        self.head = nn.Linear(cfg.dim, cfg.vocab, bias=False)  # untied from self.embed
        cos, sin = rope_tables(cfg.seq, cfg.dim // cfg.heads, cfg.rope_theta)
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)
        # GPT-2's scheme with the residual projections scaled down by depth.
        for name, p in self.named_parameters():
            if p.dim() < 2:
                continue  # the norms' weights stay ones
            std = 0.02
            if name.endswith(("attn.wo.weight", "mlp.down.weight")):
                std = 0.02 / math.sqrt(2 * cfg.layers)
            nn.init.normal_(p, std=std)

    def forward(self, idx):
        x = self.embed(idx)
        for block in self.blocks:
            x = block(x, self.rope_cos, self.rope_sin)
        return self.head(self.norm(x))

