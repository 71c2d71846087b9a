# Finds libmaelys-sandbox-policy for the Warden Policy adapter's glue and
# checks it against sandbox-policy.pin.
#
# Input:  MAELYS_WARDEN_POLICY_GLUE (AUTO|ON|OFF), MAELYS_SANDBOX_POLICY_DIR
#         (an install prefix, or a source checkout built with its Makefile:
#         include/ with lib/ or build/lib/).
# Output: the imported target MaelysSandboxPolicy::library and
#         MAELYS_SANDBOX_POLICY_FOUND, or MAELYS_SANDBOX_POLICY_SKIP_REASON.

include(${CMAKE_CURRENT_LIST_DIR}/sandbox-policy-check.cmake)

# ---------------------------------------------------------------- search
maelys_read_pin("${CMAKE_CURRENT_LIST_DIR}/../sandbox-policy.pin")
set(MAELYS_SANDBOX_POLICY_FOUND FALSE)
set(MAELYS_SANDBOX_POLICY_SKIP_REASON "")

if(MAELYS_WARDEN_POLICY_GLUE STREQUAL "OFF")
  set(MAELYS_SANDBOX_POLICY_SKIP_REASON
      "the glue is turned off (-DMAELYS_WARDEN_POLICY_GLUE=OFF)")
elseif(NOT MAELYS_WARDEN_POLICY_GLUE MATCHES "^(AUTO|ON)$")
  message(FATAL_ERROR "MAELYS_WARDEN_POLICY_GLUE is '${MAELYS_WARDEN_POLICY_GLUE}'; "
                      "give AUTO, ON or OFF")
else()
  set(sp_include "")
  set(sp_libs "")
  if(MAELYS_SANDBOX_POLICY_DIR)
    # Asked for explicitly: not finding it is an error in every mode.
    set(dir "${MAELYS_SANDBOX_POLICY_DIR}")
    if(NOT EXISTS "${dir}/include/maelys/sandbox_policy.h")
      message(FATAL_ERROR "MAELYS_SANDBOX_POLICY_DIR=${dir} has no "
                          "include/maelys/sandbox_policy.h")
    endif()
    foreach(sub lib build/lib)
      if(NOT sp_libs AND EXISTS "${dir}/${sub}/libmaelys-sandbox-policy.a" AND
         EXISTS "${dir}/${sub}/libmaelys-mir.a")
        set(sp_libs "${dir}/${sub}/libmaelys-sandbox-policy.a"
                    "${dir}/${sub}/libmaelys-mir.a")
      endif()
    endforeach()
    if(NOT sp_libs)
      message(FATAL_ERROR "MAELYS_SANDBOX_POLICY_DIR=${dir} has no "
                          "libmaelys-sandbox-policy.a and libmaelys-mir.a in "
                          "lib/ or build/lib/ (build it with its Makefile)")
    endif()
    set(sp_include "${dir}/include")
    set(how "MAELYS_SANDBOX_POLICY_DIR=${dir}")
  else()
    pkg_check_modules(MAELYS_SP QUIET maelys-sandbox-policy)
    if(MAELYS_SP_FOUND)
      # The library ships static archives only; link them by full path, the
      # policy library before the MIR library it depends on.
      foreach(name maelys-sandbox-policy maelys-mir)
        find_library(MAELYS_SP_${name}_ARCHIVE NAMES lib${name}.a
                     HINTS ${MAELYS_SP_LIBRARY_DIRS} NO_DEFAULT_PATH)
        if(MAELYS_SP_${name}_ARCHIVE)
          list(APPEND sp_libs "${MAELYS_SP_${name}_ARCHIVE}")
        endif()
      endforeach()
      list(GET MAELYS_SP_INCLUDE_DIRS 0 sp_include)
      if(NOT sp_include)
        set(sp_include "${MAELYS_SP_INCLUDEDIR}")
      endif()
      set(how "pkg-config maelys-sandbox-policy")
    endif()
  endif()
  list(LENGTH sp_libs nlibs)
  if(sp_include AND nlibs EQUAL 2)
    maelys_check_sandbox_policy("${sp_include}")
    add_library(MaelysSandboxPolicy::library INTERFACE IMPORTED)
    set_target_properties(MaelysSandboxPolicy::library PROPERTIES
      INTERFACE_INCLUDE_DIRECTORIES "${sp_include}"
      INTERFACE_LINK_LIBRARIES "${sp_libs}")
    set(MAELYS_SANDBOX_POLICY_FOUND TRUE)
    set(MAELYS_SANDBOX_POLICY_ARCHIVES ${sp_libs})
    message(STATUS "warden-policy: glue built against libmaelys-sandbox-policy "
                   "${MAELYS_SANDBOX_POLICY_VERSION} (ABI "
                   "${MAELYS_SANDBOX_POLICY_ABI}) from ${how}")
  elseif(MAELYS_WARDEN_POLICY_GLUE STREQUAL "ON")
    message(FATAL_ERROR
      "MAELYS_WARDEN_POLICY_GLUE=ON but libmaelys-sandbox-policy was not "
      "found: give -DMAELYS_SANDBOX_POLICY_DIR=<prefix or built checkout of "
      "${MAELYS_PIN_tag}> or make pkg-config find maelys-sandbox-policy")
  else()
    string(CONCAT MAELYS_SANDBOX_POLICY_SKIP_REASON
           "libmaelys-sandbox-policy (${MAELYS_PIN_tag}) was not found: give "
           "-DMAELYS_SANDBOX_POLICY_DIR=<prefix> or make pkg-config find "
           "maelys-sandbox-policy")
  endif()
endif()

if(NOT MAELYS_SANDBOX_POLICY_FOUND)
  message(STATUS "warden-policy: the sandbox-policy glue is skipped: "
                 "${MAELYS_SANDBOX_POLICY_SKIP_REASON}")
endif()
