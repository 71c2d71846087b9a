# The symbol check of seeds/001: the global symbols each archive defines.
#  - no symbol is defined by two of the archives (the Executor, the policy
#    library and the MIR library, the adapter), which would make a program
#    linking them all pick one helper for both (a strdup, a SHA-256);
#  - every global symbol of the adapter is maelys_warden_* or
#    maelys__warden_policy_*;
#  - every global symbol of the Executor is maelys_execut*, maelys_backend*
#    or maelys__*, so none can take a sibling library's name.
# Run with -DNM= -DADAPTER_GLUE= -DADAPTER_PURE= -DEXECUTOR= -DPOLICY= -DMIR=.

function(defined_symbols archive out)
  execute_process(COMMAND ${NM} -g --defined-only ${archive}
                  OUTPUT_VARIABLE text RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${NM} failed on ${archive}")
  endif()
  string(REPLACE "\n" ";" lines "${text}")
  set(names "")
  foreach(line IN LISTS lines)
    # "0000000000000000 T maelys_x"; members' headers ("x.o:") are skipped.
    # AddressSanitizer's one-definition-rule indicators (__odr_asan.NAME)
    # are the instrumentation's, not the library's.
    if(line MATCHES "^[0-9a-fA-F]* *[A-Za-z] ([^ ]+)$")
      set(name "${CMAKE_MATCH_1}")
      if(NOT name MATCHES "^__odr_asan[.]")
        list(APPEND names "${name}")
      endif()
    endif()
  endforeach()
  list(REMOVE_DUPLICATES names)
  set(${out} "${names}" PARENT_SCOPE)
endfunction()

set(groups adapter executor policy)
defined_symbols(${ADAPTER_GLUE} glue)
defined_symbols(${ADAPTER_PURE} pure)
set(adapter ${glue} ${pure})
defined_symbols(${EXECUTOR} executor)
defined_symbols(${POLICY} policy_only)
defined_symbols(${MIR} mir)
set(policy ${policy_only} ${mir})

set(failures "")
foreach(name IN LISTS adapter)
  if(NOT name MATCHES "^maelys_warden_|^maelys__warden_policy_")
    list(APPEND failures "adapter symbol '${name}' lacks the adapter prefix")
  endif()
endforeach()
foreach(name IN LISTS executor)
  if(NOT name MATCHES "^maelys_execut|^maelys_backend|^maelys__")
    list(APPEND failures "executor symbol '${name}' lacks an executor prefix")
  endif()
endforeach()
foreach(a IN LISTS groups)
  foreach(b IN LISTS groups)
    if(a STRLESS b)
      foreach(name IN LISTS ${a})
        list(FIND ${b} "${name}" at)
        if(NOT at EQUAL -1)
          list(APPEND failures "'${name}' is defined by both ${a} and ${b}")
        endif()
      endforeach()
    endif()
  endforeach()
endforeach()
foreach(name IN LISTS glue)
  list(FIND pure "${name}" at)
  if(NOT at EQUAL -1)
    list(APPEND failures "'${name}' is defined by both adapter archives")
  endif()
endforeach()

list(LENGTH adapter na)
list(LENGTH executor ne)
list(LENGTH policy np)
if(na EQUAL 0 OR ne EQUAL 0 OR np EQUAL 0)
  message(FATAL_ERROR "an archive defines no symbol: nm output not understood")
endif()
if(failures)
  string(REPLACE ";" "\n  " text "${failures}")
  message(FATAL_ERROR "symbol check failed:\n  ${text}")
endif()
message(STATUS "no collision among ${na} adapter, ${ne} executor and ${np} "
               "policy-library symbols")
