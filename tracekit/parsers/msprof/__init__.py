"""Huawei Ascend: msprof ``PROF_*`` folders, torch_npu ``*_ascend_pt`` / MindSpore ``*_ascend_ms``
output (text and db exports), ``msprof_*.db`` files and folders holding several ranks.

Modules, one job each: :mod:`.detect` (which paths are Ascend output), :mod:`.read` (a path
-> one Timeline), :mod:`.layout` (which files a path names), :mod:`.text` (one text source),
:mod:`.trace_read` (one timeline JSON -> per-layer frames: read in one go or by several
processes, :mod:`.trace_parallel` with :mod:`.worker`; decoded by :mod:`.trace_decode`, scanned
and put together by :mod:`.trace_json`, layers built by :mod:`.trace_layers`),
:mod:`.csv_tables` (op_summary / kernel_details / task_time / step_trace_time), :mod:`.db`
(SQLite exports; read by :mod:`.db_reader`, :mod:`.db_tasks`, :mod:`.db_host`), :mod:`.device`
(tasks joined with op details), :mod:`.engines` (the three task-type vocabularies -> kind and
engine), :mod:`.hccl` (collectives and their plane tasks, counted once), :mod:`.comm_tasks`
(the hardware tasks of a collective), :mod:`.device_index` (where each export records the NPU
device index), :mod:`.mc2` (fused compute-communication operators), :mod:`.host` (Python /
CANN rows, flows, steps), :mod:`.meta` (chips, cores, clocks), :mod:`.summaries` (the vendor's
own summaries, for the checks), :mod:`.rows` (the common row frame, args JSON, the table),
:mod:`.times` (µs text and floats -> ns).

Rows, in the timeline's terms: device tasks on their streams (``kernel`` with engine ``aic`` /
``aiv`` / ``mix`` / ``ai_cpu`` / ``dsa``; ``memcpy``; ``sync`` for event and notify tasks;
``marker`` for profiling / timeout bookkeeping tasks), HCCL operators as ``comm`` rows on the
stream of their first task, and the operators' tasks as ``comm`` rows naming their operator in
``args.op``: plane tasks (notifies with engine ``comm``, data moves ``sdma`` / ``comm`` by
transport, with src/dst rank, transport, size and bandwidth in ``args``), or the hardware rows
where the export lists no plane (engine kept where the task type names one). Python ops
(``op``), task-queue and CANN calls (``api``), steps (``range``). ``device`` is the NPU index
the export records (:mod:`.device_index`), null when it records none. ``corr`` is the Ascend
connection id. ts is relative to the earliest row; ``origin_ns`` is its epoch time.
"""

from __future__ import annotations

from tracekit.parsers.base import Parser
from tracekit.parsers.msprof.detect import sniff, sniff_db
from tracekit.parsers.msprof.read import parse

MSPROF = Parser(
    "msprof",
    "Huawei Ascend msprof PROF_ folder, torch_npu/MindSpore *_ascend_pt|ms output, timeline JSON "
    "or op_summary/kernel_details CSV (a folder of ranks reads as one timeline)",
    sniff,
    parse,
)
MSPROF_DB = Parser(
    "msprof-db",
    "Huawei Ascend msprof_*.db / ascend_pytorch_profiler_N.db SQLite export",
    sniff_db,
    parse,
)

__all__ = ["MSPROF", "MSPROF_DB", "parse", "sniff", "sniff_db"]
