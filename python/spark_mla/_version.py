# The version of the C library this package is built with and expects to load (CMakeLists.txt's
# project() version; tests/python/test_loader.py keeps the two equal).
__version__ = "0.1.0"
