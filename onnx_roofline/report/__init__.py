"""The report and its renderings.

- `model`: `Report`, `NodeResult`, `ModelInfo` (the result of an analysis) with `totals`
  (`Totals`); `breakdown` and `grouping`: groupings over the nodes (by op type, by module, alike
  nodes across layers); `rows`: one plain dict per node; `findings`: what every format says
  beside the totals (the other view, memory, launches, foldable nodes, branches, assumptions,
  warnings), one list of labelled lines; `experts`: an MoE model's summary; `costed`: the ok
  rows as the type checker sees them, each with its cost and placement.
- Renderings: `table` (terminal), `serialize` (JSON, `schema.json`), `markdown`, `html`
  (with `html_points`), `plot` (the roofline plot), `annotate` (the model annotated for
  Netron); `off_axis` names what the plot cannot place (data movement or transcendentals only),
  for the HTML strip and the plot alike; `units` formats figures; `output` writes any of them atomically, never onto an input.
"""
