# One helper per kind of target (abseil's absl_cc_library, leveldb's leveldb_test).
#
#   splitspec_runtime_sources(a.cc b.cc)          adds sources to the one runtime library
#   splitspec_cc_binary(NAME n SRCS ... DEPS ...)   a service or tool binary
#   splitspec_cc_test(NAME n SRCS ... DEPS ... LABELS unit|integration|gpu [TIMEOUT s])
#     (unit-labelled tests are also collected into the target splitspec_unit_tests,
#      which the sanitizer presets build)
#
# Sources are listed explicitly; no GLOB.

include(GoogleTest)

function(splitspec_runtime_sources)
  target_sources(splitspec_runtime PRIVATE ${ARGN})
endfunction()

function(splitspec_cc_binary)
  cmake_parse_arguments(ARG "" "NAME;OUTPUT_NAME" "SRCS;DEPS" ${ARGN})
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
  target_link_libraries(${ARG_NAME} PRIVATE ${ARG_DEPS} GTest::gtest GTest::gtest_main)
  target_compile_definitions(${ARG_NAME} PRIVATE
    SPLITSPEC_BIN_DIR="${PROJECT_BINARY_DIR}/bin"
    SPLITSPEC_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
  set_target_properties(${ARG_NAME} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/tests)
  if("unit" IN_LIST ARG_LABELS)
    set_property(GLOBAL APPEND PROPERTY SPLITSPEC_UNIT_TEST_TARGETS ${ARG_NAME})
  endif()
  gtest_discover_tests(${ARG_NAME}
    DISCOVERY_MODE PRE_TEST
    PROPERTIES LABELS "${ARG_LABELS}" TIMEOUT ${ARG_TIMEOUT})
endfunction()
