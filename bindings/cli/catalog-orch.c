/* Catalog entries of maelys-warden's evidence and orchestrator commands,
 * `verify` and `agent`, and the --state-dir option (appended to run and
 * probe in catalog.c). */
#include <stddef.h>

#include "catalog.h"

#define LIST(...) ((const char* const[]){__VA_ARGS__, NULL})

const option_def_t warden_o_state_dir = {
    .name = "--state-dir",
    .summary = "Where the per-user receipt signing key lives (created on "
               "first use, mode 0600); never a path a plan makes writable.",
    .arg_name = "DIR",
    .kind = KIND_PATH,
    .default_text = "$XDG_STATE_HOME/maelys"};

static const option_def_t o_key = {
    .name = "--key",
    .summary = "The public key every record must be signed by "
               "(ed25519:HEX as 'maelys-warden probe' prints it, or a file "
               "holding it).",
    .arg_name = "PUBKEY",
    .kind = KIND_STRING};

static const option_def_t* const verify_options[] = {&o_key, NULL};

static const operand_def_t verify_operands[] = {
    {"PATH", "Receipt files, closing records, or directories of them.", true,
     true, KIND_PATH, NULL}};

static const example_def_t verify_examples[] = {
    {LIST("verify", "--key", "ed25519:3b6a...", "receipts/"),
     "Check every receipt and chain in a directory against a known key."}};

const command_def_t warden_cmd_verify = {
    .id = "verify",
    .word = "verify",
    .usage = "verify [--key PUBKEY] PATH...",
    .purpose = "Verify receipts: every signature over the exact bytes, every "
               "chain link and closing record; name the first file that "
               "fails.",
    .effect = "read",
    .output_mode = "json-envelope",
    .options = verify_options,
    .operands = verify_operands,
    .operand_count = 1,
    .examples = verify_examples,
    .example_count = 1,
    .output_schema =
        "{\"type\":\"object\",\"required\":[\"verified\",\"records\",\"key\","
        "\"chains\"]}",
};

static const option_def_t o_agent_receipt_dir = {
    .name = "--receipt-dir",
    .summary = "Where the session's receipts and closing record go (refused "
               "where the agent could write).",
    .arg_name = "DIR",
    .kind = KIND_PATH,
    .default_text = "$XDG_STATE_HOME/maelys/receipts"};
static const option_def_t o_agent_trace = {
    .name = "--trace", .summary = "Trace the session on stderr."};

static const option_def_t o_agent_unprotect = {
    .name = "--unprotect",
    .summary = "Drop a protection run would apply to the spec's workspace "
               "(relative to it): .git/hooks, .git/config, .git, .maelys "
               "when it is writable; .env*, .npmrc, .netrc, .git-credentials, "
               ".aws, .ssh with the network inherited. Naming nothing "
               "protected is refused.",
    .arg_name = "PATH",
    .kind = KIND_PATH,
    .repeatable = true};

static const option_def_t* const agent_options[] = {
    &o_agent_receipt_dir, &warden_o_state_dir, &o_agent_trace,
    &o_agent_unprotect, NULL};

static const operand_def_t agent_operands[] = {
    {"SPEC",
     "The agent specification (maelys-agent-spec/1), in a file only "
     "you or root can write, outside anything a sandbox could write.",
     true, false, KIND_PATH, NULL}};

static const example_def_t agent_examples[] = {
    {LIST("agent", "~/codex.json"),
     "Run the agent the spec describes, relaying its stdio."}};

const command_def_t warden_cmd_agent = {
    .id = "agent",
    .word = "agent",
    .usage = "agent [--receipt-dir DIR] [--state-dir DIR] [--trace] "
             "[--unprotect PATH]... SPEC",
    .purpose = "Run an agent from its approved specification, relaying its "
               "duplex stdio and writing signed, chained receipts.",
    .effect = "stream",
    .output_mode = "protocol-stream",
    .options = agent_options,
    .operands = agent_operands,
    .operand_count = 1,
    .examples = agent_examples,
    .example_count = 1,
    .output_schema = "{\"type\":\"object\"}",
    .details =
        "After the agent starts, stdout carries only its bytes and the "
        "exit status is its own (128+N for signal N). Failures before "
        "it starts are an envelope on stderr with exit status 1. The "
        "spec's workspace is protected as run's is (PROTECTED PATHS in "
        "maelys-warden(1)): with it writable, git's hooks and configuration, "
        ".git and .maelys stay out of the agent's reach; with the "
        "network inherited, its secrets are denied.",
};
