# Tests against the mcp-runtime checkout. The runtime's own test objects and
# host objects come from its build directory (its `make test-build`); they
# are linked here with an example hook in place of the stock launcher, which
# is therefore never linked (see hook/hook.c for why the archive member is
# never extracted).

set(MCP_RUNTIME_BIN ${MCP_RUNTIME_BUILD_DIR}/bin)
set(MCP_RUNTIME_OBJ ${MCP_RUNTIME_BUILD_DIR}/obj)
set(helper $<TARGET_FILE:maelys-executor-helper>)

configure_file(registry-suites.json.in
               ${CMAKE_CURRENT_BINARY_DIR}/registry-suites.json @ONLY)
# The distribution's hook as the runtime's suites run with it: "sandboxed"
# (bubblewrap, the runtime's fixtures read-only) for a provider that names
# no profile, and the explicit, unconfined "trusted-local" the runtime's own
# suite requires to launch.
maelys_mcp_runtime_hook(mcpx-hook-suites
  REGISTRY ${CMAKE_CURRENT_BINARY_DIR}/registry-suites.json
  HELPER ${helper} PERMIT_POSIX)
# The same hook where bubblewrap cannot be found: its probe proves nothing,
# so the registry check fails and with it every launcher creation.
maelys_mcp_runtime_hook(mcpx-hook-broken
  REGISTRY ${CMAKE_CURRENT_BINARY_DIR}/registry-suites.json
  HELPER ${helper} BWRAP /nonexistent/bwrap PERMIT_POSIX)

# mcpx_runtime_program(NAME HOOK hook OBJECTS runtime objects... [SOURCES ...])
function(mcpx_runtime_program name)
  cmake_parse_arguments(P "" "HOOK" "OBJECTS;SOURCES" ${ARGN})
  foreach(o IN LISTS P_OBJECTS)
    if(NOT EXISTS ${o})
      message(FATAL_ERROR "${o} is missing: run `make test-build` in "
                          "${MCP_RUNTIME_DIR}")
    endif()
  endforeach()
  set_source_files_properties(${P_OBJECTS} PROPERTIES EXTERNAL_OBJECT TRUE)
  add_executable(${name} ${P_SOURCES} ${P_OBJECTS}
                 $<TARGET_OBJECTS:${P_HOOK}>)
  set_target_properties(${name} PROPERTIES LINKER_LANGUAGE C)
  target_link_libraries(${name} PRIVATE maelys-mcp-executor-launcher
    maelys-mcp-executor-core maelys-executor-static mcp-runtime-library)
  add_dependencies(${name} maelys-executor-helper)
endfunction()

# ------------------------------------------- the runtime's own suites
# Every suite of the runtime that starts a process (grep for provider_spawn,
# proxy_spawn, posix_launcher_create and process_launch in its tests/), with
# the arguments its Makefile's `test` target gives them.
set(b ${MCP_RUNTIME_BIN})
set(suite_process_launcher ${b}/example-provider ${b}/slow-describe-provider
    ${b}/stubborn-provider ${b}/exit-seven-provider)
set(suite_process_provider ${b}/example-provider ${b}/bad-json-provider
    ${b}/bad-envelope-provider ${b}/bad-schema-provider
    ${b}/oversized-provider ${b}/environment-provider
    ${b}/slow-describe-provider ${b}/fd-check-provider ${b}/stubborn-provider)
set(suite_mcp_proxy ${b}/maelys-mcp ${b}/example-provider
    ${b}/legacy-mcp-upstream ${b}/erroring-mcp-upstream
    ${b}/chatty-mcp-upstream ${b}/dying-mcp-upstream
    ${b}/exotic-schema-mcp-upstream)
set(suite_manifest ${b}/argv-echo-provider)
set(suite_nested_requests ${b}/nested-provider ${b}/nested-double-provider
    ${b}/nested-dying-provider ${b}/legacy4-provider ${b}/sdk-nested-provider)
set(suite_provider_perf ${b}/example-provider)
set(extra_manifest ${MCP_RUNTIME_OBJ}/host/manifest.o)

foreach(suite IN LISTS mcpx_runtime_suites)
  string(REPLACE "-" "_" s ${suite})
  mcpx_runtime_program(mcp-runtime-test-${suite} HOOK mcpx-hook-suites
    OBJECTS ${MCP_RUNTIME_OBJ}/tests/test_${s}.o ${extra_${s}})
  add_test(NAME mcp-runtime-suite-${suite}
           COMMAND mcp-runtime-test-${suite} ${suite_${s}})
  set_tests_properties(mcp-runtime-suite-${suite} PROPERTIES TIMEOUT 300
                       LABELS "integration;mcp-runtime")
endforeach()

# --------------------------------------------------------- refusals
mcpx_runtime_program(mcp-runtime-test-refusals HOOK mcpx-hook-suites
  SOURCES test-mcp-runtime-refusals.c ${PROJECT_SOURCE_DIR}/tests/common/marked.c)
mcpx_runtime_program(mcp-runtime-test-failed-hook HOOK mcpx-hook-broken
  SOURCES test-mcp-runtime-refusals.c ${PROJECT_SOURCE_DIR}/tests/common/marked.c)
foreach(t refusals failed-hook)
  target_include_directories(mcp-runtime-test-${t} PRIVATE
    ${MCP_RUNTIME_DIR}/include ${mcpx_dir}/include
    ${PROJECT_SOURCE_DIR}/tests/common)
  target_compile_definitions(mcp-runtime-test-${t} PRIVATE _GNU_SOURCE
    MCPX_EXAMPLE_PROVIDER="${b}/example-provider"
    MAELYS_HELPER="${helper}")
  target_link_libraries(mcp-runtime-test-${t} PRIVATE PkgConfig::CMOCKA)
  add_test(NAME mcp-runtime-${t} COMMAND mcp-runtime-test-${t})
  set_tests_properties(mcp-runtime-${t} PROPERTIES TIMEOUT 120
                       LABELS "integration;mcp-runtime")
endforeach()
target_compile_definitions(mcp-runtime-test-failed-hook PRIVATE
                           MCPX_BROKEN_HOOK=1)

# ------------------------------------------- a real MCP server, confined
set(fs_script "${MCP_FILESYSTEM_SERVER_PREFIX}/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js")
find_program(MCPX_NODE NAMES node nodejs)
find_program(MCPX_PYTHON3 NAMES python3 PATHS /usr/bin NO_DEFAULT_PATH)
if(MCP_FILESYSTEM_SERVER_PREFIX STREQUAL "")
  mcpx_skipped(mcp-runtime-filesystem-server
    "no MCP_FILESYSTEM_SERVER_PREFIX: npm install --prefix DIR @modelcontextprotocol/server-filesystem, then -DMCP_FILESYSTEM_SERVER_PREFIX=DIR")
elseif(NOT EXISTS "${fs_script}" OR NOT MCPX_NODE OR NOT MCPX_PYTHON3)
  mcpx_skipped(mcp-runtime-filesystem-server
    "node, python3 or ${fs_script} is missing")
else()
  get_filename_component(MCP_FILESYSTEM_SERVER_PREFIX
                         "${MCP_FILESYSTEM_SERVER_PREFIX}" ABSOLUTE)
  set(MCPX_FS_WORKSPACE ${CMAKE_CURRENT_BINARY_DIR}/mcp-fs-workspace)
  configure_file(registry-filesystem.json.in
                 ${CMAKE_CURRENT_BINARY_DIR}/registry-filesystem.json @ONLY)
  maelys_mcp_runtime_hook(mcpx-hook-filesystem
    REGISTRY ${CMAKE_CURRENT_BINARY_DIR}/registry-filesystem.json
    HELPER ${helper})
  # The runtime's own host program (its objects), with the hook: what a
  # distribution ships as maelys-mcp.
  mcpx_runtime_program(maelys-mcp-confined HOOK mcpx-hook-filesystem
    OBJECTS ${MCP_RUNTIME_OBJ}/host/main.o ${MCP_RUNTIME_OBJ}/host/manifest.o
            ${MCP_RUNTIME_OBJ}/host/http_parser.o
            ${MCP_RUNTIME_OBJ}/host/http_auth.o
            ${MCP_RUNTIME_OBJ}/host/http_server.o)
  add_test(NAME mcp-runtime-filesystem-server
           COMMAND ${MCPX_PYTHON3}
                   ${CMAKE_CURRENT_SOURCE_DIR}/test_filesystem_server.py
                   --host $<TARGET_FILE:maelys-mcp-confined>
                   --node ${MCPX_NODE} --server ${fs_script}
                   --workspace ${MCPX_FS_WORKSPACE}
                   --outside ${CMAKE_CURRENT_BINARY_DIR}/mcp-fs-outside)
  set_tests_properties(mcp-runtime-filesystem-server PROPERTIES TIMEOUT 180
                       LABELS "integration;mcp-runtime")
endif()
