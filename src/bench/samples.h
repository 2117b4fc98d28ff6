// What the replay phase measured and checked, visit by visit: samples.json. Every sample and
// every validation is kept, also those of a case that failed.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "bench/experiment.h"

namespace kiln::bench {

struct Validation {
  std::string after;  // "warmup", "calibration", "sample 1", "sample 2", ...
  bool ok = true;
  std::string reason;  // empty when ok
};

struct Sample {
  int64_t batch_ns = 0;  // steady_clock time of `reps` back-to-back launches
  int64_t reps = 0;
  double us = 0.0;  // sampleMicros(batch_ns, reps)
};

struct Visit {
  int cycle = 0;     // 0-based
  int position = 0;  // 0..3 within the cycle (A,B,B,A)
  int arm = 0;       // kAbba[position]
  int64_t warmup_launches = 0;
  int64_t warmup_ns = 0;
  int64_t calibration_reps = 0;  // the calibration batch
  int64_t calibration_ns = 0;
  int64_t reps = 0;  // launches per sample batch
  std::vector<Sample> samples;
  std::vector<Validation> validations;

  // Every planned sample taken, every validation passed.
  bool complete(int planned_samples) const;
};

struct CaseReplay {
  std::string id;
  std::string status = "ok";  // "ok", "failed" (a validation failed), "not_run" (no capture)
  std::string reason;         // empty when ok
  std::vector<Visit> visits;  // in the order they ran
};

struct Replay {
  int cpu = -1;                   // the CPU the replay thread was pinned to
  int64_t compilations = 0;       // compileToObject calls during the replay (must be 0)
  std::vector<CaseReplay> cases;  // in plan order
};

nlohmann::ordered_json toJson(const Replay& r, const Experiment& e);
std::optional<std::string> fromJson(const nlohmann::json& j, const Experiment& e, Replay& out);

}  // namespace kiln::bench
