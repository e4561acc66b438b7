"""Structure-aware fuzzing of the command line (issue 32): `mutate` makes mutants of real models,
`campaign` runs them through the CLI in isolated, traced subprocesses and classifies what happens.
Neither imports onnx_roofline: the tool is exercised as a user runs it, so these files survive any
reorganisation of the package."""
