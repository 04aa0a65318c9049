# LibTorch: Debian's CPU libtorch-dev in CI; a CUDA LibTorch (e.g. the PyTorch wheel's, pointed to
# by CMAKE_PREFIX_PATH) on GPU machines. CUDA support is detected, never required.
# Protobuf first: the PyTorch wheels' Caffe2Config defines protobuf::libprotobuf as an empty
# target when none exists yet, which would leave the parameter server's messages unlinked.
find_package(Protobuf REQUIRED)
find_package(Torch REQUIRED)

set(CIFAR_WITH_CUDA OFF)
if(TARGET torch_cuda OR CAFFE2_USE_CUDA)
  set(CIFAR_WITH_CUDA ON)
endif()
message(STATUS "cifartrain: LibTorch ${Torch_VERSION}, CUDA support: ${CIFAR_WITH_CUDA}")

# One interface target carries torch, its flags and the CUDA switch, so parts link just this.
add_library(cifar_torch INTERFACE)
target_link_libraries(cifar_torch INTERFACE ${TORCH_LIBRARIES})
# -pthread everywhere torch is: gRPC's targets add it (it defines _REENTRANT), and GCC refuses a
# PCH built without it. (FindThreads adds no flag where glibc has pthreads built in.)
target_compile_options(cifar_torch INTERFACE ${TORCH_CXX_FLAGS} -pthread)
if(CIFAR_WITH_CUDA)
  target_compile_definitions(cifar_torch INTERFACE CIFAR_WITH_CUDA=1)
endif()

# A shared precompiled header: a TU including torch costs ~20 s on 2 cores without it.
add_library(cifar_torch_pch STATIC ${CMAKE_CURRENT_LIST_DIR}/torch_pch.cpp)
target_link_libraries(cifar_torch_pch PUBLIC cifar_torch)
target_precompile_headers(cifar_torch_pch PRIVATE <torch/torch.h>)
# GCC only accepts a PCH built with the same language-affecting flags (-Wpedantic is one).
cifar_warnings(cifar_torch_pch)

# Whether `file` includes a torch header, itself or through the project's headers it includes
# (found beside it, or under the repository root, runtime/ or operator/). Memoized per file.
function(_cifar_reaches_torch file result)
  get_property(known GLOBAL PROPERTY "cifar_reaches_torch:${file}" SET)
  if(known)
    get_property(reaches GLOBAL PROPERTY "cifar_reaches_torch:${file}")
    set(${result} ${reaches} PARENT_SCOPE)
    return()
  endif()
  set_property(GLOBAL PROPERTY "cifar_reaches_torch:${file}" FALSE)  # an include cycle ends here
  set(reaches FALSE)
  file(STRINGS "${file}" includes REGEX "^[ \t]*#[ \t]*include[ \t]*[<\"]")
  get_filename_component(here "${file}" DIRECTORY)
  foreach(line IN LISTS includes)
    if(line MATCHES "<(torch|ATen|c10)/")
      set(reaches TRUE)
      break()
    endif()
    if(NOT line MATCHES "\"([^\"]+)\"")
      continue()
    endif()
    foreach(dir IN ITEMS "${here}" "${PROJECT_SOURCE_DIR}" "${PROJECT_SOURCE_DIR}/runtime"
                        "${PROJECT_SOURCE_DIR}/operator")
      if(EXISTS "${dir}/${CMAKE_MATCH_1}")
        _cifar_reaches_torch("${dir}/${CMAKE_MATCH_1}" reaches)
        break()
      endif()
    endforeach()
    if(reaches)
      break()
    endif()
  endforeach()
  set_property(GLOBAL PROPERTY "cifar_reaches_torch:${file}" ${reaches})
  set(${result} ${reaches} PARENT_SCOPE)
endfunction()

# The target's .cpp files that include torch (itself or through project headers) in `with`, the
# others in `without`, as the target names them.
function(_cifar_sources_by_torch target with without)
  set(reaching)
  set(not_reaching)
  get_target_property(sources ${target} SOURCES)
  foreach(source IN LISTS sources)
    get_filename_component(path "${source}" ABSOLUTE)
    if(NOT path MATCHES "\\.cpp$" OR NOT EXISTS "${path}")
      continue()
    endif()
    _cifar_reaches_torch("${path}" reaches)
    if(reaches)
      list(APPEND reaching "${source}")
    else()
      list(APPEND not_reaching "${source}")
    endif()
  endforeach()
  set(${with} ${reaching} PARENT_SCOPE)
  set(${without} ${not_reaching} PARENT_SCOPE)
endfunction()

# cifar_use_torch(<target>): link torch and reuse the shared precompiled header in the target's
# files that include torch. The others compile without it: loading the PCH costs a file that does
# not need it ~8 s on these machines (3.8 s against 12.2 s for done_marker.cpp).
function(cifar_use_torch target)
  target_link_libraries(${target} PUBLIC cifar_torch)
  target_precompile_headers(${target} REUSE_FROM cifar_torch_pch)
  _cifar_sources_by_torch(${target} with_torch without_torch)
  foreach(source IN LISTS without_torch)
    set_source_files_properties("${source}" PROPERTIES SKIP_PRECOMPILE_HEADERS ON)
  endforeach()
endfunction()

# cifar_use_torch_where_included(<target>): cifar_use_torch if one of the target's files includes
# torch; a binary that does not load torch starts in milliseconds instead of ~0.5 s of CPU (its
# operator registrations), which a test suite of hundreds of one-case processes feels.
function(cifar_use_torch_where_included target)
  _cifar_sources_by_torch(${target} with_torch without_torch)
  if(with_torch)
    cifar_use_torch(${target})
  endif()
endfunction()
