// CONV and FC programs on the device against the project's Gati-exact reference kernels (ref/,
// library npukit_ref), a second implementation that shares no code with device/.
#include "device/device.h"
#include "device/test_programs.h"
#include "ir/graph.h"
#include "ref/gati_kernels.h"

#include <gtest/gtest.h>

#include <cstring>

namespace npukit::device {
namespace {

using namespace testing;
namespace rg = npukit::ref::gati;

template <typename T>
ir::Tensor tensor(ir::DType type, ir::Shape shape, const std::vector<std::int32_t>& values) {
  ir::Tensor t;
  t.dtype = type;
  t.shape = std::move(shape);
  t.data.resize(values.size() * sizeof(T));
  for (std::size_t i = 0; i < values.size(); ++i) {
    const T v = static_cast<T>(values[i]);
    std::memcpy(t.data.data() + i * sizeof(T), &v, sizeof(T));
  }
  return t;
}

std::vector<std::int32_t> values(const ir::Tensor& t) {
  std::vector<std::int32_t> v(static_cast<std::size_t>(ir::element_count(t.shape)));
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (t.dtype == ir::DType::kInt8)
      v[i] = t.as<std::int8_t>()[i];
    else
      v[i] = t.as<std::int32_t>()[i];
  }
  return v;
}

rg::Tail ref_tail(const ConvSpec& s) {
  rg::Tail t;
  t.quant_en = s.quant_en;
  t.quant_scale = s.quant_scale;
  t.quant_shift = s.quant_shift;
  t.act = !s.act_en         ? rg::Act::kNone
          : s.act_type == 0 ? rg::Act::kRelu
          : s.act_type == 1 ? rg::Act::kClip
                            : rg::Act::kLeaky;
  t.act_param = s.act_param;
  t.neg_alpha = s.neg_alpha;
  t.pos_alpha = s.pos_alpha;
  t.global_pool = s.gbl_pool;
  t.global_pool_scale = s.gbl_scale;
  t.global_pool_shift = s.gbl_shift;
  return t;
}

std::vector<std::int32_t> run_device(const isa::SaArch& arch, const ConvSpec& s) {
  ProgramBuilder b{arch};
  const std::uint64_t dk = 32 / arch.n_sa;
  const Bytes input = pack_activation(arch, s.ic, s.ih * s.iw, s.x);
  const std::uint32_t in_addr = b.alloc(input.size());
  const auto out_bytes =
      static_cast<std::uint32_t>(up(s.kn, arch.n_sa) * up(s.out_pixels(), dk) * s.op_width);
  const std::uint32_t out_addr = b.alloc(out_bytes);
  b.add_conv(s, in_addr, out_addr, b.alloc(up(s.kn, 16) * up(s.oh() * s.ow(), 8) * 4));
  b.finish();
  const auto dev = run_program(arch, b, in_addr, input);
  return unpack_activation(arch, s.kn, s.out_pixels(),
                           dev->dram().read(out_addr, out_bytes, "test"), s.op_width);
}

TEST(ConvVsRef, RandomConvsOnAllArrays) {
  std::mt19937 rng(99);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  int checked = 0;
  for (int trial = 0; trial < 60; ++trial) {
    const isa::SaArch arch = isa::kSupportedArchs[trial % 3];
    ConvSpec s;
    s.depthwise = trial % 5 == 4;
    s.ic = pick(1, 40);
    s.kn = s.depthwise ? s.ic : pick(1, 40);
    s.kh = pick(1, 3), s.kw = pick(1, 3);
    s.stride = pick(1, 4);
    s.pad_top = pick(0, 2), s.pad_bottom = pick(0, 2), s.pad_left = pick(0, 2),
    s.pad_right = pick(0, 2);
    s.ih = pick(s.kh, 14), s.iw = pick(s.kw, 14);
    s.quant_scale = pick(1, 32767), s.quant_shift = pick(10, 24);
    s.act_en = pick(0, 1) == 1, s.act_type = pick(0, 2), s.act_param = pick(0, 127);
    s.neg_alpha = pick(0, 1023), s.pos_alpha = pick(0, 1023);
    s.gbl_pool = trial % 7 == 6, s.gbl_scale = pick(0, 65535), s.gbl_shift = pick(1, 20);
    s.on_chip_acc = pick(0, 1) == 1;
    fill_random(s, 500 + trial);
    rg::ConvParams params;
    params.stride_h = params.stride_w = s.stride;
    params.pad_top = s.pad_top, params.pad_bottom = s.pad_bottom, params.pad_left = s.pad_left,
    params.pad_right = s.pad_right;
    params.group = s.depthwise ? s.ic : 1;
    params.tail = ref_tail(s);
    const ir::Tensor x = tensor<std::int8_t>(ir::DType::kInt8, {1, s.ic, s.ih, s.iw}, s.x);
    const ir::Tensor w = tensor<std::int8_t>(ir::DType::kInt8, {s.kn, s.kc(), s.kh, s.kw}, s.w);
    const ir::Tensor bias = tensor<std::int32_t>(ir::DType::kInt32, {s.kn}, s.bias);
    const auto expected = values(rg::conv(x, w, &bias, nullptr, params));
    EXPECT_EQ(run_device(arch, s), expected) << "trial " << trial << " on " << arch.str();
    ++checked;
  }
  EXPECT_EQ(checked, 60);
}

}  // namespace
}  // namespace npukit::device
