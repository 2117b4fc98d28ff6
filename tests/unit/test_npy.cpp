// The .npy reader and writer (src/host/npy.h): round trip, versions 1 to 3, int64 scalars, and
// every malformed input an error that names the problem.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "host/npy.h"

namespace {

using kiln::host::NpyArray;
using kiln::host::npyF32;
using kiln::host::parseNpy;

// A hand-made .npy: version `major`, header dict text, raw data.
std::string npy(int major, const std::string& dict, const std::string& data) {
  std::string header = dict;
  const size_t pre = major == 1 ? 10 : 12;
  header.append((64 - (pre + header.size() + 1) % 64) % 64, ' ');
  header += '\n';
  std::string s = "\x93NUMPY";
  s += static_cast<char>(major);
  s += '\0';
  const size_t n = header.size();
  for (size_t i = 0; i < (major == 1 ? 2u : 4u); ++i) s += static_cast<char>((n >> (8 * i)) & 0xff);
  return s + header + data;
}

TEST(Npy, RoundTripAndHeaderForms) {
  const std::vector<float> data = {1.5f, -2.0f, 3.25f, 0.0f, 7.0f, -0.5f};
  const std::string bytes = npyF32({2, 3}, data);
  EXPECT_EQ((bytes.size() - data.size() * 4) % 64, 0u);  // header padded to 64 like NumPy's
  NpyArray a;
  ASSERT_FALSE(parseNpy(bytes, a));
  EXPECT_EQ(a.dtype, "float32");
  EXPECT_EQ(a.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(a.f32, data);

  // Version 2, double quotes, keys in another order, a 1-d shape "(4,)" and a scalar "()".
  std::string raw(16, '\0');
  ASSERT_FALSE(parseNpy(npy(2, "{\"shape\": (4,), \"fortran_order\": False, \"descr\": \"<f4\"}", raw), a));
  EXPECT_EQ(a.shape, (std::vector<int64_t>{4}));
  int64_t seven = 7;
  ASSERT_FALSE(parseNpy(npy(3, "{'descr': '<i8', 'fortran_order': False, 'shape': (), }",
                            std::string(reinterpret_cast<char*>(&seven), 8)),
                        a));
  EXPECT_EQ(a.dtype, "int64");
  EXPECT_TRUE(a.shape.empty());
  EXPECT_EQ(a.i64, (std::vector<int64_t>{7}));
  EXPECT_EQ(kiln::host::npyShapeText({}), "()");
  EXPECT_EQ(kiln::host::npyShapeText({5}), "(5,)");
  EXPECT_EQ(kiln::host::npyShapeText({1, 8, 80}), "(1, 8, 80)");
}

TEST(Npy, MalformedInputsAreErrorsNamingTheProblem) {
  const std::string good = npyF32({2, 2}, {1, 2, 3, 4});
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", "not an .npy file"},
      {"hello world", "not an .npy file"},
      {good.substr(0, 8), "truncated: the file ends inside the .npy preamble"},
      {good.substr(0, 40), "truncated: the header is"},
      {good.substr(0, good.size() - 1), "truncated: the shape (2, 2) needs 16 bytes of data, the file has 15"},
      {good + "x", "the file has 1 bytes of data after the array's 16"},
      {npy(4, "{}", ""), ".npy format version 4 is not supported"},
      {npy(1, "{'descr': '>f4', 'fortran_order': False, 'shape': (1,), }", "abcd"), "dtype '>f4' is not supported"},
      {npy(1, "{'descr': '<f8', 'fortran_order': False, 'shape': (1,), }", std::string(8, '\0')),
       "dtype '<f8' is not supported"},
      {npy(1, "{'descr': '<f4', 'fortran_order': True, 'shape': (1,), }", "abcd"), "Fortran order"},
      {npy(1, "{'descr': '<f4', 'shape': (1,), }", "abcd"), "lacks 'descr', 'fortran_order' or 'shape'"},
      {npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': [1], }", "abcd"), "is not a tuple"},
      {npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1, x), }", "abcd"), "is not a tuple of sizes"},
      {npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999, 99999999999), }", ""), "too large"},
  };
  for (const auto& [bytes, want] : cases) {
    NpyArray a;
    auto err = parseNpy(bytes, a);
    ASSERT_TRUE(err) << "accepted: " << want;
    EXPECT_NE(err->find(want), std::string::npos) << *err;
  }
}

}  // namespace
