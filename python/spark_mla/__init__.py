"""spark_mla: the MLA query projection of spark from Python.

    out[m, h, 0:N]   = q_nope[m, h, :] @ W_UK_T[h]   (FP32 accumulation, bf16 or e4m3 out)
    out[m, h, N:N+R] = q_pe[m, h, :]

This module needs no torch: it loads libspark (the copy bundled in the package, or the file
named by $SPARK_LIBRARY) through ctypes.  The torch op is in spark_mla.ops
(torch.ops.spark_mla.mla_qproj and mla_qproj_out, and the value up-projection's mla_oproj and
mla_oproj_out), registered when that module is imported.
"""

from ._lib import (SparkError, SparkInvalidArgument, SparkNotLoadedWhileCapturing,
                   SparkUnsupported, library_path, version)
from ._version import __version__

WEIGHT_FORMATS = ("bf16", "mxfp8", "fp8-block")  # index = spark_weight_format
OUT_DTYPES = ("bf16", "e4m3")


def can_implement(heads, nope_dim, latent_dim=512, rope_dim=64, weight_format="bf16", out_dtype="bf16"):
    """Whether spark implements this shape (spark_mla_qproj_can_implement, on the host, no GPU):
    None, or raises SparkInvalidArgument / SparkUnsupported naming the field."""
    from . import _lib
    _lib.can_implement(describe(heads, nope_dim, latent_dim, rope_dim, weight_format, out_dtype))


def describe(heads, nope_dim, latent_dim=512, rope_dim=64, weight_format="bf16", out_dtype="bf16"):
    """A spark_mla_qproj_desc (ctypes) from Python values; the formats by name."""
    from . import _lib
    if weight_format not in WEIGHT_FORMATS:
        raise ValueError(f"argument 'weight_format': must be one of {WEIGHT_FORMATS}, got {weight_format!r}")
    if out_dtype not in OUT_DTYPES:
        raise ValueError(f"argument 'out_dtype': must be one of {OUT_DTYPES}, got {out_dtype!r}")
    return _lib.qproj_desc(heads=heads, nope_dim=nope_dim, latent_dim=latent_dim, rope_dim=rope_dim,
                           weight_format=WEIGHT_FORMATS.index(weight_format),
                           out_dtype=OUT_DTYPES.index(out_dtype))


__all__ = ["SparkError", "SparkInvalidArgument", "SparkNotLoadedWhileCapturing", "SparkUnsupported",
           "__version__", "can_implement", "describe", "library_path", "version"]
