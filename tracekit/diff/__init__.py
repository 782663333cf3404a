"""``tracekit diff``: is the candidate (head) slower than the baseline (base), and where?

:func:`compare` (:mod:`.compare`) takes the analysed runs of each side and returns a
:class:`Diff` (:mod:`.result`): the decode step time (median, p90, count), the time per
category and per kernel, the rule metrics and the findings of both sides, each change with a
bootstrap confidence interval, and a verdict. The samples compared are in :mod:`.samples`.

Statistics (see :mod:`tracekit.bootstrap`): the samples are decode steps; with several runs
per side a hierarchical bootstrap resamples runs, then steps, so run-to-run variation widens
the interval instead of passing for a change. Step time is compared on the median; category
and kernel times on the mean per step, which adds up (kernel deltas sum to their category's
delta). A change *gates* (exit code 1) when

* it is beyond the threshold: step median or a category's time per step changed by at least
  ``threshold`` (5 % by default) — the practical bar;
* it is significant: the ``confidence`` (95 %) interval of the change excludes zero — the
  noise bar;
* for a category, it matters: its delta is at least ``min_impact`` (1 %) of the base step
  median, so a small category cannot fail a build by itself.

A change beyond the threshold whose interval includes zero is reported as not significant
(more steps or runs would tell). Kernels, rule metrics and findings explain; they do not gate.

Findings are compared by ``(rule, pattern)``, not by step (:mod:`.findings`): a pattern
appeared, disappeared, or its impact per step grew or shrank by at least ``min_impact`` of
the base step median.
"""

from tracekit.diff.compare import compare
from tracekit.diff.result import Diff

__all__ = ["Diff", "compare"]
