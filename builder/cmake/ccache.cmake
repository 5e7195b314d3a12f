# ccache, where installed, turns the rebuild of unchanged sources (a fresh
# clone, the sanitizer and fuzzing trees) into cache reads; the Makefile sets
# CCACHE_BASEDIR and CCACHE_NOHASHDIR so that clones in other folders share
# it. Included by the builder's project and by the fuzzing project.
option(EB_CCACHE "Compile through ccache where it is installed" ON)
find_program(EB_CCACHE_PROGRAM ccache)
if(EB_CCACHE AND EB_CCACHE_PROGRAM AND NOT CMAKE_CXX_COMPILER_LAUNCHER)
  set(CMAKE_CXX_COMPILER_LAUNCHER "${EB_CCACHE_PROGRAM}")
endif()
