// GPU capture: CPU run + interpreter check, PTX, manifest (docs/gpu/archive-format.md).
#include "driver/gpu_capture.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "codegen/lower.h"
#include "driver/compile.h"
#include "ir/printer.h"

namespace kiln::driver {
namespace {

namespace fs = std::filesystem;

std::optional<std::string> writeFile(const fs::path& path, const void* data, size_t n) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) return "cannot write " + path.string();
  f.write(static_cast<const char*>(data), static_cast<std::streamsize>(n));
  if (!f) return "cannot write " + path.string();
  return std::nullopt;
}

bool legalCaseName(const std::string& s) {
  if (s.empty() || s.size() > 100) return false;
  for (char c : s)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
          c == '-'))
      return false;
  return true;
}

}  // namespace

std::string fnv1a64Hex(const void* data, size_t n) {
  uint64_t h = 0xcbf29ce484222325ULL;
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ULL;
  }
  return fmt::format("{:016x}", h);
}

std::optional<std::string> captureGpuCase(const ir::Kernel& kernel, const plan::Knobs& knobs,
                                          const GpuCaptureOptions& options, GpuCaptureResult& out) {
  if (!legalCaseName(options.case_name))
    return fmt::format("case name '{}' is not 1-100 letters, digits, '.', '_' or '-'", options.case_name);
  if (knobs.fast_math)
    return "fast_math=true: a GPU capture is checked bit for bit against the interpreter, which needs precise mode";

  // 1. The CPU: bit for bit against the strict-f32 interpreter, then the FP64 oracle.
  plan::Knobs cpu = knobs;
  cpu.target = target::Kind::Cpu;
  CheckOptions bitexact = options.f64;
  bitexact.mode = CheckMode::Bitexact;
  bitexact.seed = options.seed;
  CheckResult exact;
  if (auto e = check(kernel, cpu, bitexact, exact)) return "CPU run: " + *e;
  out.cpu_bitexact = exact.pass;
  out.plan_vs_code = exact.plan_vs_code;
  CheckOptions f64 = options.f64;
  f64.mode = CheckMode::F64;
  f64.seed = options.seed;
  CheckResult approx;
  if (auto e = check(kernel, cpu, f64, approx)) return "CPU run (f64 check): " + *e;
  out.cpu_f64 = approx.pass;
  if (!out.cpu_bitexact || !out.cpu_f64) return std::nullopt;

  // 2. The GPU's PTX, from the same knobs.
  plan::Knobs gpu = knobs;
  gpu.target = target::Kind::Nvptx;
  Compilation c;
  if (auto e = compile(kernel, gpu, c, Stage::Report)) return "nvptx compilation: " + *e;
  out.gpu_report = c.report;

  // 3. The archive's case.
  const fs::path dir = fs::path(options.archive) / options.case_name;
  std::error_code ec;
  fs::create_directories(dir / "expected", ec);
  if (ec) return "cannot create " + (dir / "expected").string() + ": " + ec.message();
  out.case_dir = dir.string();
  if (auto e = writeFile(dir / "kernel.ptx", c.object.data(), c.object.size())) return e;
  const std::string tile = ir::print(kernel);
  if (auto e = writeFile(dir / "kernel.tile", tile.data(), tile.size())) return e;
  const std::string report = c.report.dump(2) + "\n";
  if (auto e = writeFile(dir / "report.json", report.data(), report.size())) return e;

  std::vector<host::ParamData> inputs;
  if (auto e = host::makeInputs(kernel, options.seed, options.f64.scalar_args, inputs)) return e;
  std::vector<bool> loaded(kernel.params.size(), false), written(kernel.params.size(), false);
  for (const ir::Value* v : kernel.inputs()) loaded[v->index] = true;
  for (const ir::Value* v : kernel.outputs()) written[v->index] = true;

  std::ostringstream m;
  m << "kiln-gpu-archive 1\n";
  m << "case " << options.case_name << "\n";
  m << "source " << options.source << "\n";
  m << "seed " << options.seed << "\n";
  double bytes = 0;
  std::ostringstream outputs;
  for (size_t i = 0; i < kernel.params.size(); ++i) {
    const ir::Value* p = kernel.params[i];
    if (p->type.isView() && ir::isIntegerStorage(p->type.elem)) {
      // An integer view (lengths, tables): its words travel in inputs/NAME.bin (INIT file);
      // an integer output's expected words are its int32 / int64 bytes.
      if (!options.f64.int_views.empty())
        return "a GPU capture regenerates its inputs: --input files are not supported";
      const bool i32 = p->type.elem == ir::Elem::I32;
      const std::string in = host::integerBytes(inputs[i].ints, i32);
      fs::create_directories(dir / "inputs", ec);
      if (auto e = writeFile(dir / "inputs" / (p->name + ".bin"), in.data(), in.size())) return e;
      m << fmt::format("param {} view {} {} file {} {}\n", i, p->name, in.size() / 4, written[i] ? 1 : 0,
                       fnv1a64Hex(in.data(), in.size()));
      bytes += (loaded[i] ? 1.0 : 0.0) * in.size() + (written[i] ? 1.0 : 0.0) * in.size();
      if (written[i]) {
        const std::string got = host::integerBytes(exact.native[i].ints, i32);
        if (auto e = writeFile(dir / "expected" / (p->name + ".f32"), got.data(), got.size())) return e;
        outputs << fmt::format("output {} {} {}\n", p->name, got.size() / 4, fnv1a64Hex(got.data(), got.size()));
      }
    } else if (p->type.isView()) {
      if (!options.f64.views.empty()) return "a GPU capture regenerates its inputs: --input files are not supported";
      const std::vector<float>& in = inputs[i].data;
      m << fmt::format("param {} view {} {} {} {} {}\n", i, p->name, in.size(), loaded[i] ? "random" : "zero",
                       written[i] ? 1 : 0, fnv1a64Hex(in.data(), in.size() * sizeof(float)));
      bytes += (loaded[i] ? 4.0 : 0.0) * in.size() + (written[i] ? 4.0 : 0.0) * in.size();
      if (written[i]) {
        const std::vector<float>& got = exact.native[i].data;
        if (auto e = writeFile(dir / "expected" / (p->name + ".f32"), got.data(), got.size() * sizeof(float))) return e;
        outputs << fmt::format("output {} {} {}\n", p->name, got.size(),
                               fnv1a64Hex(got.data(), got.size() * sizeof(float)));
      }
    } else if (p->type.elem == ir::Elem::I64) {
      m << fmt::format("param {} i64 {} {}\n", i, p->name, inputs[i].i64);
    } else {
      uint32_t bits = 0;
      std::memcpy(&bits, &inputs[i].f32, 4);
      m << fmt::format("param {} f32 {} {:08x}\n", i, p->name, bits);
    }
  }
  for (size_t j = 0; j < kernel.workspaces.size(); ++j)
    m << fmt::format("workspace {} {}\n", j, kernel.workspaces[j]->type.numElements());
  for (const nlohmann::json& k : c.report["gpu"]["kernels"]) {
    // A seventh field, only when the phase sizes its shared memory at launch.
    const int64_t dynamicShared = k["dynamic_shared_bytes"].get<int64_t>();
    m << fmt::format("phase {} {} {} {} {}{}\n", k["phase"].get<int64_t>(), k["entry"].get<std::string>(),
                     k["threads"].get<int64_t>(), k["block"].get<int64_t>(), k["grid"].get<int64_t>(),
                     dynamicShared > 0 ? fmt::format(" {}", dynamicShared) : std::string());
  }
  m << outputs.str();
  m << fmt::format("work {} {}\n", options.flops, bytes);
  m << "end\n";
  const std::string manifest = m.str();
  if (auto e = writeFile(dir / "manifest.txt", manifest.data(), manifest.size())) return e;

  // index.txt: the case once, in capture order.
  const fs::path index = fs::path(options.archive) / "index.txt";
  std::vector<std::string> names;
  {
    std::ifstream f(index);
    for (std::string line; std::getline(f, line);)
      if (!line.empty()) names.push_back(line);
  }
  if (std::find(names.begin(), names.end(), options.case_name) == names.end()) {
    std::ofstream f(index, std::ios::app);
    f << options.case_name << "\n";
    if (!f) return "cannot write " + index.string();
  }
  return std::nullopt;
}

}  // namespace kiln::driver
