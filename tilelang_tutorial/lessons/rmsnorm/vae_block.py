"""A video-VAE style residual block, channels-last, with a switch for its RMSNorm + SiLU.

    h = norm_silu(x, gamma1)  ->  conv1  ->  norm_silu(h, gamma2)  ->  conv2  ->  y = x + h

This is the residual block of a video VAE decoder (the Wan-style 3-D causal VAE uses this shape:
RMSNorm over channels, SiLU, 3x3x3 convolution, twice, plus the skip), with random weights. Two
simplifications, both irrelevant to the norm: the temporal padding is symmetric instead of causal,
and there is no feature cache across chunks.

Activations live as contiguous ``(B, T, H, W, C)`` tensors (channels-last). The convolutions see
them through ``permute`` as ``(B, C, T, H, W)`` with ``channels_last_3d`` strides (no copy), and
cuDNN returns channels-last outputs, so the norm gets a contiguous ``(..., C)`` view -- exactly the
drop-in's contract. ``conv="2d"`` folds T into the batch and uses 3x3 convolutions per frame.

``norm="eager"`` uses ``F.silu(F.rms_norm(...))`` (two torch kernels, works on CPU and in fp32);
``norm="fused"`` uses :func:`.dispatch.fused_rmsnorm_silu` (GPU, fp16/bf16),
which takes the Triton path for C in {96, 192, 384} and the TileLang kernel otherwise.

The benchmark (:mod:`.bench`, ``VAE_CASES``) runs it on stages of a 720x1280 decoder, two frames
a chunk.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

def eager_norm_silu(x, gamma, eps: float = 1e-5):
    """The eager baseline: torch's RMSNorm over the last dim, then SiLU."""
    return F.silu(F.rms_norm(x, (x.shape[-1],), gamma, eps))


def fused_norm_silu(x, gamma, eps: float = 1e-5):
    """The drop-in (dispatch: Triton for 96/192/384, TileLang for the other multiples of 8)."""
    from .dispatch import fused_rmsnorm_silu

    return fused_rmsnorm_silu(x, gamma, eps=eps)


NORMS = {"eager": eager_norm_silu, "fused": fused_norm_silu}


class VAEResBlock(torch.nn.Module):
    """norm+SiLU -> conv -> norm+SiLU -> conv -> + skip, on (B, T, H, W, C) activations."""

    def __init__(self, channels: int, *, conv: str = "3d", dtype=torch.float16, device="cuda",
                 eps: float = 1e-5, seed: int = 0):
        super().__init__()
        if conv not in ("3d", "2d"):
            raise ValueError(f"conv must be '3d' or '2d', got {conv!r}")
        self.channels, self.conv, self.eps = channels, conv, eps
        gen = torch.Generator(device="cpu").manual_seed(seed)
        k = (3, 3, 3) if conv == "3d" else (3, 3)
        fan_in = channels * math.prod(k)
        fmt = torch.channels_last_3d if conv == "3d" else torch.channels_last

        def weight():
            w = torch.randn((channels, channels, *k), generator=gen) / math.sqrt(fan_in)
            return torch.nn.Parameter(w.to(device=device, dtype=dtype).contiguous(memory_format=fmt),
                                      requires_grad=False)

        def vec(scale, offset):
            v = torch.randn(channels, generator=gen) * scale + offset
            return torch.nn.Parameter(v.to(device=device, dtype=dtype), requires_grad=False)

        self.w1, self.b1, self.w2, self.b2 = weight(), vec(0.02, 0.0), weight(), vec(0.02, 0.0)
        self.gamma1, self.gamma2 = vec(0.1, 1.0), vec(0.1, 1.0)

    def _conv(self, h, w, b):
        """Convolution of a (B, T, H, W, C) activation; returns (B, T, H, W, C), contiguous."""
        if self.conv == "3d":
            out = F.conv3d(h.permute(0, 4, 1, 2, 3), w, b, padding=1)   # channels_last_3d view
            out = out.permute(0, 2, 3, 4, 1)
        else:
            B, T, H, W, C = h.shape
            out = F.conv2d(h.reshape(B * T, H, W, C).permute(0, 3, 1, 2), w, b, padding=1)
            out = out.permute(0, 2, 3, 1).reshape(B, T, H, W, C)
        # cuDNN keeps channels-last, so this is a no-op there; a backend that returns NCDHW pays a
        # copy here -- identically in the eager and the fused configuration.
        return out if out.is_contiguous() else out.contiguous()

    @torch.no_grad()
    def forward(self, x, norm: str = "eager"):
        if norm not in NORMS:
            raise ValueError(f"norm must be one of {sorted(NORMS)}, got {norm!r}")
        if x.dim() != 5 or x.shape[-1] != self.channels:
            raise ValueError(f"x must be (B, T, H, W, {self.channels}), got {tuple(x.shape)}")
        norm_silu = NORMS[norm]
        h = norm_silu(x, self.gamma1, self.eps)
        h = self._conv(h, self.w1, self.b1)
        h = norm_silu(h, self.gamma2, self.eps)
        h = self._conv(h, self.w2, self.b2)
        return x + h


def make_block_and_input(channels: int, shape, *, conv: str = "3d", dtype=torch.float16,
                         device="cuda", seed: int = 0):
    """A block with random weights and a fresh random input of ``shape`` (B, T, H, W, C)."""
    shape = tuple(shape)
    if shape[-1] != channels:
        raise ValueError(f"shape {shape} must end with C = {channels}")
    block = VAEResBlock(channels, conv=conv, dtype=dtype, device=device, seed=seed)
    gen = torch.Generator(device="cpu").manual_seed(seed + 1)
    x = torch.randn(shape, generator=gen).to(device=device, dtype=dtype)
    return block, x
