# The value up-projection's torch ops on a GPU, against float64 and the staged torch path
# (bmm + transpose + reshape [+ quant]).  Skips without CUDA.
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device: the GPU tests of the torch op are skipped", allow_module_level=True)
ops = pytest.importorskip("spark_mla.ops")

BF16, E4M3 = torch.bfloat16, torch.float8_e4m3fn
BLOCK = "fp8-block"
L = 512
DEV = torch.device("cuda", torch.cuda.current_device())
MAX_M = 256


def server_tensors(m, h, v, weights=BF16, pitch_pad=64, seed=0):
    """o from attention, W_UV as the last V rows of each head of kv_b_proj [H*(K+V), L], out a
    view of a wider [M, H*V + pad] buffer filled with a sentinel."""
    k = 192 if v == 256 else 128
    g = torch.Generator(device=DEV).manual_seed(seed)
    o = torch.randn(m, h, L, device=DEV, generator=g).to(BF16)
    w_scale = None
    if weights == BF16:
        kv_b = (torch.randn(h * (k + v), L, device=DEV, generator=g) * 0.05).to(BF16)
    else:
        kv_b = torch.randn(h * (k + v), L, device=DEV, generator=g).to(E4M3)
        if weights == BLOCK:
            w_scale = torch.rand((h * (k + v) + 127) // 128, L // 128, device=DEV, generator=g) * 2e-3 + 1e-4
        else:
            scales = torch.randint(118, 124, (h * (k + v), L // 32), device=DEV, generator=g, dtype=torch.int32)
            w_scale = scales.to(torch.uint8).view(h, k + v, L // 32)[:, k:]
    w = kv_b.view(h, k + v, L)[:, k:]
    return o, w, w_scale


def assert_accuracy(out, o, w, w_scale):
    """Error against float64 no larger than 1.05x cuBLAS's own (the staged bmm)."""
    wd = ops.dequantize_oproj_weights(w, w_scale)
    ref = torch.bmm(o.transpose(0, 1).double(), wd.transpose(1, 2).double()).transpose(0, 1).reshape(o.shape[0], -1)
    staged = ops.staged_oproj_reference(o, w, w_scale)
    err_cublas = (staged.double() - ref).abs().max().item()
    err_spark = (out.double() - ref).abs().max().item()
    assert err_spark <= 1.05 * err_cublas + 1e-12, (err_spark, err_cublas)


@pytest.mark.parametrize("weights", [BF16, E4M3, BLOCK])
@pytest.mark.parametrize("h,v", [(8, 128), (16, 256), (128, 128)])
@pytest.mark.parametrize("m", [1, 17, 200])
def test_matches_float64_as_well_as_cublas(weights, h, v, m):
    o, w, w_scale = server_tensors(m, h, v, weights)
    buf = torch.full((m, h * v + 64), float("nan"), dtype=BF16, device=DEV)
    out = ops.mla_oproj(o, w, w_scale, out=buf[:, :h * v], max_m=MAX_M)
    torch.cuda.synchronize()
    assert_accuracy(out, o, w, w_scale)
    assert torch.isnan(buf[:, h * v:]).all()  # the pad is never written
    again = ops.mla_oproj(o, w, w_scale, max_m=MAX_M)
    assert torch.equal(again.view(torch.int16), out.view(torch.int16))  # deterministic


def test_e4m3_output_is_the_rule_on_the_bf16_result():
    o, w, w_scale = server_tensors(33, 16, 128, BLOCK)
    scale = torch.tensor([0.0371], device=DEV)
    bf = ops.mla_oproj(o, w, w_scale, max_m=MAX_M)
    e4 = ops.mla_oproj(o, w, w_scale, out_dtype=E4M3, out_scale=scale, max_m=MAX_M)
    expect = (bf.float() * torch.reciprocal(scale)).clamp(-448.0, 448.0).to(E4M3)
    assert torch.equal(e4.view(torch.uint8), expect.view(torch.uint8))


def test_cuda_graph_replays_new_inputs():
    o, w, w_scale = server_tensors(4, 16, 128, E4M3)
    out = torch.empty(4, 16 * 128, dtype=BF16, device=DEV)
    ops.mla_oproj(o, w, w_scale, out=out, max_m=MAX_M)  # the plan is made (and prewarmed) outside the capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        ops.mla_oproj(o, w, w_scale, out=out, max_m=MAX_M)
    o.copy_(torch.randn_like(o, dtype=torch.float32).to(BF16))
    graph.replay()
    torch.cuda.synchronize()
    assert_accuracy(out, o, w, w_scale)


def test_torch_compile_traces_one_op():
    o, w, _ = server_tensors(8, 8, 128)

    def layer(x):
        return ops.mla_oproj(x, w, max_m=MAX_M) * 2

    compiled = torch.compile(layer, fullgraph=True)
    assert torch.equal(compiled(o), layer(o))
