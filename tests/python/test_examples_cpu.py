# The vLLM-style examples' views and calls, on meta tensors (no GPU): the weight views they build
# from kv_b_proj are the ones spark's ops accept, and spark's output has the staged output's shape.
import importlib.util
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed: the examples are not tested")
pytest.importorskip("spark_mla.ops")


def example(name):
    spec = importlib.util.spec_from_file_location(name, Path(__file__).resolve().parents[2] / "examples" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("x_scale", [None, 0.05])
def test_vllm_oproj_example_views(x_scale):
    ex = example("vllm_mla_oproj")
    M = 32
    o = torch.empty(M, ex.H, ex.L, dtype=torch.bfloat16, device="meta")
    scale = None if x_scale is None else torch.full((1,), x_scale, device="meta")
    for dtype, w_scale in ((torch.bfloat16, None),
                           (torch.float8_e4m3fn,
                            torch.empty((ex.H * (ex.K + ex.V) + 127) // 128, ex.L // 128, device="meta"))):
        _, W_UV = ex.load_weights("meta", dtype)
        assert W_UV.shape == (ex.H, ex.L, ex.V) and W_UV.stride(1) == 1  # vLLM's [H, L, V], L contiguous
        spark = ex.forward_spark(o, W_UV, w_scale=w_scale, x_scale=scale)
        staged = ex.forward_staged(o, W_UV.to(torch.bfloat16), scale)
        assert spark.shape == staged.shape == (M, ex.H * ex.V) and spark.dtype == staged.dtype
    # Into a view of a wider o_proj input buffer.
    buf = torch.empty(M, ex.H * ex.V + 64, dtype=torch.float8_e4m3fn if scale is not None else torch.bfloat16,
                      device="meta")
    assert ex.forward_spark(o, W_UV.to(torch.bfloat16), x_scale=scale, out=buf[:, :ex.H * ex.V]).shape == (
        M, ex.H * ex.V)


def test_vllm_qproj_example_views():
    ex = example("vllm_mla_qproj")
    M = 32
    q = torch.empty(M, ex.H, ex.K + ex.R, dtype=torch.bfloat16, device="meta")
    W_UK_T, _ = ex.load_weights("meta")
    assert W_UK_T.shape == (ex.H, ex.K, ex.N)
    spark = ex.forward_spark(q, W_UK_T)
    staged = ex.forward_staged(q, W_UK_T)
    assert spark.shape == staged.shape == (M, ex.H, ex.N + ex.R) and spark.dtype == staged.dtype
