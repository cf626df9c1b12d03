"""ctypes bindings of include/spark/spark.h: the loader, the structs and the status codes.

No torch here: the loader, can_implement and the CLIs work without it."""

import ctypes
import os
import threading
from pathlib import Path

from ._version import __version__

_PACKAGE_DIR = Path(__file__).resolve().parent

# spark_status (values pinned by the C API).
SUCCESS = 0
ERROR_INVALID_ARGUMENT = 1
ERROR_UNSUPPORTED = 2
ERROR_NO_DEVICE = 3
ERROR_CUDA = 4
ERROR_COMPILE = 5
ERROR_CACHE = 6
ERROR_NOT_LOADED_WHILE_CAPTURING = 7
ERROR_JIT_DISABLED = 8
ERROR_OUT_OF_MEMORY = 9
ERROR_INTERNAL = 10

# spark_weight_format and spark_dtype.
WEIGHTS_BF16 = 0
WEIGHTS_MXFP8 = 1
WEIGHTS_FP8_BLOCK128 = 2
DTYPE_BF16 = 0
DTYPE_E4M3 = 1

# SPARK_MLA_QPROJ_MAX_M: the largest M of a call.
MAX_M = 8192


class SparkError(RuntimeError):
    """A spark call failed; the message is spark's own (spark_last_error), which names the
    argument and the rule it broke."""

    def __init__(self, status, message, function=None):
        self.status = status
        self.spark_message = message
        prefix = f"{function}: " if function else ""
        super().__init__(f"{prefix}{_status_name(status)}: {message}")


class SparkInvalidArgument(SparkError, ValueError):
    """SPARK_ERROR_INVALID_ARGUMENT."""


class SparkUnsupported(SparkError, ValueError):
    """SPARK_ERROR_UNSUPPORTED: a well-formed request spark does not implement."""


class SparkNotLoadedWhileCapturing(SparkError):
    """A lazy plan was asked, inside a CUDA graph capture, to run an M it has not loaded.
    Nothing was launched and the capture is intact; run that M once before capturing, or
    use a plan with lazy=False (it loads every M up to max_m when created)."""


_ERROR_CLASSES = {
    ERROR_INVALID_ARGUMENT: SparkInvalidArgument,
    ERROR_UNSUPPORTED: SparkUnsupported,
    ERROR_NOT_LOADED_WHILE_CAPTURING: SparkNotLoadedWhileCapturing,
}


class ContextOptions(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("device", ctypes.c_int32)]


class CacheStats(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("hits", ctypes.c_uint64),
                ("misses", ctypes.c_uint64), ("compiles", ctypes.c_uint64),
                ("corrupt_entries", ctypes.c_uint64), ("compile_ms", ctypes.c_double),
                ("load_ms", ctypes.c_double)]


class QProjDesc(ctypes.Structure):
    # The enums are C ints.
    _fields_ = [("struct_size", ctypes.c_size_t), ("heads", ctypes.c_int32),
                ("nope_dim", ctypes.c_int32), ("latent_dim", ctypes.c_int32),
                ("rope_dim", ctypes.c_int32), ("weight_format", ctypes.c_int),
                ("out_dtype", ctypes.c_int)]


class QProjArgs(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("m", ctypes.c_int32),
                ("q_nope", ctypes.c_void_p), ("q_nope_stride_h", ctypes.c_int64),
                ("q_nope_stride_m", ctypes.c_int64),
                ("w", ctypes.c_void_p), ("w_stride_h", ctypes.c_int64), ("w_stride_k", ctypes.c_int64),
                ("w_scale", ctypes.c_void_p), ("w_scale_stride_h", ctypes.c_int64),
                ("w_scale_stride_k", ctypes.c_int64),
                ("q_pe", ctypes.c_void_p), ("q_pe_stride_m", ctypes.c_int64),
                ("q_pe_stride_h", ctypes.c_int64),
                ("out", ctypes.c_void_p), ("out_stride_m", ctypes.c_int64),
                ("out_stride_h", ctypes.c_int64),
                ("q_scale", ctypes.c_void_p)]


class OProjDesc(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("heads", ctypes.c_int32),
                ("latent_dim", ctypes.c_int32), ("v_head_dim", ctypes.c_int32),
                ("weight_format", ctypes.c_int), ("out_dtype", ctypes.c_int)]


class OProjArgs(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("m", ctypes.c_int32),
                ("o", ctypes.c_void_p), ("o_stride_m", ctypes.c_int64), ("o_stride_h", ctypes.c_int64),
                ("w", ctypes.c_void_p), ("w_stride_h", ctypes.c_int64), ("w_stride_v", ctypes.c_int64),
                ("w_scale", ctypes.c_void_p), ("w_scale_stride_h", ctypes.c_int64),
                ("w_scale_stride_v", ctypes.c_int64),
                ("out", ctypes.c_void_p), ("out_stride_m", ctypes.c_int64),
                ("out_scale", ctypes.c_void_p)]


class PlanOptions(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("max_m", ctypes.c_int32),
                ("lazy", ctypes.c_int32), ("enable_pdl", ctypes.c_int32)]


def _init(struct_type, **fields):
    """The *_INIT initializers: struct_size set, everything else zero."""
    s = struct_type(**fields)
    s.struct_size = ctypes.sizeof(struct_type)
    return s


def context_options(**fields):
    return _init(ContextOptions, **fields)


def qproj_desc(**fields):
    return _init(QProjDesc, **fields)


def qproj_args(**fields):
    return _init(QProjArgs, **fields)


def oproj_desc(**fields):
    return _init(OProjDesc, **fields)


def oproj_args(**fields):
    return _init(OProjArgs, **fields)


def plan_options(max_m=MAX_M, lazy=False, enable_pdl=False):
    return _init(PlanOptions, max_m=max_m, lazy=int(lazy), enable_pdl=int(enable_pdl))


def cache_stats():
    return _init(CacheStats)


_SIGNATURES = {
    "spark_version_number": (ctypes.c_uint, []),
    "spark_version_string": (ctypes.c_char_p, []),
    "spark_status_string": (ctypes.c_char_p, [ctypes.c_int]),
    "spark_last_error": (ctypes.c_char_p, []),
    "spark_set_log_level": (ctypes.c_int, [ctypes.c_int]),
    "spark_context_create": (ctypes.c_int, [ctypes.POINTER(ContextOptions), ctypes.POINTER(ctypes.c_void_p)]),
    "spark_context_destroy": (None, [ctypes.c_void_p]),
    "spark_context_compute_capability": (ctypes.c_int, [ctypes.c_void_p, ctypes.POINTER(ctypes.c_int32)]),
    "spark_context_cache_stats": (ctypes.c_int, [ctypes.c_void_p, ctypes.POINTER(CacheStats)]),
    "spark_mla_qproj_can_implement": (ctypes.c_int, [ctypes.POINTER(QProjDesc), ctypes.POINTER(QProjArgs)]),
    "spark_mla_qproj_plan_create": (ctypes.c_int, [ctypes.c_void_p, ctypes.POINTER(QProjDesc),
                                                   ctypes.POINTER(PlanOptions),
                                                   ctypes.POINTER(ctypes.c_void_p)]),
    "spark_mla_qproj_plan_destroy": (None, [ctypes.c_void_p]),
    "spark_mla_qproj_run": (ctypes.c_int, [ctypes.c_void_p, ctypes.POINTER(QProjArgs), ctypes.c_void_p]),
    "spark_mla_oproj_can_implement": (ctypes.c_int, [ctypes.POINTER(OProjDesc), ctypes.POINTER(OProjArgs)]),
    "spark_mla_oproj_plan_create": (ctypes.c_int, [ctypes.c_void_p, ctypes.POINTER(OProjDesc),
                                                   ctypes.POINTER(PlanOptions),
                                                   ctypes.POINTER(ctypes.c_void_p)]),
    "spark_mla_oproj_plan_destroy": (None, [ctypes.c_void_p]),
    "spark_mla_oproj_run": (ctypes.c_int, [ctypes.c_void_p, ctypes.POINTER(OProjArgs), ctypes.c_void_p]),
}

_lib = None
_lib_lock = threading.Lock()


def library_candidates():
    """Where the library is looked for, in order: $SPARK_LIBRARY, then the copy bundled in
    the package (lib/libspark.so.0 beside this file)."""
    env = os.environ.get("SPARK_LIBRARY")
    if env:
        return [Path(env)]
    return [_PACKAGE_DIR / "lib" / "libspark.so.0"]


def library_path():
    """The file the loaded library came from."""
    lib = library()
    return lib._spark_path


def library():
    """The loaded libspark (loaded on first use; one per process)."""
    global _lib
    if _lib is not None:
        return _lib
    with _lib_lock:
        if _lib is None:
            _lib = _load()
    return _lib


def _load():
    candidates = library_candidates()
    path = next((p for p in candidates if p.is_file()), None)
    if path is None:
        tried = ", ".join(str(p) for p in candidates)
        raise ImportError(f"spark_mla: libspark.so.0 not found (tried {tried}); install the package "
                          "with pip, or set SPARK_LIBRARY to the library file")
    lib = ctypes.CDLL(str(path))
    for name, (restype, argtypes) in _SIGNATURES.items():
        fn = getattr(lib, name)
        fn.restype = restype
        fn.argtypes = argtypes
    # 0.x: a minor release may change the C API (and so these structs), as for the CMake
    # package; only the same MAJOR.MINOR is accepted.
    loaded = lib.spark_version_string().decode()
    if loaded.split(".")[:2] != __version__.split(".")[:2]:
        raise ImportError(f"spark_mla {__version__}: {path} is libspark {loaded}, which this package "
                          f"cannot use (needs {'.'.join(__version__.split('.')[:2])}.x)")
    lib._spark_path = path
    return lib


def _status_name(status):
    try:
        return library().spark_status_string(status).decode()
    except ImportError:
        return f"status {status}"


def check(status, function=None):
    """Raises the SparkError matching a failed status, with spark's message of this thread."""
    if status == SUCCESS:
        return
    message = library().spark_last_error().decode(errors="replace")
    raise _ERROR_CLASSES.get(status, SparkError)(status, message, function)


def version():
    """The version string of the loaded library ("MAJOR.MINOR.PATCH")."""
    return library().spark_version_string().decode()


def can_implement(desc, args=None):
    """spark_mla_qproj_can_implement on the host (no device): None, or raises SparkError
    naming the argument and the rule."""
    lib = library()
    check(lib.spark_mla_qproj_can_implement(ctypes.byref(desc),
                                            ctypes.byref(args) if args is not None else None),
          "spark_mla_qproj_can_implement")


def can_implement_oproj(desc, args=None):
    """spark_mla_oproj_can_implement on the host (no device): None, or raises SparkError naming
    the argument and the rule."""
    lib = library()
    check(lib.spark_mla_oproj_can_implement(ctypes.byref(desc),
                                            ctypes.byref(args) if args is not None else None),
          "spark_mla_oproj_can_implement")
