# CPack pre-build script (CPACK_PRE_BUILD_SCRIPTS): the .deb's prefix is /usr,
# so the relative install destination etc/tandem lands in usr/etc/tandem; Debian
# keeps configs in /etc. Moves it there for the DEB generator only (the tarball
# stays relocatable, etc/ next to bin/).
if(CPACK_GENERATOR STREQUAL "DEB")
  file(GLOB_RECURSE _etc_dirs LIST_DIRECTORIES true "${CPACK_TEMPORARY_INSTALL_DIRECTORY}/*/usr/etc"
       "${CPACK_TEMPORARY_INSTALL_DIRECTORY}/usr/etc")
  foreach(_from ${_etc_dirs})
    if(IS_DIRECTORY "${_from}" AND _from MATCHES "/usr/etc$")
      string(REGEX REPLACE "/usr/etc$" "/etc" _to "${_from}")
      file(RENAME "${_from}" "${_to}")
      message(STATUS "tandem: ${_from} -> ${_to}")
    endif()
  endforeach()
endif()
