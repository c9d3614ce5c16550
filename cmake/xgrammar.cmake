# xgrammar's C++ core (Apache-2.0), the structured-output engine of runtime/grammar/.
# deploy/build_xgrammar.sh (run by deploy/setup.sh) builds it from the PyPI sdist and installs
# lib/libxgrammar.a and include/{xgrammar,dlpack}/ under /usr/local, where this finds it
# without a hint; built elsewhere (SPLITSPEC_XGRAMMAR_PREFIX=DIR deploy/build_xgrammar.sh),
# configure with -DSPLITSPEC_XGRAMMAR_PREFIX=DIR. Defines the imported target xgrammar::xgrammar.
set(SPLITSPEC_XGRAMMAR_PREFIX "" CACHE PATH "Where deploy/build_xgrammar.sh installed xgrammar")
find_path(XGRAMMAR_INCLUDE_DIR xgrammar/xgrammar.h HINTS "${SPLITSPEC_XGRAMMAR_PREFIX}/include")
find_library(XGRAMMAR_LIBRARY NAMES libxgrammar.a HINTS "${SPLITSPEC_XGRAMMAR_PREFIX}/lib")
if(NOT XGRAMMAR_INCLUDE_DIR OR NOT XGRAMMAR_LIBRARY)
  message(FATAL_ERROR
    "xgrammar not found (xgrammar/xgrammar.h: ${XGRAMMAR_INCLUDE_DIR}, libxgrammar.a: "
    "${XGRAMMAR_LIBRARY}). Run deploy/build_xgrammar.sh (deploy/setup.sh does), or pass "
    "-DSPLITSPEC_XGRAMMAR_PREFIX=DIR where it was installed.")
endif()
add_library(xgrammar::xgrammar STATIC IMPORTED)
set_target_properties(xgrammar::xgrammar PROPERTIES
  IMPORTED_LOCATION "${XGRAMMAR_LIBRARY}"
  # SYSTEM: upstream's headers are not held to this project's warning flags.
  INTERFACE_SYSTEM_INCLUDE_DIRECTORIES "${XGRAMMAR_INCLUDE_DIR}"
  INTERFACE_INCLUDE_DIRECTORIES "${XGRAMMAR_INCLUDE_DIR}"
  INTERFACE_LINK_LIBRARIES Threads::Threads)
