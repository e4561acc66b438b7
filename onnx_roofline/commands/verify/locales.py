"""A StringNormalizer's locale, for the run. onnxruntime builds a C++ std::locale from the node's
`locale` attribute (default en_US, with ".UTF-8" appended on Linux) when it loads the model, and a
system without that language pack refuses the whole model ("Failed to construct locale"). The
locale decides only how non-ASCII letters change case: values, never a shape or a byte count,
which is all verify checks. So where the model's locale is not installed here, the run's copy
asks for C.UTF-8 (in every glibc since 2.35, and Debian's and Ubuntu's before it), and the
model's own is left as it is."""

from __future__ import annotations

import functools
import locale

import onnx

RUN_LOCALE = "C"  # C.UTF-8 once onnxruntime appends ".UTF-8"
DEFAULT_LOCALE = "en_US"  # the attribute's default (the ONNX spec)


def with_installed_locales(model: onnx.ModelProto) -> onnx.ModelProto:
    """`model`, or a copy whose StringNormalizers ask for RUN_LOCALE where theirs is not installed."""
    nodes = [
        node for node in model.graph.node if node.op_type == "StringNormalizer" and not _installed(_locale_of(node))
    ]
    if not nodes or not _installed(RUN_LOCALE):
        return model
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    for node in copy.graph.node:
        if node.op_type == "StringNormalizer" and not _installed(_locale_of(node)):
            kept = [a for a in node.attribute if a.name != "locale"]
            del node.attribute[:]
            node.attribute.extend([*kept, onnx.helper.make_attribute("locale", RUN_LOCALE)])
    return copy


def _locale_of(node: onnx.NodeProto) -> str:
    return next((a.s.decode("utf-8", "replace") for a in node.attribute if a.name == "locale"), DEFAULT_LOCALE)


@functools.lru_cache(maxsize=8)
def _installed(name: str) -> bool:
    """Whether the C library can build `name`.UTF-8 (as onnxruntime asks for it on Linux)."""
    before = locale.setlocale(locale.LC_CTYPE)
    try:
        locale.setlocale(locale.LC_CTYPE, f"{name}.UTF-8")
    except locale.Error:
        return False
    finally:
        locale.setlocale(locale.LC_CTYPE, before)
    return True
