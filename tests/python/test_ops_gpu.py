# The torch op on a GPU, against the staged torch path (bmm + transpose + cat [+ quant]).
# Skips without CUDA.  Run: pytest tests/python/test_ops_gpu.py (see examples/README.md).
import threading

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device: the GPU tests of the torch op are skipped", allow_module_level=True)
ops = pytest.importorskip("spark_mla.ops")

BF16, E4M3 = torch.bfloat16, torch.float8_e4m3fn
BLOCK = "fp8-block"  # e4m3 kv_b_proj with the checkpoints' float32 128 x 128 block scales
N, R, V = 512, 64, 128
DEV = torch.device("cuda", torch.cuda.current_device())
MAX_M = 512  # plans of these tests: fewer kernels to prewarm than 8192


def server_tensors(m, h, k, weights=BF16, out_pitch=640, seed=0):
    """Tensors laid out as in an MLA server: q_nope / q_pe slices of one [M, H, K+R] query,
    W_UK_T the permuted [H, K, N] view of kv_b_proj's [H*(K+V), N] weight, out a view of a
    pitched [M, H, out_pitch] buffer (poisoned, to see that nothing past N+R is written)."""
    g = torch.Generator(device=DEV).manual_seed(seed)
    q = torch.randn(m, h, k + R, device=DEV, generator=g).to(BF16)
    if weights == BF16:
        kv_b = (torch.randn(h * (k + V), N, device=DEV, generator=g) * 0.05).to(BF16)
        w_scale = None
    elif weights == BLOCK:  # GLM's K 192 + V 256 = 448-row heads straddle the 128-row blocks
        v = 256 if k == 192 else V
        kv_b = (torch.randn(h * (k + v), N, device=DEV, generator=g) * 64).to(E4M3)
        w_scale = torch.rand((h * (k + v) + 127) // 128, N // 128, device=DEV, generator=g) * 2e-3 + 1e-4
        w = kv_b.view(h, k + v, N)[:, :k]
        buf = torch.full((m, h, out_pitch), 7, dtype=torch.uint8, device=DEV)
        return q, w, w_scale, buf
    else:
        kv_b = torch.randn(h * (k + V), N, device=DEV, generator=g).to(E4M3)
        scale_buf = torch.randint(118, 124, (h, k + V, N // 32 + 16), device=DEV, generator=g, dtype=torch.int32)
        w_scale = scale_buf.to(torch.uint8)[:, :k, : N // 32]  # pitched scale rows
    w = kv_b.T.view(N, h, k + V)[..., :k].permute(1, 2, 0)
    buf = torch.full((m, h, out_pitch), 7, dtype=torch.uint8, device=DEV)
    return q, w, w_scale, buf


def bf16_buffer(m, h, pitch=640):
    return torch.full((m, h, pitch), float("nan"), dtype=BF16, device=DEV)


def assert_accuracy(out, q_nope, q_pe, w, w_scale):
    """Error against float64 no larger than 1.05x cuBLAS's own (the staged bmm), RoPE bitwise."""
    if w.dtype == BF16:
        wd = w
    elif w_scale.dtype == torch.float32:
        wd = ops.dequantize_fp8_block(w, w_scale)
    else:
        wd = ops.dequantize_mxfp8(w, w_scale)
    ref = torch.bmm(q_nope.transpose(0, 1).double(), wd.double()).transpose(0, 1)
    staged = ops.staged_reference(q_nope, q_pe, w, w_scale)
    err_cublas = (staged[..., :N].double() - ref).abs().max().item()
    err_spark = (out[..., :N].double() - ref).abs().max().item()
    assert err_spark <= 1.05 * err_cublas + 1e-12, (err_spark, err_cublas)
    assert torch.equal(out[..., N:], q_pe)


def e4m3_rule(bf16_result, q_scale):
    rcp = torch.reciprocal(q_scale.float())
    return (bf16_result.float() * rcp).clamp(-448.0, 448.0).to(E4M3)


@pytest.mark.parametrize("weights", [BF16, E4M3, BLOCK])
@pytest.mark.parametrize("h,k", [(16, 128), (11, 192), (128, 128)])
@pytest.mark.parametrize("m", [1, 7, 64, 300])
def test_bf16_output_matches_staged(weights, h, k, m):
    q, w, w_scale, _ = server_tensors(m, h, k, weights)
    buf = bf16_buffer(m, h)
    out = buf[..., : N + R]
    ops.mla_qproj(q[..., :k], q[..., k:], w, w_scale, out=out, max_m=MAX_M)
    assert torch.isnan(buf[..., N + R:]).all(), "columns past N+R were written"
    assert_accuracy(out, q[..., :k], q[..., k:], w, w_scale)
    # the functional form: the same bits
    fresh = ops.mla_qproj(q[..., :k], q[..., k:], w, w_scale, max_m=MAX_M)
    assert torch.equal(fresh, out)


@pytest.mark.parametrize("weights", [BF16, E4M3, BLOCK])
@pytest.mark.parametrize("m", [1, 33, 256])
def test_e4m3_output_is_the_rule_applied_to_the_bf16_result(weights, m):
    h, k = 16, 128
    q, w, w_scale, buf = server_tensors(m, h, k, weights)
    q_scale = torch.tensor([0.037], device=DEV)
    bf16 = ops.mla_qproj(q[..., :k], q[..., k:], w, w_scale, max_m=MAX_M)
    out = buf.view(E4M3)[..., : N + R]
    ops.mla_qproj(q[..., :k], q[..., k:], w, w_scale, out=out, q_scale=q_scale, max_m=MAX_M)
    assert torch.equal(out.view(torch.uint8), e4m3_rule(bf16, q_scale).view(torch.uint8))
    assert (buf[..., N + R:] == 7).all(), "columns past N+R were written"


def test_strided_query_and_padded_heads():
    # q_nope / q_pe from a query whose rows are pitched (a larger hidden buffer), every other token.
    m, h, k = 40, 16, 192
    big = torch.randn(2 * m, h, k + R + 64, device=DEV).to(BF16)
    q = big[::2, :, : k + R]
    w = (torch.randn(h, k, N + 64, device=DEV) * 0.05).to(BF16)[..., :N]
    out = ops.mla_qproj(q[..., :k], q[..., k:], w, max_m=MAX_M)
    assert_accuracy(out, q[..., :k], q[..., k:], w, None)


def test_m_zero_is_a_no_op():
    q, w, _, _ = server_tensors(1, 8, 128)
    out = ops.mla_qproj(q[:0, :, :128], q[:0, :, 128:], w, max_m=MAX_M)
    assert out.shape == (0, 8, N + R)


def test_spark_errors_carry_spark_message():
    q, w, _, _ = server_tensors(4, 8, 128)
    out = bf16_buffer(4, 8)[..., : N + R]
    with pytest.raises(ops.SparkInvalidArgument, match="q_nope_stride"):
        # a q_nope whose outer strides are not multiples of 8 elements (16-byte rows)
        odd = torch.randn(4, 8, 128 + R + 4, device=DEV).to(BF16)[..., :128]
        ops.mla_qproj(odd, q[..., 128:], w, out=out, max_m=MAX_M)
    with pytest.raises(ops.SparkInvalidArgument, match="'m'"):
        big = server_tensors(MAX_M + 1, 8, 128)[0]
        ops.mla_qproj(big[..., :128], big[..., 128:], w, max_m=MAX_M)
    with pytest.raises(ops.SparkUnsupported, match="nope_dim"):
        w64 = torch.zeros(8, 64, N, dtype=BF16, device=DEV)
        q64 = torch.zeros(4, 8, 64 + R, dtype=BF16, device=DEV)
        ops.mla_qproj(q64[..., :64], q64[..., 64:], w64, max_m=MAX_M)


def test_plans_are_shared_per_shape_and_options():
    a = ops.get_plan(16, 128, max_m=MAX_M)
    assert ops.get_plan(16, 128, weight_format=BF16, out_dtype="bf16", max_m=MAX_M, device=DEV) is a
    assert ops.get_plan(16, 128, max_m=MAX_M, enable_pdl=True) is not a
    assert ops.context() == ops.context(DEV)


@pytest.mark.parametrize("out_dtype", [BF16, E4M3])
def test_cuda_graph_replays_with_new_inputs_and_q_scale(out_dtype):
    m, h, k = 24, 16, 128
    q, w, w_scale, buf = server_tensors(m, h, k, E4M3)
    q_scale = torch.tensor([0.05], device=DEV)
    out = buf.view(out_dtype)[..., : N + R] if out_dtype == E4M3 else bf16_buffer(m, h)[..., : N + R]
    call = lambda: ops.mla_qproj(q[..., :k], q[..., k:], w, w_scale, out=out, q_scale=q_scale, max_m=MAX_M)
    call()  # the plan is made (and prewarmed) outside the capture
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        call()
    for seed, scale in [(1, 0.02), (2, 0.3)]:
        q.copy_(server_tensors(m, h, k, seed=seed)[0])
        w_scale.copy_(torch.randint(119, 123, w_scale.shape, device=DEV).to(torch.uint8))
        q_scale.fill_(scale)
        g.replay()
        torch.cuda.synchronize()
        bf16 = ops.mla_qproj(q[..., :k], q[..., k:], w, w_scale, max_m=MAX_M)
        assert_accuracy(bf16, q[..., :k], q[..., k:], w, w_scale)
        expect = e4m3_rule(bf16, q_scale) if out_dtype == E4M3 else bf16
        assert torch.equal(out.view(torch.uint8), expect.view(torch.uint8))


def test_lazy_plan_capture_miss_raises_and_leaves_the_capture_intact():
    m, h, k = 5, 8, 192
    q, w, _, _ = server_tensors(m, h, k)
    out = bf16_buffer(m, h)[..., : N + R]
    # a lazy plan of its own (max_m differs from the other tests' plans): nothing loaded yet
    call = lambda: ops.mla_qproj(q[..., :k], q[..., k:], w, out=out, max_m=MAX_M - 1, lazy=True)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with pytest.raises(ops.SparkNotLoadedWhileCapturing, match="lazy=False"):
        with torch.cuda.graph(g):
            call()
    assert not torch.cuda.is_current_stream_capturing()
    call()  # loads the regime outside a capture
    g = torch.cuda.CUDAGraph()  # a graph whose capture failed cannot be captured into again
    with torch.cuda.graph(g):
        call()
    g.replay()
    torch.cuda.synchronize()
    assert_accuracy(out, q[..., :k], q[..., k:], w, None)


@pytest.mark.parametrize("mode", [None, "reduce-overhead"])
def test_torch_compile(mode):
    torch._dynamo.reset()
    m, h, k = 16, 16, 128
    q, w, w_scale, _ = server_tensors(m, h, k, E4M3)
    q_scale = torch.tensor([0.04], device=DEV)

    def forward(q, w, w_scale, q_scale):
        q_nope, q_pe = q[..., :k], q[..., k:]
        buf = torch.empty(q.shape[0], h, 640, dtype=BF16, device=q.device)
        ops.mla_qproj(q_nope, q_pe, w, w_scale, out=buf[..., : N + R], max_m=MAX_M)
        fp8 = ops.mla_qproj(q_nope, q_pe, w, w_scale, out_dtype=E4M3, q_scale=q_scale, max_m=MAX_M)
        return buf[..., : N + R] * 1, fp8

    compiled = torch.compile(forward, mode=mode, fullgraph=True)
    for seed in range(3):
        q.copy_(server_tensors(m, h, k, seed=seed)[0])
        bf16, fp8 = compiled(q, w, w_scale, q_scale)
        bf16, fp8 = bf16.clone(), fp8.clone()
        ref_bf16, ref_fp8 = forward(q, w, w_scale, q_scale)
        assert torch.equal(bf16, ref_bf16)
        assert torch.equal(fp8.view(torch.uint8), ref_fp8.view(torch.uint8))


def test_threads_on_their_own_streams():
    h, k = 16, 128
    ops.get_plan(h, k, max_m=MAX_M)  # made once, shared by the threads
    errors = []

    def worker(i):
        try:
            stream = torch.cuda.Stream()
            with torch.cuda.stream(stream):
                m = 8 + 16 * i
                q, w, _, _ = server_tensors(m, h, k, seed=10 + i)
                expect = ops.mla_qproj(q[..., :k], q[..., k:], w, max_m=MAX_M)
                for _ in range(50):
                    got = ops.mla_qproj(q[..., :k], q[..., k:], w, max_m=MAX_M)
                    if not torch.equal(got, expect):
                        errors.append(f"thread {i}: result changed")
                        return
                stream.synchronize()
                assert_accuracy(expect, q[..., :k], q[..., k:], w, None)
        except Exception as e:  # reported by the main thread
            errors.append(f"thread {i}: {e!r}")

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
