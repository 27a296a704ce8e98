# `cmake --install BUILD --prefix P` puts the npukit binary, the libraries (npukit::<area>), their
# headers (P/include/npukit/<area>/*.h), the Python module and a CMake package in place, so that
# another project can say find_package(npukit 0.1 REQUIRED) and link npukit::npukit (every
# library) or one area, e.g. npukit::runtime. examples/cpp is such a project; CI builds it
# against an installed tree.
include(CMakePackageConfigHelpers)
if(TARGET DNNL::dnnl)
  set(NPUKIT_USES_DNNL TRUE)
else()
  set(NPUKIT_USES_DNNL FALSE)
endif()

get_property(npukit_libraries GLOBAL PROPERTY NPUKIT_LIBRARIES)
add_library(npukit_all INTERFACE)
set_target_properties(npukit_all PROPERTIES EXPORT_NAME npukit)
target_link_libraries(npukit_all INTERFACE ${npukit_libraries})
install(TARGETS npukit_all EXPORT npukitTargets)

set(npukit_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/npukit)
install(EXPORT npukitTargets NAMESPACE npukit:: DESTINATION ${npukit_cmake_dir})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/npukitConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/npukitConfig.cmake
                              INSTALL_DESTINATION ${npukit_cmake_dir})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/npukitConfigVersion.cmake
                                 VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/npukitConfig.cmake ${PROJECT_BINARY_DIR}/npukitConfigVersion.cmake
        DESTINATION ${npukit_cmake_dir})
