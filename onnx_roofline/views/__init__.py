"""The deployed view: what a runtime runs, estimated from the as-written report.

- `deployed`: `deploy(report)`, the report re-costed as kernels (initializer-only nodes folded at
  load, elementwise chains and epilogues fused, attention as one kernel, the KV cache copied or
  updated in place), with a kernel count for launch overhead.
- `fusion` plans which nodes fuse into one kernel (`plan_fusion`, `fuse`); `flash` recognizes
  decomposed attention; `ops` says which op classes fuse.
- `quantized` runs a QDQ graph's DequantizeLinear → op → QuantizeLinear units as integer kernels
  on the quantized tensors (`quantize`), weights read at their stored dtype.
- `graph` reads a report as a dataflow graph over `digraph`, the small directed graph they share.
"""
