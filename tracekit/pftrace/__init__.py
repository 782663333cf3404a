"""How tracekit lays a timeline out in a Perfetto protobuf trace: the layout constants,
lane assignment and vectorised protobuf encoding, shared by the reader
(:mod:`tracekit.parsers.perfetto`) and the writer (:mod:`tracekit.export.pftrace`)."""

SUFFIXES = (".pftrace", ".perfetto-trace")  # file names that say "Perfetto protobuf"
