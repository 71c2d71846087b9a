# The configure-time check of a libmaelys-sandbox-policy against
# sandbox-policy.pin, on headers written here: the pinned ABI 4 is accepted
# (and another 0.4.x release of it, with a note), ABI 3, ABI 5-7 (which are
# not compatible with 4) and another MIR format are refused, and so is a
# malformed pin. Needs no policy library, so it always runs.
#
#   cmake -DWORK=<scratch dir> -P pin-check.cmake
# Internally re-runs itself with -DCASE=<dir> [-DPIN=<file>] for each case,
# since a refusal is a FATAL_ERROR.

set(here "${CMAKE_CURRENT_LIST_DIR}/..")
include("${here}/cmake/sandbox-policy-check.cmake")

if(DEFINED CASE)
  if(NOT DEFINED PIN)
    set(PIN "${here}/sandbox-policy.pin")
  endif()
  maelys_read_pin("${PIN}")
  maelys_check_sandbox_policy("${CASE}")
  message(STATUS "accepted ${MAELYS_SANDBOX_POLICY_VERSION} "
                 "ABI ${MAELYS_SANDBOX_POLICY_ABI}")
  return()
endif()

if(NOT WORK)
  message(FATAL_ERROR "give -DWORK=<scratch directory>")
endif()
file(REMOVE_RECURSE "${WORK}")

# A pair of headers with only what the check reads.
function(headers name version abi since mir_abi mir_since mir_format)
  set(dir "${WORK}/${name}/maelys")
  file(MAKE_DIRECTORY "${dir}")
  set(sp "#define MAELYS_SANDBOX_POLICY_ABI_VERSION ${abi}u\n")
  if(since)
    string(APPEND sp "#define MAELYS_SANDBOX_POLICY_ABI_COMPATIBLE_SINCE ${since}u\n")
  endif()
  if(version)
    string(APPEND sp "#define MAELYS_SANDBOX_POLICY_VERSION \"${version}\"\n")
  endif()
  set(mir "#define MAELYS_MIR_FORMAT_VERSION ${mir_format}u\n"
          "#define MAELYS_MIR_ABI_VERSION ${mir_abi}u\n")
  if(mir_since)
    list(APPEND mir "#define MAELYS_MIR_ABI_COMPATIBLE_SINCE ${mir_since}u\n")
  endif()
  file(WRITE "${dir}/sandbox_policy.h" "${sp}")
  file(WRITE "${dir}/mir.h" ${mir})
endfunction()

set(failures "")
# expect(case accepted|refused needle [pin])
function(expect name want needle)
  set(extra "")
  if(ARGC GREATER 3)
    set(extra "-DPIN=${ARGV3}")
  endif()
  execute_process(COMMAND ${CMAKE_COMMAND} -DCASE=${WORK}/${name} ${extra}
                          -P ${CMAKE_CURRENT_LIST_FILE}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  string(REPLACE "\n" " " text "${out} ${err}")
  string(REGEX REPLACE " +" " " text "${text}")
  if(want STREQUAL "accepted" AND NOT rc EQUAL 0)
    list(APPEND failures "${name}: refused: ${text}")
  elseif(want STREQUAL "refused" AND rc EQUAL 0)
    list(APPEND failures "${name}: accepted: ${text}")
  elseif(NOT text MATCHES "${needle}")
    list(APPEND failures "${name}: output lacks '${needle}': ${text}")
  endif()
  set(failures "${failures}" PARENT_SCOPE)
endfunction()

headers(v0.4.1 0.4.1 4 "" 3 "" 3)
headers(v0.4.0 0.4.0 4 "" 3 "" 3)
headers(v0.3.0 0.3.0 3 "" 2 "" 2)
headers(v0.6.0 0.6.0 5 "" 3 "" 3)
headers(v0.8.0 0.8.0 6 5 4 3 3)
headers(v0.9.1 0.9.1 7 5 5 3 3)
headers(format2 0.4.1 4 "" 3 "" 2)
headers(noversion "" 4 "" 3 "" 3)

expect(v0.4.1 accepted "accepted 0.4.1 ABI 4")
expect(v0.4.0 accepted "tested only with the pinned release")
expect(v0.3.0 refused "Sandbox Policy ABI 3")
expect(v0.6.0 refused "Sandbox Policy ABI 5 [(]compatible since 5[)]")
expect(v0.8.0 refused "ABI 6 [(]compatible since 5[)]")
expect(v0.9.1 refused "ABI 7 [(]compatible since 5[)].*built for ABI 4")
expect(format2 refused "MIR format v2")
expect(noversion refused "cannot read")

# Malformed pins are refused before any library is looked at.
set(good "${here}/sandbox-policy.pin")
file(READ "${good}" pin)
string(REGEX REPLACE "commit=([0-9a-f]+)[0-9a-f]\n" "commit=\\1\n" short "${pin}")
file(WRITE "${WORK}/short.pin" "${short}")
expect(v0.4.1 refused "not 40 hex digits" "${WORK}/short.pin")
string(REPLACE "tag=v" "tag=release-" badtag "${pin}")
file(WRITE "${WORK}/tag.pin" "${badtag}")
expect(v0.4.1 refused "tag 'release-" "${WORK}/tag.pin")
string(REGEX REPLACE "sandbox_policy_abi=[0-9]+" "sandbox_policy_abi=four"
       badabi "${pin}")
file(WRITE "${WORK}/abi.pin" "${badabi}")
expect(v0.4.1 refused "sandbox_policy_abi 'four' is not a number"
       "${WORK}/abi.pin")

file(REMOVE_RECURSE "${WORK}")
if(failures)
  string(REPLACE ";" "\n  " text "${failures}")
  message(FATAL_ERROR "pin check:\n  ${text}")
endif()
message(STATUS "pin check: every case as expected")
