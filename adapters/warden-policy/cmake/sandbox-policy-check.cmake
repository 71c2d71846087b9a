# The pin of the Warden Policy adapter and the check of a
# libmaelys-sandbox-policy against it (functions only; used at configure time
# by sandbox-policy.cmake and by the test tests/pin-check.cmake).

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
