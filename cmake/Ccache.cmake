# ccache makes rebuilds on 2-core machines bearable. Precompiled headers need its pch sloppiness.
# CCACHE_BASEDIR makes the paths under the checkout relative, so a fresh clone elsewhere (CI's)
# hits the cache that another checkout filled.
find_program(CCACHE_PROGRAM ccache)
if(CCACHE_PROGRAM)
  set(CMAKE_CXX_COMPILER_LAUNCHER
      ${CMAKE_COMMAND} -E env
      "CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime"
      "CCACHE_BASEDIR=${PROJECT_SOURCE_DIR}"
      ${CCACHE_PROGRAM})
endif()
