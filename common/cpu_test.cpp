// The CPU-feature resolver (common/cpu.h): names, NPUKIT_ISA values, forcing and refusing levels.
#include "common/cpu.h"

#include "common/error.h"

#include <gtest/gtest.h>

#include <iostream>

namespace npukit {
namespace {

TEST(Cpu, NamesRoundTripAndUnknownNamesAreRejected) {
  for (Isa isa : cpu::kAllIsas) EXPECT_EQ(cpu::parse(cpu::name(isa)), isa);
  EXPECT_EQ(cpu::parse("avx512"), std::nullopt);
  EXPECT_EQ(cpu::parse("AVX2"), std::nullopt);
  EXPECT_EQ(cpu::parse(""), std::nullopt);
}

TEST(Cpu, DetectedLevelIsSupportedAndLevelsAreConsistent) {
  EXPECT_TRUE(cpu::supports(Isa::kScalar));
  EXPECT_TRUE(cpu::supports(cpu::detected()));
  // Both VNNI levels need AVX2 here (their kernels fall back to AVX2 code for the rest).
  if (cpu::supports(Isa::kAvxVnni) || cpu::supports(Isa::kAvx512Vnni)) {
    EXPECT_TRUE(cpu::supports(Isa::kAvx2));
  }
  std::cout << "[ info     ] this CPU supports: " << cpu::supported_names() << "; detected "
            << cpu::name(cpu::detected()) << "\n";
}

TEST(Cpu, EnvironmentValues) {
  EXPECT_EQ(cpu::from_environment_value(nullptr), cpu::detected());
  EXPECT_EQ(cpu::from_environment_value(""), cpu::detected());
  EXPECT_EQ(cpu::from_environment_value("auto"), cpu::detected());
  EXPECT_EQ(cpu::from_environment_value("scalar"), Isa::kScalar);
  EXPECT_THROW(cpu::from_environment_value("sse9"), Error);
  for (Isa isa : cpu::kAllIsas) {
    const std::string name(cpu::name(isa));
    if (cpu::supports(isa))
      EXPECT_EQ(cpu::from_environment_value(name.c_str()), isa);
    else
      EXPECT_THROW(cpu::from_environment_value(name.c_str()), Error) << name;
  }
}

TEST(Cpu, ForcingALevelAndRestoringIt) {
  const Isa before = cpu::active();
  {
    const cpu::ScopedIsa forced(Isa::kScalar);
    EXPECT_EQ(cpu::active(), Isa::kScalar);
    EXPECT_EQ(cpu::resolve(Isa::kAuto, "test"), Isa::kScalar);
    {
      const cpu::ScopedIsa inner(cpu::detected());
      EXPECT_EQ(cpu::active(), cpu::detected());
    }
    EXPECT_EQ(cpu::active(), Isa::kScalar);
  }
  EXPECT_EQ(cpu::active(), before);
  for (Isa isa : cpu::kAllIsas)
    if (!cpu::supports(isa)) {
      EXPECT_THROW(cpu::ScopedIsa{isa}, Error) << cpu::name(isa);
      EXPECT_THROW(cpu::resolve(isa, "test"), Error) << cpu::name(isa);
    }
}

TEST(Cpu, WhichPathsRunAtWhichLevel) {
  EXPECT_TRUE(cpu::path_allowed(Isa::kScalar, Isa::kScalar));
  EXPECT_FALSE(cpu::path_allowed(Isa::kScalar, Isa::kAvx2));
  EXPECT_TRUE(cpu::path_allowed(Isa::kAvx512Vnni, Isa::kAvx2));
  EXPECT_TRUE(cpu::path_allowed(Isa::kAvxVnni, Isa::kAvx2));
  // AVX-512 VNNI CPUs need not have AVX-VNNI and the other way round.
  EXPECT_FALSE(cpu::path_allowed(Isa::kAvx512Vnni, Isa::kAvxVnni));
  EXPECT_FALSE(cpu::path_allowed(Isa::kAvxVnni, Isa::kAvx512Vnni));
  EXPECT_TRUE(cpu::path_allowed(Isa::kAvx512Vnni, Isa::kAvx512Vnni));
}

}  // namespace
}  // namespace npukit
