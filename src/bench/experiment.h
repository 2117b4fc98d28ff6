// An experiment, declared before anything runs: two arms (planner settings) × cases (a library
// kernel, a shape, options, shared knobs), and the protocol. It is the archive's plan.json, and
// what the audit checks the archive's counts against.
// Expects: names made of [A-Za-z0-9_.-] (they become folder names). Guarantees: validate()
// names the first problem (a bad name, a knob outside its range, a protocol value out of range).
#pragma once

#include <nlohmann/json.hpp>

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kernels/registry.h"
#include "plan/knobs.h"

namespace kiln::bench {

// Knob assignments as written (name, text value), applied in order by plan::Knobs::set.
using KnobSettings = std::vector<std::pair<std::string, std::string>>;

struct Arm {
  std::string name;
  KnobSettings knobs;  // applied after the case's knobs
};

struct Case {
  std::string id;     // folder name and key, e.g. "decode-d80-p-on-r4"
  std::string label;  // the table's case column, e.g. "decode D80"
  kernels::LibraryRequest request;
  KnobSettings knobs;     // applied to both arms, after the defaults
  bool held_out = false;  // declared in advance as not used to choose settings
};

struct Protocol {
  int cycles = 3;         // A,B,B,A cycles per case
  int samples = 7;        // samples per visit
  double warmup_ms = 30;  // per visit, before calibration
  double target_ms = 15;  // wall time one sample batch aims at
  uint64_t seed = 0;      // of the deterministic inputs (host::makeInputs)
  double atol = 5e-5;     // oracle tolerance: |got - ref| <= atol + rtol * |ref|
  double rtol = 5e-5;
};

struct Experiment {
  std::string name;  // e.g. "seed-mma-roll", or "custom"
  std::string description;
  std::array<Arm, 2> arms;  // A (the baseline, the ratio's denominator), B
  std::vector<Case> cases;
  Protocol protocol;
  bool quick = false;
};

// Arm index of each visit position in one cycle: A, B, B, A.
inline constexpr std::array<int, 4> kAbba = {0, 1, 1, 0};

struct Totals {
  int64_t captures = 0;
  int64_t visits = 0;
  int64_t samples = 0;
};
Totals plannedTotals(const Experiment& e);

// nullopt when every name, knob and protocol value is legal.
std::optional<std::string> validate(const Experiment& e);

// Knobs of (case, arm): the defaults, then the case's settings, then the arm's.
std::optional<std::string> resolveKnobs(const Case& c, const Arm& a, plan::Knobs& out);

// "NAME:k=v,k=v" (the settings may be empty: "NAME:" or "NAME").
std::optional<std::string> parseArm(const std::string& text, Arm& out);

// plan.json, and back. fromJson(toJson(e)) == e; the audit re-serialises and compares bytes.
nlohmann::ordered_json toJson(const Experiment& e);
std::optional<std::string> fromJson(const nlohmann::json& j, Experiment& out);

// Files and JSON text as every archive file is written: 2-space indent, trailing newline.
std::string jsonText(const nlohmann::ordered_json& j);

}  // namespace kiln::bench
