# One helper per kind of target (abseil's absl_cc_library, leveldb's leveldb_test).
#
#   splitspec_cc_library(NAME n SRCS ... HDRS ... DEPS ... [TESTONLY])
#     one layer's library (runtime/CMakeLists.txt has the layer DAG): every library it
#     includes from is in DEPS, linked PUBLIC; sources include "folder/file.h" from the
#     repository root. No SRCS: a header-only INTERFACE library. TESTONLY: test helpers;
#     only TESTONLY libraries, tests and TESTONLY binaries may link one.
#   splitspec_cc_binary(NAME n SRCS ... DEPS ... [TESTONLY])   a service or tool binary
#   splitspec_cc_test(NAME n SRCS ... DEPS ... LABELS unit|integration|gpu [TIMEOUT s])
#     (unit-labelled tests are also collected into the target splitspec_unit_tests,
#      which the sanitizer presets build; gpu-labelled ones into splitspec_gpu_tests,
#      which tools/gpu/bundle.sh packs; they get tests/testing/gpu_test_main.cc as main(),
#      so that SPLITSPEC_REQUIRE_GPU=1 turns a skip into a failure)
#
# Sources are listed explicitly; no GLOB.

include(GoogleTest)

# Fails the configure when a product target (not TESTONLY) lists a TESTONLY library.
function(_splitspec_refuse_testonly_deps name testonly)
  if(testonly)
    return()
  endif()
  foreach(dep IN LISTS ARGN)
    if(TARGET ${dep})
      get_target_property(dep_testonly ${dep} SPLITSPEC_TESTONLY)
      if(dep_testonly)
        message(FATAL_ERROR "${name} is product code but links the TESTONLY library ${dep}")
      endif()
    endif()
  endforeach()
endfunction()

function(splitspec_cc_library)
  cmake_parse_arguments(ARG "TESTONLY" "NAME" "SRCS;HDRS;DEPS" ${ARGN})
  _splitspec_refuse_testonly_deps(${ARG_NAME} "${ARG_TESTONLY}" ${ARG_DEPS})
  if(ARG_SRCS)
    add_library(${ARG_NAME} STATIC ${ARG_SRCS} ${ARG_HDRS})
    target_include_directories(${ARG_NAME} PUBLIC ${PROJECT_SOURCE_DIR})
    target_link_libraries(${ARG_NAME} PUBLIC ${ARG_DEPS})
  else()
    add_library(${ARG_NAME} INTERFACE ${ARG_HDRS})
    target_include_directories(${ARG_NAME} INTERFACE ${PROJECT_SOURCE_DIR})
    target_link_libraries(${ARG_NAME} INTERFACE ${ARG_DEPS})
  endif()
  set_target_properties(${ARG_NAME} PROPERTIES SPLITSPEC_TESTONLY "${ARG_TESTONLY}")
endfunction()

function(splitspec_cc_binary)
  cmake_parse_arguments(ARG "TESTONLY" "NAME;OUTPUT_NAME" "SRCS;DEPS" ${ARGN})
  _splitspec_refuse_testonly_deps(${ARG_NAME} "${ARG_TESTONLY}" ${ARG_DEPS})
  add_executable(${ARG_NAME} ${ARG_SRCS})
  target_link_libraries(${ARG_NAME} PRIVATE ${ARG_DEPS})
  if(ARG_OUTPUT_NAME)
    set_target_properties(${ARG_NAME} PROPERTIES OUTPUT_NAME ${ARG_OUTPUT_NAME})
  endif()
  set_target_properties(${ARG_NAME} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/bin)
endfunction()

function(splitspec_cc_test)
  cmake_parse_arguments(ARG "" "NAME;TIMEOUT" "SRCS;DEPS;LABELS" ${ARGN})
  if(NOT ARG_LABELS)
    message(FATAL_ERROR "splitspec_cc_test(${ARG_NAME}): LABELS is required (unit, integration, gpu)")
  endif()
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 300)
  endif()
  add_executable(${ARG_NAME} ${ARG_SRCS})
  if("gpu" IN_LIST ARG_LABELS)
    target_link_libraries(${ARG_NAME} PRIVATE ${ARG_DEPS} GTest::gtest splitspec_gpu_test_main)
  else()
    target_link_libraries(${ARG_NAME} PRIVATE ${ARG_DEPS} GTest::gtest GTest::gtest_main)
  endif()
  target_compile_definitions(${ARG_NAME} PRIVATE
    SPLITSPEC_BIN_DIR="${PROJECT_BINARY_DIR}/bin"
    SPLITSPEC_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
  set_target_properties(${ARG_NAME} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/tests)
  if("unit" IN_LIST ARG_LABELS)
    set_property(GLOBAL APPEND PROPERTY SPLITSPEC_UNIT_TEST_TARGETS ${ARG_NAME})
  endif()
  if("gpu" IN_LIST ARG_LABELS)
    set_property(GLOBAL APPEND PROPERTY SPLITSPEC_GPU_TEST_TARGETS ${ARG_NAME})
  endif()
  gtest_discover_tests(${ARG_NAME}
    DISCOVERY_MODE PRE_TEST
    PROPERTIES LABELS "${ARG_LABELS}" TIMEOUT ${ARG_TIMEOUT})
endfunction()
