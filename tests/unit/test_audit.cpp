// The offline audit: it passes on a fresh archive, prints the same bytes on every run, runs
// no compiler, and fails after a single-byte change to any archived file, of every kind —
// also when SHA256SUMS is re-sealed after tampering with a number.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include "audit/audit.h"
#include "bench/archive.h"
#include "bench/bench.h"
#include "jit/compile.h"

namespace kiln::audit {
namespace {

namespace fs = std::filesystem;

// Two arms (max_unrolled_mma_terms 0 and 8) over one case, the shortest protocol.
bench::Experiment tinyExperiment(const std::string& name, const bench::Case& c) {
  bench::Experiment e;
  e.name = name;
  e.arms = {bench::Arm{"cap0", {{"max_unrolled_mma_terms", "0"}}},
            bench::Arm{"cap8", {{"max_unrolled_mma_terms", "8"}}}};
  e.cases = {c};
  e.protocol.cycles = 1;
  e.protocol.samples = 2;
  e.protocol.warmup_ms = 0.2;
  e.protocol.target_ms = 0.2;
  return e;
}

class Audit : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::string tmpl = (fs::temp_directory_path() / "kiln-audit-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    root_ = new fs::path(tmpl);
    bench::Case c;
    c.id = "gqa";
    c.label = "GQA tiny";
    c.request = {"attention", "1,2,1,1,33,16,16", {{"mask", "causal"}, {"block", "1x16"}}};
    c.knobs = {{"mma_indexable_snapshot", "off"}};
    const bench::Experiment e = tinyExperiment("tiny", c);
    bench::BenchOutcome out;
    auto err = bench::runBench(e, archive().string(), {}, out);
    ASSERT_FALSE(err) << *err;
  }
  static void TearDownTestSuite() {
    fs::remove_all(*root_);
    delete root_;
  }
  static fs::path archive() { return *root_ / "archive"; }

  // A copy of the archive to tamper with.
  static fs::path copy(const std::string& tag) {
    const fs::path dst = *root_ / tag;
    fs::remove_all(dst);
    fs::copy(archive(), dst, fs::copy_options::recursive);
    return dst;
  }

  static fs::path* root_;
};
fs::path* Audit::root_ = nullptr;

std::string readAll(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}
void writeAll(const fs::path& p, const std::string& s) {
  std::ofstream(p, std::ios::binary | std::ios::trunc) << s;
}
void reseal(const fs::path& dir) {
  fs::remove(dir / bench::kSumsFile);
  std::string sums;
  bench::Archive a(dir);
  ASSERT_FALSE(bench::sumsText(a, sums));
  writeAll(dir / bench::kSumsFile, sums);
}

TEST_F(Audit, PassesAndIsByteIdenticalOnTwoRuns) {
  const int64_t compiles = jit::compilationsInThisProcess();
  const Report r1 = auditArchive(archive().string());
  const Report r2 = auditArchive(archive().string());
  EXPECT_EQ(jit::compilationsInThisProcess(), compiles);
  for (const Check& c : r1.checks) EXPECT_TRUE(c.pass) << c.name << ": " << c.detail;
  EXPECT_TRUE(r1.pass());
  EXPECT_EQ(reportText(r1), reportText(r2));
  EXPECT_NE(reportText(r1).find("\"verdict\": \"pass\""), std::string::npos);
  // The report names no path: a copy elsewhere audits to the same bytes.
  EXPECT_EQ(reportText(auditArchive(copy("moved").string())), reportText(r1));
}

TEST_F(Audit, EverySingleByteChangeOfEveryFileKindFails) {
  const std::vector<std::string> files = {"captures/gqa/cap0/kernel.o",
                                          "captures/gqa/cap8/report.json",
                                          "captures/gqa/cap0/inputs/k.f32",
                                          "captures/gqa/cap0/inputs/o.f32",
                                          "captures/gqa/cap8/outputs/o.f32",
                                          "captures/gqa/cap0/reference/o.f64",
                                          "captures/gqa/cap8/capture.json",
                                          "captures/gqa/cap0/kernel.tile",
                                          "samples.json",
                                          "results.json",
                                          "plan.json",
                                          "environment.json",
                                          "table.md",
                                          "chart.svg",
                                          "SHA256SUMS"};
  // Every file of the archive is of one of these kinds.
  auto kindOf = [](const std::string& rel) {
    const fs::path p(rel);
    if (rel.rfind("captures/", 0) != 0) return rel;
    const fs::path parent = p.parent_path().filename();
    return parent == "inputs" || parent == "outputs" || parent == "reference"
               ? parent.string() + "/*" + p.extension().string()
               : p.filename().string();
  };
  std::set<std::string> tested;
  for (const std::string& f : files) tested.insert(kindOf(f));
  for (const std::string& f : bench::listFiles(archive()))
    EXPECT_TRUE(tested.count(kindOf(f))) << "no tamper test for " << f;
  int n = 0;
  for (const std::string& f : files) {
    const size_t size = fs::file_size(archive() / f);
    ASSERT_GT(size, 0u) << f;
    for (size_t at : {size_t{0}, size / 2, size - 1}) {
      const fs::path dir = copy("flip" + std::to_string(n++));
      std::string bytes = readAll(dir / f);
      bytes[at] = static_cast<char>(bytes[at] ^ 0x01);
      writeAll(dir / f, bytes);
      const Report r = auditArchive(dir.string());
      EXPECT_FALSE(r.pass()) << f << " byte " << at;
      EXPECT_NE(reportText(r).find("\"verdict\": \"fail\""), std::string::npos);
      fs::remove_all(dir);
    }
  }
}

TEST_F(Audit, MissingAndExtraFilesFail) {
  fs::path dir = copy("missing");
  fs::remove(dir / "chart.svg");
  EXPECT_FALSE(auditArchive(dir.string()).pass());
  dir = copy("extra");
  writeAll(dir / "notes.txt", "added later");
  EXPECT_FALSE(auditArchive(dir.string()).pass());
  EXPECT_FALSE(auditArchive((*root_ / "no-such-archive").string()).pass());
}

// Re-sealing SHA256SUMS after the change: the content checks still catch it.
TEST_F(Audit, TamperedNumbersAreCaughtEvenWhenResealed) {
  struct Tamper {
    std::string file, from, to, check;
  };
  const std::string samples = readAll(archive() / "samples.json");
  const size_t ns = samples.find("\"batch_ns\": ") + 12;
  const std::string digit(1, samples[ns]);
  const std::string other(1, digit == "9" ? '1' : static_cast<char>(digit[0] + 1));
  const std::vector<Tamper> tampers = {
      {"samples.json", "\"batch_ns\": " + digit, "\"batch_ns\": " + other, "samples:"},
      {"results.json", "\"median_us\": ", "\"median_us\": 1", "results:"},
      {"plan.json", "\"samples_per_visit\": 2", "\"samples_per_visit\": 3", "plan:"},
      {"table.md", "| GQA tiny |", "| GQA tinY |", "table:"},
      {"chart.svg", "GQA tiny", "GQA tinY", "chart:"},
      {"captures/gqa/cap0/capture.json", "\"max_abs_err\": ", "\"max_abs_err\": 1", "capture gqa/cap0: outputs"},
  };
  for (const Tamper& t : tampers) {
    const fs::path dir = copy("reseal");
    std::string text = readAll(dir / t.file);
    const size_t at = text.find(t.from);
    ASSERT_NE(at, std::string::npos) << t.file << ": " << t.from;
    text.replace(at, t.from.size(), t.to);
    writeAll(dir / t.file, text);
    reseal(dir);
    const Report r = auditArchive(dir.string());
    EXPECT_FALSE(r.pass()) << t.file;
    bool named = false;
    for (const Check& c : r.checks) named = named || (!c.pass && c.name.rfind(t.check, 0) == 0);
    EXPECT_TRUE(named) << t.file << " should fail the check " << t.check << "\n" << reportText(r);
  }
  // An output that differs from the FP64 reference by more than the tolerance.
  const fs::path dir = copy("reseal-output");
  std::string out = readAll(dir / "captures/gqa/cap8/outputs/o.f32");
  float v;
  std::memcpy(&v, out.data(), 4);
  v += 0.5f;
  std::memcpy(out.data(), &v, 4);
  writeAll(dir / "captures/gqa/cap8/outputs/o.f32", out);
  reseal(dir);
  const Report r = auditArchive(dir.string());
  bool caught = false;
  for (const Check& c : r.checks)
    caught = caught || (!c.pass && c.name == "capture gqa/cap8: outputs within tolerance of the FP64 reference");
  EXPECT_TRUE(caught) << reportText(r);
}

// A bench archive of case `c` (tinyExperiment) in a fresh folder under the temp folder, every
// case validated; the caller removes its parent.
fs::path benchOf(const std::string& tag, const bench::Case& c) {
  std::string tmpl = (fs::temp_directory_path() / ("kiln-audit-" + tag + "-XXXXXX")).string();
  EXPECT_NE(mkdtemp(tmpl.data()), nullptr);
  const fs::path dir = fs::path(tmpl) / "archive";
  bench::BenchOutcome out;
  auto err = bench::runBench(tinyExperiment(tag, c), dir.string(), {}, out);
  EXPECT_FALSE(err) << *err;
  for (const bench::CaseResult& r : out.results.cases) EXPECT_TRUE(r.ok) << r.reason;
  return dir;
}

void expectAuditPasses(const fs::path& dir) {
  const Report r = auditArchive(dir.string());
  for (const Check& k : r.checks) EXPECT_TRUE(k.pass) << k.name << ": " << k.detail;
  EXPECT_TRUE(r.pass());
}

// A gemm of a long K (16 x 16 x 65536): its FP32 sums drift past 5e-5 + 5e-5·|ref|, within gemm's
// own rounding allowance (kernels::libraryAllowance); the bench capture's oracle and the audit's
// re-check both apply it, so the archive validates and audits clean.
TEST(AuditGemm, LongKPassesWithItsRoundingAllowance) {
  bench::Case c;
  c.id = "long_k";
  c.label = "gemm 16x16x65536";
  c.request = {"gemm", "16,16,65536", {}};
  const fs::path dir = benchOf("gemm-long-k", c);
  ASSERT_FALSE(::testing::Test::HasFailure());
  expectAuditPasses(dir);
  fs::remove_all(dir.parent_path());
}

// Views in their own storage: bf16 K and V, int32 lengths of a dense KV cache and a bf16
// output (attention --out-dtype bf16). The archive holds each as the kernel's memory
// (inputs/k.bf16, inputs/lens.i32, outputs/o.bf16, of the views' byte sizes); the replay
// validates against those bytes and the audit re-derives the inputs, the FP64 reference and
// the oracle from them.
TEST(AuditTypedViews, HalfAndIntegerViewsAreArchivedAsTheirMemory) {
  bench::Case c;
  c.id = "cache";
  c.label = "bf16 KV cache";
  c.request = {"attention",
               "2,4,2,1,40,16,8",
               {{"kv-dtype", "bf16"}, {"kv-cache", "dense"}, {"out-dtype", "bf16"}, {"block", "1x16"}}};
  const fs::path dir = benchOf("typed", c);
  ASSERT_FALSE(::testing::Test::HasFailure());
  const fs::path tmpl = dir.parent_path();
  const fs::path cap = dir / "captures/cache/cap0";
  EXPECT_EQ(fs::file_size(cap / "inputs/k.bf16"), 2u * (2 * 2 * 40 * 16));
  EXPECT_EQ(fs::file_size(cap / "inputs/v.bf16"), 2u * (2 * 2 * 40 * 8));
  EXPECT_EQ(fs::file_size(cap / "inputs/lens.i32"), 4u * 2);
  EXPECT_EQ(fs::file_size(cap / "inputs/q.f32"), 4u * (2 * 4 * 16));
  EXPECT_EQ(fs::file_size(cap / "outputs/o.bf16"), 2u * (2 * 4 * 8));
  EXPECT_NE(readAll(cap / "capture.json").find("\"elem\": \"bf16\""), std::string::npos);
  expectAuditPasses(dir);
  // A bf16 input file of the wrong size fails the audit (resealed, so only the size is wrong).
  const fs::path bad = tmpl / "bad";
  fs::copy(dir, bad, fs::copy_options::recursive);
  writeAll(bad / "captures/cache/cap8/inputs/k.bf16", readAll(cap / "inputs/k.bf16") + "xy");
  reseal(bad);
  EXPECT_FALSE(auditArchive(bad.string()).pass());
  fs::remove_all(tmpl);
}

}  // namespace
}  // namespace kiln::audit
