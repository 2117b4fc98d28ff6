// kiln-replay: run a GPU archive's cases on the device, check them bit-exactly, time them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "archive.h"
#include "gpu/cuda_driver.h"

namespace kiln::replay {

struct Options {
  std::string archive;
  std::string out = ".";
  std::string dump;                // empty: no dump
  int visits = 3;                  // timed visits
  double min_visit_ms = 20.0;      // a case's timed sequences per visit last at least this long
  int max_reps = 200;              // ... but are at most this many
  double hysteresis = 1.5;         // limit of max/min of a case's visit medians
  std::vector<std::string> cases;  // empty: all
  bool check_archive = false;      // parse and check inputs only, no GPU
};

struct PhaseResult {
  std::string entry;
  uint64_t programs = 0;
  uint64_t threads_per_block = 0;
  uint64_t grid = 0;
  uint64_t dynamic_shared_bytes = 0;
  bool have_attributes = false;
  gpu::FunctionAttributes attributes;
};

struct OutputResult {
  std::string name;
  uint64_t elements = 0;           // 32-bit words
  Storage storage = Storage::k32;  // the view's STORAGE
  bool digest_only = false;        // compared by digest only (mode "digest")
  uint64_t mismatches = 0;         // per element (16-bit ones for 16-bit storage); 1 for a digest mismatch
  int64_t first_mismatch = -1;     // element index, -1 when bit-exact or unknown (digest_only)
  uint32_t got_bits = 0;           // at first_mismatch (16-bit values for 16-bit storage)
  uint32_t expected_bits = 0;
  std::string message;  // a digest-only output's mismatch
  bool downloaded = false;
  uint64_t gpu_digest = 0;  // FNV-1a 64 of the GPU's bytes (when downloaded)
  uint64_t expected_digest = 0;
};

struct VisitStats {
  double kernel_ms_median = 0, kernel_ms_min = 0, kernel_ms_max = 0;
  double wall_ms_median = 0;
};

struct CaseTiming {
  int reps = 0;  // timed sequences per visit
  std::vector<VisitStats> visits;
  std::vector<double> kernel_ms, wall_ms;  // every timed sequence, all visits
  double kernel_us_median = 0, kernel_us_min = 0, kernel_us_max = 0, wall_us_median = 0;
  std::vector<double> phase_us_median;  // per phase, from sequences with an event between phases
  double hysteresis_ratio = 0;          // max/min of the visit medians
  bool flagged = false;                 // hysteresis_ratio > the limit
  bool accepted = false;                // the set was accepted (and this case not flagged)
};

struct CaseResult {
  std::string name;
  std::string source;
  // "pass", "mismatch", "error", "input_digest_mismatch", "not_run"
  std::string status = "not_run";
  std::string message;
  std::vector<PhaseResult> phases;
  std::vector<OutputResult> outputs;
  double jit_ms = -1;  // cuModuleLoadDataEx wall time, -1 when not loaded
  std::string jit_log;
  double flops = 0, bytes = 0;
  std::optional<CaseTiming> timing;
  std::string timing_error;  // a CUDA error while timing this case
};

struct HealthStep {
  std::string name;  // "empty_sync", "copy_1mib", "tiny_kernel"
  bool pass = false;
  double us = 0;  // median of the samples
  double limit_us = 0;
  std::vector<double> samples_us;
  std::string message;  // the failure, or what was checked
};

struct Health {
  bool pass = false;
  std::vector<HealthStep> steps;
};

struct TimingSet {
  bool ran = false;
  bool accepted = false;
  std::vector<std::string> reasons;  // why refused
  Health before, after;
  double hysteresis_limit = 1.5;
  std::vector<std::string> cases;  // the timed cases, in order
};

struct Report {
  std::string archive;
  gpu::DeviceInfo device;
  std::vector<CaseResult> cases;
  TimingSet timing;
  bool context_lost = false;
};

// The health steps (empty sync, 1 MiB copy round trip, tiny kernel); needs a current context.
Health runHealth(const gpu::CudaDriver& driver);

// Runs every selected case (correctness pass, then the timed set); fills `report`.
void runReplay(const gpu::CudaDriver& driver, const Archive& archive, const Options& options, Report& report);

// replay.json, gpu-acceptance.json; false (with `error`) when a file cannot be written.
bool writeReports(const Report& report, const Options& options, std::string& error);
// The human table on stdout.
void printTable(const Report& report);

double median(std::vector<double> values);

}  // namespace kiln::replay
