"""Many ranks as one cluster: each input (a rank's trace, or a file that merges several) is
parsed and analysed on its own, in parallel on local processes or on a ``dask.distributed``
cluster; only compact results travel (:class:`Part`), and :func:`merge` matches their
collectives, aligns their clocks and finds the stragglers."""

from __future__ import annotations

from tracekit.cluster.part import Part, Settings, analyse_part
from tracekit.cluster.result import ClusterAnalysis, merge
from tracekit.cluster.run import analyze_cluster

__all__ = ["ClusterAnalysis", "Part", "Settings", "analyse_part", "analyze_cluster", "merge"]
