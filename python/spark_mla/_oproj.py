"""The torch op of spark's MLA value up-projection (registered by importing spark_mla.ops).

    out = torch.ops.spark_mla.mla_oproj(o, w_uv, None, torch.bfloat16)       # [M, H*V]
    torch.ops.spark_mla.mla_oproj_out(o, w_uv, None, out_view, out_scale)

    out[m, h*V + v] = sum_l o[m, h, l] * W_UV[h, l, v]     (FP32 accumulation)

Tensors (strides in elements; the innermost dimension must have stride 1):
    o          bf16 [M, H, L]   the attention output in latent space (any token- or head-major view)
    w          [H, V, L]        W_UV as the packed kv_b_proj holds it: kv_b.view(H, K+V, L)[:, K:, :]
                                (bf16, or float8_e4m3fn values of FP8 weights)
    w_scale    None for bf16 weights; its dtype says which FP8 format the weights are:
               [H, V, L/32]     MXFP8: E8M0 bytes (uint8 or float8_e8m0fnu), the packed rows' own
               [B, L/128]       block FP8: float32, the checkpoint's weight_scale_inv over the whole
                                pack (w's head stride, in rows, is the pack's rows per head, K + V;
                                W_UV[h] is the head's last V rows)
    out        [M, H*V]         bf16 or float8_e4m3fn, may be a view of a wider buffer (o_proj's input)
    out_scale  fp32, 1 element, on the device: required for float8_e4m3fn output

Plans are made on first use and cached, as for the query projection (spark_mla.ops).
"""

import ctypes
from typing import Optional

import torch

from . import _lib
from .ops import (MAX_M, _SCALE_DTYPES, _WEIGHT_DTYPES, _WEIGHT_FORMATS, _OUT_DTYPES, _OUT_DTYPE_NAMES, _as_dtype,
                  _check_tensor, _device_index, _dtype_names, _fail, _format_name, _lock, _outer_strides,
                  _raise_run_error, context, dequantize_mxfp8)


def _oproj_weight_format(w, w_scale):
    if w.dtype == torch.bfloat16:
        return "bf16"
    return "fp8-block" if w_scale is not None and w_scale.dtype == torch.float32 else "mxfp8"


def _rows_per_head(w):
    """Block FP8: the packed weight's rows per head, w's head stride over its row stride."""
    if w.shape[0] <= 1:
        return w.shape[1]
    s_h, s_v = _outer_strides(w)
    if s_h % s_v:
        _fail("w", f"block-FP8 weights must be a view of the packed kv_b_proj: the head stride {s_h} must be a "
                   f"whole number of rows of {s_v} elements")
    return s_h // s_v


def _check_oproj(o, w, w_scale, out, out_scale, out_dtype, real):
    """Every rule that can be checked on the tensors' metadata, naming the argument; returns
    (M, H, L, V).  Alignment, overlap and the supported sizes are spark's own checks."""
    _check_tensor("o", o, (torch.bfloat16,), (None, None, None))
    m, h, l = o.shape
    if isinstance(w, torch.Tensor) and w.dim() == 3 and w.shape[0] != h:
        _fail("w", f"has {w.shape[0]} heads (shape {list(w.shape)}), but o has {h} (shape {list(o.shape)} = [M, H, L])")
    _check_tensor("w", w, _WEIGHT_DTYPES, (h, None, l))
    v = w.shape[1]
    if w.dtype == torch.float8_e4m3fn:
        if w_scale is None:
            _fail("w_scale", "is required with float8_e4m3fn weights: E8M0 bytes [H, V, L/32] (MXFP8) or the "
                             "float32 block scales [ceil(rows / 128), L/128] (block FP8)")
        if w_scale.dtype == torch.float32:
            if l % 128:
                _fail("w", f"block-FP8 weights need L a multiple of 128, got L = {l}")
            _check_tensor("w_scale", w_scale, (torch.float32,), (None, l // 128))
            rows = h * _rows_per_head(w) if h > 0 else 0
            if w_scale.shape[0] * 128 < rows:
                _fail("w_scale", f"has {w_scale.shape[0]} block rows, but the pack's {rows} rows need "
                                 f"{(rows + 127) // 128}")
        else:
            if l % 32:
                _fail("w", f"MXFP8 weights need L a multiple of 32, got L = {l}")
            _check_tensor("w_scale", w_scale, _SCALE_DTYPES, (h, v, l // 32))
    elif w_scale is not None:
        _fail("w_scale", "must be None with bfloat16 weights")
    if out is not None:
        _check_tensor("out", out, tuple(_OUT_DTYPES), (m, h * v))
    elif out_dtype not in _OUT_DTYPES:
        _fail("out_dtype", f"must be {_dtype_names(_OUT_DTYPES)}, got {out_dtype}")
    e4m3 = out_dtype == torch.float8_e4m3fn
    if e4m3 and out_scale is None:
        _fail("out_scale", "is required for float8_e4m3fn output: a 1-element float32 CUDA tensor")
    if out_scale is not None:
        if not isinstance(out_scale, torch.Tensor):
            _fail("out_scale", f"must be a torch.Tensor, got {type(out_scale).__name__}")
        if out_scale.dtype != torch.float32:
            _fail("out_scale", f"must be torch.float32, got {out_scale.dtype}")
        if out_scale.numel() != 1:
            _fail("out_scale", f"must have 1 element, got shape {list(out_scale.shape)}")
    device = o.device
    if real and device.type != "cuda":
        _fail("o", f"must be a CUDA tensor, got one on {device}")
    if not real and device.type not in ("cuda", "meta"):
        _fail("o", f"must be a CUDA tensor, got one on {device}")
    named = [("w", w), ("w_scale", w_scale), ("out", out)]
    if e4m3:
        named.append(("out_scale", out_scale))
    for name, t in named:
        if t is not None and t.device != device:
            _fail(name, f"is on {t.device}, but o is on {device}; all tensors must be on one CUDA device")
    return m, h, l, v


class OprojPlan:
    """A spark plan of the value up-projection for one shape on one device: `run` launches it.

    heads, v_head_dim (V), latent_dim (L); weight_format "bf16" | "mxfp8" | "fp8-block"; out_dtype
    torch.bfloat16 | torch.float8_e4m3fn (or "bf16" | "e4m3"); max_m, enable_pdl, lazy as for
    spark_mla.ops.Plan.  Prefer get_oproj_plan(), which shares one plan among the layers."""

    def __init__(self, heads, v_head_dim, latent_dim=512, weight_format="bf16", out_dtype=torch.bfloat16,
                 max_m=MAX_M, enable_pdl=False, lazy=False, device=None):
        self.weight_format = _format_name(weight_format)
        self.out_dtype = _as_dtype(out_dtype, _OUT_DTYPE_NAMES, "out_dtype")
        if self.out_dtype not in _OUT_DTYPES:
            _fail("out_dtype", f"must be {_dtype_names(_OUT_DTYPES)}, got {self.out_dtype}")
        self.heads, self.v_head_dim, self.latent_dim = heads, v_head_dim, latent_dim
        self.max_m, self.enable_pdl, self.lazy = max_m, bool(enable_pdl), bool(lazy)
        self._handle = None
        self._desc = _lib.oproj_desc(heads=heads, latent_dim=latent_dim, v_head_dim=v_head_dim,
                                     weight_format=_WEIGHT_FORMATS[self.weight_format],
                                     out_dtype=_OUT_DTYPES[self.out_dtype])
        options = _lib.plan_options(max_m=max_m, lazy=lazy, enable_pdl=enable_pdl)
        lib = _lib.library()
        _lib.can_implement_oproj(self._desc)  # a bad shape is reported the same with or without a device
        self.device = torch.device("cuda", _device_index(device))
        ctx = context(self.device)
        handle = ctypes.c_void_p()
        _lib.check(lib.spark_mla_oproj_plan_create(ctx, ctypes.byref(self._desc), ctypes.byref(options),
                                                   ctypes.byref(handle)), "spark_mla_oproj_plan_create")
        self._handle = handle.value
        self._run = lib.spark_mla_oproj_run

    def __del__(self):
        handle, self._handle = getattr(self, "_handle", None), None
        if handle is not None and _lib is not None:
            _lib.library().spark_mla_oproj_plan_destroy(handle)

    def __repr__(self):
        return (f"spark_mla.ops.OprojPlan(heads={self.heads}, v_head_dim={self.v_head_dim}, "
                f"latent_dim={self.latent_dim}, weight_format={self.weight_format!r}, out_dtype={self.out_dtype}, "
                f"max_m={self.max_m}, enable_pdl={self.enable_pdl}, lazy={self.lazy}, device={self.device})")

    def run(self, o, w, out, w_scale=None, out_scale=None):
        """out = per-head o @ W_UV, heads side by side, on torch.cuda.current_stream()."""
        m, h, l, v = _check_oproj(o, w, w_scale, out, out_scale, out.dtype, real=True)
        if (h, l, v) != (self.heads, self.latent_dim, self.v_head_dim):
            raise ValueError(f"argument 'o': the tensors are H={h}, L={l}, V={v}, but the plan is heads={self.heads}, "
                             f"latent_dim={self.latent_dim}, v_head_dim={self.v_head_dim}")
        if _oproj_weight_format(w, w_scale) != self.weight_format:
            _fail("w", f"is {_oproj_weight_format(w, w_scale)} weights, but the plan's weight_format is "
                       f"{self.weight_format!r}")
        if out.dtype != self.out_dtype:
            _fail("out", f"is {out.dtype}, but the plan's out_dtype is {self.out_dtype}")
        if o.device != self.device:
            _fail("o", f"is on {o.device}, but the plan is for {self.device}")
        self._launch(m, o, w, out, w_scale, out_scale)

    def _launch(self, m, o, w, out, w_scale, out_scale):
        if m == 0:
            return  # no tokens: nothing to write
        o_m, o_h = _outer_strides(o)
        w_h, w_v = _outer_strides(w)
        out_m = out.stride(0) if out.shape[0] > 1 else out.shape[1]
        args = _lib.oproj_args(m=m, o=o.data_ptr(), o_stride_m=o_m, o_stride_h=o_h, w=w.data_ptr(), w_stride_h=w_h,
                               w_stride_v=w_v, out=out.data_ptr(), out_stride_m=out_m)
        if w_scale is not None and w_scale.dtype == torch.float32:  # block FP8
            args.w_scale = w_scale.data_ptr()
            args.w_scale_stride_h = _rows_per_head(w)
            args.w_scale_stride_v = w_scale.stride(0) if w_scale.shape[0] > 1 else w_scale.shape[1]
        elif w_scale is not None:
            args.w_scale = w_scale.data_ptr()
            args.w_scale_stride_h, args.w_scale_stride_v = _outer_strides(w_scale)
        if out_scale is not None:
            args.out_scale = out_scale.data_ptr()
        stream = torch.cuda.current_stream(self.device).cuda_stream
        status = self._run(self._handle, ctypes.byref(args), stream)
        if status != _lib.SUCCESS:
            _raise_run_error(status, m, "spark_mla_oproj_run")


_oproj_plans = {}


def get_oproj_plan(heads, v_head_dim, latent_dim=512, weight_format="bf16", out_dtype=torch.bfloat16, max_m=MAX_M,
                   enable_pdl=False, lazy=False, device=None):
    """The cached OprojPlan for these values (made, and so prewarmed, on first use)."""
    weight_format = _format_name(weight_format)
    out_dtype = _as_dtype(out_dtype, _OUT_DTYPE_NAMES, "out_dtype")
    index = _device_index(device)
    key = (index, heads, v_head_dim, latent_dim, weight_format, out_dtype, max_m, bool(enable_pdl), bool(lazy))
    plan = _oproj_plans.get(key)
    if plan is not None:
        return plan
    # Made outside the lock (a prewarm may compile for seconds); the first stored wins a race.
    plan = OprojPlan(heads, v_head_dim, latent_dim, weight_format, out_dtype, max_m, enable_pdl, lazy, index)
    with _lock:
        return _oproj_plans.setdefault(key, plan)


def _plan_for(o, w, w_scale, out_dtype, max_m, enable_pdl, lazy):
    return get_oproj_plan(o.shape[1], w.shape[1], o.shape[2], _oproj_weight_format(w, w_scale), out_dtype, max_m,
                          enable_pdl, lazy, o.device)


@torch.library.custom_op("spark_mla::mla_oproj_out", mutates_args=("out",))
def _mla_oproj_out(o: torch.Tensor, w: torch.Tensor, w_scale: Optional[torch.Tensor], out: torch.Tensor,
                   out_scale: Optional[torch.Tensor] = None, max_m: int = MAX_M, enable_pdl: bool = False,
                   lazy: bool = False) -> None:
    m = _check_oproj(o, w, w_scale, out, out_scale, out.dtype, real=True)[0]
    _plan_for(o, w, w_scale, out.dtype, max_m, enable_pdl, lazy)._launch(m, o, w, out, w_scale, out_scale)


@_mla_oproj_out.register_fake
def _(o, w, w_scale, out, out_scale=None, max_m=MAX_M, enable_pdl=False, lazy=False):
    _check_oproj(o, w, w_scale, out, out_scale, out.dtype, real=False)


@torch.library.custom_op("spark_mla::mla_oproj", mutates_args=())
def _mla_oproj(o: torch.Tensor, w: torch.Tensor, w_scale: Optional[torch.Tensor], out_dtype: torch.dtype,
               out_scale: Optional[torch.Tensor] = None, max_m: int = MAX_M, enable_pdl: bool = False,
               lazy: bool = False) -> torch.Tensor:
    m, h, _, v = _check_oproj(o, w, w_scale, None, out_scale, out_dtype, real=True)
    out = torch.empty((m, h * v), dtype=out_dtype, device=o.device)
    _plan_for(o, w, w_scale, out_dtype, max_m, enable_pdl, lazy)._launch(m, o, w, out, w_scale, out_scale)
    return out


@_mla_oproj.register_fake
def _(o, w, w_scale, out_dtype, out_scale=None, max_m=MAX_M, enable_pdl=False, lazy=False):
    m, h, _, v = _check_oproj(o, w, w_scale, None, out_scale, out_dtype, real=False)
    return o.new_empty((m, h * v), dtype=out_dtype)


def mla_oproj(o, w, w_scale=None, *, out=None, out_dtype=None, out_scale=None, max_m=MAX_M, enable_pdl=False,
              lazy=False):
    """out[m, h*V + v] = sum_l o[m, h, l] * w[h, v, l].  With out given ([M, H*V], a view of any pitched
    buffer) writes and returns it; otherwise returns a new [M, H*V] tensor of out_dtype (default bf16).
    Both forms are torch ops (torch.ops.spark_mla.mla_oproj_out / mla_oproj)."""
    if out is not None:
        if out_dtype is not None and out_dtype != out.dtype:
            _fail("out_dtype", f"is {out_dtype}, but out is {out.dtype}")
        torch.ops.spark_mla.mla_oproj_out(o, w, w_scale, out, out_scale, max_m, enable_pdl, lazy)
        return out
    return torch.ops.spark_mla.mla_oproj(o, w, w_scale, out_dtype or torch.bfloat16, out_scale, max_m, enable_pdl,
                                         lazy)


def dequantize_oproj_weights(w, w_scale):
    """W_UV [H, V, L] as bf16 by the format's rule (MXFP8 along L; block FP8 over the packed rows
    (h + 1) * rows_per_head - V + v).  For reference paths and tests."""
    if w.dtype == torch.bfloat16:
        return w
    if w_scale.dtype != torch.float32:
        return dequantize_mxfp8(w, w_scale)
    h, v, _ = w.shape
    per_head = _rows_per_head(w)
    rows = (torch.arange(h, device=w.device)[:, None] + 1) * per_head - v + torch.arange(v, device=w.device)
    scale = w_scale[rows // 128].repeat_interleave(128, dim=-1)  # [H, V, L]
    return (w.float() * scale).to(torch.bfloat16)


def staged_oproj_reference(o, w, w_scale=None, out_dtype=torch.bfloat16, out_scale=None):
    """What servers run today: bmm (cuBLAS) + transpose + reshape copy [+ per-tensor quant], quantising
    the bf16 result as spark's E4M3 rule does."""
    w = dequantize_oproj_weights(w, w_scale)
    res = torch.bmm(o.transpose(0, 1), w.transpose(1, 2)).transpose(0, 1).reshape(o.shape[0], -1)
    if out_dtype == torch.float8_e4m3fn:
        res = (res.float() * torch.reciprocal(out_scale.float())).clamp(-448.0, 448.0).to(torch.float8_e4m3fn)
    return res
