# One helper for every layer folder, so each area is laid out the same way:
#   <area>/*.cpp            -> library npukit_<area>
#   <area>/*_test.cpp       -> test binary npukit_<area>_tests (GoogleTest, run by CTest)
#   <area>/*_bench.cpp      -> benchmark binary npukit_<area>_bench (Google Benchmark)
#   <area>/*_fuzz.cpp       -> one libFuzzer binary per file (NPUKIT_FUZZ=ON, clang only), else a
#                              replay binary; either runs fixtures/fuzz/<name>/ as test <name>_corpus
# Usage: npukit_area(NAME <area> [DEPS targets...] [TEST_DEPS targets...])
function(npukit_area)
  cmake_parse_arguments(A "" "NAME" "DEPS;TEST_DEPS" ${ARGN})
  set(dir ${CMAKE_CURRENT_SOURCE_DIR})
  file(GLOB all_src CONFIGURE_DEPENDS ${dir}/*.cpp)
  set(lib_src "")
  set(test_src "")
  set(bench_src "")
  set(fuzz_src "")
  foreach(f ${all_src})
    if(f MATCHES "_test\\.cpp$")
      list(APPEND test_src ${f})
    elseif(f MATCHES "_bench\\.cpp$")
      list(APPEND bench_src ${f})
    elseif(f MATCHES "_fuzz\\.cpp$")
      list(APPEND fuzz_src ${f})
    else()
      list(APPEND lib_src ${f})
    endif()
  endforeach()
  set(lib npukit_${A_NAME})
  if(lib_src)
    add_library(${lib} STATIC ${lib_src})
    target_include_directories(${lib} PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}>
                                             $<INSTALL_INTERFACE:${NPUKIT_INSTALL_INCLUDEDIR}>)
    target_link_libraries(${lib} PUBLIC ${A_DEPS})
    if(NPUKIT_FUZZ)
      target_compile_options(${lib} PRIVATE -fsanitize=fuzzer-no-link)
    endif()
  else()
    add_library(${lib} INTERFACE)
    target_include_directories(${lib} INTERFACE $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}>
                                                $<INSTALL_INTERFACE:${NPUKIT_INSTALL_INCLUDEDIR}>)
    target_link_libraries(${lib} INTERFACE ${A_DEPS})
  endif()
  # Installed as npukit::<area> (cmake/npukitConfig.cmake.in), with the area's public headers
  # (every .h but the test support) under include/npukit/<area>/.
  set_target_properties(${lib} PROPERTIES EXPORT_NAME ${A_NAME})
  add_library(npukit::${A_NAME} ALIAS ${lib})
  install(TARGETS ${lib} EXPORT npukitTargets ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
  install(DIRECTORY ${dir}/ DESTINATION ${NPUKIT_INSTALL_INCLUDEDIR}/${A_NAME}
          FILES_MATCHING PATTERN "*.h" PATTERN "*.def"
          PATTERN "*test*" EXCLUDE PATTERN "testdata" EXCLUDE)
  set_property(GLOBAL APPEND PROPERTY NPUKIT_LIBRARIES ${lib})
  if(test_src)
    add_executable(${lib}_tests ${test_src})
    target_link_libraries(${lib}_tests PRIVATE ${lib} ${A_TEST_DEPS} GTest::gtest GTest::gtest_main GTest::gmock)
    target_compile_definitions(${lib}_tests PRIVATE NPUKIT_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
    target_compile_options(${lib}_tests PRIVATE ${NPUKIT_TEST_COMPILE_OPTIONS})
    gtest_discover_tests(${lib}_tests WORKING_DIRECTORY ${PROJECT_SOURCE_DIR} DISCOVERY_TIMEOUT 60
                         PROPERTIES LABELS ${A_NAME})
  endif()
  if(bench_src AND NPUKIT_BENCH)
    add_executable(${lib}_bench ${bench_src})
    target_link_libraries(${lib}_bench PRIVATE ${lib} ${A_TEST_DEPS} benchmark::benchmark benchmark::benchmark_main)
  endif()
  foreach(f ${fuzz_src})
    get_filename_component(fname ${f} NAME_WE)
    set(corpus ${PROJECT_SOURCE_DIR}/fixtures/fuzz/${fname})
    if(NPUKIT_FUZZ)
      add_executable(${fname} ${f})
      target_compile_options(${fname} PRIVATE -fsanitize=fuzzer,address,undefined)
      target_link_options(${fname} PRIVATE -fsanitize=fuzzer,address,undefined)
      target_link_libraries(${fname} PRIVATE ${lib} ${A_TEST_DEPS})
      # ctest -L fuzz-long: ten minutes per target, into build/corpus/<name> (docs/testing.md).
      # The committed seeds are read too where a target has them (libFuzzer exits at once on a
      # corpus directory that does not exist).
      set(seeds "")
      if(EXISTS ${corpus})
        set(seeds ${corpus})
      endif()
      add_test(NAME ${fname}_long
               COMMAND ${fname} -max_total_time=600 -rss_limit_mb=2048
                       -artifact_prefix=${CMAKE_BINARY_DIR}/corpus/${fname}-
                       ${CMAKE_BINARY_DIR}/corpus/${fname} ${seeds})
      set_tests_properties(${fname}_long PROPERTIES LABELS "fuzz-long;slow" TIMEOUT 700)
      file(MAKE_DIRECTORY ${CMAKE_BINARY_DIR}/corpus/${fname})
    else()
      # Without libFuzzer the same target runs once over every committed input (seeds and the
      # crashes fuzzing found), so every build keeps them as regression tests.
      add_executable(${fname} ${f} ${PROJECT_SOURCE_DIR}/cmake/fuzz_replay_main.cpp)
      target_link_libraries(${fname} PRIVATE ${lib} ${A_TEST_DEPS})
    endif()
    if(EXISTS ${corpus})
      if(NPUKIT_FUZZ)
        add_test(NAME ${fname}_corpus COMMAND ${fname} -runs=0 ${corpus})
      else()
        add_test(NAME ${fname}_corpus COMMAND ${fname} ${corpus})
      endif()
      set_tests_properties(${fname}_corpus PROPERTIES LABELS fuzz)
    endif()
  endforeach()
endfunction()
