"""The three Ascend task-type vocabularies -> timeline ``kind`` and ``engine``.

The same kernel is called three ways (MANIFEST appendix A.3):

* core names -- ``kernel_details.csv`` "Accelerator Core", ``op_summary`` "Task Type",
  ``COMPUTE_TASK_INFO.taskType``, ``op_statistic`` "Core Type": AI_CORE, AI_VECTOR_CORE,
  MIX_AIC, MIX_AIV, AI_CPU, DSA_SQE, HCCL / COMMUNICATION;
* runtime names -- ``TASK.taskType`` in the SQLite exports and ``task_time`` "kernel_type":
  KERNEL_AICORE, KERNEL_AIVEC, MEMCPY_ASYNC, EVENT_RECORD, STARS_COMMON, PROFILING_ENABLE …,
  plus the FFTS+ context types (``SDMA``, ``Write Value``, ``Notify Wait`` …);
* hardware-queue (SQE) names -- trace_view / msprof JSON "Task Type": AI_CORE (used for vector
  kernels too, so it names no engine), AIV_SQE, PCIE_DMA_SQE, EVENT_WAIT_SQE, PLACE_HOLDER_SQE …
  and, on chips before 910B, the hwts names (AI_CORE, NOTIFY_WAIT, REDUCE_ASYNC_V2 …).

:func:`classify` maps a core type when one is known, else the task type, else the row's name
(rows of non-kernel tasks are named after their type). Unknown types read as kernels with no
engine; the caller lists them in a warning.

The runtime's non-kernel tasks (its task-type names: CANN runtime ``ProfilingAgent::
RegisterProfTypeInfo``, hicann/runtime ``src/runtime/feature/src/common/profiling_agent.cc``)
are never kernels: event records and waits, host function callbacks (``HOSTFUNC_CALLBACK``,
``aclrtLaunchCallback``: the stream then waits on an event the host records when the callback
returns), value writes and waits are ``sync``; stream control, profiling and debug tasks are
``marker``. A ``NOTIFY_*`` task inside an HCCL operator becomes ``comm`` later
(:mod:`.comm_tasks`); outside one it stays ``sync``.
"""

from __future__ import annotations

import polars as pl

KERNEL, MEMCPY, SYNC, COMM, MARKER = "kernel", "memcpy", "sync", "comm", "marker"

# core name -> (kind, engine)
CORE: dict[str, tuple[str, str | None]] = {
    "AI_CORE": (KERNEL, "aic"),
    "AI_VECTOR_CORE": (KERNEL, "aiv"),
    "AIV": (KERNEL, "aiv"),
    "AIC": (KERNEL, "aic"),
    "MIX_AIC": (KERNEL, "mix"),
    "MIX_AIV": (KERNEL, "mix"),
    "AI_CPU": (KERNEL, "ai_cpu"),
    "DSA_SQE": (KERNEL, "dsa"),
    "DSA": (KERNEL, "dsa"),
    "HCCL": (COMM, "comm"),
    "COMMUNICATION": (COMM, "comm"),
    "HCCL_AI_CPU": (COMM, "ai_cpu"),
}

_SYNC_TYPES = (
    "EVENT_RECORD",
    "EVENT_WAIT",
    "EVENT_RESET",
    "STREAM_WAIT_EVENT",
    "NOTIFY_RECORD",
    "NOTIFY_WAIT",
    "REMOTE_EVENT_WAIT",
    "Notify Wait",
    "Notify Record",
    "Write Value",
    "EVENT_RECORD_SQE",
    "EVENT_WAIT_SQE",
    "NOTIFY_RECORD_SQE",
    "NOTIFY_WAIT_SQE",
    "WRITE_VALUE_SQE",
    "BARRIER",
    "STREAM_SYNC",
    "HOSTFUNC_CALLBACK",
    "WriteValueTask",
    "WRITE_VALUE",
    "MEM_WRITE_VALUE",
    "MEM_WAIT_VALUE",
    "DAVID_EVENT_RECORD",
    "DAVID_EVENT_WAIT",
    "DAVID_EVENT_RESET",
    "IPC_EVENT_RECORD",
    "IPC_EVENT_WAIT",
    "CAPTURE_RECORD",
    "CAPTURE_WAIT",
)
_MARKER_TYPES = (
    "PROFILING_ENABLE",
    "PROFILING_DISABLE",
    "TASK_TIMEOUT_SET",
    "MAINTENANCE",
    "CREATE_STREAM",
    "MODEL_MAINTAINCE",
    "MODEL_EXECUTE",
    "PLACE_HOLDER",
    "PLACE_HOLDER_SQE",
    "reserve",
    "MODEL_TO_AICPU",
    "ACTIVE_AICPU_STREAM",
    "LABEL_SET",
    "LABEL_SWITCH",
    "LABEL_GOTO",
    "STREAM_SWITCH",
    "STREAM_ACTIVE",
    "CMO",
    "CMO_SQE",
    "COND_SQE",
    "FLIP",
    "DEBUG_REGISTER",
    "DEBUG_UNREGISTER",
    "STARS_COND",
    "END_GRAPH",
    "MODEL_END_GRAPH",
    "MODEL_EXIT_GRAPH",
    "PC_TRACE",
    "PROFILER_TRACE",
    "PROFILER_TRACE_EX",
    "CREATE_L2_ADDR",
    "DATADUMP_LOADINFO",
    "FUSIONDUMP_ADDR_SET",
    "STREAM_SWITCH_N",
    "STREAM_LABEL_SWITCH_BY_INDEX",
    "STREAM_LABEL_GOTO",
    "ONLINE_PROF_ENABLE",
    "ONLINE_PROF_DISABLE",
    "ADC_PROF",
    "DEVICE_RINGBUFFER_CONTROL",
    "DEBUG_REGISTER_FOR_STREAM",
    "DEBUG_UNREGISTER_FOR_STREAM",
    "GET_DEVICE_MSG",
    "OVERFLOW_SWTICH_SET",
    "STREAM_TAG_SET",
    "SET_STREAM_MODE",
    "IPC_INT_NOTICE",
    "ALLOC_DSA_ADDR",
    "FLIP_TASK",
    "MODEL_TASK_UPDATE",
    "AICPU_LOADINFO",
    "NOP",
    "GET_STARS_VERSION",
    "TASK_SQE_UPDATE",
    "RDMA_PI_VALUE_MODIFY",
)

# task type (runtime / FFTS+ context / SQE / hwts) -> (kind, engine)
TASK: dict[str, tuple[str, str | None]] = {
    "KERNEL_AICORE": (KERNEL, "aic"),
    "KERNEL_AIVEC": (KERNEL, "aiv"),
    "KERNEL_MIX_AIC": (KERNEL, "mix"),
    "KERNEL_MIX_AIV": (KERNEL, "mix"),
    "KERNEL_AICPU": (KERNEL, "ai_cpu"),
    "KERNEL_FUSION": (KERNEL, None),
    "FFTS_PLUS": (KERNEL, None),
    "STARS_COMMON": (KERNEL, None),
    "AI_CORE": (KERNEL, None),  # SQE type of cube *and* vector kernels
    "AIV_SQE": (KERNEL, "aiv"),
    "AIC_SQE": (KERNEL, "aic"),
    "AIC": (KERNEL, "aic"),
    "AIV": (KERNEL, "aiv"),
    "MIX_AIC": (KERNEL, "mix"),
    "MIX_AIV": (KERNEL, "mix"),
    "AI_CPU": (KERNEL, "ai_cpu"),
    "AICPU_SQE": (KERNEL, "ai_cpu"),
    "AI_VECTOR_CORE": (KERNEL, "aiv"),
    "DSA_SQE": (KERNEL, "dsa"),
    "DSA": (KERNEL, "dsa"),
    "MEMCPY_ASYNC": (MEMCPY, "copy"),
    "MEMCPY_ASYNC_V2": (MEMCPY, "copy"),
    "MEMCPY_ADDR_ASYNC": (MEMCPY, "copy"),
    "PCIE_DMA_SQE": (MEMCPY, "copy"),
    "SDMA_SQE": (MEMCPY, "copy"),
    "Data Context": (MEMCPY, "copy"),
    "SDMA": (MEMCPY, "sdma"),
    "REDUCE_ASYNC": (MEMCPY, "sdma"),
    "REDUCE_ASYNC_V2": (MEMCPY, "sdma"),
    "HCCL": (COMM, "comm"),
    "COMMUNICATION": (COMM, "comm"),
    **dict.fromkeys(_SYNC_TYPES, (SYNC, None)),
    **dict.fromkeys(_MARKER_TYPES, (MARKER, None)),
}

# HCCL small-task names (plane rows, COMMUNICATION_TASK_INFO.taskType) -> kind
HCCL_TASK_KIND: dict[str, str] = {
    "Notify_Wait": SYNC,
    "Notify_Record": SYNC,
    "Notify Wait": SYNC,
    "Notify Record": SYNC,
    "Write Value": SYNC,
}


def _lookup(column: pl.Expr, table: dict[str, tuple[str, str | None]], index: int) -> pl.Expr:
    mapping = {k: v[index] for k, v in table.items()}
    return column.replace_strict(mapping, default=None, return_dtype=pl.String)


def classify(core: pl.Expr, task: pl.Expr, name: pl.Expr) -> tuple[pl.Expr, pl.Expr, pl.Expr]:
    """``(kind, engine, known)`` expressions for rows with a core type, a task type and a name
    (any of them may be null). A core type decides first; then a name that is itself a task
    type (non-kernel tasks are named after their runtime type, which says more than the SQE
    that carried them: ``EVENT_RECORD`` on a ``PLACE_HOLDER_SQE``); then the task type.
    ``known`` is False where no vocabulary recognised the row."""
    core_kind, core_engine = _lookup(core, CORE, 0), _lookup(core, CORE, 1)
    task_kind, task_engine = _lookup(task, TASK, 0), _lookup(task, TASK, 1)
    name_kind, name_engine = _lookup(name, TASK, 0), _lookup(name, TASK, 1)
    kind = pl.coalesce(core_kind, name_kind, task_kind)
    engine = (
        pl.when(core_kind.is_not_null())
        .then(core_engine)
        .when(name_kind.is_not_null())
        .then(pl.coalesce(name_engine, task_engine))
        .otherwise(task_engine)
    )
    return kind.fill_null(KERNEL), engine, kind.is_not_null()


def hccl_task_kind(task_type: pl.Expr) -> pl.Expr:
    """Kind of an HCCL small task: notify waits/records are ``sync``, data moves ``memcpy``."""
    return task_type.replace_strict(HCCL_TASK_KIND, default=MEMCPY, return_dtype=pl.String)


def transport_engine(transport: pl.Expr) -> pl.Expr:
    """Engine of an HCCL data task: SDMA and on-chip moves ``sdma``, RDMA/PCIe ``comm``."""
    return (
        pl.when(transport.is_in(["SDMA", "LOCAL"]))
        .then(pl.lit("sdma"))
        .when(transport.is_not_null())
        .then(pl.lit("comm"))
        .otherwise(pl.lit("sdma"))
    )
