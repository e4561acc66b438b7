"""The deployed view: what a runtime runs, estimated from the as-written report.

- `deployed`: `deploy(report)`, the report re-costed as kernels (initializer-only nodes folded at
  load, elementwise chains and epilogues fused, attention as one kernel, the KV cache copied or
  updated in place), with a kernel count for launch overhead.
- `fusion` plans which nodes fuse into one kernel (`plan_fusion`, `fuse`); `flash` recognizes
  decomposed attention; `ops` says which op classes fuse.
- `quantized` runs a QDQ graph's DequantizeLinear → op → QuantizeLinear units as integer kernels
  on the quantized tensors (`quantize`), weights read at their stored dtype.
- `rows`: norms as one kernel, RoPE's rotate-half in its projection, projections of one activation
  packed; `load`: zero points of constant weights folded at load; `dead`: masks and guards the
  attention kernel generates; `units`: a kernel's time as its busiest unit's; `experts`: an MoE
  layer as one grouped GEMM over the distinct experts it touches; `kernel`: `KernelResult`.
- `tensor_parallel` infers the Megatron split of a decoder from its structure; `parallel` costs
  one device of a tensor-parallel group, collectives included.
- `graph` reads a report as a dataflow graph over `digraph`, the small directed graph they share.
- `prediction`: the deployed kernels' predicted time (`predict`, attached by `deploy`), and one
  device's share of a tensor-parallel run (`predict_device`).
- `public`: the public `analyze`, whose report plans its deployed view when first asked
  (`report.other`), so that `to_dict()` is the object `--format json` prints.
"""
