// The on-disk object cache (docs/cache.md): a second compile of the same kernel and knobs
// reads the object instead of compiling; a damaged entry is detected, removed and rebuilt,
// never loaded; concurrent writers leave one valid entry; the size cap evicts the least
// recently used entries; the key changes with everything that changes the object.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include "driver/check.h"
#include "driver/compile.h"
#include "jit/object_file.h"
#include "kernels/registry.h"

namespace {

using namespace kiln;
namespace fs = std::filesystem;

struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() / ("kiln-cache-test-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(path);
  }
  ~TempDir() { fs::remove_all(path); }
};

std::vector<fs::path> entries(const fs::path& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) out.push_back(it->path());
  return out;
}

std::unique_ptr<ir::Kernel> attention(const std::string& shape) {
  std::unique_ptr<ir::Kernel> k;
  EXPECT_FALSE(kernels::buildLibraryKernel({"attention", shape, {{"mask", "causal"}}}, k));
  return k;
}

// Compiles through the process-wide cache; restores "no cache" when it goes away.
struct WithCache {
  explicit WithCache(std::shared_ptr<jit::ObjectCache> c) { driver::setObjectCache(std::move(c)); }
  ~WithCache() { driver::setObjectCache(nullptr); }
};

TEST(ObjectCache, SecondCompileIsAHitWithTheSameObject) {
  TempDir dir;
  std::vector<std::string> warnings;
  auto cache = std::make_shared<jit::DiskObjectCache>(dir.path.string(), int64_t{64} << 20,
                                                      [&](const std::string& w) { warnings.push_back(w); });
  WithCache with(cache);
  auto k = attention("1,4,2,3,40,16,16");
  driver::Compilation a, b;
  ASSERT_FALSE(driver::compile(*k, {}, a));
  EXPECT_EQ(a.report["cache"]["status"], "miss");
  EXPECT_FALSE(a.from_cache);
  ASSERT_FALSE(driver::compile(*k, {}, b));
  EXPECT_EQ(b.report["cache"]["status"], "hit");
  EXPECT_TRUE(b.from_cache);
  EXPECT_EQ(a.object, b.object);
  EXPECT_EQ(a.report["cache"]["key"], b.report["cache"]["key"]);
  EXPECT_GT(b.report["cache"]["saved_ms"].get<double>(), 0.0);
  EXPECT_EQ(cache->info().entries, 1);
  EXPECT_TRUE(warnings.empty());

  // Anything that changes the object changes the key: a knob, the ISA, the kernel.
  plan::Knobs other;
  ASSERT_FALSE(other.setAssignment("isa=avx2"));
  driver::Compilation c;
  ASSERT_FALSE(driver::compile(*k, other, c));
  EXPECT_EQ(c.report["cache"]["status"], "miss");
  ASSERT_FALSE(driver::compile(*attention("1,4,2,3,41,16,16"), {}, c));
  EXPECT_EQ(c.report["cache"]["status"], "miss");
  // threads does not change the object: a hit, and the report says the threads asked for.
  plan::Knobs threads;
  ASSERT_FALSE(threads.setAssignment("threads=2"));
  ASSERT_FALSE(driver::compile(*k, threads, c));
  EXPECT_EQ(c.report["cache"]["status"], "hit");
  EXPECT_EQ(c.report["knobs"]["threads"], 2);

  // The cached object runs and is checked like a fresh one.
  driver::CheckOptions o;
  o.mode = driver::CheckMode::Bitexact;
  driver::CheckResult r;
  ASSERT_FALSE(driver::check(*k, {}, o, r));
  EXPECT_TRUE(r.pass);
  EXPECT_EQ(r.cache, "hit");
}

// A flipped byte, a truncated entry, or garbage: detected, removed with a warning, rebuilt.
TEST(ObjectCache, DamagedEntriesAreRebuiltNeverLoaded) {
  TempDir dir;
  std::vector<std::string> warnings;
  auto cache = std::make_shared<jit::DiskObjectCache>(dir.path.string(), int64_t{64} << 20,
                                                      [&](const std::string& w) { warnings.push_back(w); });
  WithCache with(cache);
  auto k = attention("1,2,1,1,33,16,16");
  driver::Compilation fresh;
  ASSERT_FALSE(driver::compile(*k, {}, fresh));
  auto files = entries(dir.path);
  ASSERT_EQ(files.size(), 1u);
  const fs::path entry = files[0];
  std::string good;
  ASSERT_FALSE(jit::readFile(entry.string(), good));

  const std::vector<std::pair<std::string, std::string>> damages = {
      {"flipped byte",
       [&] {
         std::string s = good;
         s[s.size() - 100] ^= 0x10;  // inside the object
         return s;
       }()},
      {"truncated", good.substr(0, good.size() / 2)},
      {"not an entry", std::string("hello\n")},
      {"empty", std::string()},
  };
  for (const auto& [what, bytes] : damages) {
    warnings.clear();
    ASSERT_FALSE(jit::writeFile(entry.string(), bytes));
    driver::Compilation c;
    ASSERT_FALSE(driver::compile(*k, {}, c)) << what;
    EXPECT_EQ(c.report["cache"]["status"], "miss") << what;
    EXPECT_EQ(c.object, fresh.object) << what;
    ASSERT_EQ(warnings.size(), 1u) << what;
    EXPECT_NE(warnings[0].find("is corrupted"), std::string::npos) << warnings[0];
    // The entry is rebuilt: the next compile is a hit with the same object.
    driver::Compilation again;
    ASSERT_FALSE(driver::compile(*k, {}, again)) << what;
    EXPECT_EQ(again.report["cache"]["status"], "hit") << what;
    EXPECT_EQ(again.object, fresh.object) << what;
  }
}

TEST(ObjectCache, ConcurrentWritersLeaveOneValidEntry) {
  TempDir dir;
  const std::string key(64, 'a');
  std::vector<std::thread> writers;
  for (int t = 0; t < 8; ++t)
    writers.emplace_back([&, t] {
      jit::DiskObjectCache c(dir.path.string(), int64_t{64} << 20);
      for (int i = 0; i < 20; ++i) c.put(key, std::string(100000, 'x'));
      (void)t;
    });
  for (std::thread& w : writers) w.join();
  auto files = entries(dir.path);
  ASSERT_EQ(files.size(), 1u);  // no temporary file left behind
  jit::DiskObjectCache c(dir.path.string(), int64_t{64} << 20);
  auto got = c.get(key);
  ASSERT_TRUE(got);
  EXPECT_EQ(*got, std::string(100000, 'x'));
}

TEST(ObjectCache, SizeCapEvictsLeastRecentlyUsed) {
  TempDir dir;
  jit::DiskObjectCache c(dir.path.string(), 250000);
  auto key = [](char ch) { return std::string(64, ch); };
  c.put(key('a'), std::string(100000, 'a'));
  c.put(key('b'), std::string(100000, 'b'));
  // Make 'a' the most recently used, then overflow the cap: 'b' goes.
  fs::last_write_time(dir.path / (key('b') + ".kc"), fs::file_time_type::clock::now() - std::chrono::hours(1));
  ASSERT_TRUE(c.get(key('a')));
  c.put(key('c'), std::string(100000, 'c'));
  EXPECT_TRUE(c.get(key('a')));
  EXPECT_FALSE(c.get(key('b')));
  EXPECT_TRUE(c.get(key('c')));
  EXPECT_LE(c.info().bytes, 250000);
  EXPECT_EQ(c.clear(), 2);
  EXPECT_EQ(c.info().entries, 0);
}

}  // namespace
