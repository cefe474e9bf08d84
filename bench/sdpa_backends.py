"""Which kernel torch's scaled_dot_product_attention runs, and each backend's time, at the shapes of
bench_gpu_attention (causal, bf16, B·T = 32768 tokens, H = 16, d = 128; B = 32768 / T).

Issue 15 holds linea's cuDNN attention to torch SDPA's default. Whether that default is cuDNN's
fused attention itself (then the same library behind two configurations) or FlashAttention (then
two different kernels) decides what the gap means. torch's SDPA picks a backend per call; this
prints the one it picks (torch._fused_sdp_choice) and times every backend that takes the call, the
default included, as shared/anchors/bench_fla_kernels.py times SDPA (triton do_bench; forward, and
forward + backward with a ones gradient). One JSON line per (T, backend).
usage: sdpa_backends.py [T1,T2,...]   (default 4096,16384,32768)
"""
import json
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from triton.testing import do_bench

H, D, TOKENS = 16, 128, 32768
BACKENDS = {'flash': SDPBackend.FLASH_ATTENTION, 'cudnn': SDPBackend.CUDNN_ATTENTION,
            'efficient': SDPBackend.EFFICIENT_ATTENTION}


def timed(fn, grads):
    fwd = do_bench(fn, warmup=5, rep=30)

    def fwd_bwd():
        o = fn()
        o.backward(torch.ones_like(o))

    return fwd, do_bench(fwd_bwd, warmup=5, rep=30, grad_to_none=grads)


def main():
    lengths = [int(t) for t in (sys.argv[1] if len(sys.argv) > 1 else '4096,16384,32768').split(',')]
    torch.manual_seed(0)
    for T in lengths:
        B = TOKENS // T
        q, k, v = [torch.randn(B, H, T, D, device='cuda', dtype=torch.bfloat16).requires_grad_() for _ in range(3)]
        choice = torch._fused_sdp_choice(q, k, v, is_causal=True)
        default = next((name for name, b in BACKENDS.items() if int(b) == int(choice)), str(choice))
        fn = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True)
        runs = [('default', None)] + list(BACKENDS.items())
        for name, backend in runs:
            row = dict(op='sdpa', backend=name, T=T, B=B, H=H, D=D, default_is=default, torch=torch.__version__)
            try:
                if backend is None:
                    f, fb = timed(fn, [q, k, v])
                else:
                    with sdpa_kernel(backend):
                        f, fb = timed(fn, [q, k, v])
                row.update(fwd_ms=round(f, 4), fwd_bwd_ms=round(fb, 4))
            except RuntimeError as e:  # a backend that does not take the call
                row.update(error=str(e).splitlines()[0][:200])
            print(json.dumps(row), flush=True)


if __name__ == '__main__':
    main()
