// The device's byte interface: DWP decoding in any chunking, the start rule (14.4), the
// configuration block, START sequencing, META, and bad programs failing with named errors.
#include "device/device.h"
#include "device/test_programs.h"
#include "isa/dispatch.h"
#include "isa/meta.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <random>

namespace npukit::device {
namespace {

using namespace testing;
using ::testing::HasSubstr;

struct Program {
  Bytes stream;
  std::uint32_t out_addr;
  std::uint32_t out_bytes;
  ConvSpec spec;
  isa::SaArch arch;
};

Program small_program(const isa::SaArch& arch = isa::kArch9x8x8,
                      const std::function<void(ProgramBuilder&)>& edit = nullptr) {
  ConvSpec s;
  s.ic = 5, s.kn = 6, s.ih = 5, s.iw = 6, s.quant_shift = 8, s.dispatch = true,
  s.dispatch_id = 0x1234;
  fill_random(s, 99);
  ProgramBuilder b{arch};
  const std::uint64_t dk = 32 / arch.n_sa;
  const Bytes input = pack_activation(arch, s.ic, 30, s.x);
  const std::uint32_t in_addr = b.alloc(input.size());
  const auto out_bytes = static_cast<std::uint32_t>(up(s.kn, arch.n_sa) * up(s.oh() * s.ow(), dk));
  const std::uint32_t out_addr = b.alloc(out_bytes);
  b.add_conv(s, in_addr, out_addr, b.alloc(4096));
  b.finish();
  if (edit) edit(b);
  return {b.stream(in_addr, input), out_addr, out_bytes, s, arch};
}

std::unique_ptr<Device> make_device(const isa::SaArch& arch = isa::kArch9x8x8,
                                    std::uint64_t dram = 8ull << 20) {
  DeviceConfig cfg;
  cfg.arch = arch;
  cfg.dram_bytes = dram;
  return std::make_unique<Device>(cfg);
}

TEST(Device, RunsOnTheStartPacketAndDispatches) {
  const Program p = small_program();
  auto dev = make_device();
  dev->receive_dwp(p.stream);
  EXPECT_EQ(dev->stats().runs, 1u);
  EXPECT_TRUE(dev->dwp_idle());
  const auto frames = isa::parse_dispatch_frames(dev->take_dispatch_output());
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_EQ(frames[0].id, 0x1234u);
  EXPECT_EQ(unpack_activation(p.arch, p.spec.kn, 30, frames[0].payload), ref_conv(p.spec));
  EXPECT_TRUE(dev->take_dispatch_output().empty());  // taken once
  const auto& layer = dev->stats().layers.at(0);
  EXPECT_EQ(layer.ack_order, (std::vector<std::string>{"CONV", "TailBlock", "OutputBlock"}));
  EXPECT_TRUE(layer.dispatched);
  EXPECT_GT(dev->stats().total_cycles, layer.timing.cycles);
  EXPECT_GT(layer.model_seconds, 0.0);  // what simulating it took here
}

TEST(Device, AnyChunkingGivesTheSameResult) {
  const Program p = small_program();
  auto whole = make_device();
  whole->receive_dwp(p.stream);
  const Bytes expected = whole->take_dispatch_output();
  std::mt19937 rng(5);
  for (int trial = 0; trial < 6; ++trial) {
    auto dev = make_device();
    std::size_t pos = 0;
    while (pos < p.stream.size()) {
      const std::size_t n = trial == 0 ? 1 : std::uniform_int_distribution<std::size_t>(1, 97)(rng);
      const std::size_t take = std::min(n, p.stream.size() - pos);
      dev->receive_dwp(ByteSpan(p.stream).subspan(pos, take));
      pos += take;
    }
    EXPECT_EQ(dev->take_dispatch_output(), expected) << "trial " << trial;
    EXPECT_EQ(dev->stats().runs, 1u);
  }
}

TEST(Device, BareStartPacketIsIgnored) {
  auto dev = make_device();
  Bytes s;
  isa::append_dwp_start(s);
  dev->receive_dwp(s);
  EXPECT_EQ(dev->stats().runs, 0u);
  EXPECT_EQ(dev->stats().ignored_starts, 1u);
  // A second start right after a run is also ignored: only a data packet re-arms it.
  const Program p = small_program();
  dev->receive_dwp(p.stream);
  dev->receive_dwp(s);
  EXPECT_EQ(dev->stats().runs, 1u);
  EXPECT_EQ(dev->stats().ignored_starts, 2u);
}

TEST(Device, MetaResetDispatchAndPayloadSize) {
  auto dev = make_device();
  Bytes meta;
  isa::append_meta_reset(meta);
  isa::append_meta_dispatch(meta, isa::DispatchTarget::kUart);
  isa::append_meta_payload_size(meta, 1234);
  for (std::uint8_t b : meta) dev->receive_meta(ByteSpan(&b, 1));  // byte by byte
  EXPECT_EQ(dev->dispatch_channel(), DispatchChannel::kUart);
  isa::append_meta_reset(meta);
  dev->receive_meta(meta);
  EXPECT_EQ(dev->dispatch_channel(), DispatchChannel::kRah);
}

TEST(Device, DramIsLazyAndReadsZeroWhereNothingWasWritten) {
  Dram d(512ull << 20);
  EXPECT_EQ(d.allocated_bytes(), 0u);
  EXPECT_EQ(d.read_u8(123456789, "t"), 0);
  d.write_be32(0x1000, 0xDEADBEEF, "t");
  EXPECT_EQ(d.read_be32(0x1000, "t"), 0xDEADBEEFu);
  EXPECT_EQ(d.allocated_bytes(), Dram::kPageBytes);
  // a write across a page boundary
  Bytes big(Dram::kPageBytes + 100, 7);
  d.write(Dram::kPageBytes - 50, big, "t");
  EXPECT_EQ(d.read_u8(Dram::kPageBytes * 2 + 49, "t"), 7);
  EXPECT_EQ(d.read_u8(Dram::kPageBytes * 2 + 50, "t"), 0);
  try {
    d.read(d.size() - 4, 8, "layer 3 CONV image read");
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("layer 3 CONV image read"));
    EXPECT_THAT(e.what(), HasSubstr("0x1ffffffc"));
  }
}

// The blocks load and store 32-byte DRAM words as vectors: a word at a 32-aligned DRAM address
// must not straddle two cache lines of host memory, so every page starts on a line.
TEST(Device, DramPagesStartOnACacheLine) {
  Dram d(64 * Dram::kPageBytes);
  for (std::uint64_t page = 0; page < 64; ++page) {
    const std::uint64_t addr = page * Dram::kPageBytes + 32 * page;
    d.write_pages(addr, 32, "t", [&](std::uint64_t, std::uint8_t* data, std::uint64_t n) {
      EXPECT_EQ(reinterpret_cast<std::uintptr_t>(data) % 32, 0u) << "page " << page;
      EXPECT_EQ(reinterpret_cast<std::uintptr_t>(data - 32 * page) % 64, 0u) << "page " << page;
      std::fill_n(data, n, std::uint8_t{1});
    });
  }
  d.read_pages(0, 32, "t", [&](std::uint64_t, const std::uint8_t* data, std::uint64_t) {
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(data) % 64, 0u);
  });
}

// Pages come out of 2 MiB chunks (32 pages each): pages of more than one chunk, written whole
// with a pattern of their own, read back unharmed by their neighbours; after clear() they read
// as zeros, nothing is allocated, and they take writes again.
TEST(Device, DramPagesOfSeveralChunksKeepTheirOwnBytes) {
  const std::uint64_t pages = 80;
  Dram d(pages * Dram::kPageBytes);
  auto pattern = [](std::uint64_t page, std::uint64_t i) {
    return static_cast<std::uint8_t>(page * 7 + i % 251);
  };
  for (int round = 0; round < 2; ++round) {
    // Written out of order: odd pages first.
    for (std::uint64_t k = 0; k < pages; ++k) {
      const std::uint64_t p = k < pages / 2 ? 2 * k + 1 : 2 * (k - pages / 2);
      Bytes bytes(Dram::kPageBytes);
      for (std::uint64_t i = 0; i < bytes.size(); ++i) bytes[i] = pattern(p, i);
      d.write(p * Dram::kPageBytes, bytes, "t");
    }
    EXPECT_EQ(d.allocated_bytes(), pages * Dram::kPageBytes);
    for (std::uint64_t p = 0; p < pages; ++p) {
      const Bytes got = d.read(p * Dram::kPageBytes, Dram::kPageBytes, "t");
      for (std::uint64_t i = 0; i < got.size(); ++i)
        ASSERT_EQ(got[i], pattern(p, i)) << "round " << round << " page " << p << " byte " << i;
    }
    d.clear();
    EXPECT_EQ(d.allocated_bytes(), 0u);
    const Bytes zeros(pages * Dram::kPageBytes, 0);
    EXPECT_TRUE(d.equals(0, zeros, "t"));
  }
}

// Write tracking: every way a byte can change (write, write_be32, fill, write_pages, clear)
// marks its pages as written after any stamp taken before; reads, a zero fill of never-written
// memory and writes to other pages do not. Ids differ between Drams.
TEST(Device, DramWriteTrackingSeesEveryWriter) {
  Dram d(4 * Dram::kPageBytes);
  const std::uint64_t page = Dram::kPageBytes, blob = page + 100, blob_bytes = page;  // 2 pages
  EXPECT_TRUE(d.unwritten_since(blob, blob_bytes, d.write_stamp()));
  using Writer = std::function<void(std::uint64_t addr)>;
  const std::vector<std::pair<std::string, Writer>> writers = {
      {"write", [&](std::uint64_t a) { d.write(a, Bytes{1}, "t"); }},
      {"write_be32", [&](std::uint64_t a) { d.write_be32(a, 5, "t"); }},
      {"fill", [&](std::uint64_t a) { d.fill(a, 1, 9, "t"); }},
      {"fill 0", [&](std::uint64_t a) { d.fill(a, 1, 0, "t"); }},
      {"write_pages",
       [&](std::uint64_t a) {
         d.write_pages(a, 1, "t", [](std::uint64_t, std::uint8_t* p, std::uint64_t) { *p = 3; });
       }},
  };
  for (const auto& [name, write] : writers)
    for (const std::uint64_t at : {blob, blob + blob_bytes - 1, blob + page / 2}) {
      SCOPED_TRACE(fmt::format("{} at 0x{:x}", name, at));
      d.write(blob, Bytes{7}, "t");  // the pages exist, so even a zero fill writes them
      const std::uint64_t stamp = d.write_stamp();
      std::uint8_t sink[64];
      d.read(blob, sink, "t");
      d.read_pages(blob, 64, "t", [](std::uint64_t, const std::uint8_t*, std::uint64_t) {});
      EXPECT_TRUE(d.unwritten_since(blob, blob_bytes, stamp)) << "reads are not writes";
      write(3 * page);  // another page
      write(page - 4);  // just before the blob's first page (write_be32 writes 4 bytes)
      EXPECT_TRUE(d.unwritten_since(blob, blob_bytes, stamp));
      write(at);
      EXPECT_FALSE(d.unwritten_since(blob, blob_bytes, stamp));
      EXPECT_FALSE(d.unwritten_since(at, 1, stamp));
      EXPECT_TRUE(d.unwritten_since(3 * page + 1, 0, stamp)) << "an empty range";
    }
  // A zero fill of memory never written leaves every byte as it was.
  Dram fresh(2 * Dram::kPageBytes);
  const std::uint64_t s0 = fresh.write_stamp();
  fresh.fill(0, 2 * Dram::kPageBytes, 0, "t");
  EXPECT_TRUE(fresh.unwritten_since(0, 2 * Dram::kPageBytes, s0));
  EXPECT_EQ(fresh.allocated_bytes(), 0u);
  // clear() forgets every byte: a write to all of them.
  const std::uint64_t s1 = d.write_stamp();
  d.clear();
  EXPECT_FALSE(d.unwritten_since(0, 1, s1));
  EXPECT_FALSE(d.unwritten_since(3 * page, 1, s1));
  EXPECT_NE(d.id(), fresh.id());
  EXPECT_THROW((void)d.unwritten_since(4 * page - 1, 2, 0), Error);
}

TEST(Device, ActivationLayoutMatchesTheSpecFormula) {
  // gati.md 6.1 worked numbers: 9,4,4 -> dk 8 (NHW8C4), 9,8,8 -> dk 4, 16,1,16 -> dk 2.
  const auto l = ActivationLayout::for_arch(isa::kArch9x4x4, 6, 36);
  EXPECT_EQ(l.bytes(), 8u * 40u);  // C' 8 x P' 40 = 320 (the 5.5 example)
  EXPECT_EQ(l.offset(0, 0), 0u);
  EXPECT_EQ(l.offset(1, 0), 8u);
  EXPECT_EQ(l.offset(0, 8), 32u);
  EXPECT_EQ(l.offset(5, 9), 1u * 4 * 40 + 32 + 1 * 8 + 1);
  EXPECT_EQ(ActivationLayout::for_arch(isa::kArch16x1x16, 3, 5).bytes(), 16u * 6u);
}

// Checks planes that read_activation_planes filled: channel c's image pixel (y, x) at row
// y + top, column left + x of its plane_h x plane_w plane when that row is one of them, every
// other byte 0. value(c, p) is the image's element (p = y * width + x).
template <typename Value>
void expect_planes(const std::vector<std::int8_t>& planes, std::uint64_t channels,
                   std::uint64_t width, std::uint64_t height, std::int64_t top, std::uint64_t left,
                   std::uint64_t plane_h, std::uint64_t plane_w, Value&& value) {
  for (std::uint64_t c = 0; c < channels; ++c)
    for (std::uint64_t r = 0; r < plane_h; ++r)
      for (std::uint64_t x = 0; x < plane_w; ++x) {
        const std::int64_t y = static_cast<std::int64_t>(r) - top;
        const bool inside =
            y >= 0 && y < static_cast<std::int64_t>(height) && x >= left && x < left + width;
        const std::int32_t want =
            inside ? value(c, static_cast<std::uint64_t>(y) * width + x - left) : 0;
        ASSERT_EQ(planes[(c * plane_h + r) * plane_w + x], want)
            << "channels " << channels << " top " << top << " channel " << c << " row " << r
            << " column " << x;
      }
}

// write_activation_output, read_activation and add_activation_int32 work on the DRAM pages in
// place when the address keeps every word inside a page, and through a staging buffer otherwise:
// both against ActivationLayout::offset (the 6.1 formula), for a tensor with padding channels and
// pixels that crosses page boundaries, int8 and int32 (OpWidth 4), on every array; padding bytes
// are written as 0 over old contents, and a never-written region reads as zeros. 3 x 1001 pixels
// give whole words and a partial last word per channel, so both the vector (9,8,8 int32) and the
// element loops run.
TEST(Device, ActivationLayoutInPlaceAndStagedMatchTheFormula) {
  for (const isa::SaArch& arch : isa::kSupportedArchs)
    for (const std::uint64_t width : {1u, 4u})
      for (const std::uint64_t addr : {Dram::kPageBytes - 4096, Dram::kPageBytes - 4096 + 32 + 4}) {
        SCOPED_TRACE(fmt::format("{} width {} addr 0x{:x}", arch.str(), width, addr));
        const ActivationLayout layout = ActivationLayout::for_arch(arch, 13, 3 * 1001);
        Dram dram(1u << 20);
        dram.fill(addr, layout.bytes() * width, 0xAA, "old contents");
        std::vector<std::int32_t> values(layout.channels * layout.pixels);
        for (std::uint64_t i = 0; i < values.size(); ++i)
          values[i] = width == 1 ? static_cast<std::int32_t>(i * 37 % 256) - 128
                                 : static_cast<std::int32_t>(i * 2654435761u);
        const std::uint64_t n_sa = static_cast<std::uint64_t>(arch.n_sa);
        isa::Instruction output(isa::Opcode::OutputBlock);
        output.set(isa::Field::OutputBlock_OutputAddr, addr)
            .set(isa::Field::OutputBlock_ChannelItr, 1)
            .set(isa::Field::OutputBlock_KernelItr, layout.padded_channels() / n_sa)
            .set(isa::Field::OutputBlock_ImageDimOutput, layout.padded_pixels())
            .set(isa::Field::OutputBlock_ImageDimAcc, layout.padded_pixels())
            .set(isa::Field::OutputBlock_OH, 3)
            .set(isa::Field::OutputBlock_OW, 1001)
            .set(isa::Field::OutputBlock_OpWidth, width);
        const isa::Instruction mega(isa::Opcode::CONV);
        Diagnostics diag;
        LayerContext ctx{arch, dram, mega, &output, nullptr, 1, diag, 1, 2, 3};
        EXPECT_EQ(write_activation_output(ctx, layout, values), layout.bytes() * width);
        const Bytes raw = dram.read(addr, layout.bytes() * width, "check");
        for (std::uint64_t c = 0; c < layout.padded_channels(); ++c)
          for (std::uint64_t p = 0; p < layout.padded_pixels(); ++p) {
            const bool real = c < layout.channels && p < layout.pixels;
            const std::uint32_t want =
                real ? static_cast<std::uint32_t>(values[c * layout.pixels + p]) : 0;
            const std::uint64_t at = layout.offset(c, p) * width;
            const std::uint32_t got = width == 1 ? raw[at] : load_be32(&raw[at]);
            ASSERT_EQ(got, width == 1 ? want & 0xFF : want) << "channel " << c << " pixel " << p;
          }
        if (width == 1) {
          const std::vector<std::int8_t> back =
              read_activation(ctx, isa::Field::CONV_ImageStartAddress, addr, layout);
          for (std::uint64_t i = 0; i < values.size(); ++i) ASSERT_EQ(back[i], values[i]) << i;
          const std::vector<std::int8_t> unwritten = read_activation(
              ctx, isa::Field::CONV_ImageStartAddress, 8 * Dram::kPageBytes, layout);
          EXPECT_TRUE(std::all_of(unwritten.begin(), unwritten.end(),
                                  [](std::int8_t v) { return v == 0; }));
          // Straight into padded planes: rows below and above (top 1), a dropped first row
          // (top -1, a row skip), the middle row alone (a global pool's piece: only its words
          // are read), left and right padding; every other byte 0, over old bytes.
          // 13 channels (the tensor above), and 16 (whole channel groups on every array: the
          // vector path of 9,8,8), written here by the 6.1 formula.
          const std::uint64_t width = 1001, height = 3, left = 2, plane_w = width + left + 3;
          const ActivationLayout whole = ActivationLayout::for_arch(arch, 16, height * width);
          const std::uint64_t whole_addr = addr + 4 * Dram::kPageBytes;
          Bytes whole_bytes(whole.bytes(), 0);
          std::vector<std::int32_t> whole_values(whole.channels * whole.pixels);
          for (std::uint64_t i = 0; i < whole_values.size(); ++i) {
            whole_values[i] = static_cast<std::int32_t>(i * 53 % 256) - 128;
            whole_bytes[whole.offset(i / whole.pixels, i % whole.pixels)] =
                static_cast<std::uint8_t>(whole_values[i]);
          }
          dram.write(whole_addr, whole_bytes, "whole groups");
          for (const bool groups : {false, true}) {
            const ActivationLayout& l = groups ? whole : layout;
            const std::vector<std::int32_t>& v = groups ? whole_values : values;
            for (const auto& [top, plane_h] :
                 {std::pair<std::int64_t, std::uint64_t>{1, height + 2},
                  {0, height},
                  {-1, height - 1},
                  {-1, 1}}) {
              std::vector<std::int8_t> planes(l.channels * plane_h * plane_w, -86);
              read_activation_planes(ctx, isa::Field::CONV_ImageStartAddress,
                                     groups ? whole_addr : addr, l, width, top, left, plane_h,
                                     plane_w, planes.data());
              expect_planes(planes, l.channels, width, height, top, left, plane_h, plane_w,
                            [&](std::uint64_t c, std::uint64_t p) { return v[c * l.pixels + p]; });
            }
          }
        } else {
          // Near INT32_MAX, so about half the adds wrap (the accumulant adder's 32-bit wrap).
          const std::int32_t start = 0x7ffffff0;
          std::vector<std::int32_t> sums(values.size(), start);
          add_activation_int32(ctx, isa::Field::OutputBlock_AccumulantAddr, addr, layout, sums);
          for (std::uint64_t i = 0; i < values.size(); ++i)
            ASSERT_EQ(sums[i], static_cast<std::int32_t>(static_cast<std::uint32_t>(values[i]) +
                                                         static_cast<std::uint32_t>(start)))
                << i;
          std::vector<std::int32_t> same(values.size(), 7);
          add_activation_int32(ctx, isa::Field::OutputBlock_AccumulantAddr, 8 * Dram::kPageBytes,
                               layout, same);
          EXPECT_TRUE(std::all_of(same.begin(), same.end(), [](std::int32_t v) { return v == 7; }));
        }
      }
}

// Planes of image rows only (plane width = image width, as a global pool's pieces read): every
// band of rows, one row alone included, from narrow rows whose words straddle rows, at an
// address whose channel groups cross a DRAM page and at one that is not a word's (the staged
// reads), against the 6.1 formula; bytes outside the band's rows are 0.
TEST(Device, PlanesOfImageRowsOnlyTakeEveryBand) {
  for (const isa::SaArch& arch : isa::kSupportedArchs)
    for (const auto& [width, height] : {std::pair<std::uint64_t, std::uint64_t>{7, 7}, {3, 5}})
      for (const std::uint64_t addr : {2 * Dram::kPageBytes - 1024, 2 * Dram::kPageBytes - 1020}) {
        SCOPED_TRACE(fmt::format("{} {}x{} addr 0x{:x}", arch.str(), height, width, addr));
        const ActivationLayout layout = ActivationLayout::for_arch(arch, 70, height * width);
        Dram dram(1u << 20);
        Bytes bytes(layout.bytes(), 0);
        std::vector<std::int8_t> values(layout.channels * layout.pixels);
        for (std::uint64_t i = 0; i < values.size(); ++i) {
          values[i] = static_cast<std::int8_t>(static_cast<int>(i * 29 % 255) - 127);
          bytes[layout.offset(i / layout.pixels, i % layout.pixels)] =
              static_cast<std::uint8_t>(values[i]);
        }
        dram.write(addr, bytes, "image");
        const isa::Instruction mega(isa::Opcode::CONV);
        Diagnostics diag;
        LayerContext ctx{arch, dram, mega, nullptr, nullptr, 1, diag, 1, 2, 3};
        std::vector<std::pair<std::int64_t, std::uint64_t>> bands = {
            {0, height}, {1, height + 2}, {-2, height - 2}, {2, 3}};
        for (std::uint64_t y = 0; y < height; ++y)
          bands.push_back({-static_cast<std::int64_t>(y), 1});
        for (const auto& [top, plane_h] : bands) {
          std::vector<std::int8_t> planes(layout.channels * plane_h * width, -86);
          read_activation_planes(ctx, isa::Field::CONV_ImageStartAddress, addr, layout, width, top,
                                 0, plane_h, width, planes.data());
          expect_planes(planes, layout.channels, width, height, top, 0, plane_h, width,
                        [&](std::uint64_t c, std::uint64_t p) {
                          return std::int32_t{values[c * layout.pixels + p]};
                        });
        }
      }
}

// ---- bad programs ------------------------------------------------------------------------------

void expect_error(const Bytes& stream, std::initializer_list<const char*> parts,
                  const isa::SaArch& arch = isa::kArch9x8x8, std::uint64_t dram = 8ull << 20) {
  auto dev = make_device(arch, dram);
  try {
    dev->receive_dwp(stream);
    FAIL() << "no error; expected one mentioning " << *parts.begin();
  } catch (const Error& e) {
    for (const char* part : parts) EXPECT_THAT(e.what(), HasSubstr(part));
  }
}

TEST(DeviceErrors, UnknownOpcodeNamesTheInstruction) {
  Program p = small_program(isa::kArch9x8x8);
  // instruction 0 is at stream byte 12 (header) + 32 (zeroth); its last byte holds the opcode.
  p.stream[12 + 32 + 31] = (p.stream[12 + 32 + 31] & 0xF0) | 0xB;
  expect_error(p.stream, {"instruction 0", "opcode 0xb"});
}

TEST(DeviceErrors, SizesThatDisagreeNameTheField) {
  const Program p = small_program(isa::kArch9x8x8, [](ProgramBuilder& b) {
    b.instructions[0].set(Field::CONV_ImageEndAddress,
                          b.instructions[0].get(Field::CONV_ImageEndAddress) + 32);
  });
  expect_error(p.stream, {"layer 1, instruction 0 CONV.ImageEndAddress"});
  const Program q = small_program(
      isa::kArch9x8x8, [](ProgramBuilder& b) { b.instructions[1].set(Field::OutputBlock_OH, 9); });
  expect_error(q.stream, {"OutputBlock.OH"});
  const Program r = small_program(isa::kArch9x8x8, [](ProgramBuilder& b) {
    b.instructions[1].set(Field::OutputBlock_KernelItr, 3);
  });
  expect_error(r.stream, {"OutputBlock.KernelItr"});
  const Program t = small_program(isa::kArch9x8x8, [](ProgramBuilder& b) {
    b.instructions[2].set(Field::TailBlock_BiasEndAddress,
                          b.instructions[2].get(Field::TailBlock_BiasEndAddress) + 32);
  });
  expect_error(t.stream, {"TailBlock.BiasEndAddress"});
  const Program u = small_program(
      isa::kArch9x8x8, [](ProgramBuilder& b) { b.instructions[0].set(Field::CONV_Stride, 5); });
  expect_error(u.stream, {"CONV.Stride", "1 to 4"});
  const Program v = small_program(
      isa::kArch9x8x8, [](ProgramBuilder& b) { b.instructions[0].set(Field::CONV_ConvType, 2); });
  expect_error(v.stream, {"CONV.ConvType", "16,1,16"});
}

TEST(DeviceErrors, AddressOutsideDramNamesTheField) {
  const Program p = small_program(isa::kArch9x8x8, [](ProgramBuilder& b) {
    b.instructions[1].set(Field::OutputBlock_OutputAddr, 0x7FFFFFE0);
  });
  expect_error(p.stream, {"OutputBlock.OutputAddr", "outside"});
  const Program q = small_program(isa::kArch9x8x8, [](ProgramBuilder& b) {
    const std::uint64_t size = b.instructions[0].get(Field::CONV_ImageEndAddress) -
                               b.instructions[0].get(Field::CONV_ImageStartAddress);
    b.instructions[0].set(Field::CONV_ImageStartAddress, 0x7FFFFFE0);
    b.instructions[0].set(Field::CONV_ImageEndAddress, 0x7FFFFFE0 + size);
  });
  expect_error(q.stream, {"CONV.ImageStartAddress", "outside"});
}

TEST(DeviceErrors, LayerThatNeverFinishes) {
  // TotalLayers says 2 but there is only one layer: the board would wait forever.
  const Program p = small_program(isa::kArch9x8x8, [](ProgramBuilder& b) {
    b.instructions.back().set(Field::START_TotalLayers, 2);
  });
  expect_error(p.stream, {"TotalLayers (2)", "wait forever"});
  // No OutputBlock: the megablock's output has nowhere to go.
  const Program q = small_program(
      isa::kArch9x8x8, [](ProgramBuilder& b) { b.instructions.erase(b.instructions.begin() + 1); });
  expect_error(q.stream, {"no OutputBlock"});
  // Two OutputBlocks in one group.
  const Program r = small_program(isa::kArch9x8x8, [](ProgramBuilder& b) {
    b.instructions.insert(b.instructions.begin() + 1, b.instructions[1]);
  });
  expect_error(r.stream, {"second OutputBlock"});
}

TEST(DeviceErrors, InstructionRegionBeyondWhatWasWritten) {
  Program p = small_program();
  // ZerothEndAddress is stream bytes 12+24..12+27 (bits [63:32]); make it 32 instructions longer.
  const std::uint32_t end = load_be32(&p.stream[12 + 24]);
  store_be32(&p.stream[12 + 24], end + 32 * 32);
  expect_error(p.stream, {"beyond what the host wrote"});
}

TEST(DeviceErrors, MalformedDwpPackets) {
  Bytes s;
  append_be32(s, 0xFFFFFFFF);
  append_be32(s, 40);  // not a multiple of 32
  append_be32(s, 0);
  expect_error(s, {"stream byte 0", "DS = 40"});
  Bytes t;
  append_be32(t, 0xFFFFFFFF);
  append_be32(t, 64);
  append_be32(t, 0x10000);
  expect_error(t, {"outside"}, isa::kArch9x8x8, 0x10000);
  Bytes u;
  append_be32(u, 0xFFFFFFFF);
  append_be32(u, 32);
  append_be32(u, 0x11);
  expect_error(u, {"not 32-byte aligned"});
}

TEST(DeviceErrors, StartWithoutProgram) {
  Bytes s;
  isa::append_dwp_packet(s, 0x1000, Bytes(32, 1));
  isa::append_dwp_start(s);
  expect_error(s, {"zeroth instruction", "never written"});
}

TEST(DeviceErrors, DeviceStaysUsableAfterAnError) {
  const Program bad = small_program(
      isa::kArch9x8x8, [](ProgramBuilder& b) { b.instructions[0].set(Field::CONV_Stride, 0); });
  auto dev = make_device();
  EXPECT_THROW(dev->receive_dwp(bad.stream), Error);
  const Program good = small_program();
  dev->receive_dwp(good.stream);
  EXPECT_EQ(dev->stats().runs, 1u);
}

}  // namespace
}  // namespace npukit::device
