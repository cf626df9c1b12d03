# The value up-projection's torch ops without a GPU: shapes through the fake implementation,
# argument checks naming the argument, spark's own host checks, and the reference helpers.
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed: the torch op is not tested")
ops = pytest.importorskip("spark_mla.ops")

M, H, K, L = 4, 16, 128, 512
BF16, E4M3 = torch.bfloat16, torch.float8_e4m3fn
BLOCK = "fp8-block"


def make(device="meta", m=M, h=H, v=128, weights=BF16, out_dtype=BF16, out_pitch=None):
    """What a server holds: o from attention, W_UV as the last V rows of each head of kv_b_proj
    ([H * (K + V), L]), out a view of the o_proj input buffer."""
    o = torch.empty(m, h, L, dtype=BF16, device=device)
    kv_b = torch.empty(h * (K + v), L, dtype=BF16 if weights == BF16 else E4M3, device=device)
    w = kv_b.view(h, K + v, L)[:, K:]
    assert w.shape == (h, v, L) and w.stride() == ((K + v) * L, L, 1)
    w_scale = None
    if weights == E4M3:  # MXFP8: the pack's own scale bytes
        w_scale = torch.empty(h * (K + v), L // 32, dtype=torch.uint8, device=device).view(h, K + v, L // 32)[:, K:]
    elif weights == BLOCK:
        w_scale = torch.empty((h * (K + v) + 127) // 128, L // 128, dtype=torch.float32, device=device)
    buf = torch.empty(m, out_pitch or h * v, dtype=out_dtype, device=device)
    out_scale = torch.ones(1, dtype=torch.float32, device=device)
    return dict(o=o, w=w, w_scale=w_scale, out=buf[:, :h * v], out_scale=out_scale)


def call_out(t):
    torch.ops.spark_mla.mla_oproj_out(t["o"], t["w"], t["w_scale"], t["out"], t["out_scale"])


def call_functional(t, out_dtype=BF16):
    return torch.ops.spark_mla.mla_oproj(t["o"], t["w"], t["w_scale"], out_dtype, t["out_scale"])


@pytest.mark.parametrize("weights", [BF16, E4M3, BLOCK])
@pytest.mark.parametrize("out_dtype", [BF16, E4M3])
@pytest.mark.parametrize("v", [128, 256])
def test_meta_shapes_and_dtypes(weights, out_dtype, v):
    t = make(weights=weights, out_dtype=out_dtype, v=v, out_pitch=H * v + 64)
    call_out(t)
    out = call_functional(t, out_dtype)
    assert out.shape == (M, H * v) and out.dtype == out_dtype and out.device.type == "meta"


def broken(change, weights=E4M3, out_dtype=E4M3):
    t = make(weights=weights, out_dtype=out_dtype)
    change(t)
    return t


@pytest.mark.parametrize("change,argument,rule", [
    (lambda t: t.update(o=t["o"].float()), "o", "torch.bfloat16"),
    (lambda t: t.update(o=t["o"][0]), "o", "3 dimensions"),
    (lambda t: t.update(w=t["w"][:8]), "w", "heads"),
    (lambda t: t.update(w=t["w"][..., :256]), "w", "dimension 2"),
    (lambda t: t.update(w_scale=None), "w_scale", "required"),
    (lambda t: t.update(w_scale=t["w_scale"][..., :8]), "w_scale", "dimension 2"),
    (lambda t: t.update(out=t["out"][:, :100]), "out", "dimension 1"),
    (lambda t: t.update(out_scale=None), "out_scale", "required"),
    (lambda t: t.update(out_scale=torch.ones(2, device="meta")), "out_scale", "1 element"),
    (lambda t: t.update(o=t["o"].transpose(1, 2).contiguous().transpose(1, 2)), "o", "contiguous"),
])
def test_argument_errors_name_the_argument(change, argument, rule):
    with pytest.raises(ValueError, match=rf"argument '{argument}'.*{rule}"):
        call_out(broken(change))


def test_bf16_weights_take_no_scales():
    t = make()
    t["w_scale"] = torch.empty(H, 128, L // 32, dtype=torch.uint8, device="meta")
    with pytest.raises(ValueError, match="argument 'w_scale'.*None"):
        call_out(t)


def test_block_scales_must_cover_the_pack():
    t = make(weights=BLOCK)
    t["w_scale"] = t["w_scale"][:3]
    with pytest.raises(ValueError, match="argument 'w_scale'.*block rows"):
        call_out(t)


def test_cpu_tensors_are_refused():
    t = make(device="cpu")
    with pytest.raises(ValueError, match="argument 'o'.*CUDA"):
        call_out(t)


def test_spark_refuses_shapes_it_does_not_implement():
    # spark's own host check, before any device is touched.
    with pytest.raises(ops.SparkUnsupported, match="v_head_dim"):
        ops.OprojPlan(heads=16, v_head_dim=192)
    with pytest.raises(ops.SparkUnsupported, match="heads"):
        ops.OprojPlan(heads=129, v_head_dim=128)


def test_block_dequantisation_follows_the_packed_rows():
    # GLM's shape: K + V = 448 rows per head, so blocks straddle heads; one scale per block,
    # each a distinct power of two so a wrong block shows.
    h, k, v, l = 3, 192, 256, 512
    pack = torch.full((h * (k + v), l), 1.0).to(E4M3)
    blocks = (h * (k + v) + 127) // 128
    scales = torch.tensor([[2.0 ** (b % 7 - 3) * (c + 1) for c in range(l // 128)] for b in range(blocks)])
    w = pack.view(h, k + v, l)[:, k:]
    deq = ops.dequantize_oproj_weights(w, scales)
    for hh in range(h):
        for vv in (0, 100, v - 1):
            row = hh * (k + v) + k + vv
            for ll in (0, 130, l - 1):
                assert deq[hh, vv, ll].item() == scales[row // 128, ll // 128].to(BF16).item()


def test_staged_reference_is_bmm_transpose_reshape():
    torch.manual_seed(0)
    h, v, m = 2, 128, 3
    o = torch.randn(m, h, L).to(BF16)
    w = torch.randn(h, v, L).to(BF16)
    ref = ops.staged_oproj_reference(o, w)
    expect = torch.cat([(o[:, i].float() @ w[i].float().T) for i in range(h)], dim=1)
    assert ref.shape == (m, h * v)
    torch.testing.assert_close(ref.float(), expect, rtol=1e-2, atol=1e-2)
