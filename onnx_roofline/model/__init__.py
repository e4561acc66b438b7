"""Reading a stranger's file safely: the first wing of the pipeline, which every other imports.

- `loader`: load a model without its weights (`load_with_nodes`, `load_model`), validation and
  function inlining on the way in; `files`: every file a model, spec, policy or baseline names,
  opened only inside the model's folder; `validation`: is this an ONNX graph at all;
  `anonymous_dims`: graph-input dims with no size and no name, named at load; `inlining`:
  model-local functions at their call sites; `heap`: memory handed back after a pass;
  `isolation`: a C++ pass (ONNX's inference, onnxruntime) run where its crash cannot end the process;
  `text`: free text that is not UTF-8 (a dim's name, metadata) decoded at load; `conformance`:
  would a runtime load the file (onnx's checker on a skeleton, external locations, inline data),
  each finding an `Invalid`.
- What the later wings read of the graph: `nodes` (a node's fields read once), `schemas` (what
  ONNX's operator schemas say, opsets and domains), `scopes` (what a body reads from outside),
  `constants` (constant values read on demand, weights never), `weights` (every weight tensor of
  every graph, by dims and dtype: the parameters), `inferred` (declared value types),
  `tensors` and `precisions` (`TensorInfo`: a tensor's name, shape and dtype), `op_node`
  (`OpNode`: one node as a shape or cost rule sees it), `status` (a node's status, `Uncostable`)
  and `experts` (mixture-of-experts layers recognized from the structure: router, top-k, experts).
"""
