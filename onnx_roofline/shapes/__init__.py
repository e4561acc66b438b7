"""The shape engine: every value of the graph typed, without reading a weight.

- `engine`: `infer` runs ONNX's inference and then a sweep that types what it left, until nothing
  new is typed; `infer_body` does the same for a control-flow body. `pieces` runs ONNX's pass on a
  very large graph a piece at a time; `completion` finishes ONNX's partial result by arithmetic.
- `dims` binds symbolic dims (`--dim`, `--input`), `defaults` chooses the size of a dim left
  unbound by its name, `roles` by its role in the graph where the name says nothing (an image's
  sides, a token input's sequence), `input_values` gives small graph inputs a value (`--value`),
  `selection` sizes what a NonZero or Compress selects (`--nonzero-fraction`), `routing` an MoE
  expert's tokens by the load assumed (`--expert-load`), `bounds` a data-dependent size at the
  bound the graph's constants state (NonMaxSuppression, a Slice or Min to a constant, a NonZero's
  every element, a Resize, ConstantOfShape or Slice sized by a value whose `ranges` the graph
  bounds: a box clipped to the image), `at most`; `durations` a length regulator's frames
  (`--frames-per-token`); `texts` a text pipeline's sizes and its strings' bytes (`--string-bytes`).
- `bodies`: how a control-flow body sees its inputs, its trips and which branch runs.
- `folding` evaluates the small integer subgraphs that compute shapes; `spec_defaults` spells out
  attribute defaults ONNX's inference reads otherwise; `runnable` refuses what cannot run at the
  bound dims, `plausible` says a result the defaults taken cannot run (with sizes that run);
  `root_cause` names the node to blame when values stay untyped.
- `rules/`: shape rules for the ops ONNX's inference does not type, registered by op.
"""
