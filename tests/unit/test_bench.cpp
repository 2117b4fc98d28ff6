// The bench harness: statistics, arms, presets, plan round trip, SHA256SUMS parsing, and small
// end-to-end runs (tiny attention shapes, sub-millisecond targets): the archive layout,
// `sha256sum -c`, refusal of an existing folder, and failures recorded with their reason.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "bench/archive.h"
#include "bench/bench.h"
#include "bench/native.h"
#include "bench/presets.h"
#include "bench/statistics.h"
#include "jit/compile.h"

namespace kiln::bench {
namespace {

namespace fs = std::filesystem;

// A fresh, empty-named path under the temp folder (not created).
fs::path freshPath(const std::string& tag) {
  std::string tmpl = (fs::temp_directory_path() / ("kiln-bench-" + tag + "-XXXXXX")).string();
  char* made = mkdtemp(tmpl.data());
  EXPECT_NE(made, nullptr);
  fs::path dir(tmpl);
  return dir / "archive";
}

Case tinyCase(std::string id, std::string shape, bool full_packet) {
  Case c;
  c.id = std::move(id);
  c.label = c.id;
  c.request = {"attention", std::move(shape), {{"mask", "causal"}, {"block", "1x16"}}};
  c.knobs = {{"full_packet", full_packet ? "on" : "off"}, {"mma_indexable_snapshot", "off"}};
  return c;
}

// Two tiny cases, 1 cycle, 2 samples, 0.2 ms targets: a whole run takes well under a second.
Experiment tinyExperiment() {
  Experiment e;
  e.name = "tiny";
  e.description = "test";
  e.arms = {Arm{"cap0", {{"max_unrolled_mma_terms", "0"}}}, Arm{"cap8", {{"max_unrolled_mma_terms", "8"}}}};
  e.cases = {tinyCase("gqa", "1,2,1,1,33,16,16", false), tinyCase("mha", "1,8,8,1,20,8,8", true)};
  e.protocol.cycles = 1;
  e.protocol.samples = 2;
  e.protocol.warmup_ms = 0.2;
  e.protocol.target_ms = 0.2;
  return e;
}

TEST(BenchStatistics, MedianOfOddAndEvenCounts) {
  EXPECT_FALSE(median({}));
  EXPECT_EQ(*median({3.0}), 3.0);
  EXPECT_EQ(*median({5.0, 1.0, 3.0}), 3.0);
  EXPECT_EQ(*median({4.0, 1.0, 3.0, 2.0}), 2.5);
}

TEST(BenchStatistics, PairedRatiosFollowAbba) {
  // Cycle 1: A=2, B=3, B=4, A=8 -> 3/2, 4/8; an incomplete cycle is ignored.
  const std::vector<double> r = pairedRatios({2, 3, 4, 8, 1, 1});
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0], 1.5);
  EXPECT_EQ(r[1], 0.5);
  const Range g = *range(r);
  EXPECT_EQ(g.median, 1.0);
  EXPECT_EQ(g.min, 0.5);
  EXPECT_EQ(g.max, 1.5);
  EXPECT_EQ(sampleMicros(3000, 2), 1.5);
}

TEST(BenchExperiment, ParseArm) {
  Arm a;
  EXPECT_FALSE(parseArm("cap8:max_unrolled_mma_terms=8,full_packet=on", a));
  EXPECT_EQ(a.name, "cap8");
  ASSERT_EQ(a.knobs.size(), 2u);
  EXPECT_EQ(a.knobs[1].first, "full_packet");
  EXPECT_FALSE(parseArm("plain", a));
  EXPECT_TRUE(a.knobs.empty());
  EXPECT_TRUE(parseArm(":x=1", a));
  EXPECT_TRUE(parseArm("a:max_unrolled_mma_terms", a));
  auto err = parseArm("a:no_such_knob=1", a);
  ASSERT_TRUE(err);
  EXPECT_NE(err->find("no_such_knob"), std::string::npos) << *err;
  err = parseArm("a:packet_width=5", a);
  ASSERT_TRUE(err);
  EXPECT_NE(err->find("packet_width"), std::string::npos) << *err;
}

TEST(BenchPresets, SeedMmaRollIsTheSeedsDesign) {
  Experiment e;
  ASSERT_FALSE(preset("seed-mma-roll", false, e));
  ASSERT_EQ(e.cases.size(), 6u);
  EXPECT_EQ(e.arms[0].name, "cap0");
  EXPECT_EQ(e.arms[1].name, "cap8");
  const Totals t = plannedTotals(e);
  EXPECT_EQ(t.captures, 12);
  EXPECT_EQ(t.visits, 72);
  EXPECT_EQ(t.samples, 504);
  EXPECT_EQ(e.protocol.warmup_ms, 30);
  EXPECT_EQ(e.protocol.target_ms, 15);
  const std::vector<std::array<std::string, 5>> want = {{"decode D80", "1,8,2,1,2053,80,96", "1x16", "off", "4"},
                                                        {"decode D80", "1,8,2,1,2053,80,96", "1x16", "on", "4"},
                                                        {"MHA D64", "1,8,8,1,2048,64,64", "1x16", "off", "1"},
                                                        {"MHA D64", "1,8,8,1,2048,64,64", "1x16", "on", "1"},
                                                        {"prefill", "1,4,2,32,65,32,32", "4x16", "on", "1"},
                                                        {"decode tail-only", "1,6,2,1,2053,80,96", "1x16", "on", "4"}};
  for (size_t i = 0; i < want.size(); ++i) {
    const Case& c = e.cases[i];
    EXPECT_EQ(c.label, want[i][0]);
    EXPECT_EQ(c.request.shape, want[i][1]);
    EXPECT_EQ(c.request.options.at("block"), want[i][2]);
    EXPECT_EQ(c.request.options.at("mask"), "causal");
    for (int a = 0; a < 2; ++a) {
      plan::Knobs k;
      ASSERT_FALSE(resolveKnobs(c, e.arms[a], k));
      EXPECT_EQ(k.get("full_packet"), want[i][3]);
      EXPECT_EQ(k.get("mma_output_block"), want[i][4]);
      EXPECT_EQ(k.max_unrolled_mma_terms, a == 0 ? 0 : 8);
      EXPECT_EQ(k.packet_width, 8);
      EXPECT_EQ(k.block_size, 32);
      EXPECT_EQ(k.local_lanes, 1);
      EXPECT_EQ(k.max_unrolled_tile_elements, 64);
      EXPECT_EQ(k.max_unrolled_region_work, 4096);
      EXPECT_EQ(k.full_packet_budget, 4096);
      EXPECT_FALSE(k.fast_math);
      EXPECT_FALSE(k.mma_indexable_snapshot);
    }
  }
  ASSERT_FALSE(preset("seed-mma-roll", true, e));
  EXPECT_EQ(plannedTotals(e).visits, 24);
  EXPECT_EQ(plannedTotals(e).samples, 72);
}

TEST(BenchPresets, IndexableIsASeparateExperiment) {
  Experiment e;
  ASSERT_FALSE(preset("seed-mma-roll-indexable", false, e));
  EXPECT_EQ(e.name, "seed-mma-roll-indexable");
  ASSERT_EQ(e.cases.size(), 6u);
  for (int a = 0; a < 2; ++a) {
    plan::Knobs k;
    ASSERT_FALSE(resolveKnobs(e.cases[0], e.arms[a], k));
    EXPECT_EQ(k.max_unrolled_mma_terms, 8);
    EXPECT_EQ(k.mma_indexable_snapshot, a == 1);
  }
  auto err = preset("no-such-preset", false, e);
  ASSERT_TRUE(err);
  EXPECT_NE(err->find("seed-mma-roll"), std::string::npos);
}

TEST(BenchExperiment, PlanJsonRoundTrip) {
  Experiment e;
  ASSERT_FALSE(preset("seed-mma-roll", true, e));
  e.cases[2].held_out = true;
  const std::string text = jsonText(toJson(e));
  Experiment back;
  ASSERT_FALSE(fromJson(nlohmann::json::parse(text), back));
  EXPECT_EQ(jsonText(toJson(back)), text);
  EXPECT_TRUE(back.cases[2].held_out);
}

TEST(BenchArchive, SumsParserIsStrict) {
  const std::string h(64, 'a');
  std::vector<SumEntry> s;
  EXPECT_FALSE(parseSums(h + "  a.json\n" + h + "  b/c.f32\n", s));
  EXPECT_EQ(s.size(), 2u);
  EXPECT_TRUE(parseSums(h + "  a.json", s));                        // no newline
  EXPECT_TRUE(parseSums(h + " a.json\n", s));                       // one space
  EXPECT_TRUE(parseSums(std::string(63, 'a') + "A  a.json\n", s));  // uppercase
  EXPECT_TRUE(parseSums(h + "  b\n" + h + "  a\n", s));             // unsorted
  EXPECT_TRUE(parseSums(h + "  ../x\n", s));                        // escapes
  EXPECT_TRUE(parseSums("", s));                                    // empty
}

TEST(Bench, ArchiveIsCompleteAndChecksWithSha256sum) {
  const Experiment e = tinyExperiment();
  const fs::path dir = freshPath("layout");
  BenchOutcome out;
  const int64_t compiles_before = jit::compilationsInThisProcess();
  ASSERT_FALSE(runBench(e, dir.string(), {}, out));
  EXPECT_EQ(jit::compilationsInThisProcess() - compiles_before, 4);  // one per capture, none in replay
  EXPECT_TRUE(out.results.all_validated);
  EXPECT_EQ(out.results.done.captures, 4);
  EXPECT_EQ(out.results.done.visits, 8);
  EXPECT_EQ(out.results.done.samples, 16);
  EXPECT_EQ(out.results.compilations_during_replay, 0);
  for (const CaseResult& c : out.results.cases) {
    EXPECT_TRUE(c.ok) << c.reason;
    EXPECT_EQ(c.paired_ratios.size(), 2u);
    EXPECT_EQ(c.validations, 4 * (2 + 2));  // per visit: warmup, calibration, 2 samples
    EXPECT_TRUE(c.arms[0].median_us && c.arms[1].median_us && c.ratio);
  }
  for (const char* f :
       {"plan.json", "samples.json", "results.json", "table.md", "chart.svg", "environment.json", "SHA256SUMS"})
    EXPECT_TRUE(fs::is_regular_file(dir / f)) << f;
  for (const Case& c : e.cases)
    for (const Arm& a : e.arms) {
      const fs::path cap = dir / captureDir(c, a);
      for (const char* f : {"kernel.o", "report.json", "kernel.tile", "capture.json", "inputs/q.f32", "inputs/k.f32",
                            "inputs/v.f32", "inputs/o.f32", "outputs/o.f32", "reference/o.f64"})
        EXPECT_TRUE(fs::is_regular_file(cap / f)) << cap / f;
    }
  std::ifstream table(dir / "table.md");
  const std::string text((std::istreambuf_iterator<char>(table)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, out.table);
  EXPECT_NE(text.find("| case | P | R | cap0 µs | cap8 µs | paired cap8/cap0 | range |"), std::string::npos);
  const std::string cmd = "cd '" + dir.string() + "' && sha256sum --quiet -c SHA256SUMS";
  EXPECT_EQ(std::system(cmd.c_str()), 0);
  fs::remove_all(dir.parent_path());
}

TEST(Bench, ExistingOutputFolderIsRefused) {
  const fs::path dir = freshPath("exists");
  fs::create_directories(dir);
  std::ofstream(dir / "keep.txt") << "old results";
  BenchOutcome out;
  auto err = runBench(tinyExperiment(), dir.string(), {}, out);
  ASSERT_TRUE(err);
  EXPECT_NE(err->find("already exists"), std::string::npos) << *err;
  EXPECT_EQ(listFiles(dir), std::vector<std::string>{"keep.txt"});
  fs::remove_all(dir.parent_path());
}

TEST(Bench, CorruptedOutputDuringReplayIsRecordedAsFailure) {
  const Experiment e = tinyExperiment();
  const fs::path dir = freshPath("corrupt");
  BenchOptions options;
  int hook_calls = 0;
  options.replay.before_validation = [&](const VisitPoint& at, NativeKernel& k) {
    ++hook_calls;
    if (at.case_id == "gqa" && at.visit == 2 && at.after == "sample 1") {
      for (size_t i = 0; i < k.params.size(); ++i)
        if (k.params[i].output) k.buffers->view(i)[0] += 1.0f;
    }
  };
  BenchOutcome out;
  ASSERT_FALSE(runBench(e, dir.string(), options, out));
  EXPECT_FALSE(out.results.all_validated);
  const CaseResult& bad = out.results.cases[0];
  EXPECT_FALSE(bad.ok);
  EXPECT_NE(bad.reason.find("visit 3 (cycle 1, arm cap8) after sample 1"), std::string::npos) << bad.reason;
  EXPECT_NE(bad.reason.find("output 'o' differs from the capture at element 0"), std::string::npos) << bad.reason;
  EXPECT_EQ(bad.visits, 3);           // stopped at the failure, never re-run
  EXPECT_EQ(bad.samples, 2 + 2 + 1);  // every sample taken is kept
  EXPECT_FALSE(bad.ratio);
  EXPECT_TRUE(out.results.cases[1].ok) << out.results.cases[1].reason;
  EXPECT_NE(out.table.find("FAILED"), std::string::npos);
  EXPECT_NE(out.table.find("output 'o' differs"), std::string::npos);
  std::ifstream samples(dir / "samples.json");
  const nlohmann::json j = nlohmann::json::parse(samples);
  EXPECT_EQ(j["cases"][0]["status"], "failed");
  EXPECT_EQ(j["cases"][0]["visits"][2]["validations"].back()["ok"], false);
  fs::remove_all(dir.parent_path());
}

TEST(Bench, CorruptedGuardIsRecordedAsFailure) {
  const Experiment e = tinyExperiment();
  const fs::path dir = freshPath("guard");
  BenchOptions options;
  options.replay.before_validation = [&](const VisitPoint& at, NativeKernel& k) {
    if (at.case_id == "mha" && at.visit == 0 && at.after == "warmup") {
      float* q = k.buffers->view(0).data();
      reinterpret_cast<unsigned char*>(q)[-1] ^= 0xFF;  // the last byte of q's leading guard
    }
  };
  BenchOutcome out;
  ASSERT_FALSE(runBench(e, dir.string(), options, out));
  EXPECT_TRUE(out.results.cases[0].ok) << out.results.cases[0].reason;
  const CaseResult& bad = out.results.cases[1];
  EXPECT_FALSE(bad.ok);
  EXPECT_NE(bad.reason.find("after warmup: guard bytes corrupted"), std::string::npos) << bad.reason;
  EXPECT_EQ(bad.visits, 1);
  EXPECT_EQ(bad.samples, 0);
  fs::remove_all(dir.parent_path());
}

TEST(Bench, FailedCaptureIsKeptWithItsReason) {
  Experiment e = tinyExperiment();
  e.cases[0].request.shape = "1,3,2,1,33,16,16";  // Hq not a multiple of Hkv: the build fails
  const fs::path dir = freshPath("capture");
  BenchOutcome out;
  ASSERT_FALSE(runBench(e, dir.string(), {}, out));
  const CaseResult& bad = out.results.cases[0];
  EXPECT_FALSE(bad.ok);
  EXPECT_NE(bad.reason.find("capture of arm cap0 failed: build:"), std::string::npos) << bad.reason;
  EXPECT_EQ(bad.visits, 0);
  EXPECT_TRUE(out.results.cases[1].ok);
  EXPECT_EQ(out.results.done.captures, 2);
  EXPECT_TRUE(fs::is_regular_file(dir / "captures/gqa/cap0/capture.json"));
  fs::remove_all(dir.parent_path());
}

}  // namespace
}  // namespace kiln::bench
