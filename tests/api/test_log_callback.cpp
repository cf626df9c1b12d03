// spark_set_log_callback and spark_set_log_level: what a host that owns spark's log output
// receives, at which level, from which threads, and what stderr shows without a callback.
//
// The compile, corrupt-entry and SPARK_JIT=0 cases run through the public C API on the fake
// driver of tests/fake_cuda (this binary links it, so spark's dlopen("libcuda.so.1") gets
// it), with kernels compiled by the real NVRTC into temporary caches: H 8, K 192, N 512,
// R 64, BF16 weights, M 1-16 on sm_90a; four compiles on the serving path, one by a prewarm.

#include <doctest/doctest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <iterator>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "jit/kernel_store.h"
#include "ops/mla_qproj/presets.h"
#include "fake_cuda_control.h"
#include "fake_problem.h"
#include "ops/mla_qproj/tiles.h"
#include "spark/spark.h"
#include "tests/cache/cache_test_util.h"
#include "tests/support/scoped_env.h"

namespace {

using spark_test::Context;
using spark_test::key_for;
using spark_test::kHeads;
using spark_test::kK;
using spark_test::kMaxM;
using spark_test::kN;
using spark_test::kR;
using spark_test::make_args;
using spark_test::make_desc;
using spark_test::Plan;

namespace fs = std::filesystem;

using spark_test::ScopedEnv;
using spark_test::TempDir;

// ----------------------------------------------------------------------------------------
// What a callback received.  No lock: spark calls the callback one message at a time, and
// every case reads the record after the calls that filled it returned (or their threads
// were joined).
// ----------------------------------------------------------------------------------------

struct Message {
  spark_log_level level;
  std::string text;
};

struct Record {
  std::vector<Message> messages;
  bool trailing_newline = false;

  // The messages at `level` that contain every word.
  std::vector<std::string> find(spark_log_level level, std::initializer_list<std::string> words) const {
    std::vector<std::string> out;
    for (const Message& m : messages) {
      if (m.level != level) continue;
      bool all = true;
      for (const std::string& w : words) all = all && m.text.find(w) != std::string::npos;
      if (all) out.push_back(m.text);
    }
    return out;
  }
  std::string dump() const {
    std::string s;
    for (const Message& m : messages) s += "  [" + std::to_string(static_cast<int>(m.level)) + "] " + m.text + "\n";
    return s.empty() ? "  (nothing)\n" : s;
  }
};

void record(spark_log_level level, const char* message, void* user_data) {
  auto* r = static_cast<Record*>(user_data);
  const size_t n = std::strlen(message);
  if (n > 0 && (message[n - 1] == '\n' || message[n - 1] == '\r')) r->trailing_newline = true;
  r->messages.push_back({level, std::string(message, n)});
}

// Sets a recording callback and a level through the C API for one case; back to stderr and
// the ctest default (warn) after it.
class Recording {
 public:
  explicit Recording(spark_log_level level) {
    REQUIRE(spark_set_log_level(level) == SPARK_SUCCESS);
    REQUIRE(spark_set_log_callback(record, &record_) == SPARK_SUCCESS);
  }
  ~Recording() {
    spark_set_log_callback(nullptr, nullptr);
    spark_set_log_level(SPARK_LOG_WARN);
    CHECK_MESSAGE(!record_.trailing_newline, "a message ended in a newline:\n", record_.dump());
  }
  Recording(const Recording&) = delete;
  Recording& operator=(const Recording&) = delete;

  const Record& operator*() const { return record_; }
  const Record* operator->() const { return &record_; }

 private:
  Record record_;
};

// ----------------------------------------------------------------------------------------
// Contexts and plans on the fake device (the problem: tests/fake_cuda/fake_problem.h).
// ----------------------------------------------------------------------------------------

#define REQUIRE_OK(call)                                \
  do {                                                  \
    const spark_status st_ = (call);                    \
    INFO(#call, ": ", std::string(spark_last_error())); \
    REQUIRE(st_ == SPARK_SUCCESS);                      \
  } while (0)

// A context on the fake device whose cache is `cache` (read when the context is created).
void create_context(Context& ctx, const fs::path& cache) {
  ScopedEnv dir("SPARK_CACHE_DIR", cache.string());
  fake_cuda_reset();
  const spark_context_options o{sizeof(spark_context_options), 0};
  REQUIRE_OK(spark_context_create(&o, &ctx.h));
}

spark_status create_plan(Context& ctx, const spark_mla_qproj_desc& desc, int lazy, Plan& plan) {
  const spark_mla_qproj_plan_options o{sizeof(spark_mla_qproj_plan_options), kMaxM, lazy, 0};
  return spark_mla_qproj_plan_create(ctx.h, &desc, &o, &plan.h);
}


// A spark call that fails at once and logs its error at debug level: a cheap message.
void debug_message() { CHECK(spark_mla_qproj_can_implement(nullptr, nullptr) == SPARK_ERROR_INVALID_ARGUMENT); }

// Every kernel.cubin under a cache root (entries only, not the .corrupt/ or .tmp/ areas).
std::vector<fs::path> cubins(const fs::path& root) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(root))
    if (e.is_directory() && e.path().filename().string()[0] != '.' && fs::exists(e.path() / "kernel.cubin"))
      out.push_back(e.path() / "kernel.cubin");
  return out;
}

}  // namespace

// ----------------------------------------------------------------------------------------
// Kernels compiled, a corrupt entry, SPARK_JIT=0: the messages a server must see.
// ----------------------------------------------------------------------------------------

TEST_CASE("a compile while serving reaches the callback at warning: plan creation and a lazy plan's first run") {
  TempDir cache;
  Context ctx;
  create_context(ctx, cache.path);
  Recording log(SPARK_LOG_INFO);

  const spark_mla_qproj_desc bf16 = make_desc(SPARK_DTYPE_BF16);
  Plan eager;
  REQUIRE_OK(create_plan(ctx, bf16, 0, eager));
  INFO("messages:\n", log->dump());
  const std::string bf16_name = key_for(bf16).name();
  const auto at_creation = log->find(SPARK_LOG_WARN, {bf16_name, "plan creation", " ms", "spark-prewarm"});
  CHECK(at_creation.size() == 1);

  // A lazy plan compiles nothing when created, and warns when its first run must.
  const spark_mla_qproj_desc e4m3 = make_desc(SPARK_DTYPE_E4M3);
  const std::string e4m3_name = key_for(e4m3).name();
  Plan lazy;
  REQUIRE_OK(create_plan(ctx, e4m3, 1, lazy));
  CHECK(log->find(SPARK_LOG_WARN, {e4m3_name}).empty());
  const spark_mla_qproj_args args = make_args(e4m3, 5);
  REQUIRE_OK(spark_mla_qproj_run(lazy.h, &args, nullptr));
  INFO("messages after the run:\n", log->dump());
  CHECK(log->find(SPARK_LOG_WARN, {e4m3_name, "first run of a lazy plan", "M 1-16", " ms", "spark-prewarm"}).size() ==
        1);
  // The second run has its kernel: nothing more is said.
  const size_t before = log->messages.size();
  REQUIRE_OK(spark_mla_qproj_run(lazy.h, &args, nullptr));
  CHECK(log->messages.size() == before);

  // A plan whose kernel is cached compiles nothing, and so warns of nothing.
  Context again;
  create_context(again, cache.path);
  const size_t warnings = log->find(SPARK_LOG_WARN, {}).size();
  Plan cached;
  REQUIRE_OK(create_plan(again, bf16, 0, cached));
  CHECK(log->find(SPARK_LOG_WARN, {}).size() == warnings);
}

TEST_CASE("a prewarm's compiles reach the callback at info, never at warning") {
  TempDir cache;
  spark::KernelStore store(cache.path);
  const std::vector<spark::KernelKey> keys = {key_for(make_desc(SPARK_DTYPE_BF16))};

  Recording log(SPARK_LOG_INFO);
  const auto results = spark::prewarm(store, keys, 1);
  REQUIRE(results.size() == 1);
  INFO(results[0].error);
  REQUIRE(results[0].ok);
  CHECK(results[0].source == spark::BuildSource::kCompiled);
  INFO("messages:\n", log->dump());
  CHECK(log->find(SPARK_LOG_INFO, {"compiled", keys[0].name(), " ms", "prewarm"}).size() == 1);
  CHECK(log->find(SPARK_LOG_WARN, {}).empty());

  // Prewarmed: the serving path finds the kernel and says nothing.
  Context ctx;
  create_context(ctx, cache.path);
  Plan plan;
  const spark_mla_qproj_desc desc = make_desc(SPARK_DTYPE_BF16);
  REQUIRE_OK(create_plan(ctx, desc, 0, plan));
  CHECK(log->find(SPARK_LOG_WARN, {}).empty());
}

TEST_CASE("a corrupt cache entry reaches the callback at warning, and the rebuild is announced") {
  TempDir cache;
  const spark_mla_qproj_desc desc = make_desc(SPARK_DTYPE_BF16);
  const std::string name = key_for(desc).name();
  {
    Recording first_compile(SPARK_LOG_WARN);  // its warning is the first case's business
    Context ctx;
    create_context(ctx, cache.path);
    Plan plan;
    REQUIRE_OK(create_plan(ctx, desc, 0, plan));
  }
  const std::vector<fs::path> files = cubins(cache.path);
  REQUIRE(files.size() == 1);
  {
    // One byte flipped in the middle of the cubin: the size stays, the checksum does not.
    std::fstream f(files[0], std::ios::in | std::ios::out | std::ios::binary);
    REQUIRE(f);
    const auto size = fs::file_size(files[0]);
    REQUIRE(size > 64);
    f.seekg(static_cast<std::streamoff>(size / 2));
    char c = 0;
    f.read(&c, 1);
    f.seekp(static_cast<std::streamoff>(size / 2));
    c = static_cast<char>(c ^ 0x5a);
    f.write(&c, 1);
  }

  Recording log(SPARK_LOG_WARN);
  Context ctx;
  create_context(ctx, cache.path);
  Plan plan;
  REQUIRE_OK(create_plan(ctx, desc, 0, plan));
  INFO("messages:\n", log->dump());
  CHECK(log->find(SPARK_LOG_WARN, {"cache entry", "is corrupt", files[0].parent_path().filename().string()}).size() ==
        1);
  CHECK(log->find(SPARK_LOG_WARN, {name, "plan creation", "spark-prewarm"}).size() == 1);
  spark_cache_stats stats{};
  stats.struct_size = sizeof stats;
  REQUIRE_OK(spark_context_cache_stats(ctx.h, &stats));
  CHECK(stats.corrupt_entries == 1);
}

TEST_CASE("SPARK_JIT=0 and a kernel not in the cache: the status is returned and the error logged") {
  TempDir cache;
  Context ctx;
  create_context(ctx, cache.path);
  Recording log(SPARK_LOG_WARN);
  ScopedEnv no_jit("SPARK_JIT", "0");
  const spark_mla_qproj_desc desc = make_desc(SPARK_DTYPE_BF16);
  const std::string name = key_for(desc).name();

  SUBCASE("plan creation") {
    Plan plan;
    CHECK(create_plan(ctx, desc, 0, plan) == SPARK_ERROR_JIT_DISABLED);
    CHECK(plan.h == nullptr);
    INFO("messages:\n", log->dump());
    CHECK(log->find(SPARK_LOG_ERROR, {name, "SPARK_JIT=0", "plan creation"}).size() == 1);
  }
  SUBCASE("a lazy plan's first run") {
    Plan plan;
    REQUIRE_OK(create_plan(ctx, desc, 1, plan));
    CHECK(log->messages.empty());
    const spark_mla_qproj_args args = make_args(desc, 1);
    CHECK(spark_mla_qproj_run(plan.h, &args, nullptr) == SPARK_ERROR_JIT_DISABLED);
    INFO("messages:\n", log->dump());
    CHECK(log->find(SPARK_LOG_ERROR, {name, "SPARK_JIT=0", "first run of a lazy plan"}).size() == 1);
  }
  // Refused, not compiled: no compile warning, and nothing was put in the cache.
  CHECK(log->find(SPARK_LOG_WARN, {}).empty());
  CHECK(cubins(cache.path).empty());
}

// ----------------------------------------------------------------------------------------
// Levels.
// ----------------------------------------------------------------------------------------

TEST_CASE("messages below the level reach neither the callback nor stderr") {
  Recording log(SPARK_LOG_DEBUG);
  debug_message();
  REQUIRE(log->messages.size() == 1);
  CHECK(log->messages[0].level == SPARK_LOG_DEBUG);
  CHECK(log->messages[0].text.find("argument 'desc'") != std::string::npos);

  for (spark_log_level above : {SPARK_LOG_INFO, SPARK_LOG_WARN, SPARK_LOG_ERROR, SPARK_LOG_OFF}) {
    REQUIRE(spark_set_log_level(above) == SPARK_SUCCESS);
    debug_message();
  }
  CHECK_MESSAGE(log->messages.size() == 1, "messages:\n", log->dump());

  // Back down: delivered again.
  REQUIRE(spark_set_log_level(SPARK_LOG_TRACE) == SPARK_SUCCESS);
  debug_message();
  CHECK(log->messages.size() == 2);
}

TEST_CASE("a level outside SPARK_LOG_TRACE..SPARK_LOG_OFF is refused, naming the argument and the range") {
  Recording log(SPARK_LOG_DEBUG);
  for (int bad : {-1, 7, 1000}) {
    CAPTURE(bad);
    const spark_status st = spark_set_log_level(static_cast<spark_log_level>(bad));
    CHECK(st == SPARK_ERROR_INVALID_ARGUMENT);
    const std::string msg = spark_last_error();
    CHECK(msg.find("argument 'level'") != std::string::npos);
    CHECK(msg.find(std::to_string(bad)) != std::string::npos);
    CHECK(msg.find("SPARK_LOG_TRACE") != std::string::npos);
    CHECK(msg.find("SPARK_LOG_OFF") != std::string::npos);
  }
  // The level in force is still debug.
  const size_t before = log->messages.size();
  debug_message();
  CHECK(log->messages.size() == before + 1);
}

// ----------------------------------------------------------------------------------------
// The default sink.
// ----------------------------------------------------------------------------------------

namespace {

// What spark writes to stderr (fd 2) while fn runs.
template <class Fn>
std::string captured_stderr(Fn&& fn) {
  TempDir dir;
  const fs::path file = dir.path / "stderr";
  std::fflush(stderr);
  const int saved = ::dup(2);
  REQUIRE(saved >= 0);
  const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  REQUIRE(fd >= 0);
  REQUIRE(::dup2(fd, 2) == 2);
  ::close(fd);
  fn();
  std::fflush(stderr);
  ::dup2(saved, 2);
  ::close(saved);
  std::ifstream in(file);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

}  // namespace

TEST_CASE("NULL restores stderr: one line per message with the time, the pid and the level") {
  TempDir cache;
  Context ctx;
  create_context(ctx, cache.path);
  Record rec;
  const spark_mla_qproj_desc desc = make_desc(SPARK_DTYPE_BF16);

  // With a callback, stderr gets nothing.
  const std::string while_set = captured_stderr([&] {
    REQUIRE(spark_set_log_level(SPARK_LOG_DEBUG) == SPARK_SUCCESS);
    REQUIRE(spark_set_log_callback(record, &rec) == SPARK_SUCCESS);
    debug_message();
  });
  CHECK(while_set.empty());
  CHECK(rec.messages.size() == 1);

  const std::string text = captured_stderr([&] {
    REQUIRE(spark_set_log_callback(nullptr, nullptr) == SPARK_SUCCESS);
    debug_message();
    ScopedEnv no_jit("SPARK_JIT", "0");
    Plan plan;
    CHECK(create_plan(ctx, desc, 0, plan) == SPARK_ERROR_JIT_DISABLED);
  });
  spark_set_log_level(SPARK_LOG_WARN);
  CHECK(rec.messages.size() == 1);  // the callback is no longer called

  INFO("stderr:\n", text);
  const std::string pid = std::to_string(::getpid());
  const std::regex line(R"(\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}\] \[spark (\d+)\] \[([a-z]+)\] (.*))");
  std::istringstream lines(text);
  std::set<std::string> levels;
  int count = 0;
  for (std::string l; std::getline(lines, l);) {
    if (l.rfind("[", 0) != 0) continue;  // a continuation of a message with a newline inside
    std::smatch m;
    CHECK_MESSAGE(std::regex_match(l, m, line), "not in the format: ", l);
    if (m.empty()) continue;
    CHECK(m[1].str() == pid);
    levels.insert(m[2].str());
    ++count;
  }
  // The debug message of the refused argument, the error of the refused kernel, and the
  // debug message its status gives at the C boundary.
  CHECK(count >= 2);
  CHECK(levels.count("debug") == 1);
  CHECK(levels.count("error") == 1);
  CHECK(text.find("argument 'desc'") != std::string::npos);
  CHECK(text.find(key_for(desc).name()) != std::string::npos);
}

// ----------------------------------------------------------------------------------------
// Threads.
// ----------------------------------------------------------------------------------------

namespace {

// Counts with no lock of its own: exact only if spark never runs two calls at once.
struct Counter {
  long calls = 0;
  std::set<std::thread::id> threads;
  std::atomic<int> inside{0};
  std::atomic<int> overlaps{0};
};

void count(spark_log_level, const char*, void* user_data) {
  auto* c = static_cast<Counter*>(user_data);
  if (c->inside.fetch_add(1) != 0) ++c->overlaps;
  const long seen = c->calls;
  std::this_thread::yield();  // widen the window a second caller would fall into
  c->calls = seen + 1;
  c->threads.insert(std::this_thread::get_id());
  c->inside.fetch_sub(1);
}

}  // namespace

TEST_CASE("calls from many threads are serialised, and the callback can be swapped while they log") {
  constexpr int kThreads = 4, kPerThread = 2000;
  Counter a, b;
  REQUIRE(spark_set_log_level(SPARK_LOG_DEBUG) == SPARK_SUCCESS);
  REQUIRE(spark_set_log_callback(count, &a) == SPARK_SUCCESS);

  std::atomic<int> ready{0};
  std::atomic<bool> logging{true};
  std::atomic<int> failed_swaps{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&] {
      ++ready;
      while (ready.load() < kThreads) std::this_thread::yield();
      for (int i = 0; i < kPerThread; ++i) spark_mla_qproj_can_implement(nullptr, nullptr);
    });
  // Swaps between two callbacks while the threads log: every message goes to one of them.
  std::thread swapper([&] {
    for (int i = 0; logging.load(); ++i) {
      if (spark_set_log_callback(count, i % 2 ? &a : &b) != SPARK_SUCCESS) ++failed_swaps;
      std::this_thread::yield();
    }
  });
  for (auto& t : threads) t.join();
  logging = false;
  swapper.join();

  // Once spark_set_log_callback returns, the previous callback is not running and is not
  // called again.
  REQUIRE(spark_set_log_callback(count, &b) == SPARK_SUCCESS);
  const long a_after = a.calls;
  for (int i = 0; i < 10; ++i) spark_mla_qproj_can_implement(nullptr, nullptr);
  CHECK(a.calls == a_after);
  spark_set_log_callback(nullptr, nullptr);
  spark_set_log_level(SPARK_LOG_WARN);

  CHECK(failed_swaps.load() == 0);
  CHECK(a.overlaps.load() + b.overlaps.load() == 0);
  CHECK(a.calls + b.calls == long{kThreads} * kPerThread + 10);
  std::set<std::thread::id> callers = a.threads;
  callers.insert(b.threads.begin(), b.threads.end());
  CHECK(callers.size() >= kThreads);  // called on the threads that called spark
}

TEST_CASE("a callback that calls spark: the nested message is dropped, a swap from inside is refused") {
  struct Nested {
    int calls = 0;
    spark_status swap = SPARK_SUCCESS;
    std::string swap_error;
  } nested;
  const auto callback = [](spark_log_level, const char*, void* user_data) {
    auto* n = static_cast<Nested*>(user_data);
    ++n->calls;
    // Logs at debug again on this thread: dropped rather than waiting for itself.
    spark_mla_qproj_can_implement(nullptr, nullptr);
    n->swap = spark_set_log_callback(nullptr, nullptr);
    n->swap_error = spark_last_error();
  };
  REQUIRE(spark_set_log_level(SPARK_LOG_DEBUG) == SPARK_SUCCESS);
  REQUIRE(spark_set_log_callback(callback, &nested) == SPARK_SUCCESS);
  debug_message();
  // Still the callback: the swap from inside did not happen.
  debug_message();
  spark_set_log_callback(nullptr, nullptr);
  spark_set_log_level(SPARK_LOG_WARN);
  CHECK(nested.calls == 2);
  CHECK(nested.swap == SPARK_ERROR_INVALID_ARGUMENT);
  CHECK(nested.swap_error.find("inside the log callback") != std::string::npos);
}
