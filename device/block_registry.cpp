// Opcode -> megablock run function. A block owned by device-blocks joins when its header exists
// and defines NPUKIT_DEVICE_RUN_<NAME> (e.g. `#define NPUKIT_DEVICE_RUN_POOL 1` in device/pool.h),
// which it does once its .cpp defines the run_xxx function; so either side builds while the
// other is still writing (see block.h).
#include "device/block.h"

#if __has_include("device/eltwise.h")
#include "device/eltwise.h"
#endif
#if __has_include("device/pool.h")
#include "device/pool.h"
#endif
#if __has_include("device/reshape_transpose.h")
#include "device/reshape_transpose.h"
#endif
#if __has_include("device/concat.h")
#include "device/concat.h"
#endif
#if __has_include("device/resize.h")
#include "device/resize.h"
#endif
#if __has_include("device/nms.h")
#include "device/nms.h"
#endif

namespace npukit::device {

BlockFn find_block(isa::Opcode op) {
  switch (op) {
    case isa::Opcode::CONV:
      return &run_conv;
    case isa::Opcode::FC:
      return &run_fc;
#ifdef NPUKIT_DEVICE_RUN_ELTWISE
    case isa::Opcode::EltWise:
      return &run_eltwise;
#endif
#ifdef NPUKIT_DEVICE_RUN_POOL
    case isa::Opcode::POOL:
      return &run_pool;
#endif
#ifdef NPUKIT_DEVICE_RUN_RESHAPE_TRANSPOSE
    case isa::Opcode::RESHAPE:
      return &run_reshape;
    case isa::Opcode::TRANSPOSE:
      return &run_transpose;
#endif
#ifdef NPUKIT_DEVICE_RUN_CONCAT
    case isa::Opcode::CONCAT:
      return &run_concat;
#endif
#ifdef NPUKIT_DEVICE_RUN_RESIZE
    case isa::Opcode::RESIZE:
      return &run_resize;
#endif
#ifdef NPUKIT_DEVICE_RUN_NMS
    case isa::Opcode::NMS:
      return &run_nms;
#endif
    default:
      return nullptr;
  }
}

}  // namespace npukit::device
