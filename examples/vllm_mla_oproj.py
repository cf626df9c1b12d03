"""The MLA value up-projection of a vLLM-style MLA forward, staged and with spark.

vLLM (MLACommonImpl) keeps W_UV, the [H, L, V] view of kv_b_proj's weight, and after attention,
which returns its output in latent space (o: [M, H, L], L = kv_lora_rank), runs per layer and step:

    # staged: 2 or 3 kernels
    x = torch.bmm(o.transpose(0, 1), W_UV)               # [H, M, V]
    x = x.transpose(0, 1).reshape(M, H * V)              # o_proj's input (a copy)
    if fp8_o_proj:                                       # per-tensor quantisation
        x = (x.float() / x_scale).clamp(-448, 448).to(torch.float8_e4m3fn)

With spark it is one kernel writing o_proj's input (forward_spark below). spark takes the weight as
the packed kv_b_proj stores it, [H, V, L] with L contiguous: W_UV.transpose(1, 2), a view.
Run: python examples/vllm_mla_oproj.py   (a GPU; spark_mla importable, see examples/README.md)
"""

import torch

import spark_mla.ops  # registers torch.ops.spark_mla.*

H, K, V, L = 16, 128, 128, 512  # DeepSeek-V3 at TP 8 (GLM-5: V = 256)


def load_weights(device, dtype=torch.bfloat16):
    """kv_b_proj's weight [H * (K + V), L] and vLLM's W_UV view of it."""
    spread = 0.05 if dtype == torch.bfloat16 else 3.2  # e4m3 values: block scales of ~1/64 follow
    kv_b = (torch.randn(H * (K + V), L, device=device) * spread).to(dtype)
    W_UV = kv_b.T.view(L, H, K + V)[..., K:].transpose(0, 1)  # [H, L, V], strides ((K+V)*L, 1, L)
    return kv_b, W_UV


def forward_staged(o, W_UV, x_scale=None):
    x = torch.bmm(o.transpose(0, 1), W_UV).transpose(0, 1).reshape(o.shape[0], -1)
    if x_scale is not None:
        x = (x.float() * torch.reciprocal(x_scale)).clamp(-448.0, 448.0).to(torch.float8_e4m3fn)
    return x


def forward_spark(o, W_UV, w_scale=None, x_scale=None, out=None):
    """Drop-in: the same o, W_UV (bf16; FP8 weights below) and x_scale.  out: o_proj's input,
    e.g. a [M, H * V] view of a preallocated (possibly wider) buffer; None allocates one."""
    out_dtype = torch.float8_e4m3fn if x_scale is not None else torch.bfloat16
    return spark_mla.ops.mla_oproj(o, W_UV.transpose(1, 2), w_scale, out=out, out_dtype=out_dtype,
                                   out_scale=x_scale)


def main():
    device = torch.device("cuda")
    M = 32
    o = torch.randn(M, H, L, device=device).to(torch.bfloat16)  # the attention kernel's output
    _, W_UV = load_weights(device)
    x_scale = torch.tensor([0.05], device=device)
    # Make the plans (prewarm: loads every kernel up to max_m from the cache, or compiles them)
    # at start-up, before CUDA graphs are captured; the layers share them.
    spark_mla.ops.get_oproj_plan(H, V, out_dtype=torch.bfloat16)
    spark_mla.ops.get_oproj_plan(H, V, out_dtype=torch.float8_e4m3fn)

    staged = forward_staged(o, W_UV)
    spark = forward_spark(o, W_UV)
    print("bf16 max |spark - staged|:", (spark.float() - staged.float()).abs().max().item())

    # An FP8 o_proj: spark quantises into o_proj's input buffer itself.
    buf = torch.empty(M, H * V, dtype=torch.float8_e4m3fn, device=device)
    forward_spark(o, W_UV, x_scale=x_scale, out=buf)
    staged8 = forward_staged(o, W_UV, x_scale)
    diff = (buf.float() - staged8.float()).abs().max().item()
    print("e4m3 max |spark - staged| (one e4m3 step where the bf16 results differ):", diff)

    # A DeepSeek-V3 FP8 checkpoint: kv_b_proj is e4m3 with weight_scale_inv, one fp32 scale per
    # 128 x 128 block.  Servers dequantise it to bf16 at load; spark reads it as it is.
    kv_b_fp8, W_UV_fp8 = load_weights(device, torch.float8_e4m3fn)
    weight_scale_inv = torch.rand((H * (K + V) + 127) // 128, L // 128, device=device) * 1e-3 + 5e-4
    fp8 = forward_spark(o, W_UV_fp8, w_scale=weight_scale_inv)
    dequantised = spark_mla.ops.dequantize_oproj_weights(W_UV_fp8.transpose(1, 2), weight_scale_inv)  # [H, V, L]
    staged_fp8 = forward_staged(o, dequantised.transpose(1, 2))
    print("block-FP8 weights max |spark - staged on the dequantised weights|:",
          (fp8.float() - staged_fp8.float()).abs().max().item())


if __name__ == "__main__":
    main()
