"""The module a node belongs to, read from its name, so budgets can be set per module.

TorchScript exports name nodes `/transformer/h.0/attn/MatMul`, and our exporters rename dynamo
nodes the same way from their `pkg.torch.onnx.name_scopes` metadata. The module is the path
without its last part (the op), joined with dots: `transformer.h.0.attn`. A Sequential child is
written `/layer2/layer2.0/conv2/Conv`; its repeated parent is dropped: `layer2.0.conv2`.
"""

from __future__ import annotations


def module_of(node_name: str) -> str:
    """The dotted module path of a node name, or "" for a node outside any module."""
    if not node_name.startswith("/"):
        return ""
    parts = [part for part in node_name.split("/")[1:-1] if part]
    qualified: list[str] = []
    for part in parts:
        parent = qualified[-1].rsplit(".", 1)[-1] if qualified else ""
        if parent and part.startswith(parent + "."):
            part = part[len(parent) + 1 :]  # `layer2` then `layer2.0`: the child is `0`
        qualified.append(part)
    return ".".join(qualified)


def in_module(node_name: str, module: str) -> bool:
    """Whether the node is in `module` or any module under it (`transformer.h.0` holds `.attn`)."""
    path = module_of(node_name)
    return path == module or path.startswith(module + ".")
