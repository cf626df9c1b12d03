"""The torch ops: spark's MLA query projection on the tensors an MLA server holds (and, from
spark_mla/_oproj.py, the value up-projection: torch.ops.spark_mla.mla_oproj / mla_oproj_out).

    import spark_mla.ops
    q_nope, q_pe = q[..., :K], q[..., K:]                  # views of the [M, H, K+R] query
    out = torch.ops.spark_mla.mla_qproj(q_nope, q_pe, W_UK_T, None, torch.bfloat16)
    torch.ops.spark_mla.mla_qproj_out(q_nope, q_pe, W_UK_T, None, out_view, q_scale)

Tensors (strides in elements; the innermost dimension must have stride 1):
    q_nope   bf16 [M, H, K]     e.g. q[..., :K] (spark reads it as [H, M, K] through the strides)
    q_pe     bf16 [M, H, R]     e.g. q[..., K:]
    w        [H, K, N]          W_UK_T: bf16, or float8_e4m3fn values of FP8 weights
    w_scale  None for bf16 weights; its dtype says which FP8 format the weights are:
             [H, K, N/32]       MXFP8: E8M0 exponent bytes, uint8 or float8_e8m0fnu
             [B, N/128]         block FP8: float32, the checkpoint's weight_scale_inv (one scale
                                per 128 x 128 block of the packed kv_b_proj).  w must then be a
                                view of that packed weight: its head stride, in rows, is the rows
                                per head of the pack (K + V), and w's first row is the pack's.
    out      [M, H, N+R]        bf16 or float8_e4m3fn, may be a view of a larger buffer
    q_scale  fp32, 1 element, on the device: required for float8_e4m3fn output (read by the
             kernel at run time, so a captured CUDA graph follows its value)

The kernel runs on torch.cuda.current_stream().  Plans are made on first use and cached per
(device, shape, formats, max_m, enable_pdl, lazy); a plan that is not lazy loads (or compiles,
into the on-disk cache) every kernel up to max_m when it is made, so make it before capturing
a CUDA graph: call the op once eagerly, or get_plan() at start-up.
"""

import ctypes
import threading
from typing import Optional

import torch

from . import _lib
from ._lib import SparkError, SparkInvalidArgument, SparkNotLoadedWhileCapturing, SparkUnsupported

_E8M0 = getattr(torch, "float8_e8m0fnu", None)
_SCALE_DTYPES = (torch.uint8,) + ((_E8M0,) if _E8M0 is not None else ())
_WEIGHT_DTYPES = (torch.bfloat16, torch.float8_e4m3fn)
_WEIGHT_FORMATS = {"bf16": _lib.WEIGHTS_BF16, "mxfp8": _lib.WEIGHTS_MXFP8, "fp8-block": _lib.WEIGHTS_FP8_BLOCK128}
_OUT_DTYPES = {torch.bfloat16: _lib.DTYPE_BF16, torch.float8_e4m3fn: _lib.DTYPE_E4M3}
_OUT_DTYPE_NAMES = {"bf16": torch.bfloat16, "e4m3": torch.float8_e4m3fn}
MAX_M = _lib.MAX_M


def _fail(argument, rule):
    raise ValueError(f"argument '{argument}': {rule}")


def _dtype_names(dtypes):
    return " or ".join(str(d) for d in dtypes)


def _check_tensor(name, t, dtypes, shape):
    """dim, dtype, shape (None entries are free) and a unit innermost stride."""
    if not isinstance(t, torch.Tensor):
        _fail(name, f"must be a torch.Tensor, got {type(t).__name__}")
    if t.dim() != len(shape):
        _fail(name, f"must have {len(shape)} dimensions, got shape {list(t.shape)}")
    if t.dtype not in dtypes:
        _fail(name, f"must be {_dtype_names(dtypes)}, got {t.dtype}")
    for i, (got, want) in enumerate(zip(t.shape, shape)):
        if want is not None and got != want:
            _fail(name, f"dimension {i} is {got}, must be {want} (shape {list(t.shape)}, expected "
                        f"{['*' if s is None else s for s in shape]})")
    if t.shape[-1] > 1 and t.stride(-1) != 1:
        _fail(name, f"the innermost dimension must be contiguous (stride 1), got strides {list(t.stride())}")


def _weight_format(w, w_scale):
    """The format name of checked weights: bf16, or by the scales' dtype."""
    if w.dtype == torch.bfloat16:
        return "bf16"
    return "fp8-block" if w_scale is not None and w_scale.dtype == torch.float32 else "mxfp8"


def _block_rows_per_head(w):
    """Block FP8: the packed weight's rows per head, w's head stride over its row stride."""
    if w.shape[0] <= 1:
        return w.shape[1]
    s_h, s_k = _outer_strides(w)
    if s_h % s_k:
        _fail("w", f"block-FP8 weights must be a view of the packed kv_b_proj: the head stride {s_h} must be a "
                   f"whole number of rows of {s_k} elements")
    return s_h // s_k


def _check(q_nope, q_pe, w, w_scale, out, q_scale, out_dtype, real):
    """Every rule that can be checked on the tensors' metadata, naming the argument; returns
    (M, H, K, N, R).  Alignment, overlap and the supported sizes are spark's own checks (its
    message names the stride or field).  real: the tensors hold data (not fake or meta), so
    they must be CUDA tensors of one device."""
    _check_tensor("q_nope", q_nope, (torch.bfloat16,), (None, None, None))
    m, h, k = q_nope.shape
    _check_tensor("q_pe", q_pe, (torch.bfloat16,), (m, h, None))
    r = q_pe.shape[2]
    if isinstance(w, torch.Tensor) and w.dim() == 3 and w.shape[0] != h:
        _fail("w", f"has {w.shape[0]} heads (shape {list(w.shape)}), but q_nope has {h} "
                   f"(shape {list(q_nope.shape)} = [M, H, K])")
    _check_tensor("w", w, _WEIGHT_DTYPES, (h, k, None))
    n = w.shape[2]
    if w.dtype == torch.float8_e4m3fn:
        if w_scale is None:
            _fail("w_scale", "is required with float8_e4m3fn weights: E8M0 bytes [H, K, N/32] (MXFP8) or the "
                             "float32 block scales [ceil(rows / 128), N/128] (block FP8)")
        if w_scale.dtype == torch.float32:
            if n % 128:
                _fail("w", f"block-FP8 weights need N a multiple of 128, got N = {n}")
            _check_tensor("w_scale", w_scale, (torch.float32,), (None, n // 128))
            rows = (h - 1) * _block_rows_per_head(w) + k if h > 0 else 0
            if w_scale.shape[0] * 128 < rows:
                _fail("w_scale", f"has {w_scale.shape[0]} block rows, but the weights' {rows} packed rows need "
                                 f"{(rows + 127) // 128}")
        else:
            if n % 32:
                _fail("w", f"MXFP8 weights need N a multiple of 32, got N = {n}")
            _check_tensor("w_scale", w_scale, _SCALE_DTYPES + (torch.float32,), (h, k, n // 32))
    elif w_scale is not None:
        _fail("w_scale", "must be None with bfloat16 weights")
    if out is not None:
        _check_tensor("out", out, tuple(_OUT_DTYPES), (m, h, n + r))
    elif out_dtype not in _OUT_DTYPES:
        _fail("out_dtype", f"must be {_dtype_names(_OUT_DTYPES)}, got {out_dtype}")
    e4m3 = out_dtype == torch.float8_e4m3fn
    if e4m3:
        if q_scale is None:
            _fail("q_scale", "is required for float8_e4m3fn output: a 1-element float32 CUDA tensor")
    if q_scale is not None:
        if not isinstance(q_scale, torch.Tensor):
            _fail("q_scale", f"must be a torch.Tensor, got {type(q_scale).__name__}")
        if q_scale.dtype != torch.float32:
            _fail("q_scale", f"must be torch.float32, got {q_scale.dtype}")
        if q_scale.numel() != 1:
            _fail("q_scale", f"must have 1 element, got shape {list(q_scale.shape)}")
    device = q_nope.device
    if real and device.type != "cuda":
        _fail("q_nope", f"must be a CUDA tensor, got one on {device}")
    if not real and device.type not in ("cuda", "meta"):
        _fail("q_nope", f"must be a CUDA tensor, got one on {device}")
    named = [("q_pe", q_pe), ("w", w), ("w_scale", w_scale), ("out", out)]
    if e4m3:
        named.append(("q_scale", q_scale))  # not read for bf16 output, so anywhere
    for name, t in named:
        if t is not None and t.device != device:
            _fail(name, f"is on {t.device}, but q_nope is on {device}; all tensors must be on one CUDA device")
    return m, h, k, n, r


def _outer_strides(t):
    """(stride 0, stride 1) with the stride of a size-1 dimension replaced by one that spark
    accepts: it is never used to address, but torch leaves such strides arbitrary (0 after
    expand, anything after a slice)."""
    s0, s1 = t.stride(0), t.stride(1)
    row = t.shape[2]
    if t.shape[1] == 1:
        s1 = row
    if t.shape[0] == 1:
        s0 = max(s1 * t.shape[1], row)
    return s0, s1


# ---------------------------------------------------------------------------------------
# Contexts and plans
# ---------------------------------------------------------------------------------------

_lock = threading.Lock()
# One spark_context per device, never destroyed: every cached plan refers to it, and at exit
# the process' CUDA state goes away with it (destroying after torch's own CUDA teardown could
# touch an unloaded driver).
_contexts = {}
_plans = {}


def _device_index(device):
    if device is None:
        return torch.cuda.current_device()
    device = torch.device(device)
    if device.type != "cuda":
        raise ValueError(f"argument 'device': must be a CUDA device, got {device}")
    return device.index if device.index is not None else torch.cuda.current_device()


def context(device=None):
    """The spark_context of a CUDA device (a handle, as an int), created on first use."""
    index = _device_index(device)
    handle = _contexts.get(index)
    if handle is not None:
        return handle
    with _lock:
        if index not in _contexts:
            lib = _lib.library()
            # spark uses the device's primary context: make sure torch has initialised CUDA
            # on it first, so both see the same one.
            torch.cuda.init()
            out = ctypes.c_void_p()
            _lib.check(lib.spark_context_create(ctypes.byref(_lib.context_options(device=index)),
                                                ctypes.byref(out)), "spark_context_create")
            _contexts[index] = out.value
        return _contexts[index]


def _format_name(value):
    """A weight format by name, or torch.bfloat16 / torch.float8_e4m3fn for bf16 / MXFP8."""
    if value == torch.bfloat16:
        return "bf16"
    if value == torch.float8_e4m3fn:
        return "mxfp8"
    if isinstance(value, str) and value in _WEIGHT_FORMATS:
        return value
    raise ValueError(f"argument 'weight_format': must be one of {sorted(_WEIGHT_FORMATS)} (or torch.bfloat16, "
                     f"torch.float8_e4m3fn), got {value!r}")


def _as_dtype(value, names, argument):
    if isinstance(value, torch.dtype):
        return value
    if value in names:
        return names[value]
    raise ValueError(f"argument '{argument}': must be one of {sorted(names)} or a torch.dtype, got {value!r}")


class Plan:
    """A spark plan for one shape on one device: `run` launches the kernel.

    heads, nope_dim (K), latent_dim (N), rope_dim (R); weight_format "bf16" | "mxfp8" |
    "fp8-block" (torch.bfloat16 and torch.float8_e4m3fn also name bf16 and MXFP8); out_dtype torch.bfloat16 | torch.float8_e4m3fn (or "bf16" | "e4m3");
    max_m: the largest M it runs; enable_pdl: programmatic dependent launch (sm_90+);
    lazy: load each M-regime at its first run instead of every one now (then a first run
    inside a CUDA graph capture raises SparkNotLoadedWhileCapturing).

    Not lazy, creating it prewarms: every kernel up to max_m is loaded from the on-disk cache,
    or compiled into it.  Prefer get_plan(), which shares one plan among all the layers."""

    def __init__(self, heads, nope_dim, latent_dim=512, rope_dim=64, weight_format="bf16",
                 out_dtype=torch.bfloat16, max_m=MAX_M, enable_pdl=False, lazy=False, device=None):
        self.weight_format = _format_name(weight_format)
        self.out_dtype = _as_dtype(out_dtype, _OUT_DTYPE_NAMES, "out_dtype")
        if self.out_dtype not in _OUT_DTYPES:
            _fail("out_dtype", f"must be {_dtype_names(_OUT_DTYPES)}, got {self.out_dtype}")
        self.heads, self.nope_dim, self.latent_dim, self.rope_dim = heads, nope_dim, latent_dim, rope_dim
        self.max_m, self.enable_pdl, self.lazy = max_m, bool(enable_pdl), bool(lazy)
        self.device = torch.device("cuda", _device_index(device))
        self._handle = None
        self._desc = _lib.qproj_desc(heads=heads, nope_dim=nope_dim, latent_dim=latent_dim, rope_dim=rope_dim,
                                     weight_format=_WEIGHT_FORMATS[self.weight_format],
                                     out_dtype=_OUT_DTYPES[self.out_dtype])
        options = _lib.plan_options(max_m=max_m, lazy=lazy, enable_pdl=enable_pdl)
        lib = _lib.library()
        # The host check first: a bad shape is reported the same with or without a device.
        _lib.can_implement(self._desc)
        ctx = context(self.device)
        handle = ctypes.c_void_p()
        _lib.check(lib.spark_mla_qproj_plan_create(ctx, ctypes.byref(self._desc), ctypes.byref(options),
                                                   ctypes.byref(handle)), "spark_mla_qproj_plan_create")
        self._handle = handle.value
        self._run = lib.spark_mla_qproj_run

    def __del__(self):
        handle, self._handle = getattr(self, "_handle", None), None
        if handle is not None and _lib is not None:
            _lib.library().spark_mla_qproj_plan_destroy(handle)

    def __repr__(self):
        return (f"spark_mla.ops.Plan(heads={self.heads}, nope_dim={self.nope_dim}, latent_dim={self.latent_dim}, "
                f"rope_dim={self.rope_dim}, weight_format={self.weight_format!r}, out_dtype={self.out_dtype}, "
                f"max_m={self.max_m}, enable_pdl={self.enable_pdl}, lazy={self.lazy}, device={self.device})")

    def run(self, q_nope, q_pe, w, out, w_scale=None, q_scale=None):
        """out = [q_nope @ w, q_pe] on torch.cuda.current_stream(); the tensors as in the module doc."""
        m, h, k, n, r = _check(q_nope, q_pe, w, w_scale, out, q_scale, out.dtype, real=True)
        if (h, k, n, r) != (self.heads, self.nope_dim, self.latent_dim, self.rope_dim):
            raise ValueError(f"argument 'q_nope': the tensors are H={h}, K={k}, N={n}, R={r}, but the plan is "
                             f"heads={self.heads}, nope_dim={self.nope_dim}, latent_dim={self.latent_dim}, "
                             f"rope_dim={self.rope_dim}")
        if _weight_format(w, w_scale) != self.weight_format:
            _fail("w", f"is {_weight_format(w, w_scale)} weights ({w.dtype}"
                       f"{'' if w_scale is None else ', scales ' + str(w_scale.dtype)}), but the plan's "
                       f"weight_format is {self.weight_format!r}")
        if out.dtype != self.out_dtype:
            _fail("out", f"is {out.dtype}, but the plan's out_dtype is {self.out_dtype}")
        if q_nope.device != self.device:
            _fail("q_nope", f"is on {q_nope.device}, but the plan is for {self.device}")
        self._launch(m, q_nope, q_pe, w, out, w_scale, q_scale)

    def _launch(self, m, q_nope, q_pe, w, out, w_scale, q_scale):
        # The tensors were checked (_check) and match the plan: the ops look the plan up from them.
        if m == 0:
            return  # no tokens: nothing to write (spark itself needs m >= 1)
        qn_m, qn_h = _outer_strides(q_nope)
        w_h, w_k = _outer_strides(w)
        pe_m, pe_h = _outer_strides(q_pe)
        out_m, out_h = _outer_strides(out)
        args = _lib.qproj_args(m=m, q_nope=q_nope.data_ptr(), q_nope_stride_h=qn_h, q_nope_stride_m=qn_m,
                               w=w.data_ptr(), w_stride_h=w_h, w_stride_k=w_k,
                               q_pe=q_pe.data_ptr(), q_pe_stride_m=pe_m, q_pe_stride_h=pe_h,
                               out=out.data_ptr(), out_stride_m=out_m, out_stride_h=out_h)
        if w_scale is not None and w_scale.dtype == torch.float32:  # block FP8
            args.w_scale = w_scale.data_ptr()
            args.w_scale_stride_h = _block_rows_per_head(w)
            args.w_scale_stride_k = w_scale.stride(0) if w_scale.shape[0] > 1 else w_scale.shape[1]
        elif w_scale is not None:
            args.w_scale = w_scale.data_ptr()
            args.w_scale_stride_h, args.w_scale_stride_k = _outer_strides(w_scale)
        if q_scale is not None:
            args.q_scale = q_scale.data_ptr()
        stream = torch.cuda.current_stream(self.device).cuda_stream
        status = self._run(self._handle, ctypes.byref(args), stream)
        if status != _lib.SUCCESS:
            _raise_run_error(status, m)


def _raise_run_error(status, m, function="spark_mla_qproj_run"):
    try:
        _lib.check(status, function)
    except SparkNotLoadedWhileCapturing as e:
        raise SparkNotLoadedWhileCapturing(
            e.status, f"{e.spark_message}. The lazy plan has not loaded the kernel for M = {m} and the stream "
                      "is capturing a CUDA graph; nothing was launched and the capture is intact. Run this M "
                      "once before capturing, or use lazy=False (every M up to max_m loaded when the plan is "
                      "made)", function) from None


def get_plan(heads, nope_dim, latent_dim=512, rope_dim=64, weight_format="bf16", out_dtype=torch.bfloat16,
             max_m=MAX_M, enable_pdl=False, lazy=False, device=None):
    """The cached Plan for these values (made, and so prewarmed, on first use): the layers of a
    model share one."""
    weight_format = _format_name(weight_format)
    out_dtype = _as_dtype(out_dtype, _OUT_DTYPE_NAMES, "out_dtype")
    index = _device_index(device)
    key = (index, heads, nope_dim, latent_dim, rope_dim, weight_format, out_dtype, max_m, bool(enable_pdl),
           bool(lazy))
    plan = _plans.get(key)
    if plan is not None:
        return plan
    with _lock:
        plan = _plans.get(key)
    if plan is None:
        # Made outside the lock: a prewarm may compile for seconds, and other shapes need not wait.
        # Two threads racing on one key both make a plan; the first stored wins.
        plan = Plan(heads, nope_dim, latent_dim, rope_dim, weight_format, out_dtype, max_m, enable_pdl, lazy, index)
        with _lock:
            plan = _plans.setdefault(key, plan)
    return plan


def _plan_for(q_nope, q_pe, w, w_scale, out_dtype, max_m, enable_pdl, lazy):
    return get_plan(q_nope.shape[1], q_nope.shape[2], w.shape[2], q_pe.shape[2], _weight_format(w, w_scale),
                    out_dtype, max_m, enable_pdl, lazy, q_nope.device)


# ---------------------------------------------------------------------------------------
# The ops
# ---------------------------------------------------------------------------------------

@torch.library.custom_op("spark_mla::mla_qproj_out", mutates_args=("out",))
def _mla_qproj_out(q_nope: torch.Tensor, q_pe: torch.Tensor, w: torch.Tensor, w_scale: Optional[torch.Tensor],
                   out: torch.Tensor, q_scale: Optional[torch.Tensor] = None, max_m: int = MAX_M,
                   enable_pdl: bool = False, lazy: bool = False) -> None:
    m = _check(q_nope, q_pe, w, w_scale, out, q_scale, out.dtype, real=True)[0]
    _plan_for(q_nope, q_pe, w, w_scale, out.dtype, max_m, enable_pdl, lazy)._launch(m, q_nope, q_pe, w, out, w_scale, q_scale)


@_mla_qproj_out.register_fake
def _(q_nope, q_pe, w, w_scale, out, q_scale=None, max_m=MAX_M, enable_pdl=False, lazy=False):
    _check(q_nope, q_pe, w, w_scale, out, q_scale, out.dtype, real=False)


@torch.library.custom_op("spark_mla::mla_qproj", mutates_args=())
def _mla_qproj(q_nope: torch.Tensor, q_pe: torch.Tensor, w: torch.Tensor, w_scale: Optional[torch.Tensor],
               out_dtype: torch.dtype, q_scale: Optional[torch.Tensor] = None, max_m: int = MAX_M,
               enable_pdl: bool = False, lazy: bool = False) -> torch.Tensor:
    m, h, _, n, r = _check(q_nope, q_pe, w, w_scale, None, q_scale, out_dtype, real=True)
    out = torch.empty((m, h, n + r), dtype=out_dtype, device=q_nope.device)
    _plan_for(q_nope, q_pe, w, w_scale, out_dtype, max_m, enable_pdl, lazy)._launch(m, q_nope, q_pe, w, out, w_scale, q_scale)
    return out


@_mla_qproj.register_fake
def _(q_nope, q_pe, w, w_scale, out_dtype, q_scale=None, max_m=MAX_M, enable_pdl=False, lazy=False):
    m, h, _, n, r = _check(q_nope, q_pe, w, w_scale, None, q_scale, out_dtype, real=False)
    return q_nope.new_empty((m, h, n + r), dtype=out_dtype)


def mla_qproj(q_nope, q_pe, w, w_scale=None, *, out=None, out_dtype=None, q_scale=None, max_m=MAX_M,
              enable_pdl=False, lazy=False):
    """out[:, :, :N] = q_nope @ w per head, out[:, :, N:] = q_pe.  With out given, writes it (a view of
    any pitched buffer) and returns it; otherwise returns a new [M, H, N+R] tensor of out_dtype
    (default bf16).  Both forms are torch ops (torch.ops.spark_mla.mla_qproj_out / mla_qproj), so
    torch.compile and CUDA graphs see one op."""
    if out is not None:
        if out_dtype is not None and out_dtype != out.dtype:
            _fail("out_dtype", f"is {out_dtype}, but out is {out.dtype}")
        torch.ops.spark_mla.mla_qproj_out(q_nope, q_pe, w, w_scale, out, q_scale, max_m, enable_pdl, lazy)
        return out
    return torch.ops.spark_mla.mla_qproj(q_nope, q_pe, w, w_scale, out_dtype or torch.bfloat16, q_scale,
                                         max_m, enable_pdl, lazy)


def dequantize_mxfp8(w, w_scale):
    """The MXFP8 rule of docs/operation.md as torch ops: RN_bf16(bf16(value) * bf16(2^(byte - 127))),
    [H, K, N] bf16.  For reference paths and tests; spark dequantises inside the kernel."""
    e = w_scale.view(torch.uint8).to(torch.int32)
    # bf16 bits of 2^(e - 127): the exponent field for 1..254, the subnormal 2^-127 for 0, NaN for 255.
    bits = torch.where(e == 0, 0x0040, torch.where(e == 255, 0x7FC0, e << 7))
    scale = bits.to(torch.int16).view(torch.bfloat16).repeat_interleave(32, dim=-1)
    # bf16 x bf16 in torch: the fp32 product (exact: a 4-bit significand times a power of two,
    # within fp32's range) rounded once to bf16.
    return w.to(torch.bfloat16) * scale


def dequantize_fp8_block(w, w_scale):
    """The block-FP8 rule as torch ops: RN_bf16(fp32(float(value) * scale)), [H, K, N] bf16, with
    w a view of the packed kv_b_proj and w_scale its [ceil(rows / 128), N/128] float32 scales
    (the checkpoints' weight_scale_inv).  For reference paths and tests."""
    h, k, _ = w.shape
    rows = torch.arange(h, device=w.device)[:, None] * _block_rows_per_head(w) + torch.arange(k, device=w.device)
    scale = w_scale[rows // 128].repeat_interleave(128, dim=-1)  # [H, K, N]
    return (w.float() * scale).to(torch.bfloat16)


def staged_reference(q_nope, q_pe, w, w_scale=None, out_dtype=torch.bfloat16, q_scale=None):
    """What servers run today, for comparison: bmm (cuBLAS) + transpose + cat [+ per-tensor quant],
    quantising the bf16 result as spark's E4M3 rule does."""
    if w.dtype == torch.float8_e4m3fn:
        w = dequantize_fp8_block(w, w_scale) if w_scale.dtype == torch.float32 else dequantize_mxfp8(w, w_scale)
    ql = torch.bmm(q_nope.transpose(0, 1), w).transpose(0, 1)
    res = torch.cat([ql, q_pe], dim=-1)
    if out_dtype == torch.float8_e4m3fn:
        res = (res.float() * torch.reciprocal(q_scale.float())).clamp(-448.0, 448.0).to(torch.float8_e4m3fn)
    return res


# The value up-projection's ops register with this module (spark_mla/_oproj.py).
from ._oproj import (OprojPlan, dequantize_oproj_weights, get_oproj_plan, mla_oproj,  # noqa: E402
                     staged_oproj_reference)

__all__ = ["OprojPlan", "Plan", "SparkError", "SparkInvalidArgument", "SparkNotLoadedWhileCapturing",
           "SparkUnsupported", "context", "dequantize_fp8_block", "dequantize_mxfp8", "dequantize_oproj_weights",
           "get_oproj_plan", "get_plan", "mla_oproj", "mla_qproj", "staged_oproj_reference", "staged_reference"]
