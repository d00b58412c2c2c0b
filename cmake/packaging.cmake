# Install rules and the Debian packages (CPack DEB), included last from CMakeLists.txt.
#   cmake --install build            what the packages hold, under CMAKE_INSTALL_PREFIX (/usr)
#   cd build && cpack -G DEB         tandem-agentd_<v>_<arch>.deb and tandemctl_<v>_<arch>.deb
# Packages: tandem-agentd (the agent, and tandem-infer: the same engine, used on the nodes to try
# a model by hand) and tandemctl (the controller and its serve unit). Both run as the system
# user tandem. Their library dependencies are computed by dpkg-shlibdeps, not copied. The
# systemd, sysusers and /etc paths are fixed by systemd and Debian, not by the prefix.
# docs/install.md; tests/packaging/install_test.sh checks the result.
if(CMAKE_INSTALL_PREFIX_INITIALIZED_TO_DEFAULT)
  # The units name /usr/bin/...: install where they look.
  set(CMAKE_INSTALL_PREFIX /usr CACHE PATH "Install prefix" FORCE)
endif()
include(GNUInstallDirs)

set(TANDEM_PACKAGE_CONTACT "tandem maintainers <tandem@localhost.localdomain>" CACHE STRING
  "Maintainer field of the .deb packages")
set(_tandem_unit_dir /lib/systemd/system)
set(_tandem_sysusers_dir /usr/lib/sysusers.d)
set(_pkg_src ${CMAKE_SOURCE_DIR}/packaging)
set(_pkg_out ${CMAKE_BINARY_DIR}/packaging)

# Full RELRO for the shipped programs (lintian: hardening-no-bindnow): every symbol bound at start,
# the relocation table read-only after it. Link-time only.
foreach(_prog tandem-agentd tandem-infer tandemctl)
  target_link_options(${_prog} PRIVATE LINKER:-z,now)
endforeach()
install(TARGETS tandem-agentd tandem-infer RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT agentd)
install(TARGETS tandemctl RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT ctl)
install(FILES ${CMAKE_SOURCE_DIR}/deploy/systemd/tandem-agentd.service
  DESTINATION ${_tandem_unit_dir} COMPONENT agentd)
install(FILES ${CMAKE_SOURCE_DIR}/deploy/systemd/tandemctl-serve.service
  DESTINATION ${_tandem_unit_dir} COMPONENT ctl)
install(FILES ${_pkg_src}/agentd.env DESTINATION /etc/tandem COMPONENT agentd)
install(FILES ${CMAKE_SOURCE_DIR}/deploy/examples/dgx-spark-pair.yaml
  DESTINATION /etc/tandem RENAME cluster.yaml COMPONENT ctl)

# Per package: doc folder (with the Debian copyright and changelog), sysusers file, maintainer
# scripts and conffiles list. deb: package name; comp: install component; unit; state: the
# unit's StateDirectory; conffiles: its files under /etc.
string(TIMESTAMP TANDEM_CHANGELOG_DATE "%a, %d %b %Y %H:%M:%S +0000" UTC)
set(CPACK_PACKAGE_CONTACT "${TANDEM_PACKAGE_CONTACT}")
set(CPACK_DEBIAN_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_DEBIAN_PACKAGE_RELEASE 1)
function(tandem_deb deb comp unit state conffiles)
  set(TANDEM_DEB ${deb})
  set(TANDEM_UNIT ${unit})
  set(TANDEM_STATE_DIR ${state})
  set(out ${_pkg_out}/${deb})
  set(docdir ${CMAKE_INSTALL_DATADIR}/doc/${deb})
  foreach(script postinst prerm postrm)
    configure_file(${_pkg_src}/${script}.in ${out}/${script} @ONLY
      FILE_PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)
  endforeach()
  list(JOIN conffiles "\n" conffiles_text)
  file(WRITE ${out}/conffiles "${conffiles_text}\n")
  configure_file(${_pkg_src}/changelog.in ${out}/changelog @ONLY)
  execute_process(COMMAND gzip -9nf ${out}/changelog)
  install(FILES ${_pkg_src}/tandem.sysusers DESTINATION ${_tandem_sysusers_dir}
    RENAME ${deb}.conf COMPONENT ${comp})
  install(FILES ${_pkg_src}/copyright DESTINATION ${docdir} COMPONENT ${comp})
  install(FILES ${out}/changelog.gz DESTINATION ${docdir} RENAME changelog.Debian.gz COMPONENT ${comp})
  install(FILES ${CMAKE_SOURCE_DIR}/README.md ${CMAKE_SOURCE_DIR}/docs/install.md
    ${CMAKE_SOURCE_DIR}/docs/upgrade.md ${CMAKE_SOURCE_DIR}/docs/security.md
    DESTINATION ${docdir} COMPONENT ${comp})
  string(TOUPPER ${comp} c)
  set(CPACK_DEBIAN_${c}_PACKAGE_NAME ${deb} PARENT_SCOPE)
  set(CPACK_DEBIAN_${c}_PACKAGE_CONTROL_EXTRA
    "${out}/postinst;${out}/prerm;${out}/postrm;${out}/conffiles" PARENT_SCOPE)
endfunction()
tandem_deb(tandem-agentd agentd tandem-agentd.service tandem /etc/tandem/agentd.env)
tandem_deb(tandemctl ctl tandemctl-serve.service tandem-ctl /etc/tandem/cluster.yaml)
install(FILES ${CMAKE_SOURCE_DIR}/docs/orchestration.md ${CMAKE_SOURCE_DIR}/docs/cluster-yaml.md
  ${CMAKE_SOURCE_DIR}/docs/preflight.md DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/tandemctl COMPONENT ctl)
install(DIRECTORY ${CMAKE_SOURCE_DIR}/deploy/examples/
  DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/tandemctl/examples COMPONENT ctl)

set(CPACK_GENERATOR DEB)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL agentd ctl)
set(CPACK_PACKAGE_NAME tandem)
set(CPACK_PACKAGE_VENDOR "tandem")
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
# Installed binaries are stripped (the debug build stays in build/); lintian asks for it.
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# systemd: the units, systemd-sysusers in postinst.
set(CPACK_DEBIAN_PACKAGE_DEPENDS "systemd")
# Synopsis, then the long description; CPack indents the lines and turns an empty one into " .".
set(CPACK_DEBIAN_AGENTD_DESCRIPTION "tandem node agent: one rank of a multi-node LLM engine
tandem-agentd runs on every node of a tandem cluster (systemd unit
tandem-agentd.service, user tandem). It reports node facts (driver, kernel,
memory, GPUs, RDMA devices), hashes model weights for the controller's
preflight, exports Prometheus metrics and hosts one tensor-parallel rank of
the engine (on the head node also the OpenAI API).

Also holds tandem-infer, the engine's command line (tokenize, generate,
serve from one process).")
set(CPACK_DEBIAN_CTL_DESCRIPTION "tandem controller: preflight, bring-up and reconciler
tandemctl checks that the nodes of a tandem cluster can form one engine
(preflight), brings the group up and down, probes it, and with
tandemctl-serve.service (user tandem) keeps it serving. It also makes the
cluster's TLS certificates.")

# A CUDA build links NCCL from wherever CMake found it (a package, or /usr/local/cuda from a
# runfile): dpkg-shlibdeps must find the library to read it, and declares it only when a package
# holds it (otherwise it is left to the operator: docs/install.md).
if(TANDEM_CUDA)
  get_filename_component(_nccl_dir "${NCCL_LIBRARY}" DIRECTORY)
  list(APPEND CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${_nccl_dir} ${CUDAToolkit_LIBRARY_DIR})
endif()

# Debian's name for the target CPU (a cross build: cmake/toolchain-aarch64-linux-gnu.cmake).
if(CMAKE_CROSSCOMPILING)
  if(CMAKE_SYSTEM_PROCESSOR STREQUAL "aarch64")
    set(CPACK_DEBIAN_PACKAGE_ARCHITECTURE arm64)
  elseif(CMAKE_SYSTEM_PROCESSOR STREQUAL "x86_64")
    set(CPACK_DEBIAN_PACKAGE_ARCHITECTURE amd64)
  endif()
  # dpkg-shlibdeps finds the target's libraries in the cross root (scripts/cross-arm64.sh gives
  # it that root's dpkg record); Debian's gloo is in /usr/lib, not the multiarch folder.
  set(_root_lib "${CMAKE_SYSROOT}/usr/lib")
  list(APPEND CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS
    "${_root_lib}/${CMAKE_LIBRARY_ARCHITECTURE}" "${CMAKE_SYSROOT}/lib/${CMAKE_LIBRARY_ARCHITECTURE}" "${_root_lib}")
endif()
include(CPack)
