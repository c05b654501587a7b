# KARA_KERNELS_ONLY: the CPU kernel table and the kernel tests, nothing that
# needs libyaml or the runtime, so the kernels of another architecture can be
# cross-compiled and tested under an emulator (tools/ci_neon.sh builds the
# aarch64 NEON kernels this way and runs them under qemu-aarch64).
add_subdirectory(platform)
add_subdirectory(kernels_cpu)

add_library(kara_kernels_test_util STATIC ${PROJECT_SOURCE_DIR}/tests/common/test_util.c)
target_include_directories(kara_kernels_test_util PUBLIC ${PROJECT_SOURCE_DIR}/tests/common)
target_compile_definitions(kara_kernels_test_util PUBLIC _GNU_SOURCE
  KARA_SOURCE_DIR="${PROJECT_SOURCE_DIR}" KARA_BINARY_DIR="${PROJECT_BINARY_DIR}")

enable_testing()
# The kernel tests that need only the kernel table (test_quant_golden reads
# GGUF files through the runtime, so it stays with the full build).
foreach(name test_kernel_parity test_quant_roundtrip test_gemm_nt test_attn_q8 test_repack)
  if(EXISTS ${PROJECT_SOURCE_DIR}/tests/kernels/${name}.c)
    add_executable(${name} ${PROJECT_SOURCE_DIR}/tests/kernels/${name}.c
      $<TARGET_OBJECTS:kara_kernels_cpu> $<TARGET_OBJECTS:kara_platform>)
    target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/kernels_cpu ${PROJECT_SOURCE_DIR}/platform)
    target_link_libraries(${name} PRIVATE kara_kernels_test_util Threads::Threads m)
    if(OpenMP_C_FOUND)
      target_link_libraries(${name} PRIVATE OpenMP::OpenMP_C)
    endif()
    add_test(NAME kernels/${name} COMMAND ${name})
    set_tests_properties(kernels/${name} PROPERTIES LABELS kernels SKIP_RETURN_CODE 77 TIMEOUT 600)
  endif()
endforeach()

# One matmul of the kernel table, for instruction counts under the emulator
# (tools/bench/neon_insns.sh): the speed proxy of the NEON kernels.
add_executable(kara_kernel_insns ${PROJECT_SOURCE_DIR}/tools/bench/kernel_insns.c
  $<TARGET_OBJECTS:kara_kernels_cpu> $<TARGET_OBJECTS:kara_platform>)
target_include_directories(kara_kernel_insns PRIVATE ${PROJECT_SOURCE_DIR}/kernels_cpu ${PROJECT_SOURCE_DIR}/platform)
target_link_libraries(kara_kernel_insns PRIVATE Threads::Threads m)
if(OpenMP_C_FOUND)
  target_link_libraries(kara_kernel_insns PRIVATE OpenMP::OpenMP_C)
endif()
