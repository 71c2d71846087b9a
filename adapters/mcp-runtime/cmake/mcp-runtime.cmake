# The parts built against an mcp-runtime checkout. Nothing of the runtime is
# copied or built here: its headers are read from MCP_RUNTIME_DIR/include and
# what its own `make test-build` produced is linked from its build directory.

get_filename_component(MCP_RUNTIME_DIR "${MCP_RUNTIME_DIR}" ABSOLUTE)
if(MCP_RUNTIME_BUILD_DIR STREQUAL "")
  set(MCP_RUNTIME_BUILD_DIR "${MCP_RUNTIME_DIR}/build/release")
endif()

# ------------------------------------------------------- the pin, checked
find_package(Git REQUIRED)
# Read-only queries; safe.directory because the checkout usually belongs to
# another user than the one building (the tests also run as uid 65534), and
# git refuses such a repository otherwise ("dubious ownership").
set(mcp_git -c safe.directory=${MCP_RUNTIME_DIR} -C ${MCP_RUNTIME_DIR})
execute_process(COMMAND ${GIT_EXECUTABLE} ${mcp_git} rev-parse HEAD
                OUTPUT_VARIABLE mcp_head OUTPUT_STRIP_TRAILING_WHITESPACE
                RESULT_VARIABLE rc ERROR_QUIET)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "MCP_RUNTIME_DIR=${MCP_RUNTIME_DIR} is not a git "
                      "checkout: the pin cannot be verified")
endif()
execute_process(COMMAND ${GIT_EXECUTABLE} ${mcp_git} rev-parse
                        --verify --quiet "${MCP_RUNTIME_PIN_tag}^{commit}"
                OUTPUT_VARIABLE mcp_tag_commit OUTPUT_STRIP_TRAILING_WHITESPACE
                RESULT_VARIABLE rc ERROR_QUIET)
if(NOT rc EQUAL 0 OR NOT mcp_tag_commit STREQUAL MCP_RUNTIME_PIN_commit)
  message(FATAL_ERROR "mcp-runtime checkout: tag ${MCP_RUNTIME_PIN_tag} is "
                      "'${mcp_tag_commit}', the pin says "
                      "${MCP_RUNTIME_PIN_commit}")
endif()
if(NOT mcp_head STREQUAL MCP_RUNTIME_PIN_commit)
  message(FATAL_ERROR "mcp-runtime checkout is at ${mcp_head}, the pin "
                      "(adapters/mcp-runtime/MCP_RUNTIME_PIN) is "
                      "${MCP_RUNTIME_PIN_tag} = ${MCP_RUNTIME_PIN_commit}")
endif()
execute_process(COMMAND ${GIT_EXECUTABLE} ${mcp_git} status
                        --porcelain --untracked-files=no
                OUTPUT_VARIABLE mcp_dirty OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT mcp_dirty STREQUAL "")
  message(FATAL_ERROR "mcp-runtime checkout has local changes:\n${mcp_dirty}")
endif()
file(STRINGS ${MCP_RUNTIME_DIR}/include/maelys/mcp/version.h abi_line
     REGEX "^#define MAELYS_MCP_ABI_VERSION ")
string(REGEX MATCH "([0-9]+)u?$" _ "${abi_line}")
if(NOT CMAKE_MATCH_1 STREQUAL MCP_RUNTIME_PIN_abi)
  message(FATAL_ERROR "mcp-runtime checkout declares launcher ABI "
                      "'${CMAKE_MATCH_1}', the pin says ${MCP_RUNTIME_PIN_abi}")
endif()
message(STATUS "mcp-runtime ${MCP_RUNTIME_PIN_tag} (${MCP_RUNTIME_PIN_commit}, "
               "launcher ABI ${MCP_RUNTIME_PIN_abi}) at ${MCP_RUNTIME_DIR}")

set(MCP_RUNTIME_LIBRARY ${MCP_RUNTIME_BUILD_DIR}/lib/libmaelys_mcp.a)
if(NOT EXISTS ${MCP_RUNTIME_LIBRARY})
  message(FATAL_ERROR "${MCP_RUNTIME_LIBRARY} is missing: run "
                      "`make test-build` in ${MCP_RUNTIME_DIR}")
endif()
pkg_check_modules(URIPARSER REQUIRED IMPORTED_TARGET liburiparser)
add_library(mcp-runtime-library STATIC IMPORTED)
set_target_properties(mcp-runtime-library PROPERTIES
  IMPORTED_LOCATION ${MCP_RUNTIME_LIBRARY})
target_link_libraries(mcp-runtime-library INTERFACE PkgConfig::JANSSON
                      PkgConfig::URIPARSER pthread)

# ------------------------------------------------------------ launcher
add_library(maelys-mcp-executor-launcher STATIC ${mcpx_dir}/src/launcher.c)
set_target_properties(maelys-mcp-executor-launcher PROPERTIES
  POSITION_INDEPENDENT_CODE ON C_VISIBILITY_PRESET hidden)
target_include_directories(maelys-mcp-executor-launcher
  PRIVATE ${mcpx_dir}/src ${MCP_RUNTIME_DIR}/include)
target_compile_definitions(maelys-mcp-executor-launcher PRIVATE _GNU_SOURCE
  MAELYS_MCP_EXECUTOR_PINNED_ABI=${MCP_RUNTIME_PIN_abi})
target_link_libraries(maelys-mcp-executor-launcher PUBLIC
  maelys-mcp-executor-core PkgConfig::JANSSON)

# ------------------------------------------------------------ the hook
# maelys_mcp_runtime_hook(NAME REGISTRY file [HELPER path] [BWRAP path]
#                         [PERMIT_POSIX])
# An object library holding the strong maelys_mcp_posix_launcher_create()
# with the distribution's configuration compiled in: the profile registry
# (embedded byte for byte), the sandbox helper and bwrap paths (empty: the
# Executor's defaults), and whether the posix backend is registered. Link its
# objects ahead of libmaelys_mcp.a.
function(maelys_mcp_runtime_hook name)
  cmake_parse_arguments(H "PERMIT_POSIX" "REGISTRY;HELPER;BWRAP" "" ${ARGN})
  if(NOT EXISTS "${H_REGISTRY}")
    message(FATAL_ERROR "hook ${name}: no registry ${H_REGISTRY}")
  endif()
  file(READ "${H_REGISTRY}" hex HEX)
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
  set(MAELYS_MCP_HOOK_REGISTRY_BYTES "${bytes}")
  if(H_PERMIT_POSIX)
    set(MAELYS_MCP_HOOK_POSIX 1)
  else()
    set(MAELYS_MCP_HOOK_POSIX 0)
  endif()
  set(dir ${CMAKE_CURRENT_BINARY_DIR}/${name})
  configure_file(${mcpx_dir}/hook/hook-config.h.in ${dir}/hook-config.h @ONLY)
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS
               "${H_REGISTRY}")
  add_library(${name} OBJECT ${mcpx_dir}/hook/hook.c)
  target_include_directories(${name} PRIVATE ${dir} ${mcpx_dir}/include
                             ${MCP_RUNTIME_DIR}/include)
  # Paths as definitions, so that they may be generator expressions.
  target_compile_definitions(${name} PRIVATE _GNU_SOURCE
    MAELYS_MCP_HOOK_HELPER="${H_HELPER}" MAELYS_MCP_HOOK_BWRAP="${H_BWRAP}")
  target_link_libraries(${name} PRIVATE maelys-executor-static
                        PkgConfig::JANSSON)
endfunction()
