// Object capture: write an object's bytes to a file and read them back, with errors that
// name the path and the reason; and the on-disk object cache behind its seam.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
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
  std::string ir_text;       // the kernel's canonical TileIR text (ir::print)
  std::string knobs;         // the requested knobs, canonical text (every knob, name=value)
  std::string cpu;           // the target CPU name and features the object is compiled for
  std::string llvm_version;  // hostTarget().llvm_version
  std::string kiln_version;  // kilnBuildId()

  // SHA-256 (hex) over the fields, each length-prefixed so no two keys collide by
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

// The on-disk cache (docs/cache.md): one file DIR/<key hash>.kc per entry, a header line
// "kiln-cache-entry/1 <sha256 of the body> <body bytes>" then the body.
// - put() writes a temporary file in DIR and renames it over the entry (atomic: a reader sees
//   the old entry, the new one or none, never a partial one; two processes storing the same key
//   leave one valid entry), then evicts the least recently used entries (by modification
//   time; get() touches a hit) until the total is under the size cap.
// - get() verifies the header and the digest; an entry that fails (truncated, flipped byte,
//   not an entry) is removed with a warning and reported as a miss, never returned.
// Never throws and never fails a compile: I/O problems are warnings.
class DiskObjectCache final : public ObjectCache {
 public:
  // `warn` receives one sentence per problem (default: "kiln: warning: ..." on stderr).
  DiskObjectCache(std::string dir, int64_t max_bytes, std::function<void(const std::string&)> warn = {});
  std::optional<std::string> get(const std::string& key_hash) override;
  void put(const std::string& key_hash, const std::string& bytes) override;

  struct Info {
    int64_t entries = 0;
    int64_t bytes = 0;
  };
  Info info() const;
  // Removes every entry (and stray temporary files); returns how many entries it removed.
  int64_t clear();
  const std::string& dir() const { return dir_; }
  int64_t maxBytes() const { return max_bytes_; }

 private:
  void evict();
  std::string dir_;
  int64_t max_bytes_;
  std::function<void(const std::string&)> warn_;
};

// Where the cache lives and how large it may grow, from the environment: $KILN_CACHE_DIR,
// else $XDG_CACHE_HOME/kiln, else $HOME/.cache/kiln ("off" or an empty dir: no cache, null);
// $KILN_CACHE_MAX_MB (default 512). Error: a bad KILN_CACHE_MAX_MB (a sentence naming it).
std::optional<std::string> cacheFromEnvironment(std::unique_ptr<DiskObjectCache>& out);

// This build of Kiln: its version and the build id of the binary holding Kiln's code (the kiln
// executable, or libkiln.so for the public API; the GNU
// build-id note, a digest of the linked binary), so objects compiled by another build of the
// compiler are never reused.
const std::string& kilnBuildId();

// Kiln's version (the CMake project's), without the build id: part of the tuning key.
const char* kilnVersion();

}  // namespace kiln::jit
