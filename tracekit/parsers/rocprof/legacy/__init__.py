"""Legacy rocprof (v1/v2) outputs: ``results.db`` (:mod:`.db`), ``results.json``
(:mod:`.json_trace`), ``results.csv`` / the rocprofv2 kernel CSV (:mod:`.kernel_csv`) and
folders of them, all read into one shape of rows (:mod:`.rows`) with the devices rocminfo
describes (:mod:`.agents`); :mod:`.read` recognises and reads each. The events table comes
from :func:`tracekit.parsers.rocprof.table.events_table` (``assemble``, then ts 0 at the first
event).
"""

from __future__ import annotations

from tracekit.parsers.base import Parser
from tracekit.parsers.rocprof.legacy import read

ROCPROF_V1_DB = Parser(
    "rocprof-v1-db",
    "legacy rocprof results.db (HIP/HSA/OPS/COPY/KERN)",
    read.sniff_db,
    read.parse_db,
)
ROCPROF_V1_JSON = Parser(
    "rocprof-v1-json",
    "legacy rocprof results.json (Chrome trace)",
    read.sniff_json,
    read.parse_json,
)
ROCPROF_V1_CSV = Parser(
    "rocprof-v1-csv",
    "legacy rocprof results.csv / rocprofv2 kernel CSV",
    read.sniff_csv,
    read.parse_csv,
)
ROCPROF_V1_DIR = Parser(
    "rocprof-v1",
    "folder of legacy rocprof results.* files",
    read.sniff_dir,
    read.parse_dir,
)
PARSERS = (ROCPROF_V1_DIR, ROCPROF_V1_DB, ROCPROF_V1_JSON, ROCPROF_V1_CSV)
