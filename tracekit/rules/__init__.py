"""The rules: one module per rule on the :class:`~tracekit.rules.base.Rule` base class,
found through :mod:`tracekit.rules.registry`."""
