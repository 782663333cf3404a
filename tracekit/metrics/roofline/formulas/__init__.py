"""FLOPs and minimum bytes per operator from the shapes a trace recorded: :mod:`.inputs`
parses the texts into :class:`.base.Shapes`, :mod:`.registry` picks the formula (one module
per family: :mod:`.gemm`, :mod:`.moe`, :mod:`.attention`, :mod:`.norms`, :mod:`.elementwise`)."""
