// The CUDA driver API through dlopen("libcuda.so.1"): no CUDA headers, no link-time dependency.
// Declares the few driver types, enum values and entry points that the GPU replay needs, a
// Status for every call, and RAII wrappers (context, device buffer, module, event).
// C++17 and <dlfcn.h> only: also built standalone on the GPU machine (tools/kiln-replay).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

namespace kiln::gpu {

// Driver API types, ABI-compatible with cuda.h on 64-bit Linux.
using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
struct CUctx_st;
struct CUmod_st;
struct CUfunc_st;
struct CUstream_st;
struct CUevent_st;
using CUcontext = CUctx_st*;
using CUmodule = CUmod_st*;
using CUfunction = CUfunc_st*;
using CUstream = CUstream_st*;
using CUevent = CUevent_st*;

// CUresult values (cuda.h names in the comments).
constexpr CUresult kCudaSuccess = 0;            // CUDA_SUCCESS
constexpr CUresult kCudaErrorInvalidValue = 1;  // CUDA_ERROR_INVALID_VALUE
constexpr CUresult kCudaErrorNoDevice = 100;    // CUDA_ERROR_NO_DEVICE
// Not a CUDA error: a failure found before or around a driver call (e.g. a missing symbol).
constexpr CUresult kNotACudaError = -1;

// CUfunction_attribute values.
constexpr int kFuncAttrMaxThreadsPerBlock = 0;         // CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK
constexpr int kFuncAttrSharedSizeBytes = 1;            // CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES
constexpr int kFuncAttrConstSizeBytes = 2;             // CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES
constexpr int kFuncAttrLocalSizeBytes = 3;             // CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES
constexpr int kFuncAttrNumRegs = 4;                    // CU_FUNC_ATTRIBUTE_NUM_REGS
constexpr int kFuncAttrPtxVersion = 5;                 // CU_FUNC_ATTRIBUTE_PTX_VERSION
constexpr int kFuncAttrBinaryVersion = 6;              // CU_FUNC_ATTRIBUTE_BINARY_VERSION
constexpr int kFuncAttrMaxDynamicSharedSizeBytes = 8;  // CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES

// CUdevice_attribute values.
constexpr int kDevAttrMultiprocessorCount = 16;     // CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT
constexpr int kDevAttrComputeCapabilityMajor = 75;  // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
constexpr int kDevAttrComputeCapabilityMinor = 76;  // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR

// CUjit_option values.
constexpr int kJitInfoLogBuffer = 3;            // CU_JIT_INFO_LOG_BUFFER
constexpr int kJitInfoLogBufferSizeBytes = 4;   // CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES
constexpr int kJitErrorLogBuffer = 5;           // CU_JIT_ERROR_LOG_BUFFER
constexpr int kJitErrorLogBufferSizeBytes = 6;  // CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES
constexpr int kJitLogVerbose = 12;              // CU_JIT_LOG_VERBOSE

// cuLaunchKernelEx's configuration, laid out as cuda.h's CUlaunchConfig and CUlaunchAttribute
// (an attribute: a 4-byte id padded to 8, then a 64-byte value union).
constexpr unsigned int kLaunchAttrProgrammaticStreamSerialization = 6;  // CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_...
struct LaunchAttribute {
  unsigned int id = 0;
  char pad[4] = {};
  union {
    char bytes[64];
    int programmatic_stream_serialization_allowed;
  } value = {};
};
static_assert(sizeof(LaunchAttribute) == 72, "CUlaunchAttribute is 72 bytes");
struct LaunchConfig {
  unsigned int grid_x = 1, grid_y = 1, grid_z = 1;
  unsigned int block_x = 1, block_y = 1, block_z = 1;
  unsigned int shared_bytes = 0;
  CUstream stream = nullptr;
  LaunchAttribute* attrs = nullptr;
  unsigned int num_attrs = 0;
};

// True for the "sticky" errors after which the context (and the process's CUDA state) is
// unusable: illegal address, launch timeout, device assert, hardware stack error, illegal
// instruction, misaligned address, invalid address space, invalid PC, launch failed.
bool isContextLost(CUresult code);

// Outcome of a driver call: ok, or the failing call's CUresult (kNotACudaError when the failure is
// not a CUDA error) and a message naming the call, e.g.
// "cuModuleLoadDataEx: CUDA_ERROR_INVALID_PTX (218): a PTX JIT compilation failed".
class [[nodiscard]] Status {
 public:
  Status() = default;
  static Status failure(CUresult code, std::string message) { return Status(code, std::move(message)); }

  bool ok() const { return !failed_; }
  CUresult code() const { return code_; }
  const std::string& message() const { return message_; }

 private:
  Status(CUresult code, std::string message) : failed_(true), code_(code), message_(std::move(message)) {}
  bool failed_ = false;
  CUresult code_ = kCudaSuccess;
  std::string message_;
};

// What the replay reports about the device.
struct DeviceInfo {
  std::string name;
  int cc_major = 0;
  int cc_minor = 0;
  int multiprocessors = 0;
  int driver_version = 0;  // e.g. 13000 for CUDA 13.0
};

// Per-function resource usage (cuFuncGetAttribute).
struct FunctionAttributes {
  int max_threads_per_block = 0;
  int shared_bytes = 0;  // static shared memory per block
  int const_bytes = 0;
  int local_bytes = 0;  // per thread: spills and local arrays
  int registers = 0;    // per thread
  int ptx_version = 0;
  int binary_version = 0;
};

// The loaded driver library and its entry points. Everything else in this file borrows a
// CudaDriver, which must outlive it. Single-threaded use: the context is current on the thread
// that created it.
class CudaDriver {
 public:
  // The driver entry points, resolved with dlsym (the versioned names current drivers export).
  struct Api {
    CUresult (*cuInit)(unsigned int flags) = nullptr;
    CUresult (*cuDriverGetVersion)(int* version) = nullptr;
    CUresult (*cuGetErrorName)(CUresult error, const char** str) = nullptr;
    CUresult (*cuGetErrorString)(CUresult error, const char** str) = nullptr;
    CUresult (*cuDeviceGet)(CUdevice* device, int ordinal) = nullptr;
    CUresult (*cuDeviceGetName)(char* name, int len, CUdevice device) = nullptr;
    CUresult (*cuDeviceGetAttribute)(int* value, int attribute, CUdevice device) = nullptr;
    CUresult (*cuCtxCreate)(CUcontext* context, unsigned int flags, CUdevice device) = nullptr;  // _v2
    CUresult (*cuCtxDestroy)(CUcontext context) = nullptr;                                       // _v2
    CUresult (*cuCtxSynchronize)() = nullptr;  // the plain symbol: CUDA 13's _v2 takes a context
    CUresult (*cuMemAlloc)(CUdeviceptr* ptr, size_t bytes) = nullptr;                      // _v2
    CUresult (*cuMemFree)(CUdeviceptr ptr) = nullptr;                                      // _v2
    CUresult (*cuMemcpyHtoD)(CUdeviceptr dst, const void* src, size_t bytes) = nullptr;    // _v2
    CUresult (*cuMemcpyDtoH)(void* dst, CUdeviceptr src, size_t bytes) = nullptr;          // _v2
    CUresult (*cuMemsetD8)(CUdeviceptr dst, unsigned char value, size_t count) = nullptr;  // _v2
    CUresult (*cuModuleLoadDataEx)(CUmodule* module, const void* image, unsigned int num_options, int* options,
                                   void** option_values) = nullptr;
    CUresult (*cuModuleUnload)(CUmodule module) = nullptr;
    CUresult (*cuModuleGetFunction)(CUfunction* function, CUmodule module, const char* name) = nullptr;
    CUresult (*cuFuncGetAttribute)(int* value, int attribute, CUfunction function) = nullptr;
    CUresult (*cuFuncSetAttribute)(CUfunction function, int attribute, int value) = nullptr;
    CUresult (*cuLaunchKernel)(CUfunction function, unsigned int grid_x, unsigned int grid_y, unsigned int grid_z,
                               unsigned int block_x, unsigned int block_y, unsigned int block_z,
                               unsigned int shared_bytes, CUstream stream, void** params, void** extra) = nullptr;
    // Optional (CUDA 12+; null when the driver lacks it): launches with attributes.
    CUresult (*cuLaunchKernelEx)(const LaunchConfig* config, CUfunction function, void** params,
                                 void** extra) = nullptr;
    CUresult (*cuEventCreate)(CUevent* event, unsigned int flags) = nullptr;
    CUresult (*cuEventRecord)(CUevent event, CUstream stream) = nullptr;
    CUresult (*cuEventSynchronize)(CUevent event) = nullptr;
    CUresult (*cuEventElapsedTime)(float* ms, CUevent start, CUevent end) = nullptr;  // _v2 when exported
    CUresult (*cuEventDestroy)(CUevent event) = nullptr;                              // _v2
  };

  // Loads libcuda.so.1, resolves the entry points and calls cuInit(0). On failure returns null
  // and sets `error`: "no GPU: libcuda.so.1 not found (dlopen: ...)", "no GPU: cuInit failed:
  // CUDA_ERROR_NO_DEVICE (100): ..." (both start with "no GPU: "), or a missing-symbol message.
  static std::unique_ptr<CudaDriver> open(std::string& error);
  ~CudaDriver();
  CudaDriver(const CudaDriver&) = delete;
  CudaDriver& operator=(const CudaDriver&) = delete;

  const Api& api() const { return api_; }
  int driverVersion() const { return driver_version_; }

  // "CUDA_ERROR_INVALID_PTX (218): a PTX JIT compilation failed".
  std::string describe(CUresult code) const;
  // ok() for kCudaSuccess, else a failure "CALL: <describe(code)>".
  Status check(CUresult code, const char* call) const;

  // cuCtxSynchronize on the current context.
  Status synchronize() const;
  // One launch: grid (grid_x,1,1), block (block_x,1,1), `args` as cuLaunchKernel's kernelParams.
  // `dependent`: with programmatic stream serialization (cuLaunchKernelEx), so that the launch
  // may begin before the kernel before it in the stream has finished; the kernel must wait for
  // it itself (griddepcontrol.wait). A driver without cuLaunchKernelEx fails such a launch.
  Status launch(CUfunction function, unsigned int grid_x, unsigned int block_x, void** args,
                unsigned int shared_bytes = 0, CUstream stream = nullptr, bool dependent = false) const;
  Status attributes(CUfunction function, FunctionAttributes& out) const;
  // Lets launches of `function` take up to `bytes` of dynamic shared memory (past 48 KB a
  // launch fails without it).
  Status allowDynamicShared(CUfunction function, int bytes) const;

 private:
  CudaDriver() = default;
  void* library_ = nullptr;
  Api api_;
  int driver_version_ = 0;
};

// A context created (and made current) on one device.
class Context {
 public:
  Context() = default;
  ~Context() { reset(); }
  Context(Context&& other) noexcept { *this = std::move(other); }
  Context& operator=(Context&& other) noexcept;
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  Status create(const CudaDriver& driver, int ordinal = 0);
  Status info(DeviceInfo& out) const;  // name, compute capability, multiprocessors, driver version
  void reset();                        // destroys the context (errors ignored)

  CUcontext get() const { return context_; }
  CUdevice device() const { return device_; }

 private:
  const CudaDriver* driver_ = nullptr;
  CUcontext context_ = nullptr;
  CUdevice device_ = 0;
};

// Device memory. Allocations are at least 256 bytes so that empty views still get a valid pointer.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  ~DeviceBuffer() { reset(); }
  DeviceBuffer(DeviceBuffer&& other) noexcept { *this = std::move(other); }
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  Status allocate(const CudaDriver& driver, size_t bytes);
  Status upload(const void* src, size_t bytes) const;  // to offset 0; bytes <= size()
  Status download(void* dst, size_t bytes) const;      // from offset 0; bytes <= size()
  Status zero() const;                                 // every allocated byte
  void reset();                                        // frees (errors ignored)

  CUdeviceptr ptr() const { return ptr_; }
  size_t size() const { return bytes_; }  // the requested size

 private:
  const CudaDriver* driver_ = nullptr;
  CUdeviceptr ptr_ = 0;
  size_t bytes_ = 0;
  size_t allocated_ = 0;
};

// A module loaded from PTX text (JIT-compiled by the driver for the current device).
class Module {
 public:
  Module() = default;
  ~Module() { reset(); }
  Module(Module&& other) noexcept { *this = std::move(other); }
  Module& operator=(Module&& other) noexcept;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // cuModuleLoadDataEx with the JIT info and error logs captured; a failure's message ends with
  // the JIT error log.
  Status load(const CudaDriver& driver, const std::string& ptx);
  Status function(const std::string& entry, CUfunction& out) const;
  const std::string& jitInfoLog() const { return info_log_; }
  void reset();  // unloads (errors ignored)

 private:
  const CudaDriver* driver_ = nullptr;
  CUmodule module_ = nullptr;
  std::string info_log_;
};

// A timing event (default flags: timing enabled).
class Event {
 public:
  Event() = default;
  ~Event() { reset(); }
  Event(Event&& other) noexcept { *this = std::move(other); }
  Event& operator=(Event&& other) noexcept;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  Status create(const CudaDriver& driver);
  Status record(CUstream stream = nullptr) const;
  Status synchronize() const;
  // Milliseconds between two recorded, completed events (resolution about 0.5 us).
  static Status elapsedMs(const Event& start, const Event& stop, float& ms);
  void reset();  // destroys (errors ignored)

 private:
  const CudaDriver* driver_ = nullptr;
  CUevent event_ = nullptr;
};

}  // namespace kiln::gpu
