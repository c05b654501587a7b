# What `cmake --install` writes besides the library, the header and the
# command: a CMake package (find_package(kara) gives kara::kara) and a
# pkg-config file (pkg-config --cflags --libs kara). libkara.a is static, so
# both carry the libraries it needs: libyaml, threads, libm and, when the
# build uses them, OpenMP and the CUDA toolkit's static runtime.
include(CMakePackageConfigHelpers)
set(KARA_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/kara)
set(KARA_WITH_OPENMP ${OpenMP_C_FOUND})
install(EXPORT kara-targets NAMESPACE kara:: DESTINATION ${KARA_CMAKE_DIR})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/kara-config.cmake.in
                              ${PROJECT_BINARY_DIR}/kara-config.cmake INSTALL_DESTINATION ${KARA_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/kara-config-version.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/kara-config.cmake ${PROJECT_BINARY_DIR}/kara-config-version.cmake
        DESTINATION ${KARA_CMAKE_DIR})

set(KARA_PC_LIBS "-lkara -lyaml -lpthread -lm")
if(OpenMP_C_FOUND)
  string(APPEND KARA_PC_LIBS " ${OpenMP_C_FLAGS}")
endif()
# The CUDA backend: the toolkit's static runtime by name (cuBLAS is opened at
# run time), from the directory of the variable cuda_libdir, which a user
# with the toolkit elsewhere overrides (pkg-config --define-variable).
set(KARA_PC_VARS "")
if(KARA_CUDA_ENABLED)
  set(KARA_PC_VARS "cuda_libdir=${CUDAToolkit_LIBRARY_DIR}\n")
  string(APPEND KARA_PC_LIBS " -L\${cuda_libdir} -lcudart_static -ldl -lrt -lstdc++")
endif()
# Relocatable: the prefix is found from where kara.pc lies, so an install
# with --prefix P (or DESTDIR) works as well as the configured prefix.
file(RELATIVE_PATH KARA_PC_UP /_/${CMAKE_INSTALL_LIBDIR}/pkgconfig /_)
configure_file(${PROJECT_SOURCE_DIR}/cmake/kara.pc.in ${PROJECT_BINARY_DIR}/kara.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/kara.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
