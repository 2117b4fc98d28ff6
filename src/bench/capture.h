// Phase 1, capture: compile one (case, arm) once, run the object once on the deterministic
// inputs (guarded), compare with the library's FP64 reference, and write the capture folder:
//   captures/CASE/ARM/kernel.o          the exact object that replay runs
//   captures/CASE/ARM/report.json       the realization report
//   captures/CASE/ARM/kernel.tile       the kernel's TileIR text
//   captures/CASE/ARM/inputs/P.T        every view's bytes before the launch (T: its element
//                                       type, f32 f16 bf16 i32 i64: the memory the kernel reads)
//   captures/CASE/ARM/outputs/P.T       every written view's bytes after the launch
//   captures/CASE/ARM/reference/P.f64   the FP64 reference of every written view
//   captures/CASE/ARM/capture.json      parameters (shapes, roles, scalars), identity, oracle
// A failure (bad request, compile error, launch error, corrupted guards, oracle mismatch) is
// recorded in capture.json with its reason, with every file produced so far; never thrown.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "bench/archive.h"
#include "bench/experiment.h"
#include "host/data.h"
#include "ir/ir.h"
#include "runtime/runtime.h"

namespace kiln::bench {

struct ParamInfo {
  std::string name;
  runtime::ParamKind kind = runtime::ParamKind::View;
  std::vector<int64_t> shape;     // views
  ir::Elem elem = ir::Elem::F32;  // views: the element type of its memory
  bool output = false;            // a view the kernel writes
  int64_t i64 = 0;                // i64 scalar value
  float f32 = 0.0f;               // f32 scalar value

  int64_t elements() const;
  int64_t elemBytes() const { return ir::elemBytes(elem); }
};

// A view's values (`data`: f32, f16 and bf16 views' values as floats; `ints`: an integer view's)
// as its memory holds them, little-endian (16-bit floats as their bits), and back. Error: an
// element that is not a value of the view's type, or bytes of another size.
std::optional<std::string> bytesOfView(const ParamInfo& p, const host::ParamData& data, std::string& out);
std::optional<std::string> valuesOfView(const ParamInfo& p, std::string_view bytes, host::ParamData& out);
// Error unless `bytes` is exactly the view's size.
std::optional<std::string> checkViewBytes(const ParamInfo& p, std::string_view bytes);
// An output as the oracle compares it with the FP64 reference (capture and audit alike): its
// values as floats (an integer view's converted), and the storage the comparison allows for
// (f16/bf16: the reference rounded to the type; otherwise f32).
std::vector<float> oracleValues(const ParamInfo& p, const host::ParamData& values);
ir::Elem oracleStorage(const ParamInfo& p);

struct OracleOutput {
  std::string name;
  bool pass = true;
  double max_abs_err = 0.0;
  double max_rel_err = 0.0;
  int64_t first_bad = -1;
};

struct CaptureRecord {
  std::string case_id;
  std::string arm;
  bool ok = false;
  std::string reason;  // "STAGE: message" when not ok
  std::vector<ParamInfo> params;
  // Elements of each workspace of the kernel (docs/ir.md, "Phases and workspaces"), in order:
  // buffers the replay passes after the parameters, zero-filled whenever the views are reset.
  std::vector<int64_t> workspaces;
  std::string object_sha256;  // empty when there is no object
  int64_t object_bytes = 0;
  std::vector<OracleOutput> oracle;
  int64_t packets_full = 0;
  int64_t packets_masked = 0;
};

// "captures/CASE/ARM"
std::string captureDir(const Case& c, const Arm& a);
// File of a view in a capture folder: "inputs/NAME.T", "outputs/NAME.T" (T the view's element
// type: f32, f16, bf16, i32, i64), "reference/NAME.f64".
std::string inputFile(const ParamInfo& p);
std::string outputFile(const ParamInfo& p);
std::string referenceFile(const ParamInfo& p);

// Runs phase 1 for arm `arm` of case `case_index` and writes its folder. An error only for
// archive I/O (the capture itself records its failures).
std::optional<std::string> capture(const Experiment& e, size_t case_index, int arm, Archive& archive,
                                   CaptureRecord& out);

nlohmann::ordered_json toJson(const CaptureRecord& r, const Protocol& p);
std::optional<std::string> fromJson(const nlohmann::json& j, CaptureRecord& out);

// The parameter signature the object expects, from the recorded parameters.
std::vector<runtime::ParamSpec> signatureOf(const std::vector<ParamInfo>& params);

}  // namespace kiln::bench
