// A context: one device's primary CUDA context, its kernel store, and the kernels
// loaded into it, of any op.  Thread-safe.
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <unordered_map>

#include "jit/kernel_store.h"
#include "runtime/cuda_driver.h"

namespace spark {

// A kernel loaded into a context, ready to launch (runtime/launch.h).
struct LoadedKernel {
  std::string key;  // the spec's key name
  int threads = 0;
  int smem_bytes = 0;
  int resident_ctas = 1;  // CTAs of this kernel the whole device holds at once
  CUmodule module = nullptr;
  CUfunction function = nullptr;
  BuildSource source = BuildSource::kCacheHit;
};

// Makes a context current on this thread for the object's lifetime: pushed by the
// constructor (which throws, having pushed nothing, when the push fails), popped by the
// destructor.
class ScopedCurrent {
 public:
  explicit ScopedCurrent(CUcontext ctx);
  ~ScopedCurrent();
  ScopedCurrent(const ScopedCurrent&) = delete;
  ScopedCurrent& operator=(const ScopedCurrent&) = delete;
};

// A device's primary context, retained for the object's lifetime.  A member of Context, so
// that a Context constructor failing after the retain still releases it.
class PrimaryContext {
 public:
  explicit PrimaryContext(CUdevice device);
  ~PrimaryContext();
  PrimaryContext(const PrimaryContext&) = delete;
  PrimaryContext& operator=(const PrimaryContext&) = delete;

  CUcontext get() const { return ctx_; }

 private:
  CUdevice device_;
  CUcontext ctx_ = nullptr;
};

class Context {
 public:
  explicit Context(int device);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  int device() const { return device_; }
  int compute_capability() const { return cc_; }
  const std::string& arch() const { return arch_; }
  CUcontext cu_context() const { return primary_->get(); }
  KernelStore& store() { return store_; }

  // The loaded kernel of a key name, or nullptr.  Never loads.
  const LoadedKernel* find(const std::string& key) const;
  // Loads a spec's kernel (from the cache, compiling on a miss) if not yet loaded.  Kernels stay loaded
  // until the context is destroyed, so the reference stays valid.  On failure nothing is
  // left behind: the table holds only fully loaded kernels, and a module loaded on the way
  // is unloaded.  `during` says what is waiting ("plan creation") in the warning a compile
  // gives: it stalls a server.
  const LoadedKernel& load(const KernelSpec& spec, std::string_view during);

 private:
  int device_;
  int cc_ = 0;
  int sm_count_ = 1;
  std::string arch_;
  CUdevice cu_device_ = 0;
  KernelStore store_;
  std::optional<PrimaryContext> primary_;  // set once the device checks passed
  mutable std::shared_mutex mu_;
  // Only kernels whose module, function and attributes are all in place.
  std::unordered_map<std::string, std::unique_ptr<LoadedKernel>> kernels_;
};

}  // namespace spark
