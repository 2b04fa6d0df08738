"""The gated MLP of a quantized model, with a prefill's elementwise half done a block of rows at a time.

Qwen2 and Llama MLPs compute down(act(gate(x)) * up(x)). In a prefill of n rows, Hugging Face's
forward holds gate(x), up(x), act(gate(x)) and their product as float32 [n, intermediate] tensors:
60 MB each per layer for the default target's 8,960-wide MLP and a 1,700-token prompt, the largest
part of what a prefill adds to peak memory. `GatedMLP` keeps the two products as the quantized
layers compute them for a prefill (`wide_product`: bf16 where the CPU has bf16 instructions), and
writes act(gate) * up over the gate's product ROWS rows at a time, in the residual stream's dtype
as before. The roundings are the same, in the same order (the down projection rounds its input to
that dtype either way), so the result is bit-identical to Hugging Face's forward (tests) with less
memory. Decoding and verification passes, and layers without `wide_product`, run that forward as it is.
"""

from __future__ import annotations

from torch import Tensor, nn

ROWS = 256  # rows of the elementwise step at a time: 256 x 8960 float32 is 9 MB
# each computes down(act(gate(x)) * up(x)); quantized_model.use_gated_mlps swaps them for GatedMLP
GATED_MLPS = ("Qwen2MLP", "LlamaMLP", "MistralMLP", "Qwen3MLP")


class GatedMLP(nn.Module):
    def __init__(self, mlp: nn.Module) -> None:
        super().__init__()
        self.gate_proj, self.up_proj, self.down_proj = mlp.gate_proj, mlp.up_proj, mlp.down_proj
        self.act_fn = mlp.act_fn

    def forward(self, x: Tensor) -> Tensor:
        rows = x.reshape(-1, x.shape[-1])
        products = self._wide_products(rows)
        if products is None:
            return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))
        gate, up = products
        for start in range(0, len(gate), ROWS):
            block = slice(start, start + ROWS)
            gate[block] = self.act_fn(gate[block].to(x.dtype)) * up[block].to(x.dtype)
        del up
        out = self.down_proj.wide_product(gate)
        return out.to(x.dtype).reshape(*x.shape[:-1], out.shape[-1])

    def _wide_products(self, rows: Tensor) -> tuple[Tensor, Tensor] | None:
        """gate(rows) and up(rows) as the wide matmul gives them, or None: a pass the kernels take, a
        layer without the wide matmul, or a bias (added in float32 after the product, so not in place)."""
        layers = (self.gate_proj, self.up_proj, self.down_proj)
        if not all(hasattr(layer, "takes_wide") and layer.takes_wide(len(rows)) for layer in layers):
            return None
        if any(layer.bias is not None for layer in layers):
            return None
        return self.gate_proj.wide_product(rows), self.up_proj.wide_product(rows)
