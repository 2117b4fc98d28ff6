// The C header of an exported object; see c_header.h.
#include "driver/c_header.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <set>

#include "jit/compile.h"
#include "jit/object_file.h"
#include "runtime/abi.h"

namespace kiln::driver {
namespace {

bool isCKeyword(const std::string& s) {
  static const std::set<std::string> words = {
      "auto",     "break",     "case",     "char",     "const",  "continue",  "default", "do",     "double",
      "else",     "enum",      "extern",   "float",    "for",    "goto",      "if",      "inline", "int",
      "long",     "register",  "restrict", "return",   "short",  "signed",    "sizeof",  "static", "struct",
      "switch",   "typedef",   "union",    "unsigned", "void",   "volatile",  "while",   "bool",   "true",
      "false",    "params",    "record",   "ws",       "status", "class",     "new",     "delete", "this",
      "template", "namespace", "operator", "private",  "public", "protected", "virtual"};
  return words.count(s) > 0;
}

// A C identifier for an IR name, distinct from every name in `taken`.
std::string cName(const std::string& name, std::set<std::string>& taken) {
  std::string s;
  for (char c : name) s += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0])) || isCKeyword(s)) s = "p_" + s;
  std::string unique = s;
  for (int i = 2; taken.count(unique); ++i) unique = fmt::format("{}_{}", s, i);
  taken.insert(unique);
  return unique;
}

std::string upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

std::string shapeText(const std::vector<int64_t>& shape) {
  return fmt::format("{}", fmt::join(shape, ", "));
}

}  // namespace

std::string cHeader(const ir::Kernel& kernel, const plan::Knobs& knobs, const std::string& prefix,
                    const nlohmann::json& report, const std::string& object_name) {
  const std::string P = prefix, U = upper(prefix);
  const jit::HostTarget& host = jit::hostTarget();
  const jit::TargetCpu target = jit::targetCpu(knobs.isa);
  const std::string& cpu = target.cpu;
  std::string features;
  if (knobs.isa == "avx2") {
    features = "AVX2, FMA, BMI1/2, F16C, LZCNT, MOVBE (x86-64-v3)";
  } else if (knobs.isa == "avx512") {
    features = "AVX-512 F/BW/CD/DQ/VL and all of x86-64-v3 (x86-64-v4)";
  } else {
    features = "those of the compiling machine (" + cpu + "):";
    size_t at = 0;
    while (at < target.features.size()) {  // the "+name" entries of the sorted list
      size_t end = std::min(target.features.find(',', at), target.features.size());
      if (target.features[at] == '+') features += " " + target.features.substr(at + 1, end - at - 1) + ",";
      at = end + 1;
    }
    if (features.back() == ',') features.pop_back();
  }
  // Wrap the feature list into comment lines.
  std::string featureLines;
  {
    std::string line = " *   ";
    for (size_t i = 0; i < features.size(); ++i) {
      line += features[i];
      if (line.size() > 88 && features[i] == ',') featureLines += line + "\n", line = " *  ";
    }
    featureLines += line + "\n";
  }
  std::string h;
  const std::string guard = "KILN_AOT_" + upper(prefix) + "H";
  h += fmt::format(
      "/* {obj_h}: the C interface of {obj}, kernel @{kernel} compiled ahead of time by Kiln {ver}\n"
      " * (kiln compile --emit obj --header). Object sha256 {sha}.\n"
      " *\n"
      " * Target {triple}, CPU {cpu} (knob isa={isa}). The object runs only on a CPU with\n"
      "{features}"
      " * Pick a portable level with --set isa=avx2 or --set isa=avx512 when compiling.\n"
      " * Precision: {precision}. Self-contained: link {obj} into your program, nothing else.\n"
      " * A launch keeps up to {stack} bytes of snapshots on the calling thread's stack.\n"
      " */\n"
      "#ifndef {guard}\n#define {guard}\n\n#include <stdint.h>\n#include <stdlib.h>\n\n"
      "#ifdef __cplusplus\nextern \"C\" {{\n#endif\n\n",
      fmt::arg("obj_h", object_name.substr(0, object_name.rfind('.')) + ".h"), fmt::arg("obj", object_name),
      fmt::arg("kernel", kernel.name), fmt::arg("ver", jit::kilnVersion()),
      fmt::arg("sha", report["object"].value("sha256", std::string("?"))), fmt::arg("triple", host.triple),
      fmt::arg("cpu", cpu), fmt::arg("isa", knobs.isa), fmt::arg("features", featureLines),
      fmt::arg("precision", knobs.fast_math ? "fast_math (bits may differ from the interpreter)"
                                            : "precise (the same bits as the interpreter and the JIT)"),
      fmt::arg("stack", report.value("snapshot_bytes_per_worker", int64_t{0})), fmt::arg("guard", guard));
  h += "#ifndef KILN_LAUNCH_RECORD_DEFINED\n#define KILN_LAUNCH_RECORD_DEFINED\n"
       "/* What a launch ran: packets of the full-packet clone, packets of the masked body. */\n"
       "typedef struct kiln_launch_record {\n  int64_t packets_full;\n  int64_t packets_masked;\n"
       "} kiln_launch_record;\n#endif\n\n";
  h += fmt::format(
      "/* The entry points (Kiln runtime ABI version {abi}). params[i] points at parameter i (the first\n"
      " * element of a view, the value of a scalar), then params[{U}NUM_PARAMS + j] at workspace j.\n"
      " * {P}launch runs every block on the calling thread. To use threads of your own, call\n"
      " * {P}blocks on disjoint ranges of blocks of one phase at a time (phase i is the blocks from\n"
      " * {P}phase_ends[i-1], or 0, up to {P}phase_ends[i]); every block of a phase must have returned\n"
      " * before the next phase starts, and the workspaces are shared by all of them. A domain with\n"
      " * runtime extents runs only the first blocks[i] of phase i's blocks for given arguments, as\n"
      " * {P}phase_blocks(params, blocks) says (the others find no program); check stated ranges first. */\n"
      "void {P}blocks(void* const* params, int64_t block_begin, int64_t block_end, kiln_launch_record* record);\n"
      "void {P}launch(void* const* params, kiln_launch_record* record);\n"
      "void {P}phase_blocks(void* const* params, int64_t* blocks);\n"
      "extern const int64_t {P}num_blocks;\nextern const int64_t {P}num_phases;\n"
      "extern const int64_t {P}phase_ends[];\nextern const int64_t {P}abi_version;\n\n",
      fmt::arg("abi", runtime::kKilnAbiVersion), fmt::arg("P", P), fmt::arg("U", U));

  std::set<std::string> taken;
  std::vector<std::string> names;
  h += fmt::format(
      "/* Parameters, in order. Views are row-major, of exactly this shape: float32, int32_t / int64_t\n"
      " * for view<i32> / view<i64>, uint16_t bits for view<f16> (IEEE binary16) / view<bf16>. */\n"
      "#define {}NUM_PARAMS {}\n",
      U, kernel.params.size());
  const std::vector<ir::Value*> ins = kernel.inputs(), outs = kernel.outputs();
  auto in = [](const std::vector<ir::Value*>& vs, const ir::Value* v) {
    return std::find(vs.begin(), vs.end(), v) != vs.end();
  };
  for (const ir::Value* p : kernel.params) {
    names.push_back(cName(p->name, taken));
    const std::string N = U + upper(names.back());
    if (p->type.isView()) {
      const char* role = in(outs, p) ? (in(ins, p) ? "read and written" : "written") : "read";
      h += fmt::format("/* %{}: {}, {} */\n#define {}_ELEMENTS {}\n#define {}_RANK {}\n#define {}_SHAPE {{ {} }}\n",
                       p->name, ir::toString(p->type), role, N, p->type.numElements(), N, p->type.shape().size(), N,
                       shapeText(p->type.shape()));
    } else {
      h += fmt::format("/* %{}: {} scalar */\n", p->name, p->type.elem == ir::Elem::I64 ? "i64" : "f32");
    }
    // A stated range (docs/ir.md): the JIT's launch checks it; a caller of this object must.
    if (p->range)
      h += fmt::format(
          "/* every value of %{} must lie in [{}, {}] (its stated range){} */\n#define {}_MIN {}\n#define "
          "{}_MAX {}\n",
          p->name, p->range->lo, p->range->hi, p->range->ascending ? ", each no less than the one before" : "", N,
          p->range->lo, N, p->range->hi);
  }
  int64_t wsElements = 0;
  h += fmt::format(
      "\n/* Workspaces: zero-filled before each launch, after the parameters in params. */\n"
      "#define {}NUM_WORKSPACES {}\n",
      U, kernel.workspaces.size());
  for (size_t j = 0; j < kernel.workspaces.size(); ++j) {
    const ir::Value* w = kernel.workspaces[j];
    h += fmt::format("/* workspace {}: %{}: {} */\n#define {}WORKSPACE{}_ELEMENTS {}\n", j, w->name,
                     ir::toString(w->type), U, j, w->type.numElements());
    wsElements += w->type.numElements();
  }
  h += fmt::format("#define {}WORKSPACE_ELEMENTS {}\n\n", U, wsElements);

  // The convenience entry point.
  std::string sig, body;
  for (size_t i = 0; i < kernel.params.size(); ++i) {
    const ir::Value* p = kernel.params[i];
    if (!sig.empty()) sig += ", ";
    if (p->type.isView()) {
      const char* elem = p->type.elem == ir::Elem::I32     ? "int32_t* "
                         : p->type.elem == ir::Elem::I64   ? "int64_t* "
                         : ir::isHalfStorage(p->type.elem) ? "uint16_t* "
                                                           : "float* ";
      sig += (in(outs, p) ? "" : "const ") + std::string(elem) + names[i];
      body += fmt::format("  params[{}] = (void*){};\n", i, names[i]);
    } else {
      sig += (p->type.elem == ir::Elem::I64 ? "int64_t " : "float ") + names[i];
      body += fmt::format("  params[{}] = (void*)&{};\n", i, names[i]);
    }
  }
  if (sig.empty()) sig = "void";
  const size_t slots = std::max<size_t>(1, kernel.params.size() + kernel.workspaces.size());
  h += fmt::format(
      "/* Runs the kernel on the calling thread: allocates and zero-fills the workspaces, runs every\n"
      " * block, frees them. Returns 0, or -1 when the workspaces cannot be allocated. */\n"
      "static inline int {P}run({sig}) {{\n"
      "  void* params[{slots}];\n"
      "  kiln_launch_record record = {{0, 0}};\n"
      "  float* ws = 0;\n"
      "{body}"
      "  if ({U}WORKSPACE_ELEMENTS > 0) {{\n"
      "    ws = (float*)calloc((size_t){U}WORKSPACE_ELEMENTS + 1, sizeof(float));\n"
      "    if (!ws) return -1;\n",
      fmt::arg("P", P), fmt::arg("U", U), fmt::arg("sig", sig), fmt::arg("slots", slots), fmt::arg("body", body));
  int64_t offset = 0;
  for (size_t j = 0; j < kernel.workspaces.size(); ++j) {
    h += fmt::format("    params[{}] = (void*)(ws + {});\n", kernel.params.size() + j, offset);
    offset += kernel.workspaces[j]->type.numElements();
  }
  h += fmt::format(
      "  }}\n  {P}launch(params, &record);\n  free(ws);\n  return 0;\n}}\n\n"
      "#ifdef __cplusplus\n}}\n#endif\n\n#endif /* {guard} */\n",
      fmt::arg("P", P), fmt::arg("guard", guard));
  return h;
}

}  // namespace kiln::driver
