#include "jit/compile.h"

#include <chrono>
#include <mutex>
#include <regex>

#include "core/env.h"
#include "core/error.h"
#include "core/files.h"
#include "core/log.h"
#include "core/cubin_elf.h"
#include "core/key_name.h"
#include "jit/templates.h"

namespace spark {

namespace {

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

void dump(const KernelSpec& src, const CompiledKernel& out, nvrtcProgram prog, bool ok) {
  const auto dir = dump_dir();
  if (!dir) return;
  // A debugging aid: a directory that cannot be made or written is reported once and the
  // compile goes on.
  try {
    std::filesystem::create_directories(*dir);
    const std::string base = (*dir / src.key).string();
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

CompiledKernel compile(const KernelSpec& src) {
  const auto start = std::chrono::steady_clock::now();
  std::vector<const char*> header_names, header_bytes;
  std::vector<std::string> header_storage;
  for (const EmbeddedTemplate& t : embedded_templates()) {
    header_storage.emplace_back(t.bytes);
    header_names.push_back(t.name.data());
  }
  for (const std::string& s : header_storage) header_bytes.push_back(s.c_str());

  nvrtcProgram raw = nullptr;
  const std::string file = src.key + ".cu";
  SPARK_NVRTC_CHECK(nvrtc().CreateProgram(&raw, src.source.c_str(), file.c_str(),
                                       static_cast<int>(header_bytes.size()), header_bytes.data(),
                                       header_names.data()));
  Program prog(raw);

  CompiledKernel out;
  out.options = compile_options(src.arch);
  std::vector<const char*> opts;
  for (const std::string& o : out.options) opts.push_back(o.c_str());
  const nvrtcResult rc = nvrtc().CompileProgram(prog.get(), static_cast<int>(opts.size()), opts.data());
  out.log = program_log(prog.get());
  dump(src, out, prog.get(), rc == NVRTC_SUCCESS);
  SPARK_CHECK(rc == NVRTC_SUCCESS, SPARK_ERROR_COMPILE, "NVRTC failed to compile {} ({}):\n{}",
              src.key, nvrtc().GetErrorString(rc), out.log);

  size_t size = 0;
  SPARK_NVRTC_CHECK(nvrtc().GetCUBINSize(prog.get(), &size));
  SPARK_CHECK(size > 0, SPARK_ERROR_COMPILE, "NVRTC produced no cubin for {}", src.key);
  out.cubin.resize(size);
  SPARK_NVRTC_CHECK(nvrtc().GetCUBIN(prog.get(), out.cubin.data()));
  out.resources = parse_ptxas_report(out.log);
  fill_resources_from_cubin(out.cubin, kernel_symbol(key_op(src.key)), out.resources);
  out.compile_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  log().debug("compiled {} in {:.1f} ms ({} registers)", src.key, out.compile_ms,
              out.resources.registers);
  return out;
}

}  // namespace spark
