// Every example kernel, compiled natively, matches the strict-FP32 interpreter bit for bit
// (and the FP64 oracle within tolerance) across a covering set of the knob grid.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "driver/check.h"
#include "ir/diag.h"
#include "ir/parser.h"

namespace {

using kiln::driver::CheckMode;

std::vector<std::string> examples() {
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(std::string(KILN_SOURCE_DIR) + "/examples"))
    if (e.path().extension() == ".tile") files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  return files;
}

// The grid of the issue, covered knob by knob (each value of each knob against the defaults)
// plus the seed's configuration and a few mixed points; the exhaustive product is
// scripts/sweep-grid.sh.
std::vector<std::vector<std::string>> knobPoints() {
  std::vector<std::vector<std::string>> pts = {{}};
  for (const char* w : {"1", "4", "16"}) pts.push_back({std::string("packet_width=") + w, "block_size=32"});
  for (const char* r : {"2", "4"}) pts.push_back({std::string("mma_output_block=") + r});
  pts.push_back({"max_unrolled_mma_terms=8"});
  for (const char* t : {"0", "16"}) pts.push_back({std::string("max_unrolled_tile_elements=") + t});
  pts.push_back({"full_packet=on"});
  pts.push_back({"reduction_partitions=1"});
  pts.push_back({"mma_indexable_snapshot=off", "max_unrolled_mma_terms=8"});
  pts.push_back({"threads=2"});
  pts.push_back({"fuse_recipes=off"});
  // The seed's configuration: W8, block 32, local 1, tile 64, region 4096, R4, cap 8, clone on.
  pts.push_back({"packet_width=8", "block_size=32", "local_lanes=1", "max_unrolled_tile_elements=64",
                 "max_unrolled_region_work=4096", "mma_output_block=4", "max_unrolled_mma_terms=8", "full_packet=on",
                 "mma_indexable_snapshot=off"});
  pts.push_back({"packet_width=4", "block_size=8", "mma_output_block=2", "max_unrolled_tile_elements=16",
                 "full_packet=on", "threads=2", "reduction_partitions=4"});
  return pts;
}

class Examples : public ::testing::TestWithParam<std::string> {};

TEST_P(Examples, BitexactAcrossKnobGrid) {
  kiln::ir::DiagEngine diag;
  auto kernel = kiln::ir::parseFile(GetParam(), diag);
  ASSERT_TRUE(kernel) << diag.str();
  for (const auto& point : knobPoints()) {
    kiln::plan::Knobs knobs;
    std::string label;
    for (const auto& s : point) {
      ASSERT_FALSE(knobs.setAssignment(s).has_value()) << s;
      label += s + " ";
    }
    for (CheckMode mode : {CheckMode::Bitexact, CheckMode::F64}) {
      kiln::driver::CheckOptions opts;
      opts.mode = mode;
      kiln::driver::CheckResult r;
      auto err = kiln::driver::check(*kernel, knobs, opts, r);
      ASSERT_FALSE(err.has_value()) << label << ": " << *err;
      EXPECT_TRUE(r.pass) << GetParam() << " [" << label << "] mode "
                          << (mode == CheckMode::Bitexact ? "bitexact" : "f64") << " max_abs " << r.max_abs_err;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(All, Examples, ::testing::ValuesIn(examples()),
                         [](const auto& info) { return std::filesystem::path(info.param).stem().string(); });

}  // namespace
