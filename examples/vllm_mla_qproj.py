"""The MLA query projection of a vLLM-style MLA decode forward, staged and with spark.

vLLM (MLACommonImpl) keeps W_UK_T, the [H, K, N] view of kv_b_proj's weight, and per decode step:

    # staged: 2 to 4 kernels
    q_nope, q_pe = q.split([K, R], dim=-1)               # q: [M, H, K + R] bf16
    ql_nope = torch.bmm(q_nope.transpose(0, 1), W_UK_T)  # [H, M, N]
    ql_nope = ql_nope.transpose(0, 1)                    # [M, H, N]
    mqa_q = torch.cat([ql_nope, q_pe], dim=-1)           # [M, H, N + R]
    if fp8_attention:                                    # per-tensor quantisation
        mqa_q = (mqa_q.float() / q_scale).clamp(-448, 448).to(torch.float8_e4m3fn)

With spark it is one kernel writing the attention kernel's input in place (forward_spark below).
Run: python examples/vllm_mla_qproj.py   (a GPU; spark_mla importable, see examples/README.md)
"""

import torch

import spark_mla.ops  # registers torch.ops.spark_mla.*

H, K, V, N, R = 16, 128, 128, 512, 64  # DeepSeek-V3 at TP 8


def load_weights(device, mxfp8=False):
    """kv_b_proj's weight [H * (K + V), N] and vLLM's views of it."""
    weight = (torch.randn(H * (K + V), N, device=device) * 0.05)
    w_scale = None
    if mxfp8:
        weight = (weight * 64).to(torch.float8_e4m3fn)  # values; one E8M0 byte per 32 columns
        w_scale = torch.full((H, K, N // 32), 127 - 6, dtype=torch.uint8, device=device)
    else:
        weight = weight.to(torch.bfloat16)
    kv_b = weight.T.view(N, H, K + V)                 # [N, H, K + V]
    W_UK_T = kv_b[..., :K].permute(1, 2, 0)           # [H, K, N], pitched: strides ((K+V)*N, N, 1)
    return W_UK_T, w_scale


def forward_staged(q, W_UK_T, q_scale=None):
    q_nope, q_pe = q.split([K, R], dim=-1)
    ql_nope = torch.bmm(q_nope.transpose(0, 1), W_UK_T).transpose(0, 1)
    mqa_q = torch.cat([ql_nope, q_pe], dim=-1)
    if q_scale is not None:
        mqa_q = (mqa_q.float() * torch.reciprocal(q_scale)).clamp(-448.0, 448.0).to(torch.float8_e4m3fn)
    return mqa_q


def forward_spark(q, W_UK_T, w_scale=None, q_scale=None, out=None):
    """Drop-in: the same q, W_UK_T (bf16, or the float8_e4m3fn values of MXFP8 weights with
    their E8M0 scales) and q_scale.  out: where the attention kernel reads its query, e.g.
    a [M, H, N + R] view of a preallocated buffer; None allocates one."""
    q_nope, q_pe = q[..., :K], q[..., K:]             # views: no copy
    out_dtype = torch.float8_e4m3fn if q_scale is not None else torch.bfloat16
    return spark_mla.ops.mla_qproj(q_nope, q_pe, W_UK_T, w_scale, out=out, out_dtype=out_dtype,
                                   q_scale=q_scale)


def main():
    device = torch.device("cuda")
    M = 32
    q = torch.randn(M, H, K + R, device=device).to(torch.bfloat16)  # q_proj's output, viewed
    W_UK_T, _ = load_weights(device)
    q_scale = torch.tensor([0.05], device=device)
    # Make the plans (prewarm: loads every kernel up to max_m from the cache, or compiles them)
    # at start-up, before CUDA graphs are captured; the layers share them.
    spark_mla.ops.get_plan(H, K, out_dtype=torch.bfloat16)
    spark_mla.ops.get_plan(H, K, out_dtype=torch.float8_e4m3fn)

    staged = forward_staged(q, W_UK_T)
    spark = forward_spark(q, W_UK_T)
    print("bf16 max |spark - staged|:", (spark.float() - staged.float()).abs().max().item())

    # FP8 attention: spark writes straight into the attention kernel's query buffer.
    buf = torch.empty(M, H, N + R, dtype=torch.float8_e4m3fn, device=device)
    forward_spark(q, W_UK_T, q_scale=q_scale, out=buf)
    staged8 = forward_staged(q, W_UK_T, q_scale)
    diff = (buf.float() - staged8.float()).abs().max().item()
    print("e4m3 max |spark - staged| (one e4m3 step where the bf16 results differ):", diff)

    # A DeepSeek-V3 FP8 checkpoint: kv_b_proj is e4m3 with weight_scale_inv, one fp32 scale per
    # 128 x 128 block.  Servers dequantise it to bf16 at load; spark reads it as it is.
    kv_b_fp8 = (torch.randn(H * (K + V), N, device=device) * 64).to(torch.float8_e4m3fn)
    weight_scale_inv = torch.rand((H * (K + V) + 127) // 128, N // 128, device=device) * 1e-3 + 5e-4
    W_UK_T_fp8 = kv_b_fp8.view(H, K + V, N)[:, :K]     # [H, K, N], strides ((K+V)*N, N, 1)
    fp8 = forward_spark(q, W_UK_T_fp8, w_scale=weight_scale_inv)
    dequantised = spark_mla.ops.dequantize_fp8_block(W_UK_T_fp8, weight_scale_inv)  # what servers keep
    staged_fp8 = forward_staged(q, dequantised)
    print("block-FP8 weights max |spark - staged on the dequantised weights|:",
          (fp8.float() - staged_fp8.float()).abs().max().item())


if __name__ == "__main__":
    main()
