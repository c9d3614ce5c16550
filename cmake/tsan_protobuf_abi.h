// Force-included into every C++ file of a ThreadSanitizer build (CMakeLists.txt, SPLITSPEC_SANITIZE
// containing "thread").
//
// Why: protobuf 3.21's map_field.h gives MapFieldBase two extra members (seq1_, seq2_, a debug aid
// that makes const/mutable races visible) when __SANITIZE_THREAD__ is defined. Debian's libprotobuf
// is compiled without ThreadSanitizer, so in a TSan build our objects and the library disagree on
// the layout of every map field: google.protobuf.Struct's Map<string, Value>, filled by the
// library's JSON parser and read by header-inlined Map::find, crashed (SEGV) in every test that
// parses JSON. Including map_field.h once with the macro hidden gives our code the library's
// layout; its include guard keeps later includes from re-expanding it. <memory> comes first so that
// libstdc++ (c++config.h, shared_ptr_base.h: _GLIBCXX_TSAN) still sees the macro; protobuf 3.21
// includes no Abseil; so only protobuf's own headers are read without it, and its debug aid is all
// we lose: TSan still instruments every access.
#pragma once
#if defined(__SANITIZE_THREAD__)
#include <memory>
#pragma push_macro("__SANITIZE_THREAD__")
#undef __SANITIZE_THREAD__
#include <google/protobuf/map_field.h>
#pragma pop_macro("__SANITIZE_THREAD__")
#endif
