/*
 * config_table.h - every CCSHIM_* environment variable, declared once.
 * The library's parser (config.c) and `ccshim-run --help` both expand it.
 *
 * X(FIELD, "CCSHIM_NAME", TYPE, "default", "accepted values / help")
 * TYPE: BOOL (0/1/yes/no/on/off/true/false), INT (decimal, within MIN..MAX
 * given by CCS_CFG_RANGE_FIELD below), STR, ENUM (one of the words listed
 * in the help between braces, first word = value 0).
 *
 * Each feature keeps its rows in its own section below.
 */
#ifndef CCS_CONFIG_TABLE_H
#define CCS_CONFIG_TABLE_H

#define CCS_CONFIG_LIST(X)                                                                                 \
    /* --- core ------------------------------------------------------------------------------- */        \
    X(disable, "CCSHIM_DISABLE", BOOL, "0", "1 forwards every call unchanged and records nothing")       \
    X(log, "CCSHIM_LOG", STR, "stderr",                                                                   \
      "where log lines go: stderr, or a file pattern (%r rank, %p pid, %h host, %j job)")                 \
    X(log_level, "CCSHIM_LOG_LEVEL", ENUM, "warn", "{error warn info debug}")                            \
    X(trace_dir, "CCSHIM_TRACE_DIR", STR, "",                                                             \
      "directory for per-rank traces (created if missing); empty: no trace")                               \
    X(ring_size, "CCSHIM_RING_SIZE", INT, "65536",                                                        \
      "records buffered per thread, a power of two in 1024..16777216")                                    \
    X(stack_depth, "CCSHIM_STACK_DEPTH", INT, "16", "frames unwound per new call site, 0..32")           \
    X(flush_ms, "CCSHIM_FLUSH_MS", INT, "100", "background writer period in ms, 1..60000")                \
    X(summary, "CCSHIM_SUMMARY", BOOL, "1", "one summary line per rank at exit")                          \
    X(signals, "CCSHIM_SIGNALS", BOOL, "1",                                                               \
      "flush the trace on fatal signals (only where the job left the default handler)")                   \
    X(job_id, "CCSHIM_JOB_ID", STR, "",                                                                   \
      "job id in trace names; default: from Slurm, Open MPI, PMIx or torchrun, else 'local'")             \
    X(python_dir, "CCSHIM_PYTHON_DIR", STR, "",                                                           \
      "ccshim-run --torch/--python: directory of sitecustomize.py and ccshim_torch.py; "                   \
      "default: beside ccshim-run")                                                                        \
    X(torch_helper, "CCSHIM_TORCH_HELPER", BOOL, "0",                                                     \
      "set by ccshim-run --torch: the PyTorch helper marks the optimizer steps; every:N then answers "     \
      "nothing locally in a communicator's first step, where DDP rebuilds its buckets")                    \
    X(torch_ddp_skip, "CCSHIM_TORCH_DDP_SKIP", BOOL, "1",                                                 \
      "--torch with coalescing: once the pattern is agreed, DDP itself skips the per-mini-batch "         \
      "synchronisation (as under no_sync); 0 keeps coalescing at the all-reduce level")                   \
    X(torch_predict, "CCSHIM_TORCH_PREDICT", BOOL, "1",                                                   \
      "--torch with DDP skipping: a first step whose no-grad forwards announce its backward passes (a "   \
      "cached loss) skips from the start once the ranks agree; 0 learns it from synchronised passes")     \
    /* --- desync detection (docs/desync.md) ----------------------------------------------- */          \
    X(desync, "CCSHIM_DESYNC", BOOL, "1", "early desync detection over a side channel (docs/desync.md)")     \
    X(on_desync, "CCSHIM_ON_DESYNC", ENUM, "warn",                                                        \
      "{warn abort}: after the diagnostics of a MISMATCH, DESYNC or DEAD verdict, abort the job")         \
    X(desync_period_ms, "CCSHIM_DESYNC_PERIOD_MS", INT, "20", "side-channel publication period in ms, 1..10000") \
    X(desync_block_ms, "CCSHIM_DESYNC_BLOCK_MS", INT, "1000",                                             \
      "blocked this long (ms) in a collective that cannot complete: DESYNC, 10..3600000")                 \
    X(desync_straggler_ms, "CCSHIM_DESYNC_STRAGGLER_MS", INT, "10000",                                    \
      "waiting this long (ms) for a rank that computes: STRAGGLER warning, 10..86400000")                 \
    X(desync_heartbeat_ms, "CCSHIM_DESYNC_HEARTBEAT_MS", INT, "10000",                                    \
      "no publication from a rank for this long (ms): DEAD on its host, unreachable across, 100..3600000") \
    X(desync_flight, "CCSHIM_DESYNC_FLIGHT", INT, "64",                                                   \
      "records per thread in the flight-recorder file written with a verdict, 0..65536")                  \
    X(desync_transport, "CCSHIM_DESYNC_TRANSPORT", ENUM, "auto",                                          \
      "{auto shm tcp}: auto = shared memory, plus TCP when ranks span hosts")                             \
    X(coord, "CCSHIM_COORD", STR, "",                                                                     \
      "host:port of the coordinator (in rank 0); default: MPI, or MASTER_ADDR at a port keyed by the secret")         \
    X(secret, "CCSHIM_SECRET", STR, "",                                                                   \
      "per-job secret (32+ characters) of side-channel members without MPI; environment only")            \
    X(secret_file, "CCSHIM_SECRET_FILE", STR, "",                                                         \
      "file holding the per-job secret (owned by you, mode 0600), e.g. in a directory every node shares") \
    X(desync_tree, "CCSHIM_DESYNC_TREE", ENUM, "auto",                                                    \
      "{auto off on}: hosts report through relays of groups of hosts (docs/desync.md, 'The tree'); "     \
      "auto: from 4097 ranks on")                                                                          \
    X(desync_relay_ranks, "CCSHIM_DESYNC_RELAY_RANKS", INT, "0",                                          \
      "ranks a relay's group holds, 0..16777216; 0: about sqrt(ranks x ranks a host)")                    \
    X(desync_relay_listen, "CCSHIM_DESYNC_RELAY_LISTEN", STR, "",                                         \
      "[host:]port a relay listens on (a firewall's); default: any free port on the address it reaches "  \
      "the coordinator from")                                                                              \
    X(desync_relay_addr, "CCSHIM_DESYNC_RELAY_ADDR", STR, "",                                             \
      "host:port its group's leaders reach a relay at (behind NAT or a proxy); default: where it listens") \
    X(desync_host, "CCSHIM_DESYNC_HOST", STR, "",                                                         \
      "host identity for the side channel (default: the host name); ranks sharing it share memory")      \
    X(nccl_completion, "CCSHIM_NCCL_COMPLETION", BOOL, "1",                                               \
      "NCCL: track completion on the device with CUDA events when the job has loaded CUDA (docs/nccl.md)") \
    /* --- coalescing (docs/coalescing.md) ------------------------------------------------- */          \
    X(coalesce, "CCSHIM_COALESCE", STR, "off",                                                             \
      "coalesce per-mini-batch all-reduces: off, every:N (per identity N-1 of every N answered locally, "  \
      "the N-th real) or auto (N learned per identity between step markers, agreed across ranks)")        \
    X(coalesce_min_bytes, "CCSHIM_COALESCE_MIN_BYTES", INT, "1024",                                         \
      "smallest all-reduce coalesced, in bytes per rank; smaller ones (scalars, metadata) pass through")  \
    X(coalesce_learn_steps, "CCSHIM_COALESCE_LEARN_STEPS", INT, "2",                                        \
      "auto: consecutive steps with the same count per identity (all real) before N is agreed, 1..1000")      \
    X(coalesce_include, "CCSHIM_COALESCE_INCLUDE", STR, "",                                                 \
      "coalesce only calls whose call stack names one of these comma-separated substrings; empty: all")  \
    X(coalesce_exclude, "CCSHIM_COALESCE_EXCLUDE", STR, "",                                                 \
      "never coalesce calls whose call stack names one of these comma-separated substrings")              \
    /* --- live metrics (docs/metrics.md) ------------------------------------------------------ */        \
    X(metrics, "CCSHIM_METRICS", STR, "",                                                                   \
      "file pattern (%r rank, required; %h host, %j job, %p pid) rewritten with live counters in the "    \
      "Prometheus text format every CCSHIM_METRICS_PERIOD_MS; removed at exit; empty: off")              \
    X(metrics_period_ms, "CCSHIM_METRICS_PERIOD_MS", INT, "1000", "live metrics period in ms, 10..3600000") \
    X(metrics_keep, "CCSHIM_METRICS_KEEP", BOOL, "0",                                                      \
      "1 keeps the metrics file at exit with the run's totals (default: removed, it is a live view)")

/* CCSHIM_* names that are not settings of the library, and what reads
 * them: ccshim-run leaves them alone when it checks its environment before
 * launch (any other unknown CCSHIM_* name is refused there, with the
 * nearest setting's name).  X("CCSHIM_NAME", "who reads it") */
#define CCS_CONFIG_OTHER_NAMES(X)                                                                          \
    X("CCSHIM_LIBDIR", "ccshim-run: where libccshim*.so are (as --libdir)")                                \
    X("CCSHIM_BUILD", "scripts/setup.sh, test.sh, demo.sh, soak-nccl.sh: the build directory")             \
    X("CCSHIM_NO_APT", "scripts/setup.sh: install no package")                                             \
    X("CCSHIM_NO_REALSTACK", "scripts/setup.sh, tests/realstack: skip the real-stack tier")                \
    X("CCSHIM_CONFIGURE_FLAGS", "scripts/setup.sh: extra configure flags")                                 \
    X("CCSHIM_VENV", "scripts/realstack-venv.sh, tests/realstack, bench: the real-stack venv")             \
    X("CCSHIM_WHEELS", "scripts/realstack-venv.sh: the wheel cache")                                       \
    X("CCSHIM_REALSTACK_PYTHON", "scripts/realstack-venv.sh: the Python the venv is made from")            \
    X("CCSHIM_MPICH_BUILD", "scripts/check-mpich.sh: its build directory")                                 \
    X("CCSHIM_TSAN_BUILD", "scripts/check-tsan.sh: its build directory")                                   \
    X("CCSHIM_DEMO_DIR", "scripts/demo.sh: its output directory")                                          \
    X("CCSHIM_CHECK_TIMING", "make check-timing: run the latency targets")                                 \
    X("CCSHIM_FUZZ_SECONDS", "tests/fuzz: seconds per fuzz target")                                        \
    X("CCSHIM_FUZZ_ONLY", "tests/fuzz: the targets to run")                                                \
    X("CCSHIM_FUZZ_KEEP", "tests/fuzz: keep the work directories here")                                    \
    X("CCSHIM_FUZZ_LOG", "tests/fuzz/fuzz_log.c: print the fuzzed log lines")                              \
    X("CCSHIM_GPU_BUDGET_S", "tests/gpu/run-device-checks.sh: seconds of device time")                     \
    X("CCSHIM_BENCH_AUDIT_STEPS", "bench/audit-bench.sh: steps of its job")                                \
    X("CCSHIM_RUN", "tests: the ccshim-run under test")                                                    \
    X("CCSHIM_AUDIT", "tests: the ccshim-audit under test")                                                \
    X("CCSHIM_TRAINER", "tests: the ccshim-trainer under test")

/* Ranges of INT fields: X(FIELD, MIN, MAX) */
#define CCS_CONFIG_RANGES(X)                                                                               \
    X(ring_size, 1024, 16777216)                                                                           \
    X(stack_depth, 0, 32)                                                                                  \
    X(flush_ms, 1, 60000)                                                                                  \
    X(desync_period_ms, 1, 10000)                                                                          \
    X(desync_block_ms, 10, 3600000)                                                                        \
    X(desync_straggler_ms, 10, 86400000)                                                                   \
    X(desync_heartbeat_ms, 100, 3600000)                                                                   \
    X(desync_flight, 0, 65536)                                                                             \
    X(desync_relay_ranks, 0, 16777216)                                                                     \
    X(coalesce_min_bytes, 0, 2147483647)                                                                   \
    X(coalesce_learn_steps, 1, 1000)                                                                       \
    X(metrics_period_ms, 10, 3600000)

#endif
