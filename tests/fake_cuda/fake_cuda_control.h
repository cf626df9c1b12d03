/*
 * The control side of the fake CUDA driver (fake_cuda.cpp, built as a library whose soname
 * is libcuda.so.1).  A test that links it makes spark's dlopen("libcuda.so.1") return this
 * very library, so the test drives the driver spark uses: it makes any entry point fail and
 * reads what spark did to it.
 *
 * The fake emulates one device (settable: fake_cuda_set_device_count) of compute capability
 * 9.0 with 132 SMs, its primary context, modules (an image must start with the ELF magic),
 * functions, attributes, occupancy, stream capture status and launches (recorded, never run).
 * It also catches what the real driver would refuse or what would leak on it: popping a
 * context nobody pushed, unloading an unknown module, loading or launching with no current
 * context, releasing a primary context more often than it was retained.  Those count as
 * misuse.  Every function here is thread-safe.
 *
 * NVRTC dlopens libcuda.so.1 as well when it compiles, and gets this library: it calls
 * cuInit (counted like spark's calls) and cuGetExportTable, which says CUDA_ERROR_NOT_SUPPORTED
 * so that NVRTC goes on as on a machine without a driver (it crashes if the symbol is missing).
 */
#ifndef SPARK_TESTS_FAKE_CUDA_CONTROL_H_
#define SPARK_TESTS_FAKE_CUDA_CONTROL_H_

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FAKE_CUDA_API __attribute__((visibility("default")))

enum { FAKE_CUDA_SM_COUNT = 132, FAKE_CUDA_CC_MAJOR = 9, FAKE_CUDA_CC_MINOR = 0 };

/* Makes entry_point ("cuModuleLoadData"; a trailing "_v2" may be left out) return
 * cuda_result (a CUresult) without doing anything, on every call after the next
 * after_n_calls ones, until fake_cuda_reset or fake_cuda_clear_failure.  The call that
 * fails still counts in fake_cuda_calls.  An unknown entry point aborts the process. */
FAKE_CUDA_API void fake_cuda_fail(const char* entry_point, int cuda_result, int after_n_calls);
/* The same for `times` calls only (-1: forever). */
FAKE_CUDA_API void fake_cuda_fail_times(const char* entry_point, int cuda_result, int after_n_calls, int times);
FAKE_CUDA_API void fake_cuda_clear_failure(const char* entry_point);

/* Clears the failure rules, the settings below (back to the defaults) and the counters.
 * What is loaded or retained stays loaded or retained (live_modules, primary_refcount). */
FAKE_CUDA_API void fake_cuda_reset(void);

/* Settings. */
FAKE_CUDA_API void fake_cuda_set_device_count(int count);        /* default 1, at most 8 */
FAKE_CUDA_API void fake_cuda_set_occupancy(int blocks_per_sm);   /* default 1 */
FAKE_CUDA_API void fake_cuda_set_capture_status(int status);     /* a CUstreamCaptureStatus, default NONE */
FAKE_CUDA_API void fake_cuda_record_param_bytes(size_t bytes);   /* copy this much of a launch's kernelParams[0] */

/* Calls of one entry point (failed ones included) since the last reset. */
FAKE_CUDA_API long fake_cuda_calls(const char* entry_point);

typedef struct fake_cuda_counters {
  long init_calls;
  long primary_retains, primary_releases;
  long primary_refcount; /* state: sum over devices of retains - releases, not reset */
  long pushes, pops;     /* successful cuCtxPushCurrent / cuCtxPopCurrent, all threads */
  long modules_loaded, modules_unloaded;
  long live_modules;     /* state: modules loaded and not yet unloaded, not reset */
  long function_lookups;
  long launches;         /* successful cuLaunchKernelEx */
  long misuse;           /* calls the real driver would refuse (fake_cuda_last_misuse says which) */
} fake_cuda_counters;

FAKE_CUDA_API void fake_cuda_get_counters(fake_cuda_counters* out);

/* Contexts pushed and not popped on the calling thread. */
FAKE_CUDA_API int fake_cuda_push_depth(void);

/* The latest misuse, "" if none since the reset, copied into buf (always terminated). */
FAKE_CUDA_API void fake_cuda_last_misuse(char* buf, size_t size);

enum { FAKE_CUDA_MAX_PARAM_BYTES = 512 };

typedef struct fake_cuda_launch {
  unsigned grid[3], block[3];
  unsigned shared_mem_bytes;
  void* stream;
  void* function;
  unsigned num_attrs;
  int pdl; /* an attribute CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION with value 1 */
  size_t param_bytes;
  unsigned char params[FAKE_CUDA_MAX_PARAM_BYTES]; /* the first param_bytes of kernelParams[0] */
} fake_cuda_launch;

/* The most recent successful launch; 0 (and *out untouched) when none since the reset. */
FAKE_CUDA_API int fake_cuda_last_launch(fake_cuda_launch* out);

#ifdef __cplusplus
}
#endif

#endif /* SPARK_TESTS_FAKE_CUDA_CONTROL_H_ */
