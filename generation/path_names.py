"""The numeric paths' names, without torch: argument parsers offer them before any model loads."""

MLAS = "int4-mlas"  # the int4 weights on ONNX Runtime's kernels (mlas_linear.py)
PATHS = ("auto", "int4", "int8", MLAS, "none")
