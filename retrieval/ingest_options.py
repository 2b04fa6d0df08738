"""What an ingest is asked (IngestOptions, checked before anything loads) and what it answers
(IngestReport, printed by `specrag ingest` or returned as JSON)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path

from retrieval.chunking import ChunkParams
from retrieval.embeddings import PRECISIONS
from retrieval.errors import RetrievalError
from retrieval.loaders import DEFAULT_MAX_BYTES

LIST_FILES_UP_TO = 20  # the text summary names added/updated/removed files up to this many


@dataclass
class IngestOptions:
    """None means: the index's own setting if it exists, else the default."""

    model: str | None = None
    precision: str = "auto"  # embedding matmuls: auto | float32 | bfloat16 (retrieval.embeddings)
    chunk_tokens: int | None = None
    overlap_tokens: int | None = None
    max_file_bytes: int = DEFAULT_MAX_BYTES
    rebuild: bool = False
    progress: bool = False
    follow_symlinks: bool = False  # index files whose symlinks leave their root
    trusted_roots: tuple[Path, ...] = ()  # tracked roots under these may be rescanned without being named

    def check(self) -> ChunkParams | None:
        """Refuse impossible values before anything is loaded; the explicit chunking, if any."""
        if self.max_file_bytes <= 0:
            raise RetrievalError("--max-file-mb must be positive")
        if self.precision not in PRECISIONS:
            raise RetrievalError(f"unknown precision {self.precision!r}; use one of {', '.join(PRECISIONS)}")
        if self.chunk_tokens is None and self.overlap_tokens is None:
            return None
        defaults = ChunkParams()
        chunk = defaults.chunk_tokens if self.chunk_tokens is None else self.chunk_tokens
        overlap = defaults.overlap_tokens if self.overlap_tokens is None else self.overlap_tokens
        try:
            return ChunkParams(chunk, overlap)
        except ValueError:
            raise RetrievalError(
                f"--chunk-tokens {chunk} / --overlap-tokens {overlap} is not usable: "
                "pass --chunk-tokens of at least 16 and --overlap-tokens below half of it"
            ) from None


@dataclass
class IngestReport:
    index_dir: str
    written: bool = False
    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    unchanged: int = 0
    skipped: list[dict[str, str]] = field(default_factory=list)  # {"path", "reason"}
    ignored: dict[str, int] = field(default_factory=dict)  # unsupported extension -> files
    dropped_roots: list[str] = field(default_factory=list)
    kept_roots: list[str] = field(default_factory=list)  # tracked, not named now: rows kept unread
    notes: list[str] = field(default_factory=list)  # recoveries and other things the user should know
    chunks: int = 0
    embedded_chunks: int = 0
    seconds: float = 0.0
    timings: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)

    def summary(self) -> str:
        state = "updated" if self.written else "unchanged, nothing written"
        lines = [f"note: {note}" for note in self.notes] + [
            f"index {self.index_dir} {state} in {self.seconds:.1f} s: {self.chunks} chunks "
            f"({self.embedded_chunks} embedded now)",
            f"  files: {len(self.added)} added, {len(self.updated)} updated, {len(self.removed)} removed, "
            f"{self.unchanged} unchanged, {len(self.skipped)} skipped",
        ]
        if self.ignored:
            kinds = ", ".join(f"{ext} {n}" for ext, n in sorted(self.ignored.items()))
            lines.append(f"  ignored (unsupported types): {kinds}")
        for verb, paths in (("added", self.added), ("updated", self.updated), ("removed", self.removed)):
            if len(paths) <= LIST_FILES_UP_TO:
                lines += [f"  {verb} {path}" for path in paths]
        lines += [f"  skipped {s['path']}: {s['reason']}" for s in self.skipped]
        lines += [f"  dropped root (no longer exists): {root}" for root in self.dropped_roots]
        lines += [f"  kept without rescanning (name it to refresh): {root}" for root in self.kept_roots]
        return "\n".join(lines)
