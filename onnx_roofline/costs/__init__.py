"""What a node costs and where it sits on the roofline: pure functions of one node and the hardware.

- `cost`: `Cost` (FLOPs, transcendentals, bytes read and written) and `CompositeCost`;
  `rules/`: one cost rule per op, registered by (domain, op type, opset), one module per family.
- `hardware/`: the hardware table (`specs.toml`, every figure with its source) and spec files;
  `roofline`: `place` a cost on a roofline (intensity, ridge, bound, time lower bound).
- `memory`: what a model holds while it runs (weights, KV cache, peak activations);
  `collectives`: what a ring all-reduce or all-gather costs over the hardware's interconnect.
"""
