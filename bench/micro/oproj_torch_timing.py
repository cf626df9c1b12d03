# A quick torch timing of the value up-projection before spark-bench had its rows: spark's
# torch op against the staged torch path (bmm -> transpose -> reshape copy [-> e4m3 quant])
# in CUDA-graph replay over enough layers of distinct weights (>= 4x a 60 MB L2).  Prints
# us per layer, spark / staged, and the floor (bytes / ceiling) over spark.  The numbers in
# bench/results/v19-oproj/run2-b3629b2/torch-timing.txt came from this script (PDL off).
#   SPARK_LIBRARY=build/libspark.so.0 PYTHONPATH=python python bench/micro/oproj_torch_timing.py [CEILING_TBPS] [pdl]
import sys, torch
import spark_mla.ops as ops
BF16, E4M3 = torch.bfloat16, torch.float8_e4m3fn
L = 512
dev = torch.device("cuda")
ceil_tbps = float(sys.argv[1]) if len(sys.argv) > 1 else 4.29
pdl = len(sys.argv) > 2 and sys.argv[2] == "pdl"

def measure(graph_fn, layers, reps=20):
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        graph_fn()  # warm (plans)
        torch.cuda.synchronize()
        with torch.cuda.graph(g, stream=s):
            graph_fn()
    g.replay(); g.replay(); torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        a = torch.cuda.Event(enable_timing=True); b = torch.cuda.Event(enable_timing=True)
        a.record(); g.replay(); b.record(); b.synchronize()
        ts.append(a.elapsed_time(b) * 1e3 / layers)
    ts.sort()
    return ts[len(ts) // 2]

def row(h, v, m, fmt, outdt):
    k = 128
    wbytes = h * v * L * (2 if fmt == "bf16" else 1)
    layers = max(16, int(4 * 60e6 // wbytes) + 1)
    layers = min(layers, 400)
    o = torch.randn(m, h, L, device=dev).to(BF16)
    packs, scales = [], []
    for i in range(layers):
        if fmt == "bf16":
            packs.append((torch.randn(h * (k + v), L, device=dev) * 0.05).to(BF16)); scales.append(None)
        else:
            packs.append(torch.randn(h * (k + v), L, device=dev).to(E4M3))
            if fmt == "mxfp8":
                sc = torch.randint(118, 124, (h * (k + v), L // 32), device=dev, dtype=torch.int32).to(torch.uint8)
                scales.append(sc.view(h, k + v, L // 32)[:, k:])
            else:
                scales.append(torch.rand((h * (k + v) + 127) // 128, L // 128, device=dev) * 2e-3 + 1e-4)
    ws = [p.view(h, k + v, L)[:, k:] for p in packs]
    wd = [ops.dequantize_oproj_weights(w, s).contiguous() for w, s in zip(ws, scales)]
    out = torch.empty(m, h * v, device=dev, dtype=outdt)
    osc = torch.tensor([0.0371], device=dev)
    oscale = osc if outdt == E4M3 else None
    ops.get_oproj_plan(h, v, weight_format=fmt, out_dtype=outdt, max_m=8192, enable_pdl=pdl)
    def spark():
        for w, s in zip(ws, scales):
            ops.mla_oproj(o, w, s, out=out, out_scale=oscale, max_m=8192, enable_pdl=pdl)
    bmm_out = torch.empty(h, m, v, device=dev, dtype=BF16)
    def staged():
        for w in wd:
            torch.bmm(o.transpose(0, 1), w.transpose(1, 2), out=bmm_out)
            if outdt == BF16:
                out.view(m, h, v).copy_(bmm_out.transpose(0, 1))
            else:
                out.view(m, h, v).copy_((bmm_out.transpose(0, 1).float() * (1 / 0.0371)).clamp(-448, 448).to(E4M3))
    ts = measure(spark, layers); tt = measure(staged, layers)
    floor_b = wbytes + (h * v * L // 32 if fmt == "mxfp8" else 0) + m * h * L * 2 + m * h * v * (2 if outdt == BF16 else 1)
    floor_us = floor_b / (ceil_tbps * 1e12) * 1e6
    print(f"H{h:4d} V{v} M{m:5d} {fmt:9s} {str(outdt)[6:]:14s} spark {ts:8.2f} staged {tt:8.2f} ratio {ts/tt:5.2f} "
          f"floor {floor_us:7.2f} frac {floor_us/ts:5.2f} layers {layers}", flush=True)
    del packs, ws, wd

for h, v in [(8, 256), (16, 128), (64, 256), (128, 128)]:
    for fmt in ["bf16", "mxfp8"]:
        for m in [1, 16, 32, 256, 1024, 4096]:
            row(h, v, m, fmt, BF16)
    torch.cuda.empty_cache()
for m in [1, 16, 1024]:
    row(128, 128, m, "fp8-block", BF16)
    row(128, 128, m, "bf16", E4M3)
