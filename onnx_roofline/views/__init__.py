"""The deployed view: what a runtime runs, estimated from the as-written report.

- `deployed`: `deploy(report)`, the report re-costed as kernels (initializer-only nodes folded at
  load, elementwise chains and epilogues fused, attention as one kernel, the KV cache copied or
  updated in place), with a kernel count for launch overhead.
- `fusion` plans which nodes fuse into one kernel (`plan_fusion`, `fuse`); `flash` recognizes
  decomposed attention; `ops` says which op classes fuse.
- `graph` reads a report as a dataflow graph over `digraph`, the small directed graph they share.
"""
