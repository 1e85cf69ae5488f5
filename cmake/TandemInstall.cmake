# Install layout and packages (docs/operations.md, "Install"). Components:
# programs (bin/), config (etc/tandem, systemd units), doc (share/tandem); the
# packages hold all three.
#
#   cmake --install build --prefix P     P/bin, P/etc/tandem, P/lib/systemd/system, P/share/tandem
#   cpack -G TGZ (in build/)             the same tree under tandem-<version>-Linux/, relocatable
#   cpack -G DEB (in build/)             /usr/bin, /etc/tandem (conffiles), /usr/lib/systemd/system,
#                                        /usr/share/tandem; Depends from dpkg-shlibdeps
#
# The programs find nothing through this checkout: no RPATH (we install no shared
# library of our own), no data files looked up at run time, and __FILE__ is
# relative to the source root (CMakeLists.txt).
include(GNUInstallDirs)

set(CMAKE_SKIP_INSTALL_RPATH ON)
foreach(_program tandem-router tandem-prefill tandem-decode tandem-ctl tandem-make-model tandem-generate
                 tandem-bench-serving tandem-profile)
  if(TARGET ${_program})  # the router and tandem-generate are skipped without PCRE2/utf8proc
    install(TARGETS ${_program} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT programs)
  endif()
endforeach()

# Configs an operator edits: one file per process; the systemd units read
# router.yaml, prefill-<instance>.yaml and decode-<instance>.yaml.
set(TANDEM_INSTALL_CONFDIR etc/tandem)
install(FILES deploy/router.yaml DESTINATION ${TANDEM_INSTALL_CONFDIR} COMPONENT config)
install(FILES deploy/prefill.yaml DESTINATION ${TANDEM_INSTALL_CONFDIR} RENAME prefill-0.yaml COMPONENT config)
install(FILES deploy/decode.yaml DESTINATION ${TANDEM_INSTALL_CONFDIR} RENAME decode-0.yaml COMPONENT config)
install(FILES deploy/systemd/tandem-router.service deploy/systemd/tandem-prefill@.service
              deploy/systemd/tandem-decode@.service
        DESTINATION lib/systemd/system COMPONENT config)
# Read-only material: the documentation, pristine copies of the configs, the
# Kubernetes manifests, the Prometheus alert rules and the container recipe.
install(FILES README.md docs/operations.md docs/metrics.md docs/protocol.md docs/architecture.md docs/planner.md
        DESTINATION ${CMAKE_INSTALL_DATADIR}/tandem/doc COMPONENT doc)
install(FILES deploy/router.yaml deploy/prefill.yaml deploy/decode.yaml
        DESTINATION ${CMAKE_INSTALL_DATADIR}/tandem/examples/config COMPONENT doc)
install(DIRECTORY deploy/k8s deploy/prometheus deploy/container DESTINATION ${CMAKE_INSTALL_DATADIR}/tandem/examples
        COMPONENT doc)

set(CPACK_PACKAGE_NAME tandem)
set(CPACK_PACKAGE_VENDOR "Tandem")
set(CPACK_PACKAGE_CONTACT "Tandem maintainers <tandem@invalid>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "LLM server with disaggregated prefill and decode")
set(CPACK_PACKAGE_DESCRIPTION
    "Tandem serves large language models with an OpenAI-compatible router and separate prefill and decode node pools that move the KV cache between them.")
set(CPACK_GENERATOR "DEB;TGZ")
set(CPACK_STRIP_FILES ON)
set(CPACK_PACKAGE_CHECKSUM SHA256)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
if(TANDEM_CUDA)
  # CUDA libraries come from the NVIDIA runtime image or the host's CUDA install,
  # often outside any Debian package: let dpkg-shlibdeps pass over them.
  set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${CUDAToolkit_LIBRARY_DIR})
endif()
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA ${PROJECT_SOURCE_DIR}/deploy/debian/conffiles
    ${PROJECT_SOURCE_DIR}/deploy/debian/postinst ${PROJECT_SOURCE_DIR}/deploy/debian/postrm)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
# The .deb installs under /usr, but configs belong in /etc: moved before packing.
set(CPACK_PRE_BUILD_SCRIPTS ${PROJECT_SOURCE_DIR}/cmake/TandemDebLayout.cmake)
include(CPack)
