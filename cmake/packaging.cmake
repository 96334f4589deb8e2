# The .deb (`cpack -G DEB` in the build directory): what `cmake --install` puts in place, under
# /usr: bin/lockstep, lib/liblockstep.so (where the CLI looks for its shim: ../lib next to its
# binary), include/lockstep/lockstep.h and the Python package in lib/python3/dist-packages.
# Each part's install() rules sit with its targets; this file only describes the package.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME lockstep)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "lockstep maintainers <lockstep@invalid>")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "bit-for-bit audit traces of GPU training runs")
# The CUDA driver and toolkit are not Debian packages (NVIDIA's): a prerequisite of the traced
# job, stated here and in README's Install section, not a dependency.
# The control file's long description (CPack puts the summary above it and indents each line).
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION
    "liblockstep.so is preloaded into a CUDA job (lockstep run) and records its kernel
launches, NCCL collectives and cuBLAS calls with fingerprints of their buffers; lockstep diff
names the first op whose inputs matched and whose outputs differed. The Python package
(python3 -c 'import lockstep') reads and diffs runs.
.
Tracing needs an NVIDIA driver for CUDA 13 (580 or later) and a job built for CUDA 13.
Reading and diffing traces needs no GPU.")
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION devel)
# The shared libraries the binaries link (libfmt, libstdc++, libc...) named by dpkg-shlibdeps;
# xxHash is compiled in, nlohmann/json is headers only, protobuf-lite is linked statically
# (CMakeLists.txt). The extension is built for one python3 minor version.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
if(LOCKSTEP_PYTHON_VERSION)
  string(REGEX MATCH "^[0-9]+\\.([0-9]+)" _ "${LOCKSTEP_PYTHON_VERSION}")
  math(EXPR _next_minor "${CMAKE_MATCH_1} + 1")
  set(CPACK_DEBIAN_PACKAGE_DEPENDS
      "python3 (>= ${LOCKSTEP_PYTHON_VERSION}), python3 (<< 3.${_next_minor})")
  set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "python3-pandas")
endif()
# RelWithDebInfo objects carry debug info the package does not need.
set(CPACK_STRIP_FILES ON)
include(CPack)
