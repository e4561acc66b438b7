"""What a node costs and where it sits on the roofline: pure functions of one node and the hardware.

- `cost`: `Cost` (FLOPs, transcendentals, bytes read and written) and `CompositeCost`;
  `rules/`: one cost rule per op, registered by (domain, op type, opset), one module per family.
- `hardware/`: the hardware table (`specs.toml`, every figure with its source) and spec files;
  `roofline`: `place` a cost on a roofline (intensity, ridge, bound, time lower bound);
  `prediction`: a kernel's predicted time at the hardware's achievable fractions (`hardware/achievable`),
  GEMM wave quantization and launches, and the `Prediction` record.
- `memory`: what a model holds while it runs (weights, KV cache, peak activations); `capacity`:
  what fits (the capacity × a memory utilization, vLLM's 0.9 by default) and the largest batch
  that fits, the one memory model every command judges by;
  `collectives`: what an all-reduce or all-gather costs over the hardware's interconnect, with the
  algorithm NCCL would pick; `nccl_tuning` (ring, tree, NVLS) and `nccl_symmetric` (one-shot,
  two-shot) transcribe NCCL's cost model.
"""
