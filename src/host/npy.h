// NumPy .npy files (format versions 1.0, 2.0 and 3.0): little-endian float32 ('<f4'), float16
// ('<f2'), bfloat16 bits (uint16 '<u2', or a 2-byte void 'V2' as ml_dtypes writes it), int32
// ('<i4') and int64 ('<i8') arrays in C order, read and written without NumPy. `kiln run --input/--output`.
// Expects: any bytes (a file that is not an .npy, a truncated one, another dtype or Fortran
// order is an error naming the problem, never a crash).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kiln::host {

struct NpyArray {
  std::string dtype;           // "float32", "float16", "uint16" (bfloat16 bits), "int32" or "int64"
  std::vector<int64_t> shape;  // () for a scalar
  std::vector<float> f32;      // dtype float32
  std::vector<uint16_t> u16;   // dtype float16 and uint16: the elements' bits
  std::vector<int64_t> i64;    // dtype int64 and int32 (widened)
  int64_t elements() const;
};

// Parses `bytes`. Error: one sentence ("not an .npy file (no \x93NUMPY magic)", "dtype '>f8'
// is not supported; Kiln reads little-endian float32 ('<f4'), int32 ('<i4') or int64 ('<i8')", "truncated: the
// header promises 24 bytes of data, the file has 12", ...).
std::optional<std::string> parseNpy(const std::string& bytes, NpyArray& out);

// A version 1.0 .npy of float32 data in C order with this shape (() for a scalar).
std::string npyF32(const std::vector<int64_t>& shape, const std::vector<float>& data);

// A version 1.0 .npy of 16-bit floats' bits in C order: float16 ('<f2') or bfloat16 as uint16 ('<u2').
std::string npyHalves(const std::vector<int64_t>& shape, const std::vector<uint16_t>& bits, bool bf16);

// A version 1.0 .npy of integers in C order: int32 ('<i4', each value's low 32 bits) or int64.
std::string npyInts(const std::vector<int64_t>& shape, const std::vector<int64_t>& data, bool int32);

// "(1, 8, 80)", "()", "(5,)": the shape as NumPy prints it.
std::string npyShapeText(const std::vector<int64_t>& shape);

}  // namespace kiln::host
