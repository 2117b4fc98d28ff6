// The GPU archive (docs/gpu/archive-format.md): manifest parsing, validation, input generation
// and digests. No GPU needed: `kiln-replay --check-archive` uses only this.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kiln::replay {

// FNV-1a 64 of `bytes` bytes.
uint64_t fnv1a64(const void* data, size_t bytes);
// Lowercase hex, 16 digits / 8 digits.
std::string hex64(uint64_t value);
std::string hex32(uint32_t value);

enum class ParamKind { kView, kI64, kF32 };

// What a view's 32-bit words hold: 32-bit values, or two 16-bit floats per word (IEEE binary16 /
// bfloat16 bits; element 2w in the low half of word w, an odd last half is zero padding).
enum class Storage { k32, kF16, kBF16 };
// "32", "f16", "bf16".
const char* storageName(Storage storage);

struct Param {
  int index = 0;
  ParamKind kind = ParamKind::kView;
  std::string name;
  // kView:
  uint64_t elements = 0;           // 32-bit words, whatever the storage
  Storage storage = Storage::k32;  // STORAGE (absent: k32)
  bool random_init = false;        // INIT random (else zero, bits:, or file)
  // INIT bits:B: word e is (B + e) mod 2^32.
  bool bits_init = false;
  uint32_t bits_base = 0;
  // INIT file: the initial words, read from CASE/inputs/NAME.bin (an integer view's int32 /
  // int64 bytes: lengths, block tables), checked against the digest.
  std::vector<uint32_t> file_words;
  bool from_file = false;
  bool written = false;  // OUT 1
  uint64_t digest = 0;   // of the initial bytes
  // Scalars:
  int64_t i64 = 0;
  uint32_t f32_bits = 0;
};

struct Phase {
  std::string entry;
  uint64_t programs = 0;
  uint64_t threads_per_block = 0;
  uint64_t grid = 0;
  uint64_t dynamic_shared_bytes = 0;  // 0: the entry's shared memory is all static
  // A `dependent K` line: launched with programmatic stream serialization (its entry waits for
  // the phase before with griddepcontrol.wait), so that its launch overlaps that phase's end.
  bool dependent = false;
};

struct Output {
  std::string name;
  uint64_t elements = 0;
  uint64_t digest = 0;
  size_t param = 0;                // index into CaseSpec::params
  bool digest_only = false;        // mode "digest": no expected/NAME.f32, compare the GPU bytes' digest
  std::vector<uint32_t> expected;  // the bits of expected/NAME.f32 (empty when digest_only)
};

// One case of the archive, validated.
struct CaseSpec {
  std::string name;  // the directory name (= the manifest's case name)
  std::string dir;   // ARCH/CASE
  std::string source;
  uint64_t seed = 0;
  std::vector<Param> params;         // sorted by index (params[i].index == i)
  std::vector<uint64_t> workspaces;  // element counts, by index
  std::vector<Phase> phases;         // by index = launch order
  std::vector<Output> outputs;       // manifest order
  double flops = 0.0;
  double bytes = 0.0;
  std::string ptx;  // kernel.ptx
};

struct Archive {
  std::string path;
  std::vector<CaseSpec> cases;  // index.txt order
};

// Parses manifest text; `file` names it in errors ("FILE:LINE: message"). Checks the records'
// syntax and consistency (indices, names, outputs against their view params).
std::optional<std::string> parseManifest(const std::string& text, const std::string& file, CaseSpec& out);

// Loads ARCH: index.txt, every case's manifest (its case name must equal the directory name),
// kernel.ptx (every phase entry must be an .entry of it) and expected/NAME.f32 (size and digest;
// not read for a digest-only output).
// Returns "FILE:LINE: message" or "FILE: message" on the first problem.
std::optional<std::string> loadArchive(const std::string& path, Archive& out);

// The initial contents of every view param (bits; empty for scalars): the generator's draws for
// INIT random, zeros for INIT zero, B, B+1, ... (wrapping) for INIT bits:B, the file's words for
// INIT file. Returns one message per view whose digest differs from the manifest's
// ("param 2 q: digest 0123... != manifest 4567...").
std::vector<std::string> makeInputs(const CaseSpec& spec, std::vector<std::vector<uint32_t>>& views);

// Reads a whole file; false when it cannot be read.
bool readFile(const std::string& path, std::string& out);

}  // namespace kiln::replay
