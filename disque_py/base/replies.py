"""Every text a client reads in an error reply, in one place.

The texts are protocol: client libraries and operators' scripts compare
them, so each is worded exactly as Disque 1.0-rc1 words it (its prefix, the
part before the text, is the error class's: base/errors.py). Texts of our
own (options and commands beyond Disque) follow Disque's style. A text with
%s or %d is formatted by the code that raises it; nothing else is built
from pieces.
"""

from __future__ import annotations

# ------------------------------------------------------------ any command
SYNTAX_ERROR = "syntax error"
UNKNOWN_COMMAND = "unknown command '%s'"
WRONG_ARITY = "wrong number of arguments for '%s' command"
PING_ARITY = "wrong number of arguments for 'ping' command"
NOT_INTEGER = "value is not an integer or out of range"
TIMEOUT_NOT_INTEGER = "timeout is not an integer or out of range"
TIMEOUT_NEGATIVE = "timeout is negative"
INVALID_CURSOR = "invalid cursor or option name"
COUNT_POSITIVE = "COUNT must be a number greater than zero"
BADID_MESSAGE = "Invalid Job ID format."
LEAVING_MESSAGE = "This node is leaving the cluster, please connect to a different one"
NOAUTH_MESSAGE = "Authentication required."
OOM_MESSAGE = "command not allowed when used memory > 'maxmemory'."
LOADING_MESSAGE = "Disque is loading the dataset in memory"
AOF_MISCONF = "Errors writing to the AOF file: %s"
MAX_CLIENTS = "max number of clients reached"
# Protected mode's refusal (config/protected_mode.py), prefix DENIED.
PROTECTED_MODE_DENIED = (
    "Disque is in protected mode: protected mode is on, no bind address was given and "
    "clients need no password, so only clients on this host (loopback or Unix socket) are "
    "served. To serve other hosts, do one of these: 1) from a client on the server's own "
    "host, send 'CONFIG SET protected-mode no' (and CONFIG REWRITE to keep it across "
    "restarts), having made sure the server cannot be reached from the internet; 2) set "
    "'protected-mode no' in the configuration file and restart the server; 3) if you "
    "started the server by hand to try it out, restart it with '--protected-mode no'; 4) "
    "give the addresses to listen on with 'bind', or set a password with 'requirepass'. "
    "Any one of these is enough.")

# ------------------------------------------------------------------ ADDJOB
REPLICATE_RANGE = "REPLICATE must be between 1 and 65535"
TTL_POSITIVE = "TTL must be a number > 0"
RETRY_NON_NEGATIVE = "RETRY time must be a non negative number"
DELAY_NON_NEGATIVE = "DELAY time must be a non negative number"
MAXLEN_POSITIVE = "MAXLEN must be a positive number"
RETRY0_NEEDS_REPL1 = ("With RETRY set to 0 please explicitly set  REPLICATE to 1 "
                      "(at-most-once delivery)")
DELAY_NOT_BELOW_TTL = ("The specified DELAY is greater than TTL. Job refused since "
                       "would never be delivered")
NOT_ENOUGH_NODES = "Not enough reachable nodes for the requested replication level"
CANNOT_HOLD_COPY = (NOT_ENOUGH_NODES + ", since I'm unable to hold a copy of the "
                    "message for the following reason: %s")
REASON_LEAVING = "I'm leaving the cluster"
REASON_MEMORY = "I'm out of memory"
MAXLEN_REACHED = "Queue is already longer than the specified MAXLEN count"
PAUSED_INPUT = "Queue paused in input, try later"
ID_COLLISION = "Internal error creating the job, check server logs"
REMOVED_BEFORE_COPIES = ("job removed (expired?) before the requested replication "
                         "level was achieved")
TIMEOUT_BEFORE_COPIES = "Timeout reached before replicating to the requested number of nodes"
# ... options beyond Disque
BACKOFF_RANGE = "BACKOFF needs base-ms > 0 and max-ms >= base-ms, both below 2^32"
MAXDELIVERIES_RANGE = "MAXDELIVERIES must be between 1 and 65535"
PRIORITY_RANGE = "PRIORITY must be between 0 and 9"
DEADLETTER_NEEDS_MAXDELIVERIES = "DEADLETTER needs MAXDELIVERIES"
DEADLETTER_SAME_QUEUE = "DEADLETTER must name another queue than the job's"
DEDUP_KEY_SIZE = "DEDUP key must be 1 to 1024 bytes"
WINDOW_POSITIVE = "WINDOW must be a number > 0"
WINDOW_NEEDS_DEDUP = "WINDOW needs DEDUP"
DEDUP_TABLE_FULL = "DEDUP key table is full (dedup-max-keys %d)"
FIRST_ADD_GONE = "The first ADDJOB with this DEDUP key was cancelled before its copies were made"

# ------------------------------------------------------------ job commands
JOB_UNKNOWN = "Job not known in the context of this node."
JOB_ACKED = "The job is already acknowledged."
HALF_TTL_ELAPSED = ("Half of job TTL already elapsed, you are no longer allowed "
                    "to postpone the next delivery.")
INVALID_STATE = "Invalid job state name"
INVALID_REPLY_TYPE = "Invalid REPLY type, try ID or ALL"
LOADJOB_ONLY_FROM_AOF = "LOADJOB is a special command only processed from AOF"

# ------------------------------------------------------------ administration
NO_PASSWORD_SET = "Client sent AUTH, but no password is set"
INVALID_PASSWORD = "invalid password"
BAD_CLIENT_NAME = "Client names cannot contain spaces, newlines or special characters."
CONFIG_SUBCOMMANDS = "CONFIG subcommand must be one of GET, SET, RESETSTAT, REWRITE"
COMMAND_USAGE = "Unknown subcommand or wrong number of arguments."
CLIENT_SYNTAX = ("Syntax error, try CLIENT (LIST | KILL ip:port | GETNAME | "
                 "SETNAME connection-name)")
HELLO_NEEDS_AUTH = ("HELLO must be called with the client already authenticated, otherwise "
                    "the HELLO <proto> AUTH <user> <pass> option can be used to authenticate "
                    "the client and select the RESP protocol version at the same time")
SLOWLOG_USAGE = "Unknown SLOWLOG subcommand or wrong # of args. Try GET, RESET, LEN."
NO_SAMPLES = "No samples available for event '%s'"
SHUTDOWN_FAILED = "Errors trying to SHUTDOWN. Check logs."
PROTOCOL_NOT_INTEGER = "Protocol version is not an integer or out of range"
UNSUPPORTED_PROTOCOL = "unsupported protocol version"
HELLO_BAD_OPTION = "Syntax error in HELLO option '%s'"
WRONG_PASS = "invalid username-password pair"
CONFIG_ARITY = "Wrong number of arguments for CONFIG %s"
UNRECOGNIZED_OPTION = "Unrecognized option '%s'"
NO_SUCH_CLIENT = "No such client"
UNKNOWN_CLIENT_TYPE = "Unknown client type '%s'"
DEBUG_USAGE = "Unknown DEBUG subcommand or wrong number of arguments for '%s'"

# ----------------------------------------------------------------- the AOF
REWRITE_IN_PROGRESS = "Background append only file rewriting already in progress"
# Disque answers a bare -ERR here; later Redis names where to look.
REWRITE_NOT_STARTED = ("Can't execute an AOF background rewriting. "
                       "Please check the server logs for more information.")
LOADJOB_CORRUPTED = "corrupted LOADJOB data: %s"
AOF_NOT_TURNED_ON = "Unable to turn on AOF. Check server logs."
TLS_NOT_UPDATED = "Unable to update the TLS configuration: %s"

# ------------------------------------------------------------------ CONFIG
UNSUPPORTED = "Unsupported CONFIG parameter: %s"
INVALID_ARGUMENT = "Invalid argument '%s' for CONFIG SET '%s'"
NO_CONFIG_FILE = "The server is running without a config file"
REWRITE_FAILED = "Rewriting config file: %s"
CHDIR_FAILED = "Changing directory: %s"
BAD_DIRECTIVE = "Bad directive or wrong number of arguments"
UNBALANCED = "Unbalanced quotes in configuration line"

# ----------------------------------------------------------------- CLUSTER
WRONG_SUBCOMMAND = "Wrong CLUSTER subcommand or number of arguments"
WRONG_LEAVING_ARG = "Wrong argument for CLUSTER LEAVING. Use 'yes' or 'no'"
CANNOT_FORGET_MYSELF = "I tried hard but I can't forget myself..."
INVALID_TCP_PORT = "Invalid TCP port specified: %s"
INVALID_NODE_ADDRESS = "Invalid node address specified: %s:%s"
NODES_CONF_NOT_SAVED = "error saving the cluster node config: %s"
INVALID_NODE_ID = "Invalid node identifier"
UNKNOWN_NODE = "Unknown node %s"
