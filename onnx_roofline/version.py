"""The package's version, in a module of its own: the command line and the annotated model print
it without importing the public API (`onnx_roofline/__init__`, which sits above every wing)."""

__version__ = "0.1.0"
