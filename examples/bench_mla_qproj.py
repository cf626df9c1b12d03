"""spark's torch op against the staged torch path (bmm + transpose + cat [+ quant]).

  per-layer GPU time: one CUDA graph running the projection of every layer, each layer with
      its own weights (so they stream from HBM as in a model, not from L2), replayed many
      times; CUDA events around the replays, divided by layers x replays.
  eager host cost: the CPU time of one op call (perf_counter over many calls, no sync inside).

  python examples/bench_mla_qproj.py --heads 16 --nope 128 --layers 61 --m 1,8,32,128,512
"""

import argparse
import time

import torch

import spark_mla.ops as ops

N, R, V = 512, 64, 128


def staged(q_nope, q_pe, w, w_scale, out_dtype, q_scale):
    if w.dtype == torch.float8_e4m3fn:
        raise ValueError("the staged path has no MXFP8 bmm; benchmark --weights bf16")
    ql = torch.bmm(q_nope.transpose(0, 1), w).transpose(0, 1)
    res = torch.cat([ql, q_pe], dim=-1)
    if out_dtype == torch.float8_e4m3fn:
        res = (res.float() * torch.reciprocal(q_scale)).clamp(-448.0, 448.0).to(torch.float8_e4m3fn)
    return res


def spark(q_nope, q_pe, w, w_scale, out_dtype, q_scale, out=None):
    return ops.mla_qproj(q_nope, q_pe, w, w_scale, out=out, out_dtype=out_dtype, q_scale=q_scale)


def layer_weights(layers, h, k, mxfp8, device):
    ws = []
    for _ in range(layers):
        kv_b = torch.randn(h * (k + V), N, device=device) * 0.05
        kv_b = (kv_b * 64).to(torch.float8_e4m3fn) if mxfp8 else kv_b.to(torch.bfloat16)
        w = kv_b.T.view(N, h, k + V)[..., :k].permute(1, 2, 0)
        s = torch.full((h, k, N // 32), 121, dtype=torch.uint8, device=device) if mxfp8 else None
        ws.append((w, s))
    return ws


def graph_time_us(fn, layers, replays):
    """Per-layer microseconds of fn(layer) captured for every layer in one graph."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for i in range(layers):  # warm-up: plans, cuBLAS handles, allocator
            fn(i)
    torch.cuda.current_stream().wait_stream(stream)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for i in range(layers):
            fn(i)
    for _ in range(3):
        g.replay()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(replays):
        g.replay()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1e3 / (layers * replays)


def host_time_us(fn, calls):
    for _ in range(20):
        fn(0)
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(calls):
        fn(0)
    host = (time.perf_counter() - t) * 1e6 / calls
    torch.cuda.synchronize()
    return host


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--heads", type=int, default=16)
    p.add_argument("--nope", type=int, default=128, choices=[128, 192])
    p.add_argument("--layers", type=int, default=61)
    p.add_argument("--m", default="1,8,32,128,512", help="comma-separated token counts")
    p.add_argument("--weights", default="bf16", choices=["bf16", "mxfp8"])
    p.add_argument("--out", default="bf16", choices=["bf16", "e4m3"])
    p.add_argument("--pdl", action="store_true", help="spark plans with programmatic dependent launch")
    p.add_argument("--replays", type=int, default=50)
    p.add_argument("--host-calls", type=int, default=2000)
    a = p.parse_args()
    device = torch.device("cuda")
    h, k = a.heads, a.nope
    out_dtype = torch.float8_e4m3fn if a.out == "e4m3" else torch.bfloat16
    mxfp8 = a.weights == "mxfp8"
    ms = [int(x) for x in a.m.split(",")]
    max_m = max(ms)
    ws = layer_weights(a.layers, h, k, mxfp8, device)
    q_scale = torch.tensor([0.05], device=device)
    ops.get_plan(h, k, weight_format=a.weights, out_dtype=out_dtype, max_m=max_m, enable_pdl=a.pdl)
    print(f"{torch.cuda.get_device_name()}  H={h} K={k} N={N} R={R} weights={a.weights} out={a.out} "
          f"layers={a.layers} pdl={a.pdl}")
    print(f"{'M':>6} {'staged us/layer':>16} {'spark us/layer':>15} {'speedup':>8} "
          f"{'staged host us':>15} {'spark host us':>14}")
    for m in ms:
        q = torch.randn(m, h, k + R, device=device).to(torch.bfloat16)
        q_nope, q_pe = q[..., :k], q[..., k:]
        outs = torch.empty(a.layers, m, h, N + R, dtype=out_dtype, device=device)

        def run_spark(i):
            w, s = ws[i]
            ops.mla_qproj(q_nope, q_pe, w, s, out=outs[i], q_scale=q_scale, max_m=max_m, enable_pdl=a.pdl)

        def run_staged(i):
            w, s = ws[i]
            return staged(q_nope, q_pe, w, s, out_dtype, q_scale)

        t_spark = graph_time_us(run_spark, a.layers, a.replays)
        h_spark = host_time_us(run_spark, a.host_calls)
        if mxfp8:
            t_staged = h_staged = float("nan")
        else:
            t_staged = graph_time_us(run_staged, a.layers, a.replays)
            h_staged = host_time_us(run_staged, a.host_calls)
        print(f"{m:>6} {t_staged:>16.2f} {t_spark:>15.2f} {t_staged / t_spark:>7.2f}x {h_staged:>15.1f} "
              f"{h_spark:>14.1f}")


if __name__ == "__main__":
    main()
