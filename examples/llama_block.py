"""A LLaMA-style decoder block with three classic mixed-precision mistakes.

Run `mpcheck check examples/` to see them; `mpcheck rule MPC101` explains each code.
"""

import torch
import torch.nn.functional as F
from torch import nn


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * h.to(x.dtype)  # correct: cast back before the weight


class Attention(nn.Module):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.q_proj = nn.Linear(dim, dim, bias=False)
        self.k_proj = nn.Linear(dim, dim, bias=False)
        self.v_proj = nn.Linear(dim, dim, bias=False)
        self.o_proj = nn.Linear(dim, dim, bias=False)

    def forward(self, x, cos, sin):
        b, n, d = x.shape
        q = self.q_proj(x).view(b, n, self.heads, -1).transpose(1, 2)
        k = self.k_proj(x).view(b, n, self.heads, -1).transpose(1, 2)
        v = self.v_proj(x).view(b, n, self.heads, -1).transpose(1, 2)
        # Rotary math in float32 for accuracy, but only q is cast, and never back:
        q = q.float() * cos + rotate_half(q.float()) * sin
        k = k * cos + rotate_half(k) * sin
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.o_proj(out.transpose(1, 2).reshape(b, n, d))


class Block(nn.Module):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.attn_norm = RMSNorm(dim)
        self.attn = Attention(dim, heads)
        self.mlp_norm = nn.LayerNorm(dim)
        self.up = nn.Linear(dim, 4 * dim)
        self.down = nn.Linear(4 * dim, dim)

    def forward(self, x, cos, sin):
        x = x + self.attn(self.attn_norm(x), cos, sin)
        h = self.mlp_norm(x).float()
        h = F.gelu(self.up(h))
        return x + self.down(h)
