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
#include "host/storage.h"
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
  if (!options.f64.views.empty() || !options.f64.int_views.empty())
    return "a GPU capture regenerates its inputs: --input files are not supported";
  CheckOptions bitexact = options.f64;
  for (const auto& [name, base] : options.bit_patterns) {
    const ir::Value* p = nullptr;
    for (const ir::Value* q : kernel.params)
      if (q->name == name) p = q;
    if (!p || !p->type.isView() || !(p->type.elem == ir::Elem::F32 || ir::isHalfStorage(p->type.elem)))
      return fmt::format("--input-bits {}: the kernel has no view<f32>, view<f16> or view<bf16> parameter %{}", name,
                         name);
    std::vector<float>& v = bitexact.views[name];
    v.resize(static_cast<size_t>(p->type.numElements()));
    for (size_t e = 0; e < v.size(); ++e) {
      const uint32_t bits = base + static_cast<uint32_t>(e);
      v[e] = p->type.elem == ir::Elem::F32   ? host::floatOf(bits)
             : p->type.elem == ir::Elem::F16 ? host::f16ToF32(static_cast<uint16_t>(bits))
                                             : host::bf16ToF32(static_cast<uint16_t>(bits));
    }
  }
  bitexact.mode = CheckMode::Bitexact;
  bitexact.seed = options.seed;
  CheckResult exact;
  if (auto e = check(kernel, cpu, bitexact, exact)) return "CPU run: " + *e;
  out.cpu_bitexact = exact.pass;
  out.plan_vs_code = exact.plan_vs_code;
  // A sweep of bit patterns (conversions the interpreter defines exactly, NaNs and infinities
  // among the inputs) has no FP64 meaning beyond the bit-for-bit check.
  out.f64_checked = options.bit_patterns.empty();
  if (out.f64_checked) {
    CheckOptions f64 = bitexact;
    f64.mode = CheckMode::F64;
    CheckResult approx;
    if (auto e = check(kernel, cpu, f64, approx)) return "CPU run (f64 check): " + *e;
    out.cpu_f64 = approx.pass;
  } else {
    out.cpu_f64 = true;
  }
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
  // An output's expected bytes (or, digest_only, only their digest): `words` 32-bit words.
  auto expect = [&](const ir::Value* p, const void* data, size_t bytes) -> std::optional<std::string> {
    if (!options.digest_only)
      if (auto e = writeFile(dir / "expected" / (p->name + ".f32"), data, bytes)) return e;
    outputs << fmt::format("output {} {} {}{}\n", p->name, bytes / 4, fnv1a64Hex(data, bytes),
                           options.digest_only ? " digest" : "");
    return std::nullopt;
  };
  // A view whose words travel in inputs/NAME.bin (INIT file), with the manifest's STORAGE token.
  // A view only stored to starts as zeros (INIT zero), carried in no file.
  auto fileView = [&](size_t i, const std::string& in, const char* storage) -> std::optional<std::string> {
    const ir::Value* p = kernel.params[i];
    if (!loaded[i]) {
      m << fmt::format("param {} view {} {} zero {} {}{}\n", i, p->name, in.size() / 4, written[i] ? 1 : 0,
                       fnv1a64Hex(in.data(), in.size()), storage);
      bytes += (written[i] ? 1.0 : 0.0) * in.size();
      return std::nullopt;
    }
    fs::create_directories(dir / "inputs", ec);
    if (auto e = writeFile(dir / "inputs" / (p->name + ".bin"), in.data(), in.size())) return e;
    m << fmt::format("param {} view {} {} file {} {}{}\n", i, p->name, in.size() / 4, written[i] ? 1 : 0,
                     fnv1a64Hex(in.data(), in.size()), storage);
    bytes += (loaded[i] ? 1.0 : 0.0) * in.size() + (written[i] ? 1.0 : 0.0) * in.size();
    return std::nullopt;
  };
  for (size_t i = 0; i < kernel.params.size(); ++i) {
    const ir::Value* p = kernel.params[i];
    if (p->type.isView() && ir::isIntegerStorage(p->type.elem)) {
      // An integer view (lengths, tables): its words travel in inputs/NAME.bin (INIT file);
      // an integer output's expected words are its int32 / int64 bytes.
      const bool i32 = p->type.elem == ir::Elem::I32;
      if (auto e = fileView(i, host::integerBytes(inputs[i].ints, i32), "")) return e;
      if (written[i]) {
        const std::string got = host::integerBytes(exact.native[i].ints, i32);
        if (auto e = expect(p, got.data(), got.size())) return e;
      }
    } else if (p->type.isView() && ir::isHalfStorage(p->type.elem)) {
      // A 16-bit view: its halves, two to a word (an odd last one padded with zero bits), travel
      // in inputs/NAME.bin with STORAGE f16 | bf16; the replay compares an output half by half.
      const bool bf16 = p->type.elem == ir::Elem::BF16;
      auto packed = [&](const std::vector<float>& values, std::string& out) -> std::optional<std::string> {
        if (auto e = host::halfBytes(values, bf16, out)) return fmt::format("%{}: {}", p->name, *e);
        out.resize((out.size() + 3) / 4 * 4, '\0');
        return std::nullopt;
      };
      std::string in, got;
      if (const auto bits = options.bit_patterns.find(p->name); bits != options.bit_patterns.end()) {
        // The patterns as they are (an f16 signaling NaN's float is its quiet twin: the CPU ran
        // on that, which every f16 load gives the same result as the pattern itself).
        in.resize((static_cast<size_t>(p->type.numElements()) * 2 + 3) / 4 * 4, '\0');
        for (size_t e = 0; e * 2 < in.size() && e < static_cast<size_t>(p->type.numElements()); ++e) {
          const uint16_t h = static_cast<uint16_t>(bits->second + static_cast<uint32_t>(e));
          std::memcpy(in.data() + 2 * e, &h, 2);
        }
      } else if (auto e = packed(inputs[i].data, in)) {
        return e;
      }
      if (auto e = fileView(i, in, bf16 ? " bf16" : " f16")) return e;
      if (written[i]) {
        if (auto e = packed(exact.native[i].data, got)) return e;
        if (auto e = expect(p, got.data(), got.size())) return e;
      }
    } else if (p->type.isView()) {
      const auto bits = options.bit_patterns.find(p->name);
      const std::vector<float>& in = bits != options.bit_patterns.end() ? bitexact.views.at(p->name) : inputs[i].data;
      m << fmt::format("param {} view {} {} {} {} {}\n", i, p->name, in.size(),
                       bits != options.bit_patterns.end() ? fmt::format("bits:{:08x}", bits->second)
                       : loaded[i]                        ? std::string("random")
                                                          : std::string("zero"),
                       written[i] ? 1 : 0, fnv1a64Hex(in.data(), in.size() * sizeof(float)));
      bytes += (loaded[i] ? 4.0 : 0.0) * in.size() + (written[i] ? 4.0 : 0.0) * in.size();
      if (written[i]) {
        const std::vector<float>& got = exact.native[i].data;
        if (auto e = expect(p, got.data(), got.size() * sizeof(float))) return e;
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
    // Launched with programmatic stream serialization: its entry waits for the phase before.
    if (k["dependent_launch"]["waits_for_previous"].get<bool>())
      m << fmt::format("dependent {}\n", k["phase"].get<int64_t>());
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
