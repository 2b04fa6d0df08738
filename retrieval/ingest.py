"""Incremental ingest: folders of documents -> a new index generation, embedding only what changed.

The ladder: scan the roots -> hash every candidate file -> plan (unchanged / added / updated /
removed) -> load and chunk the new and changed files -> embed their chunks -> keep the stored
rows of unchanged files -> write a new generation and swap it in (store.write_generation).
Bad files are skipped with a reason and never stop the run. When nothing changed, nothing is
loaded, embedded or written (the model is not even loaded).

An index remembers its roots: a later `ingest` with no PATH refreshes them all, and a file
that disappeared from a root loses its chunks.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from retrieval.chunking import Chunk, ChunkParams, ChunkRecipe, chunk_document, make_splitter
from retrieval.embeddings import DEFAULT_MODEL_NAME, Embedder, resolve_model, tokenizer_file_of
from retrieval.errors import IndexMismatchError, RetrievalError, SkipFile
from retrieval.index import HybridIndex, load_rows
from retrieval.loaders import DEFAULT_MAX_BYTES, Document, kind_of, too_large
from retrieval.parallel_load import read_all
from retrieval.store import (
    IndexSettings,
    check_is_index_dir,
    current_generation,
    ingest_lock,
    manifest_for,
    read_manifest,
    rebuild_hint,
    remove_stale,
    settings_of,
    write_generation,
)

PROGRESS_MIN_CHUNKS = 256  # show an embedding progress bar from this many chunks up
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
    chunks: int = 0
    embedded_chunks: int = 0
    seconds: float = 0.0
    timings: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)

    def summary(self) -> str:
        state = "updated" if self.written else "unchanged, nothing written"
        lines = [
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
        return "\n".join(lines)


@dataclass
class _Plan:
    """Files of this run, by what must happen to them."""

    digests: dict[str, str] = field(default_factory=dict)  # path -> sha256 of every readable file
    to_load: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    gone: list[str] = field(default_factory=list)  # indexed before, absent or unreadable now


def ingest(
    paths: Sequence[Path], index_dir: Path, options: IngestOptions | None = None, embedder: Embedder | None = None
) -> IngestReport:
    """Bring the index at index_dir up to date with paths (plus the roots it already tracks)."""
    started = time.perf_counter()
    options = options or IngestOptions()
    index_dir = Path(index_dir).expanduser().resolve()
    new_roots = [_existing_root(Path(p)) for p in paths]
    check_is_index_dir(index_dir)
    report = IngestReport(str(index_dir))
    with ingest_lock(index_dir):
        live = current_generation(index_dir)
        remove_stale(index_dir, keep=live.name if live else None)
        manifest = read_manifest(live) if live and not options.rebuild else None
        model_id, params = _resolve_settings(options, manifest, embedder, index_dir)
        roots = _roots(manifest, new_roots, report)
        plan = _plan(roots, index_dir, manifest, options.max_file_bytes, report)
        loading = _load_in_background(model_id, options.precision) if embedder is None and plan.to_load else None
        recipe = _chunk_recipe(embedder, model_id, params) if plan.to_load else None
        docs, chunked = _load(plan, options, report, recipe)
        if not _must_write(manifest, roots, plan, docs, options):
            _classify(report, manifest, plan, docs)
            return _finish(report, started, chunks=manifest["chunks"] if manifest else 0)
        embedder = embedder or (loading.result() if loading else Embedder.load(model_id, options.precision))
        chunks, vectors = _embed(docs, chunked, embedder, params, options, report)
        _classify(report, manifest, plan, docs)
        settings = IndexSettings(embedder.model_id, embedder.dim, params.chunk_tokens, params.overlap_tokens)
        chunks, vectors = _merge(live, manifest, plan, settings, chunks, vectors)
        files = _file_entries(manifest, plan, docs, chunks)
        tick = time.perf_counter()
        index = HybridIndex.build(chunks, vectors)
        precision = getattr(embedder, "precision", "float32")  # of this run's embeddings
        write_generation(index_dir, manifest_for(settings, roots, files, len(chunks), precision), index.save)
        report.timings["index_and_write"] = round(time.perf_counter() - tick, 3)
        report.written = True
    return _finish(report, started, chunks=len(chunks))


def _existing_root(path: Path) -> Path:
    path = path.expanduser()
    if not path.exists():
        raise RetrievalError(f"{path} does not exist; pass existing files or folders to ingest")
    return path.resolve()


def _resolve_settings(
    options: IngestOptions, manifest: dict | None, embedder: Embedder | None, index_dir: Path
) -> tuple[str, ChunkParams]:
    """Explicit options must agree with an existing index; unset ones take the index's values."""
    model = embedder.model_id if embedder else (resolve_model(options.model)[0] if options.model else None)
    wanted = {"model": model, "chunk_tokens": options.chunk_tokens, "overlap_tokens": options.overlap_tokens}
    if manifest is None:
        defaults = ChunkParams()
        params = ChunkParams(
            options.chunk_tokens or defaults.chunk_tokens,
            defaults.overlap_tokens if options.overlap_tokens is None else options.overlap_tokens,
        )
        return model or DEFAULT_MODEL_NAME, params
    stored = asdict(settings_of(manifest))
    diffs = [f"{k} is {stored[k]!r}, not {v!r}" for k, v in wanted.items() if v is not None and v != stored[k]]
    if diffs:
        raise IndexMismatchError(
            f"{index_dir} was built with other settings ({'; '.join(diffs)}); {rebuild_hint(index_dir)}"
        )
    return stored["model"], ChunkParams(stored["chunk_tokens"], stored["overlap_tokens"])


def _load_in_background(model_id: str, precision: str) -> Future[Embedder]:
    """Load the embedder while the files are read (importing sentence-transformers alone takes ~9 s here)."""
    executor = ThreadPoolExecutor(1, thread_name_prefix="specrag-embedder")
    try:
        return executor.submit(Embedder.load, model_id, precision)
    finally:
        executor.shutdown(wait=False)


def _roots(manifest: dict | None, new_roots: list[Path], report: IngestReport) -> list[str]:
    roots = set(manifest["roots"] if manifest else []) | {str(r) for r in new_roots}
    report.dropped_roots = sorted(r for r in roots if not os.path.exists(r))
    if not roots:
        raise RetrievalError("nothing to ingest: pass PATH... (files or folders) or --corpus NAME")
    return sorted(roots - set(report.dropped_roots))


# --- scan, hash, plan ---------------------------------------------------------------------------


def _plan(roots: list[str], index_dir: Path, manifest: dict | None, max_bytes: int, report: IngestReport) -> _Plan:
    tick = time.perf_counter()
    plan, known = _Plan(), manifest["files"] if manifest else {}
    ignored: Counter[str] = Counter()
    for path in _scan(roots, index_dir, ignored, report):
        try:
            plan.digests[path] = file_digest(Path(path), max_bytes)
        except SkipFile as why:
            report.skipped.append({"path": path, "reason": str(why)})
            continue
        same = known.get(path, {}).get("sha256") == plan.digests[path]
        (plan.unchanged if same else plan.to_load).append(path)
    plan.gone = sorted(set(known) - set(plan.unchanged) - set(plan.to_load))
    report.ignored = dict(ignored)
    report.timings["scan_and_hash"] = round(time.perf_counter() - tick, 3)
    return plan


def _scan(roots: list[str], index_dir: Path, ignored: Counter[str], report: IngestReport) -> list[str]:
    """Supported files under the roots (hidden entries and the index itself are not visited)."""
    found: set[str] = set()
    for root in map(Path, roots):
        if root.is_file():
            if kind_of(root):
                found.add(str(root))
            else:
                report.skipped.append({"path": str(root), "reason": f"unsupported file type {root.suffix!r}"})
            continue
        for dirpath, dirnames, filenames in os.walk(root):
            here = Path(dirpath)
            dirnames[:] = [d for d in dirnames if not d.startswith(".") and here / d != index_dir]
            for name in filenames:
                if name.startswith("."):
                    continue
                if kind_of(here / name):
                    found.add(str(here / name))
                else:
                    ignored[Path(name).suffix.lower() or "(none)"] += 1
    return sorted(found)


def file_digest(path: Path, max_bytes: int) -> str:
    """sha256 of the file's bytes; huge or unreadable files raise SkipFile before being read whole."""
    try:
        if path.stat().st_size > max_bytes:
            raise SkipFile(too_large(path.stat().st_size, max_bytes))
        with open(path, "rb") as handle:
            return hashlib.file_digest(handle, "sha256").hexdigest()
    except OSError as err:
        raise SkipFile(f"unreadable ({err.strerror or err})") from err


# --- load, chunk, embed ------------------------------------------------------------------------


def _chunk_recipe(embedder: Embedder | None, model_id: str, params: ChunkParams) -> ChunkRecipe | None:
    """Chunk in the reading workers when they can count tokens exactly as the embedder will."""
    if embedder is not None:
        tokenizer_file = getattr(embedder, "tokenizer_file", None)
    else:
        tokenizer_file = tokenizer_file_of(resolve_model(model_id)[1])
    return ChunkRecipe(str(tokenizer_file), params) if tokenizer_file else None


def _load(
    plan: _Plan, options: IngestOptions, report: IngestReport, recipe: ChunkRecipe | None
) -> tuple[dict[str, Document], dict[str, list[Chunk]]]:
    """The readable documents, and their chunks when the recipe let the workers cut them."""
    tick, docs, chunked = time.perf_counter(), {}, {}
    loaded = read_all(plan.to_load, options.max_file_bytes, recipe)
    bar = tqdm(
        loaded,
        total=len(plan.to_load),
        desc="reading",
        unit="file",
        disable=not options.progress or len(plan.to_load) < 20,
    )
    for path, outcome in bar:
        if outcome.document is None:
            report.skipped.append({"path": path, "reason": outcome.skipped})
            continue
        docs[path] = outcome.document
        if outcome.chunks is not None:
            chunked[path] = outcome.chunks
    report.timings["load"] = round(time.perf_counter() - tick, 3)  # includes chunking done by the readers
    return docs, chunked


def _must_write(manifest: dict | None, roots: list[str], plan: _Plan, docs: dict, options: IngestOptions) -> bool:
    if manifest is None:
        return bool(docs)  # a first ingest that found nothing readable writes no empty index
    stale = set(plan.to_load) & set(manifest["files"])  # changed or now unreadable
    return options.rebuild or bool(docs or plan.gone or stale) or roots != manifest["roots"]


def _embed(
    docs: dict[str, Document],
    chunked: dict[str, list[Chunk]],
    embedder: Embedder,
    params: ChunkParams,
    options: IngestOptions,
    report: IngestReport,
) -> tuple[list[Chunk], np.ndarray]:
    if params.chunk_tokens > embedder.max_tokens - 2:
        raise RetrievalError(f"chunk_tokens {params.chunk_tokens} exceeds what the model reads ({embedder.max_tokens})")
    tick = time.perf_counter()
    splitter = make_splitter(embedder.count_tokens, params)
    chunks = []
    for path, doc in list(docs.items()):
        doc_chunks = chunked[path] if path in chunked else chunk_document(doc, splitter)
        if not doc_chunks:
            report.skipped.append({"path": path, "reason": "no text to index"})
            del docs[path]
        chunks += doc_chunks
    report.timings["chunk"] = round(time.perf_counter() - tick, 3)
    tick = time.perf_counter()
    progress = options.progress and len(chunks) >= PROGRESS_MIN_CHUNKS
    vectors = embedder.embed_documents([c.indexed_text() for c in chunks], progress=progress)
    report.timings["embed"] = round(time.perf_counter() - tick, 3)
    report.embedded_chunks = len(chunks)
    return chunks, vectors


def _merge(
    live: Path | None,
    manifest: dict | None,
    plan: _Plan,
    settings: IndexSettings,
    chunks: list[Chunk],
    vectors: np.ndarray,
) -> tuple[list[Chunk], np.ndarray]:
    """The stored rows of unchanged files plus the new rows, ordered by source then position."""
    if manifest is not None and live is not None and plan.unchanged:
        keep = set(plan.unchanged)
        old_chunks, old_vectors = load_rows(live, settings.dim)
        rows = [i for i, c in enumerate(old_chunks) if c.source in keep]
        chunks = [old_chunks[i] for i in rows] + chunks
        vectors = np.concatenate([old_vectors[rows], vectors]) if rows else vectors
    order = sorted(range(len(chunks)), key=lambda i: (chunks[i].source, chunks[i].position.start))
    return [chunks[i] for i in order], np.ascontiguousarray(vectors[order], dtype=np.float32).reshape(-1, settings.dim)


def _classify(report: IngestReport, manifest: dict | None, plan: _Plan, docs: dict[str, Document]) -> None:
    known = manifest["files"] if manifest else {}
    report.added = [p for p in docs if p not in known]
    report.updated = [p for p in docs if p in known]
    report.removed = sorted(plan.gone + [p for p in plan.to_load if p in known and p not in docs])
    report.unchanged = len(plan.unchanged)


def _file_entries(manifest: dict | None, plan: _Plan, docs: dict[str, Document], chunks: list[Chunk]) -> dict:
    counts = Counter(c.source for c in chunks)
    files = {p: manifest["files"][p] for p in plan.unchanged} if manifest else {}
    for path, doc in docs.items():
        files[path] = {"sha256": plan.digests[path], "kind": doc.kind, "title": doc.title, "chunks": counts[path]}
    return dict(sorted(files.items()))


def _finish(report: IngestReport, started: float, chunks: int) -> IngestReport:
    report.chunks = chunks
    report.seconds = round(time.perf_counter() - started, 3)
    return report
