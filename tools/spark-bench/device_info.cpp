#include "tools/spark-bench/device_info.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <cctype>
#include <cstdlib>
#include <ctime>
#include <mutex>

#include "tools/spark-bench/check.h"
#include "tools/spark-bench/spark_bench_commit.h"  // generated at build time

namespace spark_bench {

namespace {

// The few NVML entry points used, declared from NVML's stable C ABI (nvml.h is not needed).
using NvmlDevice = struct NvmlDeviceOpaque*;
constexpr int kNvmlSuccess = 0;
constexpr int kNvmlClockGraphics = 0, kNvmlClockSm = 1, kNvmlClockMem = 2;
constexpr int kNvmlTemperatureGpu = 0;

struct Nvml {
  bool ok = false;
  int (*init)() = nullptr;
  int (*driver_version)(char*, unsigned) = nullptr;
  int (*handle_by_pci)(const char*, NvmlDevice*) = nullptr;
  int (*clock)(NvmlDevice, int, unsigned*) = nullptr;
  int (*max_clock)(NvmlDevice, int, unsigned*) = nullptr;
  int (*app_clock)(NvmlDevice, int, unsigned*) = nullptr;
  int (*temperature)(NvmlDevice, int, unsigned*) = nullptr;
  int (*power)(NvmlDevice, unsigned*) = nullptr;
  int (*power_limit)(NvmlDevice, unsigned*) = nullptr;
  int (*throttle)(NvmlDevice, unsigned long long*) = nullptr;
};

template <typename F>
void load(void* lib, F& f, const char* name) {
  f = reinterpret_cast<F>(dlsym(lib, name));
}

// Loaded once, never unloaded (the process is short-lived).
const Nvml& nvml() {
  static Nvml n;
  static std::once_flag once;
  std::call_once(once, [] {
    void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) return;
    load(lib, n.init, "nvmlInit_v2");
    load(lib, n.driver_version, "nvmlSystemGetDriverVersion");
    load(lib, n.handle_by_pci, "nvmlDeviceGetHandleByPciBusId_v2");
    load(lib, n.clock, "nvmlDeviceGetClockInfo");
    load(lib, n.max_clock, "nvmlDeviceGetMaxClockInfo");
    load(lib, n.app_clock, "nvmlDeviceGetApplicationsClock");
    load(lib, n.temperature, "nvmlDeviceGetTemperature");
    load(lib, n.power, "nvmlDeviceGetPowerUsage");
    load(lib, n.power_limit, "nvmlDeviceGetEnforcedPowerLimit");
    load(lib, n.throttle, "nvmlDeviceGetCurrentClocksEventReasons");
    if (n.throttle == nullptr) load(lib, n.throttle, "nvmlDeviceGetCurrentClocksThrottleReasons");
    n.ok = n.init != nullptr && n.handle_by_pci != nullptr && n.init() == kNvmlSuccess;
  });
  return n;
}

// Adds j[key] = value when the query succeeds.
template <typename Fn>
void put_uint(nlohmann::ordered_json& j, const char* key, Fn&& query) {
  unsigned v = 0;
  if (query(&v) == kNvmlSuccess) j[key] = v;
}

}  // namespace

DeviceInfo query_device(int device) {
  DeviceInfo d;
  d.device = device;
  cudaDeviceProp prop{};
  BENCH_CUDA(cudaGetDeviceProperties(&prop, device));
  d.name = prop.name;
  d.sm_count = prop.multiProcessorCount;
  d.cc_major = prop.major;
  d.cc_minor = prop.minor;
  d.l2_bytes = static_cast<size_t>(prop.l2CacheSize);
  d.memory_bytes = prop.totalGlobalMem;
  char bus[64] = {};
  BENCH_CUDA(cudaDeviceGetPCIBusId(bus, sizeof bus, device));
  d.pci_bus_id = bus;
  int khz = 0;
  if (cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, device) == cudaSuccess) d.peak_sm_clock_mhz = khz / 1000;
  if (cudaDeviceGetAttribute(&khz, cudaDevAttrMemoryClockRate, device) == cudaSuccess)
    d.peak_mem_clock_mhz = khz / 1000;
  (void)cudaGetLastError();
  BENCH_CUDA(cudaDriverGetVersion(&d.driver_api_version));
  BENCH_CUDA(cudaRuntimeGetVersion(&d.runtime_version));
  int cublas = 0;
  if (cublasGetProperty(MAJOR_VERSION, &cublas) == CUBLAS_STATUS_SUCCESS) {
    int minor = 0, patch = 0;
    (void)cublasGetProperty(MINOR_VERSION, &minor);
    (void)cublasGetProperty(PATCH_LEVEL, &patch);
    d.cublas_version = cublas * 10000 + minor * 100 + patch;
  }
  d.driver_version = nvml_driver_version();
  return d;
}

std::string nvml_driver_version() {
  const Nvml& n = nvml();
  if (!n.ok || n.driver_version == nullptr) return "";
  char buf[96] = {};
  return n.driver_version(buf, sizeof buf) == kNvmlSuccess ? std::string(buf) : std::string();
}

nlohmann::ordered_json nvml_snapshot(const std::string& pci_bus_id) {
  const Nvml& n = nvml();
  NvmlDevice dev = nullptr;
  if (!n.ok || n.handle_by_pci(pci_bus_id.c_str(), &dev) != kNvmlSuccess) return nullptr;
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  j["time"] = utc_timestamp();
  if (n.clock != nullptr) {
    put_uint(j, "sm_clock_mhz", [&](unsigned* v) { return n.clock(dev, kNvmlClockSm, v); });
    put_uint(j, "graphics_clock_mhz", [&](unsigned* v) { return n.clock(dev, kNvmlClockGraphics, v); });
    put_uint(j, "mem_clock_mhz", [&](unsigned* v) { return n.clock(dev, kNvmlClockMem, v); });
  }
  if (n.max_clock != nullptr) {
    put_uint(j, "max_sm_clock_mhz", [&](unsigned* v) { return n.max_clock(dev, kNvmlClockSm, v); });
    put_uint(j, "max_mem_clock_mhz", [&](unsigned* v) { return n.max_clock(dev, kNvmlClockMem, v); });
  }
  if (n.app_clock != nullptr) {
    put_uint(j, "app_sm_clock_mhz", [&](unsigned* v) { return n.app_clock(dev, kNvmlClockSm, v); });
    put_uint(j, "app_mem_clock_mhz", [&](unsigned* v) { return n.app_clock(dev, kNvmlClockMem, v); });
  }
  if (n.temperature != nullptr)
    put_uint(j, "temperature_c", [&](unsigned* v) { return n.temperature(dev, kNvmlTemperatureGpu, v); });
  if (n.power != nullptr) put_uint(j, "power_mw", [&](unsigned* v) { return n.power(dev, v); });
  if (n.power_limit != nullptr) put_uint(j, "power_limit_mw", [&](unsigned* v) { return n.power_limit(dev, v); });
  unsigned long long reasons = 0;
  if (n.throttle != nullptr && n.throttle(dev, &reasons) == kNvmlSuccess) j["clock_event_reasons"] = reasons;
  return j;
}

CommitInfo commit_info() {
  CommitInfo c;
  if (const char* env = std::getenv("SPARK_BENCH_COMMIT"); env != nullptr && *env != '\0') {
    c.commit = env;
    c.source = "env";
    return c;
  }
  c.commit = SPARK_BENCH_BUILD_COMMIT;
  c.source = "build";
  c.dirty = SPARK_BENCH_BUILD_DIRTY != 0;
  return c;
}

std::string utc_timestamp() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string utc_date() { return utc_timestamp().substr(0, 10); }

std::string slug(const std::string& s) {
  std::string out;
  for (const char ch : s) {
    const unsigned char c = static_cast<unsigned char>(ch);
    if (std::isalnum(c)) {
      out += static_cast<char>(std::tolower(c));
    } else if (!out.empty() && out.back() != '-') {
      out += '-';
    }
  }
  while (!out.empty() && out.back() == '-') out.pop_back();
  return out.empty() ? "gpu" : out;
}

}  // namespace spark_bench
