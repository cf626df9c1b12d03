# The torch op without a GPU: argument checks and their messages (meta tensors reach the same
# checks through the fake implementation; CPU tensors reach the real one), and tracing by
# torch.compile with fake tensors.
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed: the torch op is not tested")
ops = pytest.importorskip("spark_mla.ops")

M, H, K, N, R = 4, 16, 128, 512, 64
BF16, E4M3 = torch.bfloat16, torch.float8_e4m3fn
BLOCK = "fp8-block"  # e4m3 values with the checkpoints' float32 block scales


def make(device="meta", m=M, h=H, k=K, weights=BF16, out_dtype=BF16, out_pitch=None):
    """The tensors a server holds: q_nope / q_pe views of one [M, H, K+R] query, W_UK_T as the
    [H, K, N] permuted view of kv_b_proj's weight, out a view of a pitched buffer."""
    q = torch.empty(m, h, k + R, dtype=BF16, device=device)
    # kv_b_proj.weight: [H * (K + V), N]; W_UK_T = weight.T.view(N, H, K + V)[..., :K].permute(1, 2, 0)
    kv_b = torch.empty(h * (k + 128), N, dtype=BF16 if weights == BF16 else E4M3, device=device)
    w = kv_b.view(h, k + 128, N)[:, :k]
    assert w.shape == (h, k, N) and w.stride() == ((k + 128) * N, N, 1)  # pitched heads
    w_scale = torch.empty(h, k, N // 32, dtype=torch.uint8, device=device) if weights == E4M3 else None
    if weights == BLOCK:  # weight_scale_inv: one float per 128 x 128 block of kv_b
        w_scale = torch.empty((h * (k + 128) + 127) // 128, N // 128, dtype=torch.float32, device=device)
    buf = torch.empty(m, h, out_pitch or (N + R), dtype=out_dtype, device=device)
    q_scale = torch.ones(1, dtype=torch.float32, device=device)
    return dict(q_nope=q[..., :k], q_pe=q[..., k:], w=w, w_scale=w_scale, out=buf[..., :N + R], q_scale=q_scale)


def call_out(t):
    torch.ops.spark_mla.mla_qproj_out(t["q_nope"], t["q_pe"], t["w"], t["w_scale"], t["out"], t["q_scale"])


def call_functional(t, out_dtype=BF16):
    return torch.ops.spark_mla.mla_qproj(t["q_nope"], t["q_pe"], t["w"], t["w_scale"], out_dtype, t["q_scale"])


@pytest.mark.parametrize("weights", [BF16, E4M3, BLOCK])
@pytest.mark.parametrize("out_dtype", [BF16, E4M3])
def test_meta_shapes_and_dtypes(weights, out_dtype):
    t = make(weights=weights, out_dtype=out_dtype, out_pitch=640)
    call_out(t)
    o = call_functional(t, out_dtype)
    assert o.shape == (M, H, N + R) and o.dtype == out_dtype and o.device.type == "meta"


def test_e8m0_scale_dtype_accepted():
    if not hasattr(torch, "float8_e8m0fnu"):
        pytest.skip("this torch has no float8_e8m0fnu")
    t = make(weights=E4M3)
    t["w_scale"] = t["w_scale"].view(torch.float8_e8m0fnu)
    call_out(t)


def broken(change):
    t = make(weights=E4M3, out_dtype=E4M3)
    change(t)
    return t


@pytest.mark.parametrize("change,pattern", [
    (lambda t: t.update(q_nope=t["q_nope"].float()), r"argument 'q_nope': must be torch.bfloat16, got torch.float32"),
    (lambda t: t.update(q_pe=t["q_pe"].half()), r"argument 'q_pe': must be torch.bfloat16"),
    (lambda t: t.update(w=t["w"].to(torch.float16)), r"argument 'w': must be torch.bfloat16 or torch.float8_e4m3fn"),
    (lambda t: t.update(w_scale=t["w_scale"].to(torch.int32)), r"argument 'w_scale': must be torch.uint8"),
    (lambda t: t.update(w_scale=None), r"argument 'w_scale': is required with float8_e4m3fn"),
    (lambda t: t.update(out=t["out"].float()), r"argument 'out': must be torch.bfloat16 or torch.float8_e4m3fn"),
    (lambda t: t.update(q_scale=None), r"argument 'q_scale': is required for float8_e4m3fn output"),
    (lambda t: t.update(q_scale=t["q_scale"].double()), r"argument 'q_scale': must be torch.float32"),
    (lambda t: t.update(q_scale=torch.ones(2, device="meta")), r"argument 'q_scale': must have 1 element"),
    (lambda t: t.update(q_nope=t["q_nope"][0]), r"argument 'q_nope': must have 3 dimensions"),
    (lambda t: t.update(q_pe=t["q_pe"][:2]), r"argument 'q_pe': dimension 0 is 2, must be 4"),
    (lambda t: t.update(q_pe=t["q_pe"][..., :32]), r"argument 'out': dimension 2 is 576, must be 544"),
    (lambda t: t.update(w=t["w"][:8]), r"argument 'w': has 8 heads .* but q_nope has 16"),
    (lambda t: t.update(w=t["w"][:, :64]), r"argument 'w': dimension 1 is 64, must be 128"),
    (lambda t: t.update(w_scale=t["w_scale"][:, :, :8]), r"argument 'w_scale': dimension 2 is 8, must be 16"),
    (lambda t: t.update(out=t["out"][:, :, :512]), r"argument 'out': dimension 2 is 512, must be 576"),
    (lambda t: t.update(out=t["out"][:, :8]), r"argument 'out': dimension 1 is 8, must be 16"),
    (lambda t: t.update(q_nope=t["q_nope"].transpose(1, 2).contiguous().transpose(1, 2)),
     r"argument 'q_nope': the innermost dimension must be contiguous \(stride 1\)"),
    (lambda t: t.update(w=t["w"].transpose(1, 2).contiguous().transpose(1, 2)),
     r"argument 'w': the innermost dimension must be contiguous"),
    (lambda t: t.update(out=torch.empty(M, H, 2 * 576, dtype=E4M3, device="meta")[..., ::2]),
     r"argument 'out': the innermost dimension must be contiguous"),
])
def test_argument_errors_name_the_argument(change, pattern):
    t = broken(change)
    with pytest.raises(ValueError, match=pattern):
        call_out(t)


@pytest.mark.parametrize("change,pattern", [
    (lambda t: t.update(w_scale=t["w_scale"][:, :2]), r"argument 'w_scale': dimension 1 is 2, must be 4"),
    (lambda t: t.update(w_scale=t["w_scale"][:10]), r"argument 'w_scale': has 10 block rows, but the weights' "
                                                    r"3968 packed rows need 31"),
    (lambda t: t.update(w_scale=t["w_scale"][0]), r"argument 'w_scale': must have 2 dimensions"),
    (lambda t: t.update(w=torch.empty(H * 256 * N + 8, dtype=E4M3, device="meta")
                        .as_strided((H, K, N), (256 * N + 8, N, 1))),
     r"argument 'w': block-FP8 weights must be a view of the packed kv_b_proj"),
])
def test_block_fp8_argument_errors_name_the_argument(change, pattern):
    t = make(weights=BLOCK, out_dtype=E4M3)
    change(t)
    with pytest.raises(ValueError, match=pattern):
        call_out(t)


def test_functional_rejects_bad_out_dtype():
    with pytest.raises(ValueError, match=r"argument 'out_dtype': must be torch.bfloat16 or torch.float8_e4m3fn"):
        call_functional(make(), torch.float16)


def test_cpu_tensors_are_refused_naming_the_device():
    t = make(device="cpu", weights=E4M3, out_dtype=E4M3)
    with pytest.raises(ValueError, match=r"argument 'q_nope': must be a CUDA tensor, got one on cpu"):
        call_out(t)
    with pytest.raises(ValueError, match=r"argument 'q_nope': must be a CUDA tensor"):
        call_functional(t, E4M3)


def test_mixed_devices_are_refused_naming_the_argument():
    t = make(weights=E4M3, out_dtype=E4M3)
    t["q_scale"] = torch.ones(1)
    with pytest.raises(ValueError, match=r"argument 'q_scale': is on cpu, but q_nope is on meta"):
        call_out(t)


def test_wrapper_checks_out_dtype_against_out():
    t = make()
    with pytest.raises(ValueError, match="argument 'out_dtype'"):
        ops.mla_qproj(t["q_nope"], t["q_pe"], t["w"], out=t["out"], out_dtype=E4M3)
    assert ops.mla_qproj(t["q_nope"], t["q_pe"], t["w"], out=t["out"]) is t["out"]


def forward(q, w, w_scale, buf, q_scale):
    """One MLA query projection as a server writes it: slices of q, a pitched out buffer."""
    q_nope, q_pe = q[..., :K], q[..., K:]
    torch.ops.spark_mla.mla_qproj_out(q_nope, q_pe, w, w_scale, buf[..., :N + R], q_scale)
    fresh = ops.mla_qproj(q_nope, q_pe, w, w_scale, out_dtype=E4M3, q_scale=q_scale)
    return buf, fresh


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_compile_fullgraph_traces_the_op(backend):
    torch._dynamo.reset()
    t = make(weights=E4M3, out_dtype=BF16, out_pitch=640)
    q = torch.empty(M, H, K + R, dtype=BF16, device="meta")
    buf = torch.empty(M, H, 640, dtype=BF16, device="meta")
    compiled = torch.compile(forward, backend=backend, fullgraph=True)
    b, fresh = compiled(q, t["w"], t["w_scale"], buf, t["q_scale"])
    assert b.shape == (M, H, 640) and b.dtype == BF16
    assert fresh.shape == (M, H, N + R) and fresh.dtype == E4M3


def test_fake_tensor_mode_and_make_fx_trace_the_op():
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.proxy_tensor import make_fx
    with FakeTensorMode():
        q = torch.empty(M, H, K + R, dtype=BF16, device="cuda")
        w = torch.empty(H, K, N, dtype=E4M3, device="cuda")
        s = torch.empty(H, K, N // 32, dtype=torch.uint8, device="cuda")
        buf = torch.empty(M, H, 640, dtype=BF16, device="cuda")
        qs = torch.ones(1, device="cuda")
        b, fresh = forward(q, w, s, buf, qs)
        assert fresh.shape == (M, H, N + R) and fresh.dtype == E4M3 and fresh.device.type == "cuda"
        gm = make_fx(forward, tracing_mode="fake")(q, w, s, buf, qs)
    targets = {str(n.target) for n in gm.graph.nodes if n.op == "call_function"}
    assert "spark_mla.mla_qproj_out.default" in targets and "spark_mla.mla_qproj.default" in targets


def test_dynamic_m_traces_symbolically():
    torch._dynamo.reset()
    t = make()
    compiled = torch.compile(forward, backend="aot_eager", fullgraph=True, dynamic=True)
    for m in (3, 7):
        q = torch.empty(m, H, K + R, dtype=BF16, device="meta")
        buf = torch.empty(m, H, 640, dtype=BF16, device="meta")
        _, fresh = compiled(q, t["w"], None, buf, t["q_scale"])
        assert fresh.shape == (m, H, N + R)


def test_plan_rejects_bad_names_without_a_device():
    with pytest.raises(ValueError, match="argument 'weight_format'"):
        ops.Plan(8, 128, weight_format="int4", device="cuda:0")
    with pytest.raises(ValueError, match="argument 'device': must be a CUDA device"):
        ops.get_plan(8, 128, device="cpu")


def test_mxfp8_dequantization_rule():
    # bf16(value) * bf16(2^(byte - 127)) rounded once: byte 127 is 1, 128 doubles, 0 is 2^-127, 255 NaN.
    values = torch.tensor([1.0, -0.5, 448.0, 2.0 ** -9], dtype=torch.float32).to(E4M3)
    w = values.repeat_interleave(32).view(1, 1, 128)
    for byte, expect in [(127, [1.0, -0.5, 448.0, 2.0 ** -9]), (128, [2.0, -1.0, 896.0, 2.0 ** -8])]:
        s = torch.full((1, 1, 4), byte, dtype=torch.uint8)
        got = ops.dequantize_mxfp8(w, s).float().view(4, 32)[:, 0].tolist()
        assert got == expect
    s = torch.tensor([0, 255, 127, 127], dtype=torch.uint8).view(1, 1, 4)
    got = ops.dequantize_mxfp8(w, s).float().view(4, 32)[:, 0]
    assert got[0].item() == 2.0 ** -127 and torch.isnan(got[1])


def test_fp8_block_dequantization_rule():
    # float(value) * scale rounded to float32, then once to bf16; rows h * (K + V) + k pick the
    # block (a GLM-style 448-row head: head 1 starts in the middle of block 3).
    import struct
    h, k, v = 2, 192, 256
    kv_b = (torch.randn(h * (k + v), N) * 64).to(E4M3)
    w = kv_b.view(h, k + v, N)[:, :k]
    scales = torch.rand((h * (k + v) + 127) // 128, N // 128) * 0.01 + 1e-4
    got = ops.dequantize_fp8_block(w, scales)

    def rule(value, scale):
        prod = struct.unpack("f", struct.pack("f", float(value) * float(scale)))[0]  # float32 product
        return torch.tensor(prod, dtype=torch.float32).to(BF16)

    for hh, kk, nn in [(0, 0, 0), (0, 191, 511), (1, 0, 5), (1, 63, 200), (1, 64, 300), (1, 191, 130)]:
        row = hh * (k + v) + kk
        want = rule(kv_b[row, nn].float().item(), scales[row // 128, nn // 128].item())
        assert got[hh, kk, nn].view(torch.int16).item() == want.view(torch.int16).item(), (hh, kk, nn)
