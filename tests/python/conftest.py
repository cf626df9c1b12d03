# The Python tests import spark_mla as installed (pip install ., or PYTHONPATH=<site folder> as
# scripts/test.sh does), or from the source tree with SPARK_LIBRARY naming a built library.
import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def pytest_report_header(config):
    try:
        import spark_mla
        where = spark_mla.__file__
    except ImportError as e:
        where = f"not importable ({e})"
    return [f"spark_mla: {where}", f"SPARK_LIBRARY: {os.environ.get('SPARK_LIBRARY', '(unset)')}"]


@pytest.fixture(autouse=True, scope="session")
def _private_cache(tmp_path_factory):
    # Kernels compiled by the tests go to a cache of their own unless one is named.
    if "SPARK_CACHE_DIR" not in os.environ:
        os.environ["SPARK_CACHE_DIR"] = str(tmp_path_factory.mktemp("spark-cache"))
    yield
