"""Incremental ingest: folders of documents -> a new index generation, embedding only what changed.

The ladder: scan the roots -> hash every candidate file -> plan (unchanged / added / updated /
removed) -> load and chunk the new and changed files -> embed their chunks (a chunk whose text
is stored already keeps its vector) -> keep the stored rows of unchanged files -> write a new
generation and swap it in (store.write_generation).
Bad files are skipped with a reason and never stop the run. When nothing changed, nothing is
loaded, embedded or written (the model is not even loaded).

An index remembers its roots, but a manifest is data on disk, not the user's word: a run rescans
the roots it is given plus tracked roots under a configured default place (scan.default_roots,
IngestOptions.trusted_roots). Other tracked roots keep their stored rows unread, and a run with
no PATH that would need them is refused with the command to run. A file that disappeared from a
rescanned root loses its chunks.

Before anything is written: a folder that is not an index is refused untouched (store.inspect),
a broken CURRENT next to an intact generation is repointed and reported, and a damaged
generation is refused with a `--rebuild` command that works whatever state CURRENT is in.
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
from retrieval.errors import IndexCorruptError, IndexMismatchError, RetrievalError, SkipFile
from retrieval.index import HybridIndex, load_rows
from retrieval.ingest_options import IngestOptions, IngestReport
from retrieval.lease import pin
from retrieval.loaders import Document, kind_of, reader_revision, too_large
from retrieval.manifest import roots_of
from retrieval.parallel_load import read_all
from retrieval.scan import default_roots, scan, untrusted_roots
from retrieval.store import (
    IndexSettings,
    check_generation,
    clean,
    find_live,
    ingest_lock,
    inspect,
    known_roots,
    manifest_for,
    rebuild_hint,
    repoint,
    settings_of,
    write_generation,
)

PROGRESS_MIN_CHUNKS = 256  # show an embedding progress bar from this many chunks up
PROGRESS_MIN_FILES = 20  # ... a reading bar from this many files up
PROGRESS_MIN_BYTES = 4 * 2**20  # ... or this much text (4 MB chunk in ~3 s here)


@dataclass
class _Plan:
    """Files of this run, by what must happen to them."""

    digests: dict[str, str] = field(default_factory=dict)  # path -> sha256 of every readable file
    sizes: dict[str, int] = field(default_factory=dict)  # path -> bytes, for the progress bar
    to_load: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    gone: list[str] = field(default_factory=list)  # indexed before, absent or unreadable now


def ingest(
    paths: Sequence[Path], index_dir: Path, options: IngestOptions | None = None, embedder: Embedder | None = None
) -> IngestReport:
    """Bring the index at index_dir up to date with paths (plus the roots it already tracks)."""
    started = time.perf_counter()
    options = options or IngestOptions()
    explicit = options.check()
    index_dir = Path(index_dir).expanduser().resolve()
    new_roots = [_existing_root(Path(p)) for p in paths]
    inspect(index_dir)  # refuse a file or a foreign folder before creating anything in it
    report = IngestReport(str(index_dir))
    with ingest_lock(index_dir):
        history = inspect(index_dir) or []
        live, manifest, repair = _open_live(index_dir, history, options)
        roots = _roots(index_dir, history, manifest, new_roots, options, report)  # may refuse: nothing changed yet
        if repair:
            repoint(index_dir, live)
            report.notes.append(repair)
        if live is not None:
            history = clean(index_dir, history, keep=live.name)
        model_id, params = _resolve_settings(options, explicit, manifest, embedder, index_dir)
        plan = _plan(roots, index_dir, manifest, options, report)
        if plan.to_load and embedder is None:
            _require_trusted_model(model_id, options, index_dir)
        loading = _load_in_background(model_id, options.precision) if embedder is None and plan.to_load else None
        recipe = _chunk_recipe(embedder, model_id, params) if plan.to_load else None
        docs, chunked = _load(plan, options, report, recipe)
        if not _must_write(manifest, roots, plan, docs, options):
            _classify(report, manifest, plan, docs)
            return _finish(report, started, chunks=manifest["chunks"] if manifest else 0)
        embedder = embedder or (loading.result() if loading else Embedder.load(model_id, options.precision))
        rows = _live_rows(live, manifest)
        stored = _stored_vectors(rows, manifest, plan, embedder)
        chunks, vectors = _embed(docs, chunked, embedder, params, options, report, stored)
        _classify(report, manifest, plan, docs)
        settings = IndexSettings(embedder.model_id, embedder.dim, params.chunk_tokens, params.overlap_tokens)
        chunks, vectors = _merge(live, rows, plan, settings, chunks, vectors)
        if manifest is None and not chunks:  # read, but nothing to index (a page of headings): still no empty index
            return _finish(report, started, chunks=0)
        files = _file_entries(manifest, plan, docs, chunks)
        tick = time.perf_counter()
        index = HybridIndex.build(chunks, vectors)
        precision = getattr(embedder, "precision", "float32")  # of this run's embeddings
        manifest = manifest_for(settings, roots, files, len(chunks), precision)
        written = write_generation(index_dir, history, manifest, index.save)
        clean(index_dir, history, keep=written.name)
        report.timings["index_and_write"] = round(time.perf_counter() - tick, 3)
        report.written = True
    return _finish(report, started, chunks=len(chunks))


def _existing_root(path: Path) -> Path:
    path = path.expanduser()
    if not path.exists():
        raise RetrievalError(f"{path} does not exist; pass existing files or folders to ingest")
    return path.resolve()


def _open_live(index_dir: Path, history: list[str], options: IngestOptions) -> tuple[Path | None, dict | None, str]:
    """The generation to keep while writing, the checked manifest to extend (None with --rebuild),
    and, when CURRENT is broken next to an intact generation, the repair to make and report."""
    live = find_live(index_dir, history) if history else None
    if live is None or live.generation is None:
        roots = known_roots(index_dir, history)
        if live is None or options.rebuild or not roots:  # nothing usable left: start afresh
            return None, None, ""
        raise IndexCorruptError(f"{live.problem} and no intact generation remains; {rebuild_hint(index_dir, roots)}")
    try:
        manifest = check_generation(live.generation)
    except (IndexMismatchError, IndexCorruptError) as err:
        if options.rebuild:
            return live.generation, None, ""  # kept until the rebuilt generation is live
        damaged = "" if isinstance(err, IndexMismatchError) else "the index is damaged: "
        roots = known_roots(index_dir, history)
        raise type(err)(f"{damaged}{err}; {rebuild_hint(index_dir, roots)}") from err
    repair = f"{live.problem}; restored the intact generation {live.generation.name}" if live.problem else ""
    return live.generation, (None if options.rebuild else manifest), repair


def _resolve_settings(
    options: IngestOptions,
    explicit: ChunkParams | None,
    manifest: dict | None,
    embedder: Embedder | None,
    index_dir: Path,
) -> tuple[str, ChunkParams]:
    """Explicit options must agree with an existing index; unset ones take the index's values."""
    model = embedder.model_id if embedder else (resolve_model(options.model)[0] if options.model else None)
    if manifest is None:
        return model or DEFAULT_MODEL_NAME, explicit or ChunkParams()
    stored = asdict(settings_of(manifest))
    wanted = {"model": model, "chunk_tokens": options.chunk_tokens, "overlap_tokens": options.overlap_tokens}
    diffs = [f"{k} is {stored[k]!r}, not {v!r}" for k, v in wanted.items() if v is not None and v != stored[k]]
    if diffs:
        raise IndexMismatchError(
            f"{index_dir} was built with other settings ({'; '.join(diffs)}); {rebuild_hint(index_dir)}"
        )
    try:
        return stored["model"], ChunkParams(stored["chunk_tokens"], stored["overlap_tokens"])
    except ValueError as err:
        raise IndexCorruptError(f"{index_dir} records impossible chunking ({err}); {rebuild_hint(index_dir)}") from err


def _require_trusted_model(model_id: str, options: IngestOptions, index_dir: Path) -> None:
    """A model path from a manifest is loaded only if this run names it (or it is the default):
    it is data from disk, and loading a model can run its code."""
    if model_id != DEFAULT_MODEL_NAME and options.model is None:
        raise IndexMismatchError(
            f"{index_dir} was built with the embedding model {model_id}; pass --model {model_id} "
            "if you trust it, or --rebuild to use the default model"
        )


def _load_in_background(model_id: str, precision: str) -> Future[Embedder]:
    """Load the embedder while the files are read (importing sentence-transformers alone takes ~9 s here)."""
    executor = ThreadPoolExecutor(1, thread_name_prefix="specrag-embedder")
    try:
        return executor.submit(Embedder.load, model_id, precision)
    finally:
        executor.shutdown(wait=False)


def _roots(
    index_dir: Path,
    history: list[str],
    manifest: dict | None,
    new_roots: list[Path],
    options: IngestOptions,
    report: IngestReport,
) -> list[str]:
    """All roots the new generation tracks; those this run may not rescan go to report.kept_roots."""
    given = [str(r) for r in new_roots]
    if options.rebuild:
        tracked = [] if given else known_roots(index_dir, history)
    else:
        tracked = roots_of(manifest) if manifest else []
    roots = set(tracked) | set(given)
    report.dropped_roots = sorted(r for r in roots if not os.path.exists(r))
    roots = roots - set(report.dropped_roots)
    if not roots:
        raise RetrievalError("nothing to ingest: pass PATH... (files or folders) or --corpus NAME")
    untrusted = untrusted_roots(
        sorted(roots), given, default_roots() + [Path(p).resolve() for p in options.trusted_roots]
    )
    if untrusted and (not given or options.rebuild):
        raise RetrievalError(
            f"{index_dir} tracks folders you did not name ({', '.join(untrusted)}); to refresh them, "
            f"name them: specrag ingest {' '.join(untrusted)} --index {index_dir}{' --rebuild' * options.rebuild}"
        )
    report.kept_roots = untrusted
    return sorted(roots)


# --- scan, hash, plan ---------------------------------------------------------------------------


def _plan(
    roots: list[str], index_dir: Path, manifest: dict | None, options: IngestOptions, report: IngestReport
) -> _Plan:
    tick = time.perf_counter()
    plan, known = _Plan(), manifest["files"] if manifest else {}
    kept = [Path(r) for r in report.kept_roots]
    plan.unchanged = [p for p in known if any(Path(p).is_relative_to(root) for root in kept)]  # rows kept unread
    found = scan([r for r in roots if r not in report.kept_roots], index_dir, options.follow_symlinks)
    report.skipped += found.skipped
    report.ignored = dict(found.ignored)
    for path in found.files:
        try:
            plan.digests[path] = file_digest(Path(path), options.max_file_bytes)
            plan.sizes[path] = os.stat(path).st_size
        except (SkipFile, OSError) as why:
            report.skipped.append({"path": path, "reason": str(why)})
            continue
        entry = known.get(path, {})
        same = entry.get("sha256") == plan.digests[path]
        same = same and entry.get("kind") == kind_of(Path(path))  # .rst was read as plain text before rst
        same = same and entry.get("reader", 1) == reader_revision(entry.get("kind", ""))  # read as today
        (plan.unchanged if same else plan.to_load).append(path)
    plan.gone = sorted(set(known) - set(plan.unchanged) - set(plan.to_load))
    report.timings["scan_and_hash"] = round(time.perf_counter() - tick, 3)
    return plan


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
    sizes = [plan.sizes.get(p, 0) for p in plan.to_load]
    show = options.progress and (len(sizes) >= PROGRESS_MIN_FILES or sum(sizes) >= PROGRESS_MIN_BYTES)
    with _Bar("reading", sum(sizes), show) as bar:
        for path, outcome in read_all(plan.to_load, options.max_file_bytes, recipe, bar.advance):
            bar.finish_item(plan.sizes.get(path, 0))
            if outcome.document is None:
                report.skipped.append({"path": path, "reason": outcome.skipped})
                continue
            docs[path] = outcome.document
            if outcome.chunks is not None:
                chunked[path] = outcome.chunks
    report.timings["load"] = round(time.perf_counter() - tick, 3)  # includes chunking done by the readers
    return docs, chunked


class _Bar:
    """A byte progress bar that one large file can move while it is chunked (when chunked in this
    process), and that each finished file tops up to its full size."""

    def __init__(self, desc: str, total: int, show: bool) -> None:
        self.bar = tqdm(total=total, desc=desc, unit="B", unit_scale=True, disable=not show)
        self.credited = 0  # of the file in progress

    def advance(self, chars: int) -> None:
        self.credited += chars
        self.bar.update(chars)

    def finish_item(self, size: int) -> None:
        self.bar.update(max(0, size - self.credited))
        self.credited = 0

    def __enter__(self) -> _Bar:
        return self

    def __exit__(self, *exc: object) -> None:
        self.bar.close()


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
    stored: dict[str, np.ndarray] | None = None,
) -> tuple[list[Chunk], np.ndarray]:
    """Chunk the loaded documents and embed each chunk whose text has no vector in `stored` yet."""
    if params.chunk_tokens > embedder.max_tokens - 2:
        raise RetrievalError(f"chunk_tokens {params.chunk_tokens} exceeds what the model reads ({embedder.max_tokens})")
    tick = time.perf_counter()
    splitter = make_splitter(embedder.count_tokens, params)
    chunks = []
    sizes = {path: len(doc.text) for path, doc in docs.items() if path not in chunked}
    with _Bar("chunking", sum(sizes.values()), options.progress and sum(sizes.values()) >= PROGRESS_MIN_BYTES) as bar:
        for path, doc in list(docs.items()):
            doc_chunks = chunked[path] if path in chunked else chunk_document(doc, splitter, bar.advance)
            bar.finish_item(sizes.get(path, 0))
            if not doc_chunks:
                report.skipped.append({"path": path, "reason": "no text to index"})
                del docs[path]
            chunks += doc_chunks
    report.timings["chunk"] = round(time.perf_counter() - tick, 3)
    tick = time.perf_counter()
    texts, stored = [c.indexed_text() for c in chunks], stored or {}
    new = [i for i, text in enumerate(texts) if text not in stored]
    progress = options.progress and len(new) >= PROGRESS_MIN_CHUNKS
    embedded = embedder.embed_documents([texts[i] for i in new], progress=progress)
    vectors = np.zeros((len(chunks), embedder.dim), dtype=np.float32)
    for i, text in enumerate(texts):
        if text in stored:
            vectors[i] = stored[text]
    if new:
        vectors[new] = embedded
    report.timings["embed"] = round(time.perf_counter() - tick, 3)
    report.embedded_chunks = len(new)
    return chunks, vectors


Rows = tuple[list[Chunk], np.ndarray]


def _live_rows(live: Path | None, manifest: dict | None) -> Rows | None:
    """The live generation's chunks and vectors, read once for both their uses (`_stored_vectors`, `_merge`);
    None when there is no live generation or a concurrent clean took it."""
    if live is None or manifest is None:
        return None
    lease = pin(live)
    if lease is None:
        return None
    with lease:
        return load_rows(live, manifest["embedding"]["dim"])


def _stored_vectors(rows: Rows | None, manifest: dict | None, plan: _Plan, embedder: Embedder) -> dict[str, np.ndarray]:
    """The stored vector of each chunk text of the files read again or gone, where this run's model
    and precision made them: an edit re-embeds only the chunks it changed, and a new reader revision
    only the chunks whose text it changed (all 4,707 Slurm chunks were embedded again, ~4-9 min
    here, when the HTML reader changed the text of 3 of 130 pages). Without stored rows (a concurrent
    clean took them) everything is embedded, as before."""
    if rows is None or manifest is None or not plan.to_load:
        return {}
    made = manifest["embedding"]
    if made["model"] != embedder.model_id or made.get("precision") != getattr(embedder, "precision", "float32"):
        return {}
    chunks, vectors = rows
    again = {*plan.to_load, *plan.gone}  # a moved or renamed file is one gone and one added
    return {chunk.indexed_text(): vectors[i] for i, chunk in enumerate(chunks) if chunk.source in again}


def _merge(
    live: Path | None,
    rows: Rows | None,
    plan: _Plan,
    settings: IndexSettings,
    chunks: list[Chunk],
    vectors: np.ndarray,
) -> tuple[list[Chunk], np.ndarray]:
    """The stored rows of unchanged files plus the new rows, ordered by source then position.
    Stored rows come from load_rows, which pairs each chunk with the vector stored under its id."""
    if live is not None and plan.unchanged:
        if rows is None:
            raise IndexCorruptError(f"{live} vanished while this ingest was reading it; run the ingest again")
        keep = set(plan.unchanged)
        old_chunks, old_vectors = rows
        kept = [i for i, c in enumerate(old_chunks) if c.source in keep]
        chunks = [old_chunks[i] for i in kept] + chunks
        vectors = np.concatenate([old_vectors[kept], vectors]) if kept else vectors
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
        files[path] = {
            "sha256": plan.digests[path],
            "kind": doc.kind,
            "reader": reader_revision(doc.kind),
            "title": doc.title,
            "chunks": counts[path],
        }
    return dict(sorted(files.items()))


def _finish(report: IngestReport, started: float, chunks: int) -> IngestReport:
    report.chunks = chunks
    report.seconds = round(time.perf_counter() - started, 3)
    return report
