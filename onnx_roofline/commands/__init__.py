"""The command line and what each command adds around the analysis: the top wing, which imports
every other and is imported by none.

- `cli`: `onnx-roofline MODEL` (analyze) and the subcommands' dispatch; `arguments`: the options
  every analyzing command shares and the analysis they ask for; `terminal`: what only a terminal
  shows (colour, progress, a long analysis's time).
- `inspect` (what a model is), `summary` (one row per model), `plot` (saved reports overlaid),
  `diff` (two saved reports), `docs` (docs/operators.md from the rules).
- `gate/`: `check`, the CI gate; `verify/`: the onnxruntime checker and calibration; `whatif/`:
  sweeps, critical batch, hardware comparison, fusion and context studies, and `serve`, the
  serving envelope over batch and tensor parallelism.
"""
