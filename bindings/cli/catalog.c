/* The catalog of maelys-warden. Every command, option, operand, constraint,
 * example and output schema is declared here and nowhere else. */
#include <string.h>

#include "catalog.h"

#define LIST(...) ((const char* const[]){__VA_ARGS__, NULL})

static const char* const format_choices[] = {"text", "json", "jsonl", NULL};
static const char* const tristate[] = {"auto", "always", "never", NULL};

/* ------------------------------------------------------ global options */

static const option_def_t g_format = {
    .name = "--format",
    .summary = "Rendering: text for humans, json for one envelope, jsonl for "
               "records.",
    .arg_name = "VALUE",
    .kind = KIND_CHOICE,
    .choices = format_choices,
    .default_text = "text"};
static const option_def_t g_json = {.name = "--json",
                                    .summary = "Alias of --format json."};
static const option_def_t g_compact = {.name = "--compact",
                                       .summary = "JSON on a single line."};
static const option_def_t g_pretty = {
    .name = "--pretty",
    .summary = "Indented JSON; --pretty=false selects compact JSON."};
static const option_def_t g_noninteractive = {
    .name = "--non-interactive",
    .summary = "Never prompt (maelys-warden never does)."};
static const option_def_t g_color = {.name = "--color",
                                     .summary = "ANSI colors on terminals.",
                                     .arg_name = "VALUE",
                                     .kind = KIND_CHOICE,
                                     .choices = tristate,
                                     .default_text = "auto"};
static const option_def_t g_progress = {
    .name = "--progress",
    .summary = "Progress of a long run on stderr (maelys-warden shows none).",
    .arg_name = "VALUE",
    .kind = KIND_CHOICE,
    .choices = tristate,
    .default_text = "auto"};
static const option_def_t g_verbose = {
    .name = "--verbose",
    .summary = "Details of the run on stderr, in text mode only."};
static const option_def_t g_pager = {
    .name = "--pager",
    .summary = "Pager for the text rendering (maelys-warden pages nothing).",
    .arg_name = "VALUE",
    .kind = KIND_CHOICE,
    .choices = tristate,
    .default_text = "auto"};
static const option_def_t g_field = {.name = "--field",
                                     .summary = "Render one member of data.",
                                     .arg_name = "NAME",
                                     .kind = KIND_STRING};
static const option_def_t g_help = {
    .name = "--help", .summary = "The help of the selected command."};

const option_def_t* const warden_global_options[] = {
    &g_format,   &g_json,    &g_compact, &g_pretty, &g_noninteractive, &g_color,
    &g_progress, &g_verbose, &g_pager,   &g_field,  &g_help,           NULL};

bool catalog_is_rendering_option(const char* name) {
  return strcmp(name, "--format") == 0 || strcmp(name, "--json") == 0 ||
         strcmp(name, "--compact") == 0 || strcmp(name, "--pretty") == 0 ||
         strcmp(name, "--pager") == 0 || strcmp(name, "--field") == 0;
}

/* -------------------------------------------------- policy options */

static const char* const network_choices[] = {"none", "inherit", NULL};
static const char* const io_choices[] = {"auto", "isolated", "stdio", NULL};
static const char* const stdin_choices[] = {"auto", "null", NULL};

static const option_def_t o_ro = {
    .name = "--ro",
    .summary = "Built-in profile: the workspace read-only, the minimal runtime "
               "read-only, "
               "a private sized /tmp, no network.",
    .conflicts = LIST("--rw", "--plan", "--policy")};
static const option_def_t o_rw = {
    .name = "--rw",
    .summary =
        "Built-in profile: the workspace read-write, the minimal runtime "
        "read-only, a private sized /tmp, no network.",
    .conflicts = LIST("--ro", "--plan", "--policy")};
static const option_def_t o_plan = {
    .name = "--plan",
    .summary = "A JSON plan in the executor's vocabulary "
               "(maelys-executor-plan/1, what 'plan' prints) instead of a "
               "profile.",
    .arg_name = "FILE",
    .kind = KIND_PATH,
    .conflicts = LIST("--ro", "--rw", "--policy", "--allow-read", "--deny",
                      "--network", "--allow-write", "--home")};
static const option_def_t o_policy = {
    .name = "--policy",
    .summary =
        "A policy in canonical MIR, compiled by libmaelys-sandbox-policy "
        "against this host's workspace and runtime and lowered by the "
        "Warden Policy adapter (when this program was built with it).",
    .arg_name = "FILE",
    .kind = KIND_PATH,
    .conflicts = LIST("--ro", "--rw", "--plan", "--allow-read", "--deny",
                      "--network", "--allow-write", "--home")};
static const option_def_t o_mediator = {
    .name = "--mediator",
    .summary = "The trusted mediator id a --policy with mediated network "
               "uses (maelys-egress.fd4 or maelys-egress.proxy).",
    .arg_name = "ID",
    .kind = KIND_STRING,
    .requires = LIST("--policy")};
static const option_def_t o_policy_temp = {
    .name = "--policy-temp",
    .summary = "The host directory a --policy's temp root names (refused "
               "like a workspace); none by default.",
    .arg_name = "DIR",
    .kind = KIND_PATH,
    .requires = LIST("--policy")};
static const option_def_t o_profile = {
    .name = "--profile",
    .summary = "A named profile (maelys-warden-profile/1): NAME.json from "
               "$XDG_CONFIG_HOME/maelys/profiles (default ~/.config), else "
               "from the system profile directory. Options given on the line "
               "add to its lists and override its single values.",
    .arg_name = "NAME",
    .kind = KIND_STRING,
    .pattern = "^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$"};
static const option_def_t o_allow_write = {
    .name = "--allow-write",
    .summary = "Also make PATH writable (refused as a writable workspace "
               "would be: the root, /tmp, your home, the system trees, "
               "maelys-warden's own files).",
    .arg_name = "PATH",
    .kind = KIND_PATH,
    .repeatable = true,
    .conflicts = LIST("--plan", "--policy")};
static const option_def_t o_home = {
    .name = "--home",
    .summary = "A persistent private directory bound writable as HOME "
               "(created 0700 when missing; yours and writable by nobody "
               "else; never your home, the workspace or around it).",
    .arg_name = "DIR",
    .kind = KIND_PATH,
    .conflicts = LIST("--plan", "--policy")};
static const option_def_t o_workspace = {
    .name = "--workspace",
    .summary = "The workspace directory (the payload's working directory).",
    .arg_name = "DIR",
    .kind = KIND_PATH,
    .default_text = "."};
static const option_def_t o_allow_read = {
    .name = "--allow-read",
    .summary = "Also make PATH readable (a built-in profile only).",
    .arg_name = "PATH",
    .kind = KIND_PATH,
    .repeatable = true,
    .conflicts = LIST("--plan")};
static const option_def_t o_deny = {
    .name = "--deny",
    .summary = "Make PATH unreadable and unwritable (a built-in profile only).",
    .arg_name = "PATH",
    .kind = KIND_PATH,
    .repeatable = true,
    .conflicts = LIST("--plan")};
static const option_def_t o_network = {
    .name = "--network",
    .summary = "Network access. inherit also binds what names and TLS "
               "need (resolv.conf, hosts, nsswitch.conf, the CA stores) and "
               "passes SSL_CERT_FILE, SSL_CERT_DIR, NODE_EXTRA_CA_CERTS and "
               "REQUESTS_CA_BUNDLE when set, with their files.",
    .arg_name = "MODE",
    .kind = KIND_CHOICE,
    .choices = network_choices,
    .default_text = "none",
    .conflicts = LIST("--plan")};

static const option_def_t o_unprotect = {
    .name = "--unprotect",
    .summary = "Drop a protection the built-in profile applies (relative to "
               "the workspace): .git/hooks, .git/config, .git, .maelys in a "
               "writable workspace; .env*, .npmrc, .netrc, .git-credentials, "
               ".aws, .ssh with --network inherit. PATH removes every "
               "protection at or below it; naming nothing protected is "
               "refused.",
    .arg_name = "PATH",
    .kind = KIND_PATH,
    .repeatable = true,
    .conflicts = LIST("--plan", "--policy")};

static const option_def_t o_plan_digest = {
    .name = "--plan-digest",
    .summary = "Refuse the --plan file unless it seals to exactly this digest "
               "(the one you reviewed).",
    .arg_name = "DIGEST",
    .kind = KIND_STRING,
    .pattern = "^sha256:[0-9a-f]{64}$",
    .requires = LIST("--plan")};
static const option_def_t o_tasks = {
    .name = "--tasks",
    .summary = "Sandbox-wide ceiling on tasks (processes and threads) alive "
               "at once.",
    .arg_name = "N",
    .kind = KIND_UNSIGNED,
    .default_text = "1024",
    .conflicts = LIST("--plan")};
static const option_def_t o_memory = {
    .name = "--memory",
    .summary = "Sandbox-wide memory ceiling (refused where no backend proved "
               "one; by default 4G where one did, else unbounded).",
    .arg_name = "SIZE",
    .kind = KIND_SIZE,
    .conflicts = LIST("--plan")};
static const option_def_t o_cpu_time = {
    .name = "--cpu-time",
    .summary = "Per-process CPU time limit (each process has its own).",
    .arg_name = "DURATION",
    .kind = KIND_DURATION,
    .conflicts = LIST("--plan")};
static const option_def_t o_open_files = {
    .name = "--open-files",
    .summary = "Per-process limit on open descriptors.",
    .arg_name = "N",
    .kind = KIND_UNSIGNED,
    .conflicts = LIST("--plan")};
static const option_def_t o_file_size = {
    .name = "--file-size",
    .summary = "Per-process limit on the size of a file it writes.",
    .arg_name = "SIZE",
    .kind = KIND_SIZE,
    .conflicts = LIST("--plan")};

static const option_def_t o_raw_output = {
    .name = "--raw-output",
    .summary = "Write the program's bytes to a terminal as they are (by "
               "default its control characters are made visible and inert "
               "there: \\x1b)."};

/* ----------------------------------------------------- run options */

static const option_def_t o_env = {
    .name = "--env",
    .summary = "Add NAME=VALUE to the payload's environment.",
    .arg_name = "NAME=VALUE",
    .kind = KIND_STRING,
    .pattern = "^[A-Za-z_][A-Za-z0-9_]*=.*$",
    .repeatable = true};
static const option_def_t o_pass_env = {
    .name = "--pass-env",
    .summary = "Pass the caller's NAME to the payload (nothing else of the "
               "caller's environment reaches it).",
    .arg_name = "NAME",
    .kind = KIND_STRING,
    .pattern = "^[A-Za-z_][A-Za-z0-9_]*$",
    .repeatable = true};
static const option_def_t o_backend = {
    .name = "--backend",
    .summary = "The backend that enforces the plan: bubblewrap, landlock "
               "or posix (default: the strongest whose proved capabilities "
               "cover it; posix only when asked for).",
    .arg_name = "NAME",
    .kind = KIND_STRING,
    .pattern = "^[a-z0-9-]+$"};
static const option_def_t o_wall_time = {
    .name = "--wall-time",
    .summary = "Stop the payload (gracefully, then by force) after "
               "DURATION.",
    .arg_name = "DURATION",
    .kind = KIND_DURATION};
static const option_def_t o_grace = {
    .name = "--grace",
    .summary = "How long a stop waits after the graceful signal before the "
               "forced kill.",
    .arg_name = "DURATION",
    .kind = KIND_DURATION,
    .default_text = "2s"};
static const option_def_t o_receipt_dir = {
    .name = "--receipt-dir",
    .summary = "Where the receipt is written (refused where the sandbox "
               "could write).",
    .arg_name = "DIR",
    .kind = KIND_PATH,
    .default_text = "$XDG_STATE_HOME/maelys/receipts"};
static const option_def_t o_trace = {
    .name = "--trace",
    .summary = "Trace what maelys-warden does on stderr.",
    .conflicts = LIST("--quiet")};
static const option_def_t o_quiet = {
    .name = "--quiet",
    .summary = "Write nothing of maelys-warden's own on stderr but failures.",
    .conflicts = LIST("--trace")};
static const option_def_t o_verbose_trace = {
    .name = "--verbose-trace",
    .summary = "With --trace: also the sealed plan and the backend's "
               "proved capabilities.",
    .requires = LIST("--trace")};
static const option_def_t o_io = {
    .name = "--io",
    .summary =
        "auto: a terminal session when stdin and stdout are terminals (the "
        "payload gets a pseudo-terminal of its own), plain stdio otherwise "
        "(its stdout to stdout, its stderr to stderr, stdin relayed); "
        "isolated: the protocol socket at the payload's fd 3, its stdin "
        "/dev/null and its stdout joined to stderr; stdio: one socket as "
        "its stdin and stdout (stock stdio MCP servers).",
    .arg_name = "MODE",
    .kind = KIND_CHOICE,
    .choices = io_choices,
    .default_text = "auto"};
static const option_def_t o_tty = {
    .name = "--tty",
    .summary = "With --io auto: a terminal session even when stdin or stdout "
               "is not a terminal.",
    .conflicts = LIST("--no-tty")};
static const option_def_t o_no_tty = {
    .name = "--no-tty",
    .summary = "With --io auto: plain stdio even on a terminal (a terminal "
               "stdin is then not read: the payload's stdin is /dev/null).",
    .conflicts = LIST("--tty")};
static const option_def_t o_stdin = {
    .name = "--stdin",
    .summary = "With --io auto: null gives the payload /dev/null as stdin and "
               "leaves this process's stdin unread; auto relays it (a "
               "terminal only in a terminal session).",
    .arg_name = "MODE",
    .kind = KIND_CHOICE,
    .choices = stdin_choices,
    .default_text = "auto"};
static const option_def_t o_allow_clipboard = {
    .name = "--allow-clipboard",
    .summary = "In a terminal session, let the payload's clipboard escape "
               "sequences (OSC 52) reach the terminal (dropped by default)."};

static const option_def_t* const run_options[] = {&o_ro,
                                                  &o_rw,
                                                  &o_profile,
                                                  &o_plan,
                                                  &o_workspace,
                                                  &o_allow_read,
                                                  &o_allow_write,
                                                  &o_deny,
                                                  &o_home,
                                                  &o_network,
                                                  &o_env,
                                                  &o_pass_env,
                                                  &o_backend,
                                                  &o_wall_time,
                                                  &o_grace,
                                                  &o_receipt_dir,
                                                  &o_trace,
                                                  &o_quiet,
                                                  &o_verbose_trace,
                                                  &o_io,
                                                  &o_tty,
                                                  &o_no_tty,
                                                  &o_stdin,
                                                  &o_allow_clipboard,
                                                  &warden_o_state_dir,
                                                  &o_plan_digest,
                                                  &o_tasks,
                                                  &o_memory,
                                                  &o_cpu_time,
                                                  &o_open_files,
                                                  &o_file_size,
                                                  &o_raw_output,
                                                  &o_policy,
                                                  &o_mediator,
                                                  &o_policy_temp,
                                                  &o_unprotect,
                                                  NULL};

static const operand_def_t run_operands[] = {
    {"PROGRAM",
     "The program to run (searched on the sandbox's PATH when it has "
     "no '/').",
     true, false, KIND_STRING, NULL},
    {"ARG", "Its arguments, verbatim.", false, true, KIND_STRING, NULL},
};

static const constraint_def_t run_constraints[] = {
    {"exactly-one", LIST("--ro", "--rw", "--profile", "--plan", "--policy")},
    {"at-most-one", LIST("--trace", "--quiet")},
    {"requires", LIST("--verbose-trace", "--trace")},
};

static const example_def_t run_examples[] = {
    {LIST("run", "--rw", "--", "/usr/bin/make", "test"),
     "Run make in the current directory, which it may write (pipe its "
     "output as usual: | tee log)."},
    {LIST("run", "--rw", "--", "bash", "-i"),
     "From a terminal: an interactive shell on a terminal of its own in the "
     "sandbox (job control, full-screen programs)."},
    {LIST("run", "--ro", "--io", "stdio", "--", "/usr/bin/python3",
          "server.py"),
     "Run a stdio MCP server that may only read the workspace."},
    {LIST("run", "--plan", "~/agent-plan.json", "--wall-time", "10m", "--",
          "./agent"),
     "Run an agent under a plan file (kept where no sandbox writes), for "
     "at most ten minutes."},
    {LIST("run", "--profile", "claude-code", "--", "claude"),
     "Run Claude Code with its shipped profile: the workspace writable, the "
     "network inherited, a persistent home."},
    {LIST("run", "--rw", "--allow-write", "../build", "--home",
          "~/maelys-homes/tool", "--", "/usr/bin/make"),
     "Also write ../build, and keep a home between runs."},
};

static const command_def_t cmd_run = {
    .id = "run",
    .word = "run",
    .usage =
        "run (--ro | --rw | --profile NAME | --plan FILE [--plan-digest "
        "DIGEST] | --policy FILE [--mediator ID] [--policy-temp DIR]) "
        "[--workspace DIR] [--allow-read PATH]... [--allow-write PATH]... "
        "[--deny PATH]... [--unprotect PATH]... [--home DIR] [--network MODE] "
        "[--tasks N] [--memory SIZE] [--cpu-time DURATION] [--open-files N] "
        "[--file-size SIZE] [--env NAME=VALUE]... [--pass-env NAME]... "
        "[--backend NAME] [--wall-time DURATION] [--grace DURATION] "
        "[--receipt-dir DIR] [--state-dir DIR] [--trace [--verbose-trace] | "
        "--quiet] [--io MODE] [--tty | --no-tty] [--stdin MODE] "
        "[--allow-clipboard] [--raw-output] -- PROGRAM [ARG...]",
    .purpose = "Run a program confined by a sealed plan, relaying its stdio "
               "and writing its receipt.",
    .effect = "stream",
    .output_mode = "protocol-stream",
    .options = run_options,
    .operands = run_operands,
    .operand_count = 2,
    .constraints = run_constraints,
    .constraint_count = 3,
    .examples = run_examples,
    .example_count = 6,
    .output_schema = "{\"type\":\"object\"}",
    .details =
        "After the program starts, stdout carries only the program's bytes "
        "and the exit status is the program's (128+N when it died of signal "
        "N). Failures before it starts are an envelope on stderr with exit "
        "status 1. SIGINT, SIGTERM and SIGHUP stop it gracefully, then by "
        "force after --grace. "
        "With --io auto (the default) and a terminal as stdin and stdout, "
        "the program gets a pseudo-terminal of its own, made inside the "
        "sandbox (tty, job control and full-screen programs work; the "
        "operator's terminal never enters): the terminal is put in raw "
        "mode, so Ctrl-C and Ctrl-Z reach the program's foreground job, "
        "window size changes follow, TERM is passed, escape sequences pass "
        "except clipboard "
        "writes (OSC 52, unless --allow-clipboard), and however the run "
        "ends the terminal's mode is restored and the modes the program "
        "left set (alternate screen, mouse reporting, bracketed paste, "
        "hidden cursor) are reset. In the background (not the terminal's "
        "foreground job) the terminal is neither read nor changed. "
        "Otherwise its stdout and stderr are relayed to stdout and stderr "
        "and stdin to its stdin, with backpressure and end-of-file passed "
        "on; a terminal stdin is not read outside a terminal session. What the "
        "sandbox refuses (a network call under --network none, an exec of a "
        "program the host has and the sandbox does not) is told on stderr at "
        "the first denial of each kind, with what would allow it, summed up "
        "when the run ends (text format, unless --quiet) and listed in the "
        "receipt under \"denials\".",
};

/* ---------------------------------------------------------- plan, probe */

static const option_def_t o_explain = {
    .name = "--explain",
    .summary = "A human summary of the plan: what the program may read and "
               "write, what is protected and denied, the network, the "
               "limits and the backend."};

/* plan takes every option of run (so that any run line becomes its dry run
 * by changing the word), and --explain. tests/cli/test_dryrun.py checks that
 * no option of run is missing here. */
static const option_def_t* const plan_options[] = {&o_ro,
                                                   &o_rw,
                                                   &o_profile,
                                                   &o_plan,
                                                   &o_workspace,
                                                   &o_allow_read,
                                                   &o_allow_write,
                                                   &o_deny,
                                                   &o_home,
                                                   &o_network,
                                                   &o_env,
                                                   &o_pass_env,
                                                   &o_backend,
                                                   &o_wall_time,
                                                   &o_grace,
                                                   &o_receipt_dir,
                                                   &o_trace,
                                                   &o_quiet,
                                                   &o_verbose_trace,
                                                   &o_io,
                                                   &o_tty,
                                                   &o_no_tty,
                                                   &o_stdin,
                                                   &o_allow_clipboard,
                                                   &warden_o_state_dir,
                                                   &o_plan_digest,
                                                   &o_tasks,
                                                   &o_memory,
                                                   &o_cpu_time,
                                                   &o_open_files,
                                                   &o_file_size,
                                                   &o_raw_output,
                                                   &o_policy,
                                                   &o_mediator,
                                                   &o_policy_temp,
                                                   &o_unprotect,
                                                   &o_explain,
                                                   NULL};

static const operand_def_t plan_operands[] = {
    {"PROGRAM",
     "The program run would start (optional: when given, it is looked up "
     "as run looks it up).",
     false, false, KIND_STRING, NULL},
    {"ARG", "Its arguments.", false, true, KIND_STRING, NULL},
};

static const example_def_t plan_examples[] = {
    {LIST("plan", "--rw", "--deny", "/etc/ssl/private"),
     "Show the sealed read-write profile with one path denied, and its "
     "digest."},
    {LIST("plan", "--profile", "node-mcp"),
     "Print the plan of the shipped node-mcp profile: redirected to a file, "
     "it is what run --plan reads."},
    {LIST("plan", "--explain", "--rw", "--network", "inherit", "--",
          "/usr/bin/make", "test"),
     "Check a run line without running it, and summarise what it allows."},
};

static const command_def_t cmd_plan = {
    .id = "plan",
    .word = "plan",
    .usage = "plan [--explain] RUN-OPTIONS [-- PROGRAM [ARG...]]",
    .purpose = "A dry run of run: make every check run makes and fail exactly "
               "when run would, then print the sealed plan (its text "
               "rendering is a plan file --plan accepts) or, with --explain, "
               "a summary, running nothing.",
    .effect = "read",
    .output_mode = "json-envelope",
    .options = plan_options,
    .operands = plan_operands,
    .operand_count = 2,
    .constraints = run_constraints,
    .constraint_count = 3,
    .examples = plan_examples,
    .example_count = 3,
    .details =
        "plan takes run's options, and run's program when given. It makes "
        "the checks run makes before it starts anything: the workspace and "
        "every path (no symbolic link, no system tree or shared directory "
        "made writable, nothing of maelys-warden's own), the receipt and "
        "state directories, the backend's proved capabilities and its own "
        "preparation of the sandbox. It reserves and releases the same "
        "placeholders run would, and leaves nothing else behind. Its plan "
        "member is a maelys-executor-plan/1 document: 'maelys-warden plan "
        "--ro --format jsonl --field plan > ~/agent-plan.json' writes one "
        "that '--plan ~/agent-plan.json' loads (a plan file is refused where "
        "a sandbox could have written it: not in a workspace that was "
        "writable).",
    .output_schema =
        "{\"type\":\"object\",\"required\":[\"digest\",\"plan\","
        "\"required_capabilities\",\"backend\",\"protection\"],"
        "\"properties\":{\"digest\":{\"type\":"
        "\"string\",\"pattern\":\"^sha256:[0-9a-f]{64}$\"},\"plan\":{\"type\":"
        "\"object\"},\"required_capabilities\":{\"type\":\"array\",\"items\":{"
        "\"type\":\"string\"}},\"backend\":{\"type\":\"string\"},"
        "\"protection\":{\"type\":\"object\"}}}",
};

static const option_def_t* const no_options[] = {NULL};

static const option_def_t* const probe_options[] = {&warden_o_state_dir, NULL};

static const command_def_t cmd_probe = {
    .id = "probe",
    .word = "probe",
    .usage = "probe [--state-dir DIR]",
    .purpose = "Probe every backend: its proved capabilities, why each "
               "missing one is missing, and which backend serves each "
               "built-in profile here.",
    .effect = "read",
    .output_mode = "json-envelope",
    .options = probe_options,
    .examples = (const example_def_t[]){{LIST("probe"),
                                         "List what each backend proved."}},
    .example_count = 1,
    .output_schema =
        "{\"type\":\"object\",\"required\":[\"backends\"],\"properties\":{"
        "\"backends\":{\"type\":\"array\",\"items\":{\"type\":\"object\","
        "\"required\":[\"name\",\"capabilities\",\"missing\",\"diagnostic\"]}}"
        "}}",
};

/* ------------------------------------------------------ built-ins */

static const operand_def_t command_id_operand[] = {
    {"COMMAND_ID", "A command identifier.", false, false, KIND_STRING, NULL}};

static const command_def_t cmd_help = {
    .id = "help",
    .word = "help",
    .usage = "help [COMMAND_ID] | --help",
    .purpose = "Show the help of the program or of one command.",
    .effect = "read",
    .output_mode = "json-envelope",
    .options = no_options,
    .operands = command_id_operand,
    .operand_count = 1,
    .output_schema =
        "{\"type\":\"object\",\"required\":[\"text\",\"commands\"],"
        "\"properties\":{\"text\":{\"type\":\"string\"},\"commands\":{\"type\":"
        "\"array\",\"items\":{\"type\":\"string\"}}}}",
};

static const command_def_t cmd_version = {
    .id = "version",
    .word = "version",
    .usage = "version | --version",
    .purpose = "Show the program's identity and version.",
    .effect = "read",
    .output_mode = "json-envelope",
    .options = no_options,
    .output_schema =
        "{\"type\":\"object\",\"required\":[\"product\",\"program\","
        "\"version\",\"contract\",\"cliApi\",\"framework\"]}",
};

static const option_def_t o_summary = {
    .name = "--summary", .summary = "Every descriptor, without schemas."};
static const option_def_t o_prefix = {
    .name = "--prefix",
    .summary = "Only the commands of one namespace.",
    .arg_name = "PREFIX",
    .kind = KIND_STRING,
    .pattern = "^[a-z]([a-z0-9.-]*[a-z0-9-])?$",
    .requires = LIST("--summary"),
    .conflicts = LIST("COMMAND_ID")};
static const option_def_t* const describe_options[] = {&o_summary, &o_prefix,
                                                       NULL};

static const command_def_t cmd_describe = {
    .id = "describe",
    .word = "describe",
    .usage = "describe [COMMAND_ID] [--summary] [--prefix PREFIX]",
    .purpose = "Describe the catalog, or one command, for agents.",
    .effect = "read",
    .output_mode = "json-envelope",
    .options = describe_options,
    .operands = command_id_operand,
    .operand_count = 1,
    .constraints =
        (const constraint_def_t[]){{"requires", LIST("--prefix", "--summary")}},
    .constraint_count = 1,
    .output_schema = "{\"type\":\"object\",\"required\":[\"schemaVersion\","
                     "\"kind\",\"commands\"]}",
};

static const char* const shells[] = {"bash", "zsh", "fish", NULL};
static const operand_def_t shell_operand[] = {
    {"SHELL", "The shell.", true, false, KIND_CHOICE, shells}};

static const command_def_t cmd_completion = {
    .id = "completion",
    .word = "completion",
    .usage = "completion SHELL",
    .purpose = "Print the shell completion script.",
    .effect = "read",
    .output_mode = "json-envelope",
    .options = no_options,
    .operands = shell_operand,
    .operand_count = 1,
    .examples = (const example_def_t[]){{LIST("completion", "bash"),
                                         "Print the bash completion script."}},
    .example_count = 1,
    .output_schema =
        "{\"type\":\"object\",\"required\":[\"shell\",\"script\"]}",
};

static const operand_def_t words_operand[] = {
    {"WORDS", "The words typed so far.", false, true, KIND_STRING, NULL}};

static const command_def_t cmd_complete = {
    .id = "complete.candidates",
    .word = "__complete",
    .usage = "__complete -- WORDS...",
    .purpose = "Completion candidates for the words typed so far.",
    .effect = "read",
    .output_mode = "json-records",
    .hidden = true,
    .options = no_options,
    .operands = words_operand,
    .operand_count = 1,
    .output_schema =
        "{\"type\":\"object\",\"required\":[\"count\",\"records\"]}",
};

const command_def_t* const warden_commands[] = {&cmd_run,
                                                &cmd_plan,
                                                &cmd_probe,
                                                &cmd_help,
                                                &cmd_version,
                                                &cmd_describe,
                                                &cmd_completion,
                                                &cmd_complete,
                                                &warden_cmd_verify,
                                                &warden_cmd_agent,
                                                &warden_cmd_ps,
                                                &warden_cmd_stop,
                                                &warden_cmd_receipts,
                                                NULL};

const char* const warden_invariants[] = {
    "Fail closed: a capability the backend did not prove refuses the launch, "
    "never an unconfined fallback.",
    "Closed environment: the payload sees exactly the request's environment.",
    "Descriptors 0-2 per io mode, 3 the protocol socket in isolated mode, "
    "nothing else.",
    "No terminal of the operator's enters the sandbox: a terminal session "
    "gives the program a fresh pseudo-terminal of its own and relays it.",
    "The relay transports bytes and never parses or buffers protocol frames "
    "beyond a bounded window.",
    "Receipts are written outside anything the sandbox can write.",
    NULL};

/* ------------------------------------------------------------- lookups */

const command_def_t* catalog_command_by_id(const char* id) {
  for (size_t i = 0; warden_commands[i] != NULL; i++)
    if (strcmp(warden_commands[i]->id, id) == 0)
      return warden_commands[i];
  return NULL;
}

const command_def_t* catalog_command_by_word(const char* word) {
  for (size_t i = 0; warden_commands[i] != NULL; i++)
    if (strcmp(warden_commands[i]->word, word) == 0)
      return warden_commands[i];
  return NULL;
}

bool catalog_is_global(const option_def_t* opt) {
  for (size_t i = 0; warden_global_options[i] != NULL; i++)
    if (warden_global_options[i] == opt)
      return true;
  return false;
}

const option_def_t* catalog_option(const command_def_t* cmd, const char* name) {
  if (cmd != NULL)
    for (size_t i = 0; cmd->options[i] != NULL; i++)
      if (strcmp(cmd->options[i]->name, name) == 0)
        return cmd->options[i];
  for (size_t i = 0; warden_global_options[i] != NULL; i++)
    if (strcmp(warden_global_options[i]->name, name) == 0)
      return warden_global_options[i];
  return NULL;
}

const char* catalog_kind_name(value_kind_t kind) {
  switch (kind) {
  case KIND_STRING:
    return "string";
  case KIND_PATH:
    return "path";
  case KIND_ABSOLUTE_PATH:
    return "absolute-path";
  case KIND_CHOICE:
    return "choice";
  case KIND_DURATION:
    return "duration";
  case KIND_SIZE:
    return "size";
  case KIND_UNSIGNED:
    return "unsigned";
  case KIND_NONE:
    break;
  }
  return "boolean";
}
