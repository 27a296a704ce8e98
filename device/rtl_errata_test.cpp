// The v1.0.0 errata warnings (DECISIONS.md 18, 19) against the RTL recordings: every program of
// ../shared/rtl-blocks/errata (copied to fixtures/rtl/errata) makes the device model name the
// erratum the board hit, and no good recording (rtl-blocks, rtl-calibration) gets any of the
// optional-block errata warnings (E7-E12). The streams are the recorded byte streams, unchanged;
// fixtures/rtl/index.txt gives each one's array.
#include "device/device.h"

#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace npukit::device {
namespace {

struct Recording {
  std::string subset, name, arch;
};

std::string fixture_dir() { return std::string(NPUKIT_SOURCE_DIR) + "/fixtures/rtl/"; }

std::vector<Recording> recordings() {
  std::ifstream in(fixture_dir() + "index.txt");
  std::vector<Recording> out;
  for (Recording r; in >> r.subset >> r.name >> r.arch;) out.push_back(r);
  return out;
}

// Runs one recorded stream; returns the device's warnings.
std::vector<Warning> run(const Recording& r) {
  std::ifstream f(fixture_dir() + r.subset + "/" + r.name + ".stream.bin", std::ios::binary);
  const Bytes stream((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_FALSE(stream.empty()) << r.name;
  DeviceConfig cfg;
  cfg.arch = isa::SaArch::parse(r.arch);
  Device dev(cfg);
  dev.receive_dwp(stream);
  EXPECT_EQ(dev.stats().runs, 1u) << r.name;
  return dev.diagnostics().warnings();
}

// The erratum each errata recording must report, by the kind of program (its name).
Erratum expected_erratum(const std::string& name) {
  if (name.find("avgpool") != std::string::npos) return Erratum::kPoolAverage;
  if (name.find("conv_gap") != std::string::npos) return Erratum::kGblPoolTail;
  if (name.find("gap") != std::string::npos) return Erratum::kPoolGlobalAverage;
  if (name.find("cat") != std::string::npos) return Erratum::kConcatPixelPadding;
  if (name.find("resize") != std::string::npos) return Erratum::kResizePaddingPixel;
  ADD_FAILURE() << "no erratum known for recording " << name;
  return Erratum::kTallImageHang;
}

bool is_block_erratum(const Warning& w) {
  for (Erratum e :
       {Erratum::kConcatNoLayerDone, Erratum::kConcatPixelPadding, Erratum::kPoolAverage,
        Erratum::kPoolGlobalAverage, Erratum::kGblPoolTail, Erratum::kResizePaddingPixel})
    if (w.erratum == erratum_name(e)) return true;
  return false;
}

TEST(RtlErrata, EveryErrataRecordingIsWarnedAbout) {
  int errata = 0;
  for (const Recording& r : recordings()) {
    if (r.subset != "errata") continue;
    ++errata;
    const auto warnings = run(r);
    const std::string want(erratum_name(expected_erratum(r.name)));
    bool found = false;
    for (const Warning& w : warnings) {
      found = found || w.erratum == want;
      if (w.erratum == want) {
        EXPECT_EQ(w.layer, 1) << r.name;
        EXPECT_NE(w.text().find("layer 1"), std::string::npos) << w.text();
      }
    }
    EXPECT_TRUE(found) << r.name << ": no warning for " << want;
  }
  EXPECT_EQ(errata, 14);
}

TEST(RtlErrata, NoGoodRecordingIsWarnedAbout) {
  int good = 0;
  for (const Recording& r : recordings()) {
    if (r.subset == "errata") continue;
    ++good;
    for (const Warning& w : run(r))
      EXPECT_FALSE(is_block_erratum(w)) << r.subset << "/" << r.name << ": " << w.text();
  }
  EXPECT_EQ(good, 62);
}

}  // namespace
}  // namespace npukit::device
