// What a result file must say about where it was measured: the GPU, driver, runtime and
// library versions, the clocks (through NVML when libnvidia-ml.so.1 is there, loaded with
// dlopen; nothing needs it at build time), the commit and the date.
#pragma once

#include <cstddef>
#include <string>

#include <nlohmann/json.hpp>

namespace spark_bench {

struct DeviceInfo {
  int device = 0;
  std::string name;
  std::string pci_bus_id;
  int sm_count = 0;
  int cc_major = 0, cc_minor = 0;
  size_t l2_bytes = 0;
  size_t memory_bytes = 0;
  int peak_sm_clock_mhz = 0;   // cudaDevAttrClockRate
  int peak_mem_clock_mhz = 0;  // cudaDevAttrMemoryClockRate
  int driver_api_version = 0;  // cudaDriverGetVersion, e.g. 13000
  int runtime_version = 0;     // cudaRuntimeGetVersion
  int cublas_version = 0;
  std::string driver_version;  // e.g. "580.65.06" (NVML), "" if unknown
};

// Throws BenchError when a CUDA query fails.
DeviceInfo query_device(int device);

// The current clocks, temperature, power and throttle reasons from NVML; null when NVML is
// not available.
nlohmann::ordered_json nvml_snapshot(const std::string& pci_bus_id);

// The driver version string from NVML, "" if unavailable.
std::string nvml_driver_version();

// The commit measured: $SPARK_BENCH_COMMIT, else the build's `git rev-parse HEAD` (+ whether
// the tree had uncommitted changes to tracked files).
struct CommitInfo {
  std::string commit;
  std::string source;  // "env" or "build"
  bool dirty = false;
};
CommitInfo commit_info();

// UTC, "2026-12-02T10:11:12Z" and "2026-12-02".
std::string utc_timestamp();
std::string utc_date();

// "NVIDIA H200" -> "nvidia-h200".
std::string slug(const std::string& s);

}  // namespace spark_bench
