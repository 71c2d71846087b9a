/*
 * The link check of seeds/001: this program is linked with every object of
 * the Executor's static library, of libmaelys-sandbox-policy.a and
 * libmaelys-mir.a and of both adapter archives (--whole-archive), so a symbol
 * defined twice fails the link itself. Running it touches each library once.
 */
#include <stdio.h>
#include <string.h>

#include "maelys/warden_policy_adapter.h"

int main(void) {
  uint64_t portable = 0;
  maelys_sandbox_policy_capabilities_t library = 0;
  if (maelys_warden_policy_capabilities_from_executor(MAELYS_BACKEND_CAP_ALL,
                                                      &portable, NULL) != 0 ||
      maelys_warden_policy_library_capabilities(portable, &library, NULL) != 0)
    return 1;
  maelys_mir_builder_t* b = NULL;
  maelys_mir_t* mir = NULL;
  char hex[MAELYS_MIR_DIGEST_HEX_SIZE];
  if (maelys_mir_builder_create(&b, NULL) != 0 ||
      maelys_mir_builder_build(b, &mir, NULL) != 0 ||
      maelys_mir_digest_hex(mir, hex, NULL) != 0)
    return 1;
  maelys_mir_destroy(mir);
  maelys_mir_builder_destroy(b);
  printf("executor %s (ABI %u), sandbox-policy %s (ABI %u), adapter ABI %d, "
         "empty MIR sha256:%s\n",
         maelys_executor_version(), maelys_executor_abi_version(),
         MAELYS_SANDBOX_POLICY_VERSION, MAELYS_SANDBOX_POLICY_ABI_VERSION,
         MAELYS_WARDEN_POLICY_ADAPTER_ABI_VERSION, hex);
  return strlen(hex) == 64 ? 0 : 1;
}
