"""Reference timings for bench_gpu_delta_rule: fla's Triton chunk kernels for the delta rule.

Runs on the GPU machine with fla's source (its fla/ folder, never committed) under $FLA_SRC.
Same shapes and operand ranges as bench/cuda/bench_gpu_delta_rule.cpp: B·T = 32768 tokens, bf16
q/k/v with rows of norm ≈ 1 for q and k, v and d_o in [−1, 1), β in [0.1, 0.9), f32 log decays
in [−0.2, −0.001); head shapes `anchors` (H = 16, K = V = 128) and `340m` (H = 4, K = 256,
V = 512). Prints one JSON line per (shape, op, T): forward and forward+backward milliseconds
(triton do_bench, median).
usage: fla_delta_rule.py [T1,T2,...] [op1,op2,...] [shape1,shape2]
       (default 4096; deltanet,gdn,kda; anchors,340m)
"""
import json
import os
import sys

sys.path.insert(0, os.environ.get('FLA_SRC', '.gpu-fla'))
import torch
from triton.testing import do_bench

import fla.ops.common.chunk_o as chunk_o
chunk_o.TRITON_ABOVE_3_7_1 = True  # timing only: fla refuses its gated backward on Triton 3.4–3.7.0/Hopper
from fla.ops.delta_rule import chunk_delta_rule
from fla.ops.gated_delta_rule import chunk_gated_delta_rule
from fla.ops.kda import chunk_kda

TOKENS = 32768
SHAPES = {'anchors': (16, 128, 128), '340m': (4, 256, 512)}
dev, bf16, f32 = 'cuda', torch.bfloat16, torch.float32


def uniform(shape, lo, hi, dtype):
    return (torch.rand(shape, device=dev, dtype=f32) * (hi - lo) + lo).to(dtype).requires_grad_()


def time_op(fn, leaves, d_o):
    fwd = do_bench(fn, warmup=5, rep=30, return_mode='median')

    def fwd_bwd():
        out = fn()
        (out[0] if isinstance(out, tuple) else out).backward(d_o)

    return fwd, do_bench(fwd_bwd, warmup=5, rep=30, grad_to_none=leaves, return_mode='median')


def ops(B, T, H, K, V):
    edge = (3.0 / K) ** 0.5  # uniform entries of variance 1/K: rows of norm ≈ 1
    q, k = uniform((B, T, H, K), -edge, edge, bf16), uniform((B, T, H, K), -edge, edge, bf16)
    v = uniform((B, T, H, V), -1, 1, bf16)
    beta = uniform((B, T, H), 0.1, 0.9, bf16)
    g_token = uniform((B, T, H), -0.2, -0.001, f32)
    g_channel = uniform((B, T, H, K), -0.2, -0.001, f32)
    yield 'deltanet', lambda: chunk_delta_rule(q, k, v, beta), [q, k, v, beta]
    yield 'gdn', lambda: chunk_gated_delta_rule(q, k, v, g_token, beta), [q, k, v, g_token, beta]
    yield 'kda', lambda: chunk_kda(q, k, v, g_channel, beta), [q, k, v, g_channel, beta]


if __name__ == '__main__':
    lengths = [int(t) for t in (sys.argv[1] if len(sys.argv) > 1 else '4096').split(',')]
    only = set((sys.argv[2] if len(sys.argv) > 2 else 'deltanet,gdn,kda').split(','))
    shapes = (sys.argv[3] if len(sys.argv) > 3 else 'anchors,340m').split(',')
    for shape in shapes:
        H, K, V = SHAPES[shape]
        for T in lengths:
            B = TOKENS // T
            d_o = (torch.rand((B, T, H, V), device=dev, dtype=f32) * 2 - 1).to(bf16)
            for name, fn, leaves in ops(B, T, H, K, V):
                if name not in only:
                    continue
                row = dict(bench='fla_delta_rule', shape=shape, op=name, impl='fla', B=B, T=T, H=H, K=K, V=V)
                try:
                    fwd, fwd_bwd = time_op(fn, leaves, d_o)
                    row.update(fwd_ms=round(fwd, 4), fwd_bwd_ms=round(fwd_bwd, 4))
                except Exception as error:  # one op failing must not hide the others' timings
                    row.update(error=repr(error)[:300])
                print(json.dumps(row), flush=True)
