"""Where the eager host time of one spark_mla op call goes (needs a GPU).

Times, per call, with a CPU timer over many calls (no synchronisation inside): the public
wrapper ops.mla_qproj, the registered torch op called directly, Plan.run (Python argument
checks + ctypes), the C call alone through ctypes with prepared arguments, an empty
torch.library custom op (the dispatcher's own cost), and the staged torch path.

  python examples/host_cost.py --heads 16 --nope 128 --m 8
"""

import argparse
import ctypes
import time

import torch

import spark_mla.ops as ops
from spark_mla import _lib

N, R = 512, 64


@torch.library.custom_op("spark_mla_example::noop", mutates_args=("out",))
def _noop(q_nope: torch.Tensor, q_pe: torch.Tensor, w: torch.Tensor, out: torch.Tensor) -> None:
    pass


def per_call_us(fn, calls):
    for _ in range(50):
        fn()
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(calls):
        fn()
    us = (time.perf_counter() - t) * 1e6 / calls
    torch.cuda.synchronize()
    return us


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--heads", type=int, default=16)
    p.add_argument("--nope", type=int, default=128, choices=[128, 192])
    p.add_argument("--m", type=int, default=8)
    p.add_argument("--calls", type=int, default=5000)
    a = p.parse_args()
    h, k, m, dev = a.heads, a.nope, a.m, "cuda"
    q = torch.randn(m, h, k + R, device=dev).to(torch.bfloat16)
    w = (torch.randn(h, k, N, device=dev) * 0.05).to(torch.bfloat16)
    out = torch.empty(m, h, N + R, device=dev, dtype=torch.bfloat16)
    q_nope, q_pe = q[..., :k], q[..., k:]
    plan = ops.get_plan(h, k, max_m=ops.MAX_M)
    lib = _lib.library()
    args = _lib.qproj_args(m=m, q_nope=q_nope.data_ptr(), q_nope_stride_h=q_nope.stride(1),
                           q_nope_stride_m=q_nope.stride(0), w=w.data_ptr(), w_stride_h=w.stride(0),
                           w_stride_k=w.stride(1), q_pe=q_pe.data_ptr(), q_pe_stride_m=q_pe.stride(0),
                           q_pe_stride_h=q_pe.stride(1), out=out.data_ptr(), out_stride_m=out.stride(0),
                           out_stride_h=out.stride(1))
    stream = torch.cuda.current_stream().cuda_stream
    handle = ctypes.c_void_p(plan._handle)
    rows = [
        ("ops.mla_qproj(..., out=out)", lambda: ops.mla_qproj(q_nope, q_pe, w, out=out)),
        ("torch.ops.spark_mla.mla_qproj_out", lambda: torch.ops.spark_mla.mla_qproj_out(q_nope, q_pe, w, None, out)),
        ("Plan.run (checks + ctypes)", lambda: plan.run(q_nope, q_pe, w, out)),
        ("spark_mla_qproj_run via ctypes", lambda: lib.spark_mla_qproj_run(handle, ctypes.byref(args), stream)),
        ("torch.cuda.current_stream().cuda_stream", lambda: torch.cuda.current_stream().cuda_stream),
        ("an empty torch.library custom op", lambda: torch.ops.spark_mla_example.noop(q_nope, q_pe, w, out)),
        ("staged: bmm + transpose + cat", lambda: torch.cat(
            [torch.bmm(q_nope.transpose(0, 1), w).transpose(0, 1), q_pe], dim=-1)),
    ]
    print(f"{torch.cuda.get_device_name()}  torch {torch.__version__}  H={h} K={k} M={m}")
    for name, fn in rows:
        print(f"  {name:<44} {per_call_us(fn, a.calls):8.2f} us/call")


if __name__ == "__main__":
    main()
