"""How a model is sized: every input of the analysis that decides a tensor's size, in one frozen
value passed whole from `analyze` to the stage that reads each part (the binding of dims, the shape
engine, the walk of control-flow bodies). A new assumption is a field here and a read where it
applies, not one more argument on every signature between (issue 45).

    r.analyze("model.onnx", "h100", r.Sizing(dims={"batch": 8}, nonzero_fraction=0.25))

`analyze`'s former keywords (`dims=`, `input_shapes=`, ... one per field) still work for one
release, with a DeprecationWarning: `sizing_from_keywords`."""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from onnx_roofline.model.tensors import TensorInfo
from onnx_roofline.shapes.dims import checked_sizes
from onnx_roofline.shapes.routing import UNIFORM_LOAD, ExpertLoad
from onnx_roofline.shapes.selection import check_fraction
from onnx_roofline.shapes.texts import check_string_bytes
from onnx_roofline.version import __version__


@dataclass(frozen=True)
class Sizing:
    """`dims`: symbolic dims by name (`{"batch": 8}`); `input_shapes`: whole input shapes;
    `values`: small graph inputs given a value (a Loop's trip count, a scalar that sizes a Range),
    folded as constants; `default_dims`: bind every dim left unbound to its default (shapes/defaults.py),
    as the command line does; `nonzero_fraction`: the share of its candidates each data-dependent
    NonZero/Compress selects (None: its bound, every candidate); `expert_load`: an MoE's routing
    (routing.ExpertLoad, or its text: "uniform", "skew=F", "capacity=C"); `found_sizes`: the types a run found for values whose
    size is data (verify); `frames_per_token`: the frames each token lasts in a TTS length
    regulator (None: durations.FRAMES_PER_TOKEN); `string_bytes`: the average bytes of one string
    element, what a string tensor's bytes count (None: texts.STRING_BYTES). Checked when made: a
    bad value is a DimensionError or ValueError naming it."""

    dims: Mapping[str, int] = field(default_factory=dict)
    input_shapes: Mapping[str, Sequence[int]] | None = None  # each made a tuple
    values: Mapping[str, Sequence[float] | float] = field(default_factory=dict)
    default_dims: bool = False
    nonzero_fraction: float | None = None
    expert_load: ExpertLoad = UNIFORM_LOAD
    found_sizes: Mapping[str, TensorInfo] = field(default_factory=dict)
    frames_per_token: float | None = None
    string_bytes: int | None = None

    def __post_init__(self) -> None:
        dims, input_shapes = checked_sizes(self.dims, self.input_shapes)
        load = self.expert_load if isinstance(self.expert_load, ExpertLoad) else ExpertLoad.parse(self.expert_load)
        if self.nonzero_fraction is not None:
            check_fraction(self.nonzero_fraction)
        if self.string_bytes is not None:
            check_string_bytes(self.string_bytes)
        for name, value in (("dims", dims), ("input_shapes", input_shapes), ("values", dict(self.values or {})),
                            ("expert_load", load), ("found_sizes", dict(self.found_sizes or {}))):  # fmt: skip
            object.__setattr__(self, name, value)

    def bound(self, dims: Mapping[str, int]) -> Sizing:
        """The same sizing with `dims` bound too (a retry at other sizes)."""
        return dataclasses.replace(self, dims={**self.dims, **dims})


UNSIZED = Sizing()  # the graph as declared: nothing bound, every data-dependent size at its bound
FIELDS = tuple(f.name for f in dataclasses.fields(Sizing))
REMOVED_IN = "0.3.0"  # the release after the next drops the keywords: one release of warning


def sizing_from_keywords(sizing: Sizing | Mapping[str, int] | None, keywords: Mapping[str, Any]) -> Sizing:
    """`analyze`'s sizing, from its `sizing` argument or from the former keywords (one per Sizing
    field, and a dims mapping where the sizing goes), with a DeprecationWarning for the latter."""
    unknown = sorted(set(keywords) - set(FIELDS))
    if unknown:
        raise TypeError(f"analyze() got an unexpected keyword argument {unknown[0]!r}")
    if isinstance(sizing, Sizing):
        if keywords:
            raise TypeError(
                f"analyze(): give the sizing once: sizing= or the former {', '.join(sorted(keywords))}=, not both"
            )
        return sizing
    if sizing is None and not keywords:
        return UNSIZED
    if sizing is not None and not isinstance(sizing, Mapping):
        raise TypeError(f"analyze(): sizing must be an onnx_roofline.Sizing, got {type(sizing).__name__}")
    given = {**keywords, **({"dims": sizing} if sizing is not None else {})}
    if sizing is not None and "dims" in keywords:
        raise TypeError("analyze() got dims twice: positionally and as dims=")
    shown = ", ".join(f"{name}=..." for name in given)
    warnings.warn(f"analyze({shown}) is deprecated since {__version__} and goes in {REMOVED_IN}: pass sizing=Sizing({shown}) "
                  "(onnx_roofline.Sizing)", DeprecationWarning, stacklevel=4)  # the caller of the public analyze  # fmt: skip
    return Sizing(**given)
