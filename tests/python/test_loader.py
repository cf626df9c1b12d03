# The loader, the version and can_implement through ctypes: no torch, no GPU.
import ctypes
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import spark_mla
from spark_mla import _lib

REPO = Path(__file__).resolve().parents[2]


def test_library_loads_and_versions_agree():
    path = spark_mla.library_path()
    assert path.is_file()
    if "SPARK_LIBRARY" not in os.environ:
        # the copy bundled in the package
        assert path.parent == Path(spark_mla.__file__).parent / "lib"
    assert spark_mla.version() == spark_mla.__version__
    lib = _lib.library()
    major, minor, patch = (int(x) for x in spark_mla.__version__.split("."))
    assert lib.spark_version_number() == major * 10000 + minor * 100 + patch
    cmake_version = re.search(r"project\(spark VERSION ([0-9.]+)", (REPO / "CMakeLists.txt").read_text()).group(1)
    assert spark_mla.__version__ == cmake_version


def test_missing_library_is_a_clear_import_error(tmp_path):
    code = "import spark_mla; spark_mla.version()"
    env = dict(os.environ, SPARK_LIBRARY=str(tmp_path / "nope.so"))
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert r.returncode != 0
    assert "libspark.so.0 not found" in r.stderr and "SPARK_LIBRARY" in r.stderr


STRUCTS = {"spark_context_options": _lib.ContextOptions, "spark_cache_stats": _lib.CacheStats,
           "spark_mla_qproj_desc": _lib.QProjDesc, "spark_mla_qproj_args": _lib.QProjArgs,
           "spark_mla_qproj_plan_options": _lib.PlanOptions}


def test_struct_layouts_match_the_header(tmp_path):
    """Every field's offset and every struct's size as the C compiler sees include/spark/spark.h."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler to read the header's layout")
    lines = []
    for c_name, py in STRUCTS.items():
        lines.append(f'printf("{c_name} size %zu\\n", sizeof({c_name}));')
        for field, _ in py._fields_:
            lines.append(f'printf("{c_name} {field} %zu\\n", offsetof({c_name}, {field}));')
    src = tmp_path / "layout.c"
    src.write_text("#include <stddef.h>\n#include <stdio.h>\n#include <spark/spark.h>\nint main(void) {\n"
                   + "\n".join(lines) + "\nreturn 0;\n}\n")
    exe = tmp_path / "layout"
    subprocess.run([cc, "-std=c99", f"-I{REPO / 'include'}", str(src), "-o", str(exe)], check=True)
    got = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout.split("\n")
    expect = []
    for c_name, py in STRUCTS.items():
        expect.append(f"{c_name} size {ctypes.sizeof(py)}")
        expect += [f"{c_name} {field} {getattr(py, field).offset}" for field, _ in py._fields_]
    assert got[:-1] == expect


def test_constants_match_the_header(tmp_path):
    """The statuses, formats and the largest M as include/spark/spark.h defines them."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler to read the header")
    names = {"MAX_M": "SPARK_MLA_QPROJ_MAX_M", "WEIGHTS_BF16": "SPARK_WEIGHTS_BF16",
             "WEIGHTS_MXFP8": "SPARK_WEIGHTS_MXFP8", "DTYPE_BF16": "SPARK_DTYPE_BF16", "DTYPE_E4M3": "SPARK_DTYPE_E4M3"}
    names.update({n: "SPARK_" + n for n in dir(_lib) if n.startswith("ERROR_")})
    src = tmp_path / "constants.c"
    src.write_text("#include <stdio.h>\n#include <spark/spark.h>\nint main(void) {\n"
                   + "\n".join(f'printf("{py} %d\\n", (int){c});' for py, c in names.items()) + "\nreturn 0;\n}\n")
    exe = tmp_path / "constants"
    subprocess.run([cc, "-std=c99", f"-I{REPO / 'include'}", str(src), "-o", str(exe)], check=True)
    got = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout.split("\n")[:-1]
    assert got == [f"{py} {getattr(_lib, py)}" for py in names]


@pytest.mark.parametrize("heads,nope,weights,out", [(1, 128, "bf16", "bf16"), (128, 128, "mxfp8", "e4m3"),
                                                    (11, 192, "bf16", "e4m3"), (64, 192, "mxfp8", "bf16")])
def test_can_implement_supported_shapes(heads, nope, weights, out):
    spark_mla.can_implement(heads, nope, weight_format=weights, out_dtype=out)


@pytest.mark.parametrize("kwargs,field,cls", [
    (dict(heads=0, nope_dim=128), "heads", spark_mla.SparkError),
    (dict(heads=129, nope_dim=128), "heads", spark_mla.SparkError),
    (dict(heads=8, nope_dim=256), "nope_dim", spark_mla.SparkUnsupported),
    (dict(heads=8, nope_dim=128, latent_dim=256), "latent_dim", spark_mla.SparkError),
    (dict(heads=8, nope_dim=128, rope_dim=32), "rope_dim", spark_mla.SparkError),
])
def test_can_implement_names_the_field(kwargs, field, cls):
    with pytest.raises(cls, match=field) as e:
        spark_mla.can_implement(**kwargs)
    assert e.value.status in (_lib.ERROR_INVALID_ARGUMENT, _lib.ERROR_UNSUPPORTED)
    assert field in e.value.spark_message


def test_bad_enum_is_refused_by_spark():
    desc = spark_mla.describe(8, 128)
    desc.weight_format = 7
    with pytest.raises(spark_mla.SparkInvalidArgument, match="weight_format"):
        _lib.can_implement(desc)


def test_python_side_rejects_unknown_format_names():
    with pytest.raises(ValueError, match="argument 'weight_format'"):
        spark_mla.can_implement(8, 128, weight_format="fp4")
    with pytest.raises(ValueError, match="argument 'out_dtype'"):
        spark_mla.can_implement(8, 128, out_dtype="fp16")


def _args(h=8, k=128, n=512, r=64, m=4):
    """A valid argument set with fake, aligned addresses: can_implement never dereferences them."""
    base = 1 << 32
    a = _lib.qproj_args(m=m, q_nope=base, q_nope_stride_h=k + r, q_nope_stride_m=h * (k + r),
                        w=base + (1 << 28), w_stride_h=k * n, w_stride_k=n,
                        q_pe=base + k * 2, q_pe_stride_m=h * (k + r), q_pe_stride_h=k + r,
                        out=base + (1 << 29), out_stride_m=h * (n + r), out_stride_h=n + r)
    return a


def test_can_implement_checks_args_and_names_the_stride():
    desc = spark_mla.describe(8, 128)
    _lib.can_implement(desc, _args())
    bad = _args()
    bad.out_stride_h = 580  # not a multiple of 8
    with pytest.raises(spark_mla.SparkInvalidArgument, match="out_stride_h"):
        _lib.can_implement(desc, bad)
    bad = _args()
    bad.m = 0
    with pytest.raises(spark_mla.SparkInvalidArgument, match="'m'"):
        _lib.can_implement(desc, bad)


def _bundled_tool(name):
    path = Path(spark_mla.__file__).parent / "bin" / name
    if not path.exists():
        pytest.skip(f"no bundled {name} (spark_mla imported from the source tree, not installed)")
    return path


@pytest.mark.parametrize("tool,entry", [("spark-prewarm", "prewarm"), ("spark-cache", "cache")])
def test_console_scripts_exec_the_bundled_tools(tool, entry):
    _bundled_tool(tool)
    code = f"import sys; sys.argv[0] = '{tool}'; from spark_mla._cli import {entry}; {entry}()"
    r = subprocess.run([sys.executable, "-c", code, "--version"], capture_output=True, text=True)
    if r.returncode == 127 and "error while loading shared libraries" in r.stderr:
        # spark-cache links the system's libarchive, which a machine may lack (docs/tools.md)
        pytest.skip(f"{tool} cannot run here: {r.stderr.strip()}")
    assert r.returncode == 0, r.stderr
    assert spark_mla.__version__ in r.stdout


def test_bundled_prewarm_fills_a_cache(tmp_path):
    tool = _bundled_tool("spark-prewarm")
    r = subprocess.run([str(tool), "--heads", "8", "--nope", "128", "--max-m", "1", "--arch", "sm_90a",
                        "--cache-dir", str(tmp_path)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert any(tmp_path.rglob("*")), "the cache directory is empty after a prewarm"
