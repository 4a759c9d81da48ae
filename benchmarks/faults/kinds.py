"""The fault kinds of the scorecard: what each does (in job.py) and the categories a right
answer may name. Development kinds were written next to the rules; the sealed kinds
(SEALED.md) were written before the rules and are scored apart."""

from __future__ import annotations

from dataclasses import dataclass

CRASH = frozenset({"rank_crashed"})
SLOW = frozenset({"straggler_or_imbalance", "timeout_too_short"})
PATH = frozenset({"collective_mismatch", "straggler_or_imbalance"})
RDZV = frozenset({"rendezvous_failure"})


@dataclass(frozen=True)
class Kind:
    name: str
    right: frozenset[str]
    doc: str
    #: the fault stops the group from forming: it is injected at start-up, not at a step
    at_start: bool = False
    #: on a multi-node shape the fault is every rank's of one node (shared hardware, image)
    node_wide: bool = False


DEV: tuple[Kind, ...] = (
    # deaths
    Kind("exception", CRASH, "RuntimeError raised in the training loop"),
    Kind("value_error", CRASH, "ValueError from a bad label in one rank's batch"),
    Kind("sigkill", CRASH, "the rank is SIGKILLed (as the host OOM killer does)"),
    Kind("sigsegv", CRASH, "the rank dies of SIGSEGV (a crash in native code)"),
    Kind("exit1", CRASH, "os._exit(1): the rank dies without a traceback"),
    Kind("exit0_early", CRASH | PATH,
         "the rank leaves the loop and exits cleanly (code 0) while the others wait"),
    # memory
    Kind("memory_error", CRASH, "Python MemoryError (a huge host allocation)"),
    Kind("rlimit_as", CRASH, "a tensor allocation fails under RLIMIT_AS (DefaultCPUAllocator)"),
    # different code paths
    Kind("skip", PATH, "the rank skips one all_reduce"),
    Kind("extra_collective", PATH, "the rank issues one all_reduce the others do not"),
    Kind("barrier_branch", PATH, "a barrier inside an `if rank == ...:` branch"),
    # data that differs per rank
    Kind("mismatch", PATH, "the rank all_reduces a tensor of another shape"),
    Kind("dtype", PATH, "the rank all_reduces a float64 tensor where the others use float32"),
    Kind("fewer_batches", PATH,
         "the rank's data split is shorter: it reaches the end-of-epoch collective early"),
    # environment that differs per rank or node
    Kind("nojoin", RDZV | CRASH, "the worker exits (code 3) before joining the group",
         at_start=True),
    Kind("wrong_master", RDZV | frozenset({"network_interface"}),
         "MASTER_ADDR points at an address nobody listens on", at_start=True),
    Kind("wrong_port", RDZV, "MASTER_PORT differs on the rank: nobody listens there",
         at_start=True),
    Kind("wrong_world", RDZV, "WORLD_SIZE is one larger on the rank", at_start=True),
    Kind("bad_ifname", RDZV | frozenset({"network_interface"}),
         "GLOO_SOCKET_IFNAME names an interface the host does not have", at_start=True),
    # legitimate slowness against the configured timeout
    Kind("sleep", SLOW, "the rank stalls for three timeouts before an all_reduce"),
    Kind("slow_ckpt", SLOW, "the rank saves a checkpoint that takes three timeouts"),
    Kind("slow_loader", SLOW, "the rank's data loader takes 2.5 timeouts for one batch"),
)

#: written down (SEALED.md) before the rules; implemented and run once at the end
SEALED: tuple[Kind, ...] = (
    Kind("abort", CRASH, "os.abort() (SIGABRT) mid-run"),
    Kind("assert_batch", CRASH, "an assert on the batch shape fails (AssertionError)"),
    Kind("nan_loss", CRASH, "a loss check raises FloatingPointError"),
    Kind("sys_exit2", CRASH, "sys.exit(2) mid-run, no traceback"),
    Kind("bcast_src", PATH, "the rank broadcasts from another src than the others"),
    Kind("deadlock", SLOW, "the rank blocks forever on a lock it holds"),
    Kind("missing_shard", CRASH, "FileNotFoundError opening the rank's data shard"),
    Kind("gather_vs_reduce", PATH, "all_gather where the others all_reduce"),
)

#: the second sealed set (SEALED-2.md), written before the rules of the second round; run once
SEALED2: tuple[Kind, ...] = (
    Kind("sigint", CRASH, "SIGINT mid-run (a Ctrl-C): KeyboardInterrupt"),
    Kind("sigterm_ext", CRASH, "SIGTERM from outside the launcher (a preemption) mid-run"),
    Kind("loader_killed", CRASH, "a DataLoader worker of the rank is SIGKILLed"),
    Kind("disk_full", CRASH, "a checkpoint save hits ENOSPC (/dev/full)"),
    Kind("nofile", CRASH, "RLIMIT_NOFILE exhausted opening data: EMFILE"),
    Kind("subgroup_barrier", PATH, "barrier(group=sub) where the others barrier() the world"),
    Kind("layers_config", PATH, "another config: the gradient all_reduce is 1280 not 1024"),
    Kind("early_destroy", CRASH | PATH,
         "early stopping on one rank: destroy_process_group(), then the next collective raises"),
)

#: the third sealed set (SEALED-3.md), written before the rules of the third round; run once
#: on the fixed plan in scorecard.SEALED3_PLAN
SEALED3: tuple[Kind, ...] = (
    Kind("ckpt_truncated", CRASH, "torch.load of a truncated checkpoint shard raises"),
    Kind("sigbus", CRASH | frozenset({"shm_ipc_container"}), "the rank dies of SIGBUS"),
    Kind("slow_init", RDZV | SLOW, "the rank stalls three timeouts before init_process_group",
         at_start=True),
    Kind("node_lost", CRASH, "every rank of the node is SIGKILLed at the step", node_wide=True),
    Kind("slow_node", SLOW, "every rank of the node takes 2.5 timeouts for the step",
         node_wide=True),
    Kind("bad_dns", RDZV | frozenset({"network_interface"}),
         "MASTER_ADDR is a host name that does not resolve", at_start=True),
    Kind("import_error", CRASH | RDZV | frozenset({"version_incompatibility"}),
         "ModuleNotFoundError at start-up, before joining", at_start=True),
)

#: the fourth sealed set (SEALED-4.md), written before the rules of the fourth round; run
#: once on the fixed plan in scorecard.SEALED4_PLAN
SEALED4: tuple[Kind, ...] = (
    Kind("sigfpe", CRASH, "the rank dies of SIGFPE (native integer division by zero)"),
    Kind("anomaly_nan", CRASH, "autograd's anomaly mode raises on a NaN gradient"),
    Kind("stale_config", CRASH, "an old config on the rank (or node): KeyError at the step",
         node_wide=True),
    Kind("node_preempt", CRASH, "every rank of the node is SIGTERMed from outside (preempted)",
         node_wide=True),
    Kind("fifo_hang", SLOW, "the rank blocks for good reading a shard from a hung mount"),
    Kind("bcast_size", PATH, "the rank broadcasts 1280 elements where the others 1024"),
    Kind("allgather_size", PATH, "the rank all_gathers 1000 elements where the others 1024"),
)

#: the fifth sealed set (SEALED-5.md), written before it was implemented, without reading the
#: rules' code; run once on the fixed plan in scorecard.SEALED5_PLAN
SEALED5: tuple[Kind, ...] = (
    Kind("sighup", CRASH, "SIGHUP mid-run (its ssh session or tmux pane closed)"),
    Kind("weights_only", CRASH | frozenset({"version_incompatibility"}),
         "torch.load (weights_only=True) of the rank's old shard raises UnpicklingError"),
    Kind("sigill", CRASH | frozenset({"version_incompatibility"}),
         "every rank of the node dies of SIGILL (an extension built for a newer CPU)",
         node_wide=True),
    Kind("gen_longer", PATH, "the rank's sample generates 8 tokens, the others' 4 (one "
         "all_reduce per token)"),
    Kind("object_collective", PATH, "the rank alone logs metrics with all_gather_object"),
    Kind("precision_env", PATH, "fp16 on the node: a float16 gradient all_reduce, the others "
         "float32", node_wide=True),
    Kind("dup_rank", RDZV, "RANK from LOCAL_RANK on the node (or a neighbour's RANK)",
         at_start=True, node_wide=True),
    Kind("slow_eval", SLOW, "the rank runs a CPU-bound validation pass for three timeouts"),
)

#: the sixth sealed set (SEALED-6.md), written before it was implemented, without reading the
#: rules' code; run once on the fixed plan in scorecard.SEALED6_PLAN
SEALED6: tuple[Kind, ...] = (
    Kind("sigusr1", CRASH, "SIGUSR1 mid-run (a requeue warning signal, no handler)"),
    Kind("deep_json", CRASH, "json.loads of a sample nested 100000 deep: RecursionError"),
    Kind("bad_utf8", CRASH, "a line of the rank's text shard holds 0xff: UnicodeDecodeError"),
    Kind("hashseed_order", PATH, "another PYTHONHASHSEED on the node: the step's two gradient "
         "buckets all_reduced in the other order", node_wide=True),
    Kind("grad_accum_env", PATH, "gradient accumulation 2 on the node (the others 1): from the "
         "step on it all_reduces every second step", node_wide=True),
    Kind("unused_param", PATH | CRASH, "DDP: the rank's forward skips a layer from the step on "
         "(find_unused_parameters=False)"),
    Kind("main_first", SLOW, "the rank preprocesses the dataset for three timeouts while the "
         "others wait at a barrier"),
    Kind("no_rank_env", RDZV | CRASH, "RANK not exported on the node: init_process_group "
         "(env://) raises", at_start=True, node_wide=True),
)

BY_NAME = {k.name: k for k in (*DEV, *SEALED, *SEALED2, *SEALED3, *SEALED4, *SEALED5,
                               *SEALED6)}
