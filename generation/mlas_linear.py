"""Int4/int8 linear layers on ONNX Runtime's MatMulNBits CPU kernels (MLAS), batch invariant.

torch's int4 kernel is compute bound on AVX2 CPUs. ONNX Runtime's MatMulNBits with
accuracy_level 4 quantizes each activation row to int8 per block of 32 and accumulates in
int32, the way llama.cpp does: on a 2-core AVX2 EPYC one 8960x1536 int4 product took
~0.9 ms for 2 rows and ~2.3 ms for 8 against 2.0 and 4.7 ms in torch's kernel.

Batch invariance, measured (tests check it on every machine that runs them): from two rows
on, every row of a product is bit-identical whatever the number of rows and wherever the
row sits; a single row takes another code path. So a one-row pass is padded with a row of
zeros and the padding's output dropped, and plain decoding (1 row) and verification
(k + 1 rows) compute each token identically.

The weights are the Int4Linear's own, bit for bit: MatMulNBits dequantizes (code - 8) *
scale with uint8 codes; the Int4Linear's per-group zero (weight = (code - 8) * scale + zero,
from Q4_K's per-sub-block min) is one float per group, which MatMulNBits takes only on a
slow path. It is added as a second term in the same graph: sum over groups of zero[n, g]
times the sum of the row's 32 inputs of group g (a [rows, K/32] x [K/32, N] float matmul,
1/32 of the main product's work), which is row invariant in the same measured sense.
Int8Linear maps to 8-bit MatMulNBits with its per-channel scale on every block.
"""

from __future__ import annotations

from functools import cache

import numpy as np
import torch
from torch import nn

from generation.gguf_blocks import GROUP
from generation.quantized import Int4Linear, Int8Linear, int4_block, unpack_int4_centered
from generation.quantized_model import replace_module

ACCURACY_INT8 = 4  # MatMulNBits accuracy_level: int8 activations, int32 accumulation
THREADS = 0  # ONNX Runtime's pool size; 0: torch's thread count when the first layer is built


@cache
def _runtime(threads: int):
    """onnxruntime, with one global pool of `threads` threads shared by every layer's session
    (the first call fixes its size for the process)."""
    import onnxruntime

    onnxruntime.set_global_thread_pool_sizes(threads, 1)
    return onnxruntime


def available() -> bool:
    try:
        import onnx  # noqa: F401
        import onnxruntime  # noqa: F401
    except ImportError:
        return False
    return True


class MlasLinear(nn.Module):
    """y = x W^T (+ bias) through one ONNX Runtime session; inputs and outputs stay torch tensors."""

    def __init__(self, model_bytes: bytes, in_features: int, out_features: int, bias: torch.Tensor | None) -> None:
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        ort = _runtime(THREADS or torch.get_num_threads())
        options = ort.SessionOptions()
        options.use_per_session_threads = False  # one pool for all ~200 layers, not a pool each
        # no arena per session: each of ~200 sessions kept its largest prefill's buffers (a [rows, N]
        # output and intermediates), and `ask` on a 1,300-token prompt peaked at 20 GB
        options.enable_cpu_mem_arena = False
        options.enable_mem_pattern = False
        self.session = ort.InferenceSession(model_bytes, options, providers=["CPUExecutionProvider"])
        self.register_buffer("bias", None if bias is None else bias.float().clone())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.reshape(-1, self.in_features).float()
        count = rows.shape[0]
        if count == 1:  # one row takes another kernel path: pad to two (see the module docstring)
            rows = torch.cat([rows, rows.new_zeros(1, self.in_features)])
        out = self.session.run(None, {"A": np.ascontiguousarray(rows.numpy())})[0]
        y = torch.from_numpy(out[:count])
        if self.bias is not None:
            y = y + self.bias
        return y.to(x.dtype).reshape(*x.shape[:-1], self.out_features)


def from_int4(layer: Int4Linear) -> MlasLinear:
    """The same weights as `layer`, on MatMulNBits: codes and scales as they are, zeros as the second term."""
    k, n, group = layer.in_features, layer.out_features, layer.group
    codes = (unpack_int4_centered(layer.packed, k, int4_block()).to(torch.int16) + 8).to(torch.uint8)  # [K, N]
    codes = codes.t().reshape(n, k // group, group)
    packed = (codes[..., 0::2] | (codes[..., 1::2] << 4)).contiguous().numpy()  # low nibble first
    scale = layer.scales_zeros[..., 0].float().t().contiguous().numpy()  # [N, K/group]
    zero_t = layer.scales_zeros[..., 1].float().contiguous().numpy()  # [K/group, N]
    return MlasLinear(_graph(k, n, group, 4, packed, scale, zero_t), k, n, layer.bias)


def from_int8(layer: Int8Linear) -> MlasLinear:
    """Per-channel int8 as 8-bit MatMulNBits: code + 128 with the default zero point 128."""
    k, n = layer.in_features, layer.out_features
    codes = (layer.weight_int8.to(torch.int16) + 128).to(torch.uint8).reshape(n, k // GROUP, GROUP)
    scale = layer.scales.float()[:, None].expand(n, k // GROUP).contiguous().numpy()
    return MlasLinear(_graph(k, n, GROUP, 8, codes.contiguous().numpy(), scale, None), k, n, layer.bias)


def _graph(
    k: int, n: int, group: int, bits: int, packed: np.ndarray, scale: np.ndarray, zero_t: np.ndarray | None
) -> bytes:
    from onnx import TensorProto, helper

    def tensor(name: str, kind: int, array: np.ndarray):
        return helper.make_tensor(name, kind, array.shape, array.tobytes(), raw=True)

    initializers = [tensor("B", TensorProto.UINT8, packed), tensor("scales", TensorProto.FLOAT, scale)]
    main = "Y" if zero_t is None else "main"
    nodes = [
        helper.make_node(
            "MatMulNBits", ["A", "B", "scales"], [main], domain="com.microsoft",
            K=k, N=n, bits=bits, block_size=group, accuracy_level=ACCURACY_INT8,
        )
    ]  # fmt: skip
    if zero_t is not None:  # + (sum of each group's inputs) @ zero: the groups' float zero points
        initializers += [
            tensor("zero_t", TensorProto.FLOAT, zero_t),
            tensor("grouped", TensorProto.INT64, np.array([-1, k // group, group], dtype=np.int64)),
            tensor("last", TensorProto.INT64, np.array([2], dtype=np.int64)),
        ]
        nodes += [
            helper.make_node("Reshape", ["A", "grouped"], ["A3"]),
            helper.make_node("ReduceSum", ["A3", "last"], ["sums"], keepdims=0),
            helper.make_node("MatMul", ["sums", "zero_t"], ["offsets"]),
            helper.make_node("Add", [main, "offsets"], ["Y"]),
        ]
    graph = helper.make_graph(
        nodes, "linear",
        [helper.make_tensor_value_info("A", TensorProto.FLOAT, ["rows", k])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["rows", n])],
        initializer=initializers,
    )  # fmt: skip
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
    return helper.make_model(graph, opset_imports=opsets).SerializeToString()


def use_cores_for_mlas() -> None:
    """Give the cores to ONNX Runtime's pool and run torch's own ops (attention, norms) on one thread.

    With both pools at two threads, torch's OpenMP threads spin between ops and take the cores
    from ONNX Runtime: a one-token pass of the default target took 0.26-0.31 s instead of 0.16 s."""
    global THREADS
    THREADS = THREADS or torch.get_num_threads()
    torch.set_num_threads(1)


def to_mlas(model: nn.Module) -> nn.Module:
    """Swap every Int4Linear / Int8Linear of `model` for its MlasLinear, in place.

    One layer at a time, by name: each torch layer is freed as soon as its session holds the
    weights, so the two copies of the whole model never coexist."""
    names = [name for name, module in model.named_modules() if isinstance(module, Int4Linear | Int8Linear)]
    for name in names:
        layer = model.get_submodule(name)
        replace_module(model, name, from_int4(layer) if isinstance(layer, Int4Linear) else from_int8(layer))
        del layer
    return model
