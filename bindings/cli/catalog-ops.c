/* Catalog entries of maelys-warden's everyday commands on runs that exist:
 * `ps`, `stop` and `receipts` (registry.c). */
#include <stddef.h>

#include "catalog.h"

#define LIST(...) ((const char* const[]){__VA_ARGS__, NULL})

static const option_def_t o_ops_receipt_dir = {
    .name = "--receipt-dir",
    .summary = "The directory the runs wrote their receipts to.",
    .arg_name = "DIR",
    .kind = KIND_PATH,
    .default_text = "$XDG_STATE_HOME/maelys/receipts"};
static const option_def_t o_limit = {
    .name = "--limit",
    .summary = "How many receipts to list, newest first.",
    .arg_name = "N",
    .kind = KIND_UNSIGNED,
    .default_text = "10"};

static const option_def_t* const ps_options[] = {&warden_o_state_dir, NULL};

static const example_def_t ps_examples[] = {
    {LIST("ps"), "List your running executions."}};

const command_def_t warden_cmd_ps = {
    .id = "ps",
    .word = "ps",
    .usage = "ps [--state-dir DIR]",
    .purpose = "List your running executions: id, maelys-warden pid, uptime, "
               "program and workspace.",
    .effect = "read",
    .output_mode = "json-envelope",
    .options = ps_options,
    .examples = ps_examples,
    .example_count = 1,
    .output_schema = "{\"type\":\"object\",\"required\":[\"executions\"]}",
};

static const option_def_t* const stop_options[] = {&warden_o_state_dir,
                                                   &o_ops_receipt_dir, NULL};

static const operand_def_t stop_operands[] = {
    {"ID",
     "The execution id, or its first characters (4 or more), as 'ps' "
     "shows it.",
     true, false, KIND_STRING, NULL}};

static const example_def_t stop_examples[] = {
    {LIST("stop", "3f2a"), "Stop the running execution whose id starts "
                           "with 3f2a."}};

const command_def_t warden_cmd_stop = {
    .id = "stop",
    .word = "stop",
    .usage = "stop [--state-dir DIR] [--receipt-dir DIR] ID",
    .purpose = "Stop one of your running executions: gracefully, then by "
               "force after its --grace; prints how, and its receipt.",
    .effect = "execute",
    .output_mode = "json-envelope",
    .options = stop_options,
    .operands = stop_operands,
    .operand_count = 1,
    .examples = stop_examples,
    .example_count = 1,
    .output_schema = "{\"type\":\"object\",\"required\":[\"id\",\"stopped\"]}",
    .details = "stop signals the run's maelys-warden (SIGTERM), which stops "
               "its payload as on Ctrl-C and writes the receipt. A warden "
               "that has not exited 5s after its grace is killed; the "
               "sandbox dies with it.",
};

static const option_def_t* const receipts_options[] = {&o_ops_receipt_dir,
                                                       &o_limit, NULL};

static const operand_def_t receipts_operands[] = {
    {"ID", "Show this receipt (its id or first characters), or 'latest'.",
     false, false, KIND_STRING, NULL}};

static const example_def_t receipts_examples[] = {
    {LIST("receipts"), "List the latest receipts."},
    {LIST("receipts", "latest"), "Show the newest receipt."}};

const command_def_t warden_cmd_receipts = {
    .id = "receipts",
    .word = "receipts",
    .usage = "receipts [--receipt-dir DIR] [--limit N] [ID | latest]",
    .purpose = "List the latest receipts (id, start, outcome, executable), or "
               "show one.",
    .effect = "read",
    .output_mode = "json-envelope",
    .options = receipts_options,
    .operands = receipts_operands,
    .operand_count = 1,
    .examples = receipts_examples,
    .example_count = 2,
    .output_schema = "{\"type\":\"object\"}",
};
