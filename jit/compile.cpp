#include "jit/compile.h"

#include <chrono>
#include <mutex>
#include <regex>

#include <cuda.h>  // CUDA_VERSION: the toolkit this library was built with
#include <nvrtc.h>

#include <cstring>

#include "core/dynlib.h"
#include "core/env.h"
#include "core/error.h"
#include "core/files.h"
#include "core/log.h"
#include "core/cubin_elf.h"
#include "jit/templates.h"

namespace spark {

namespace {

// NVRTC, loaded at first use rather than linked: a process that only loads cached kernels
// (SPARK_JIT=0 after a prewarm) runs where no NVRTC is installed.  SPARK_NVRTC_LIBRARY names
// another library file.
struct Nvrtc {
  decltype(&::nvrtcVersion) Version = nullptr;
  decltype(&::nvrtcGetErrorString) GetErrorString = nullptr;
  decltype(&::nvrtcCreateProgram) CreateProgram = nullptr;
  decltype(&::nvrtcDestroyProgram) DestroyProgram = nullptr;
  decltype(&::nvrtcCompileProgram) CompileProgram = nullptr;
  decltype(&::nvrtcGetProgramLogSize) GetProgramLogSize = nullptr;
  decltype(&::nvrtcGetProgramLog) GetProgramLog = nullptr;
  decltype(&::nvrtcGetPTXSize) GetPTXSize = nullptr;
  decltype(&::nvrtcGetPTX) GetPTX = nullptr;
  decltype(&::nvrtcGetCUBINSize) GetCUBINSize = nullptr;
  decltype(&::nvrtcGetCUBIN) GetCUBIN = nullptr;
  // Optional (reported by `spark-cache info`, never needed for a compile).
  decltype(&::nvrtcGetNumSupportedArchs) GetNumSupportedArchs = nullptr;
  decltype(&::nvrtcGetSupportedArchs) GetSupportedArchs = nullptr;
  std::string path;   // the file loaded, as the loader resolved it
  std::string error;  // why it is not available; empty when it is
};

const Nvrtc& nvrtc_api() {
  static const Nvrtc api = [] {
    Nvrtc n;
    // The library the loader finds by its soname, else the one of the toolkit this was built with.
    const std::string soname = fmt::format("libnvrtc.so.{}", CUDA_VERSION / 1000);
    const auto named = env_string("SPARK_NVRTC_LIBRARY");
    std::string file = named.value_or(soname);
    void* lib = open_library(file, "NVRTC", n.error);
    if (!lib && !named) {
      file = std::string(SPARK_CUDA_LIBRARY_DIR) + "/" + soname;
      n.error.clear();
      lib = open_library(file, "NVRTC", n.error);
    }
    if (!lib) return n;
    const auto bind = [&](const char* name, auto& fn) { bind_symbol(lib, file, name, fn, n.error); };
    bind("nvrtcVersion", n.Version);
    bind("nvrtcGetErrorString", n.GetErrorString);
    bind("nvrtcCreateProgram", n.CreateProgram);
    bind("nvrtcDestroyProgram", n.DestroyProgram);
    bind("nvrtcCompileProgram", n.CompileProgram);
    bind("nvrtcGetProgramLogSize", n.GetProgramLogSize);
    bind("nvrtcGetProgramLog", n.GetProgramLog);
    bind("nvrtcGetPTXSize", n.GetPTXSize);
    bind("nvrtcGetPTX", n.GetPTX);
    bind("nvrtcGetCUBINSize", n.GetCUBINSize);
    bind("nvrtcGetCUBIN", n.GetCUBIN);
    n.GetNumSupportedArchs = reinterpret_cast<decltype(n.GetNumSupportedArchs)>(::dlsym(lib, "nvrtcGetNumSupportedArchs"));
    n.GetSupportedArchs = reinterpret_cast<decltype(n.GetSupportedArchs)>(::dlsym(lib, "nvrtcGetSupportedArchs"));
    Dl_info where{};
    n.path = n.Version && ::dladdr(reinterpret_cast<void*>(n.Version), &where) && where.dli_fname ? where.dli_fname
                                                                                                   : file;
    return n;
  }();
  return api;
}

// NVRTC for a compile; throws COMPILE saying why where it cannot be loaded.
const Nvrtc& nvrtc() {
  const Nvrtc& n = nvrtc_api();
  SPARK_CHECK(n.error.empty(), SPARK_ERROR_COMPILE, "{}; kernels not already in the cache cannot be compiled",
              n.error);
  return n;
}

#define SPARK_NVRTC_CHECK(call)                                                                                 \
  do {                                                                                                          \
    const nvrtcResult rc_ = (call);                                                                             \
    SPARK_CHECK(rc_ == NVRTC_SUCCESS, SPARK_ERROR_COMPILE, "{} failed: {}", #call, nvrtc().GetErrorString(rc_)); \
  } while (0)

// Owns an nvrtcProgram.
class Program {
 public:
  explicit Program(nvrtcProgram p) : p_(p) {}
  ~Program() { nvrtc_api().DestroyProgram(&p_); }
  Program(const Program&) = delete;
  Program& operator=(const Program&) = delete;
  nvrtcProgram get() const { return p_; }

 private:
  nvrtcProgram p_;
};

std::string program_log(nvrtcProgram p) {
  size_t size = 0;
  if (nvrtc().GetProgramLogSize(p, &size) != NVRTC_SUCCESS || size <= 1) return {};
  std::string log(size, '\0');
  nvrtc().GetProgramLog(p, log.data());
  log.resize(size - 1);
  return log;
}

void dump(const RenderedSource& src, const CompiledKernel& out, nvrtcProgram prog, bool ok) {
  const auto dir = dump_dir();
  if (!dir) return;
  // A debugging aid: a directory that cannot be made or written is reported once and the
  // compile goes on.
  try {
    std::filesystem::create_directories(*dir);
    const std::string base = (*dir / src.key.name()).string();
    write_file_synced(base + ".cu", src.source);
    write_file_synced(base + ".log", out.log);
    size_t ptx_size = 0;
    if (ok && nvrtc().GetPTXSize(prog, &ptx_size) == NVRTC_SUCCESS && ptx_size > 1) {
      std::string ptx(ptx_size, '\0');
      nvrtc().GetPTX(prog, ptx.data());
      ptx.resize(ptx_size - 1);
      write_file_synced(base + ".ptx", ptx);
    }
  } catch (const std::exception& e) {
    static std::once_flag warned;
    std::call_once(warned, [&] { log().warn("SPARK_DUMP_DIR={}: {}; compiling without dumps", dir->string(), e.what()); });
  }
}

}  // namespace

std::string nvrtc_version() {
  // Without NVRTC, the version of the toolkit this library was built with: a cache
  // prewarmed by that NVRTC still hits.
  if (!nvrtc_api().error.empty()) return nvrtc_built_version();
  int major = 0, minor = 0;
  SPARK_NVRTC_CHECK(nvrtc().Version(&major, &minor));
  return fmt::format("{}.{}", major, minor);
}

std::string nvrtc_built_version() { return fmt::format("{}.{}", CUDA_VERSION / 1000, CUDA_VERSION % 1000 / 10); }

NvrtcInfo nvrtc_info() {
  const Nvrtc& n = nvrtc_api();
  NvrtcInfo info;
  info.problem = n.error;
  if (!n.error.empty()) return info;
  info.path = n.path;
  int major = 0, minor = 0;
  if (n.Version(&major, &minor) != NVRTC_SUCCESS) {
    info.problem = "nvrtcVersion failed";
    return info;
  }
  info.loaded = true;
  info.version = fmt::format("{}.{}", major, minor);
  int count = 0;
  if (n.GetNumSupportedArchs && n.GetSupportedArchs && n.GetNumSupportedArchs(&count) == NVRTC_SUCCESS && count > 0 &&
      count < 1024) {
    info.archs.resize(static_cast<size_t>(count));
    if (n.GetSupportedArchs(info.archs.data()) != NVRTC_SUCCESS) info.archs.clear();
  }
  return info;
}

std::vector<std::string> compile_options(const std::string& arch) {
  return {"--gpu-architecture=" + arch, "--std=c++17", "--ptxas-options=--verbose",
          "--generate-line-info"};
}

KernelResources parse_ptxas_report(const std::string& log) {
  KernelResources r;
  std::smatch m;
  static const std::regex regs(R"(Used (\d+) registers)");
  static const std::regex smem(R"((\d+) bytes smem)");
  static const std::regex stack(R"((\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads)");
  if (std::regex_search(log, m, regs)) r.registers = std::stoi(m[1]);
  if (std::regex_search(log, m, smem)) r.shared_static_bytes = std::stoi(m[1]);
  else if (r.registers >= 0) r.shared_static_bytes = 0;
  if (std::regex_search(log, m, stack)) {
    r.local_bytes = std::stoi(m[1]);
    r.spill_bytes = std::stoi(m[2]) + std::stoi(m[3]);
  }
  return r;
}

CompiledKernel compile(const RenderedSource& src) {
  const auto start = std::chrono::steady_clock::now();
  std::vector<const char*> header_names, header_bytes;
  std::vector<std::string> header_storage;
  for (const EmbeddedTemplate& t : embedded_templates()) {
    header_storage.emplace_back(t.bytes);
    header_names.push_back(t.name.data());
  }
  for (const std::string& s : header_storage) header_bytes.push_back(s.c_str());

  nvrtcProgram raw = nullptr;
  const std::string file = src.key.name() + ".cu";
  SPARK_NVRTC_CHECK(nvrtc().CreateProgram(&raw, src.source.c_str(), file.c_str(),
                                       static_cast<int>(header_bytes.size()), header_bytes.data(),
                                       header_names.data()));
  Program prog(raw);

  CompiledKernel out;
  out.options = compile_options(src.key.arch);
  std::vector<const char*> opts;
  for (const std::string& o : out.options) opts.push_back(o.c_str());
  const nvrtcResult rc = nvrtc().CompileProgram(prog.get(), static_cast<int>(opts.size()), opts.data());
  out.log = program_log(prog.get());
  dump(src, out, prog.get(), rc == NVRTC_SUCCESS);
  SPARK_CHECK(rc == NVRTC_SUCCESS, SPARK_ERROR_COMPILE, "NVRTC failed to compile {} ({}):\n{}",
              src.key.name(), nvrtc().GetErrorString(rc), out.log);

  size_t size = 0;
  SPARK_NVRTC_CHECK(nvrtc().GetCUBINSize(prog.get(), &size));
  SPARK_CHECK(size > 0, SPARK_ERROR_COMPILE, "NVRTC produced no cubin for {}", src.key.name());
  out.cubin.resize(size);
  SPARK_NVRTC_CHECK(nvrtc().GetCUBIN(prog.get(), out.cubin.data()));
  out.resources = parse_ptxas_report(out.log);
  fill_resources_from_cubin(out.cubin, kKernelEntryName, out.resources);
  out.compile_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  log().debug("compiled {} in {:.1f} ms ({} registers)", src.key.name(), out.compile_ms,
              out.resources.registers);
  return out;
}

}  // namespace spark
