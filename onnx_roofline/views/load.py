"""Work on constant operands a runtime does once at load: a weight's zero point subtracted.

An integer matrix op (MatMulInteger, ConvInteger, QLinearMatMul, QLinearConv, QGemm, …) computes
(A − a_zero_point)·(B − b_zero_point). Its rule counts one subtract per element of each operand
with a zero point, and says which inputs each count reads (Cost.load_flops). Where those inputs
are all constant — a weight and its zero point: initializers, or outputs of nodes folded at load —
onnxruntime's kernels subtract once when the weights are prepacked, not per run: one 1024×8210
MatMulInteger with a constant weight zero point did 8.4 M FLOPs a run for it as written. The
deployed view drops that work; the written view keeps it (it is what the graph says to do)."""

from __future__ import annotations

import dataclasses

from onnx_roofline.costs.roofline import place
from onnx_roofline.report.costed import is_ok
from onnx_roofline.report.model import Report


def fold_constant_operand_work(report: Report) -> tuple[Report, int]:
    """`report` with each main-graph node's load_flops on constant inputs taken out of its FLOPs
    (and its placement redone), and how many FLOPs per run that removed."""
    produced = {t.name: n for n in report.nodes if not n.scope for t in n.outputs if t is not None}
    graph_inputs = frozenset(report.model.graph_inputs)

    def constant(name: str) -> bool:
        producer = produced.get(name)
        return producer.constant_foldable if producer is not None else name not in graph_inputs

    changed, removed = {}, 0
    for node in report.nodes:
        if not is_ok(node) or node.scope or not node.cost.load_flops:
            continue
        folded = sum(flops for slots, flops in node.cost.load_flops
                     if all(s < len(node.inputs) and (t := node.inputs[s]) is not None and constant(t.name) for s in slots))  # fmt: skip
        if folded:
            cost = dataclasses.replace(node.cost, flops=node.cost.flops - folded)
            placement = place(cost.flops, cost.bytes, node.peak, report.hardware.memory_bandwidth)
            changed[node.index] = dataclasses.replace(node, cost=cost, placement=placement)
            removed += folded
    if not changed:
        return report, 0
    return dataclasses.replace(report, nodes=tuple(changed.get(n.index, n) for n in report.nodes)), removed
