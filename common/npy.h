// NumPy .npy files (format versions 1, 2 and 3): the exchange format for inputs, outputs,
// calibration data and test splits. Only what npukit can use unambiguously is accepted:
// little-endian (or byte-order-free) numeric dtypes in C order. Fortran order and big-endian data
// are rejected with an error that says how to convert them, never silently reinterpreted.
// common/ sits below ir/, so arrays are plain {dtype, shape, bytes}; onnx/tensor_io.h converts
// them to and from ir::Tensor.
#pragma once

#include "common/bytes.h"

#include <cstdint>
#include <string>
#include <vector>

namespace npukit {

struct NpyArray {
  // NumPy dtype name: float32, float64, int8, uint8, int16, int32, int64 or bool.
  std::string dtype;
  std::vector<std::int64_t> shape;  // empty for a 0-d array (one element)
  Bytes data;                       // C order, little-endian (host order on x86/ARM)

  std::int64_t element_count() const;
};

// Bytes per element of a dtype name above; throws naming the dtype when unsupported.
std::size_t npy_dtype_size(const std::string& dtype);

// Parses a whole .npy image. `what` names the source (file path) in error messages.
NpyArray parse_npy(ByteSpan bytes, const std::string& what);
NpyArray read_npy(const std::string& path);

// Encodes as format version 1.0 (or 2.0 when the header would not fit 65535 bytes).
Bytes encode_npy(const NpyArray& array);
void write_npy(const std::string& path, const NpyArray& array);

// Whole-file helpers shared by every reader of binary inputs; errors name the path.
Bytes read_file_bytes(const std::string& path);
void write_file_bytes(const std::string& path, ByteSpan bytes);

}  // namespace npukit
