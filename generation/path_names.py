"""The numeric paths' names, without torch: argument parsers offer them before any model loads."""

MLAS = "int4-mlas"  # the int4 weights on ONNX Runtime's kernels (mlas_linear.py)
LLAMACPP = "llamacpp"  # the GGUF itself on llama.cpp's kernels (llamacpp_lm.py), row invariant: speculative
LLAMACPP_F16 = "llamacpp-f16"  # the same with an f16 KV cache: faster prefill, plain decoding only
LLAMACPP_PATHS = (LLAMACPP, LLAMACPP_F16)
PATHS = ("auto", "int4", "int8", MLAS, LLAMACPP, LLAMACPP_F16, "none")
