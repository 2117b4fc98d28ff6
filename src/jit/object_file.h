// Object capture: write an object's bytes to a file and read them back, with errors that
// name the path and the reason; and the seam for an on-disk object cache.
#pragma once

#include <optional>
#include <string>

namespace kiln::jit {

// nullopt on success, else "cannot write 'PATH': REASON".
std::optional<std::string> writeFile(const std::string& path, const std::string& bytes);

// The whole file into `bytes`; nullopt on success, else "cannot read 'PATH': REASON".
std::optional<std::string> readFile(const std::string& path, std::string& bytes);

// What decides an object's bytes. Two compiles with equal keys must give equal objects, so
// a cache may return a stored object instead of compiling.
struct ObjectCacheKey {
  std::string ir_text;       // the LLVM IR handed to compileToObject, printed
  std::string knobs;         // effective knobs and JitOptions, canonical text
  std::string cpu;           // hostTarget().cpu + " " + hostTarget().features
  std::string llvm_version;  // hostTarget().llvm_version

  // SHA-256 (hex) over the four fields, each length-prefixed so no two keys collide by
  // concatenation.
  std::string hash() const;
};

// The seam for a future on-disk cache (e.g. DIR/<hash>.o). get() returns the stored bytes or
// nullopt; put() stores them (best effort: a cache never turns a compile into a failure).
// Callers: compute the key, try get(), else compile and put().
class ObjectCache {
 public:
  virtual ~ObjectCache() = default;
  virtual std::optional<std::string> get(const std::string& key_hash) = 0;
  virtual void put(const std::string& key_hash, const std::string& object_bytes) = 0;
};

// The default: stores nothing, finds nothing.
class NoObjectCache final : public ObjectCache {
 public:
  std::optional<std::string> get(const std::string&) override { return std::nullopt; }
  void put(const std::string&, const std::string&) override {}
};

}  // namespace kiln::jit
