"""Nsight Systems: ``nsys export --type sqlite`` databases (schema 2.9 to 3.16+) and reports.

Reads kernels, memcpy, memset, synchronization, CUDA runtime/driver calls and NVTX ranges
and marks in bulk; names resolve through ``StringIds`` into one dictionary column.
``.nsys-rep``/``.qdrep`` reports are exported with ``nsys`` into a temporary folder first.
"""

from __future__ import annotations

from tracekit.parsers.base import Parser
from tracekit.parsers.nsys.read import parse_sqlite, sniff_sqlite
from tracekit.parsers.nsys.report import parse_report, sniff_report

SQLITE = Parser("nsys-sqlite", "Nsight Systems SQLite export (.sqlite)", sniff_sqlite, parse_sqlite)
REPORT = Parser(
    "nsys-rep", "Nsight Systems report (.nsys-rep/.qdrep; needs nsys)", sniff_report, parse_report
)
