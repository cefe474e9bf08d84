"""Reference timings for bench_gpu_gla: fla's Triton kernels for the GLA family and HGRN.

Runs on the GPU machine with fla's source (its fla/ folder, never committed) under $FLA_SRC.
Same shapes and operand ranges as bench/cuda/bench_gpu_gla.cpp: B·T = 32768 tokens, H = 16,
K = V = 128, bf16 q/k/v, f32 log decays in [−0.2, −0.001); hgrn over D = H·K = 2048 channels.
Prints one JSON line per (op, T): forward and forward+backward milliseconds (triton do_bench).
usage: fla_gla_family.py [T1,T2,...] [op1,op2,...]   (default 4096,16384; every op)
"""
import json
import os
import sys

sys.path.insert(0, os.environ.get('FLA_SRC', '.gpu-fla'))
import torch
from triton.testing import do_bench

import fla.ops.common.chunk_o as chunk_o
chunk_o.TRITON_ABOVE_3_7_1 = True  # timing only: fla refuses one gated backward on Triton 3.6/Hopper
from fla.ops.gla import chunk_gla
from fla.ops.hgrn import chunk_hgrn
from fla.ops.rwkv6 import chunk_rwkv6
from fla.ops.simple_gla import chunk_simple_gla

H, K, V, TOKENS = 16, 128, 128, 32768
dev, bf16, f32 = 'cuda', torch.bfloat16, torch.float32


def uniform(shape, lo, hi, dtype):
    return (torch.rand(shape, device=dev, dtype=f32) * (hi - lo) + lo).to(dtype).requires_grad_()


def time_op(fn, leaves):
    fwd = do_bench(fn, warmup=5, rep=30)

    def fwd_bwd():
        out = fn()
        out = out[0] if isinstance(out, tuple) else out
        out.backward(torch.ones_like(out))

    return fwd, do_bench(fwd_bwd, warmup=5, rep=30, grad_to_none=leaves)


def ops(B, T):
    edge = (3.0 / K) ** 0.5
    q, k = uniform((B, T, H, K), -edge, edge, bf16), uniform((B, T, H, K), -edge, edge, bf16)
    v = uniform((B, T, H, V), -1, 1, bf16)
    g_channel = uniform((B, T, H, K), -0.2, -0.001, f32)
    g_token = uniform((B, T, H), -0.2, -0.001, f32)
    g_head = torch.rand(H, device=dev, dtype=f32) * -0.199 - 0.001
    u = uniform((H, K), -1, 1, f32)
    x, g_hgrn = uniform((B, T, H * K), -1, 1, bf16), uniform((B, T, H * K), -0.2, -0.001, f32)
    yield 'gla', lambda: chunk_gla(q, k, v, g_channel), [q, k, v, g_channel]
    yield 'retnet', lambda: chunk_simple_gla(q, k, v, g_gamma=g_head), [q, k, v]
    yield 'mamba2', lambda: chunk_simple_gla(q, k, v, g=g_token), [q, k, v, g_token]
    yield 'rwkv6', lambda: chunk_rwkv6(q, k, v, g_channel, u), [q, k, v, g_channel, u]
    yield 'hgrn', lambda: chunk_hgrn(x, g_hgrn), [x, g_hgrn]


if __name__ == '__main__':
    lengths = [int(t) for t in (sys.argv[1] if len(sys.argv) > 1 else '4096,16384').split(',')]
    only = set(sys.argv[2].split(',')) if len(sys.argv) > 2 else None
    for T in lengths:
        B = TOKENS // T
        for name, fn, leaves in ops(B, T):
            if only is not None and name not in only:
                continue
            row = dict(op=name, impl='fla', B=B, T=T, H=H, K=K, V=V)
            try:
                fwd, fwd_bwd = time_op(fn, leaves)
                row.update(fwd_ms=round(fwd, 4), fwd_bwd_ms=round(fwd_bwd, 4))
            except Exception as error:  # one op failing must not hide the others' timings
                row.update(error=repr(error)[:300])
            print(json.dumps(row), flush=True)
