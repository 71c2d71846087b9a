# Finds libmaelys-sandbox-policy for the Warden Policy adapter's glue and
# checks it against sandbox-policy.pin.
#
# Input:  MAELYS_WARDEN_POLICY_GLUE (AUTO|ON|OFF), MAELYS_SANDBOX_POLICY_DIR
#         (an install prefix, or a source checkout built with its Makefile:
#         include/ with lib/ or build/lib/).
# Output: the imported target MaelysSandboxPolicy::library and
#         MAELYS_SANDBOX_POLICY_FOUND, or MAELYS_SANDBOX_POLICY_SKIP_REASON.

# --------------------------------------------------------------- the pin
function(maelys_read_pin file)
  file(STRINGS "${file}" lines REGEX "^[a-z_]+=")
  foreach(line IN LISTS lines)
    string(REGEX MATCH "^([a-z_]+)=(.*)$" _ "${line}")
    set(pin_${CMAKE_MATCH_1} "${CMAKE_MATCH_2}")
  endforeach()
  if(NOT pin_version MATCHES "^([0-9]+)\\.([0-9]+)\\.([0-9]+)$")
    message(FATAL_ERROR "${file}: version '${pin_version}' is not X.Y.Z")
  endif()
  if(NOT pin_tag STREQUAL "v${pin_version}")
    message(FATAL_ERROR "${file}: tag '${pin_tag}' is not v${pin_version}")
  endif()
  if(NOT pin_commit MATCHES "^[0-9a-f]+$")
    message(FATAL_ERROR "${file}: commit '${pin_commit}' is not hexadecimal")
  endif()
  string(LENGTH "${pin_commit}" n)
  if(NOT n EQUAL 40)
    message(FATAL_ERROR "${file}: commit '${pin_commit}' is not 40 hex digits")
  endif()
  foreach(key sandbox_policy_abi mir_abi mir_format)
    if(NOT pin_${key} MATCHES "^[0-9]+$")
      message(FATAL_ERROR "${file}: ${key} '${pin_${key}}' is not a number")
    endif()
  endforeach()
  foreach(key version tag commit sandbox_policy_abi mir_abi mir_format)
    set(MAELYS_PIN_${key} "${pin_${key}}" PARENT_SCOPE)
  endforeach()
endfunction()

# A numeric #define of `header` (a trailing u is allowed), or "" when absent.
function(maelys_header_number header macro out)
  file(STRINGS "${header}" line REGEX "^#define ${macro} ")
  set(value "")
  if(line MATCHES "^#define ${macro} +\\(?([0-9]+)u?\\)?")
    set(value "${CMAKE_MATCH_1}")
  endif()
  set(${out} "${value}" PARENT_SCOPE)
endfunction()

# Refuses (FATAL_ERROR) a library the adapter was not built for: its ABI must
# serve the pinned one (ABI_COMPATIBLE_SINCE <= pinned <= ABI_VERSION; a
# header without a compatibility floor, ABI 4 and earlier, must equal it), the
# MIR format must be the pinned one exactly, and the release the pinned
# major.minor series.
function(maelys_check_sandbox_policy include_dir)
  set(sp "${include_dir}/maelys/sandbox_policy.h")
  set(mir "${include_dir}/maelys/mir.h")
  maelys_header_number("${sp}" MAELYS_SANDBOX_POLICY_ABI_VERSION abi)
  maelys_header_number("${sp}" MAELYS_SANDBOX_POLICY_ABI_COMPATIBLE_SINCE since)
  maelys_header_number("${mir}" MAELYS_MIR_ABI_VERSION mir_abi)
  maelys_header_number("${mir}" MAELYS_MIR_ABI_COMPATIBLE_SINCE mir_since)
  maelys_header_number("${mir}" MAELYS_MIR_FORMAT_VERSION mir_format)
  file(STRINGS "${sp}" vline REGEX "^#define MAELYS_SANDBOX_POLICY_VERSION ")
  string(REGEX MATCH "\"([0-9]+)\\.([0-9]+)\\.([0-9]+)\"" _ "${vline}")
  set(version "${CMAKE_MATCH_1}.${CMAKE_MATCH_2}.${CMAKE_MATCH_3}")
  set(series "${CMAKE_MATCH_1}.${CMAKE_MATCH_2}")
  if(abi STREQUAL "" OR mir_abi STREQUAL "" OR mir_format STREQUAL "" OR
     series STREQUAL ".")
    message(FATAL_ERROR
      "${sp}: cannot read the Sandbox Policy ABI, MIR ABI, MIR format or "
      "version: is this libmaelys-sandbox-policy?")
  endif()
  if(since STREQUAL "")
    set(since "${abi}")
  endif()
  if(mir_since STREQUAL "")
    set(mir_since "${mir_abi}")
  endif()
  set(pinned "${MAELYS_PIN_sandbox_policy_abi}")
  if(since GREATER pinned OR abi LESS pinned)
    message(FATAL_ERROR
      "libmaelys-sandbox-policy ${version} at ${include_dir} has Sandbox "
      "Policy ABI ${abi} (compatible since ${since}); the Warden Policy "
      "adapter is built for ABI ${pinned} (${MAELYS_PIN_tag}, "
      "adapters/warden-policy/sandbox-policy.pin). Refused: point "
      "MAELYS_SANDBOX_POLICY_DIR at a ${MAELYS_PIN_tag} build, or configure "
      "with -DMAELYS_WARDEN_POLICY_GLUE=OFF.")
  endif()
  if(mir_since GREATER MAELYS_PIN_mir_abi OR mir_abi LESS MAELYS_PIN_mir_abi)
    message(FATAL_ERROR
      "libmaelys-sandbox-policy ${version}: MIR ABI ${mir_abi} (compatible "
      "since ${mir_since}) does not serve the pinned MIR ABI "
      "${MAELYS_PIN_mir_abi}. Refused.")
  endif()
  if(NOT mir_format EQUAL MAELYS_PIN_mir_format)
    message(FATAL_ERROR
      "libmaelys-sandbox-policy ${version}: MIR format v${mir_format}, the "
      "adapter reads v${MAELYS_PIN_mir_format}. Refused.")
  endif()
  string(REGEX MATCH "^[0-9]+\\.[0-9]+" pin_series "${MAELYS_PIN_version}")
  if(NOT series STREQUAL pin_series)
    message(FATAL_ERROR
      "libmaelys-sandbox-policy ${version} is not of the pinned ${pin_series} "
      "series (${MAELYS_PIN_tag}, commit ${MAELYS_PIN_commit}). Refused.")
  endif()
  if(NOT version STREQUAL MAELYS_PIN_version)
    message(STATUS
      "warden-policy: libmaelys-sandbox-policy ${version} is ABI ${abi} like "
      "the pinned ${MAELYS_PIN_tag} (${MAELYS_PIN_commit}); tested only with "
      "the pinned release")
  endif()
  set(MAELYS_SANDBOX_POLICY_VERSION "${version}" PARENT_SCOPE)
  set(MAELYS_SANDBOX_POLICY_ABI "${abi}" PARENT_SCOPE)
endfunction()

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
