"""Time the analysis of optimum's MoE decoders (tests/corpus/moe: ~1,200 nodes each) with the
experts recognized and sized, and their deployed view with the grouped-GEMM kernels; the
recognition alone beside it. Figures, not assertions (issue 34's budget: under 1 s a model).

    python benchmarks/bench_moe.py [--repeats 5]

The minimum over the repeats, after a warm-up call (imports, schema caches)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import onnx

from onnx_roofline import Sizing, analyze
from onnx_roofline.model.experts import recognize
from onnx_roofline.model.nodes import read_nodes
from onnx_roofline.views.deployed import deploy

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_analysis import timed  # a sibling script, not a package

MOE = Path(__file__).resolve().parents[1] / "tests" / "corpus" / "moe"
DIMS = {"batch_size": 1, "sequence_length": 8, "past_sequence_length": 24}


def best(fn, repeats: int) -> float:
    return min(timed(fn, repeats))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    print(f"{'model':46s} {'nodes':>5s} {'recognize':>10s} {'analysis':>9s} {'+ deployed':>10s}")
    for path in sorted(MOE.glob("*.onnx")):
        graph = onnx.load(path, load_external_data=False).graph
        nodes = read_nodes(graph)
        found = best(lambda g=graph, n=nodes: recognize(g, n), args.repeats)
        analysis = best(lambda p=path: analyze(p, sizing=Sizing(dims=DIMS)), args.repeats)
        both = best(lambda p=path: deploy(analyze(p, sizing=Sizing(dims=DIMS))), args.repeats)
        print(f"{path.stem:46s} {len(nodes):5d} {found * 1e3:8.1f} ms {analysis:7.3f} s {both:8.3f} s")


if __name__ == "__main__":
    main()
