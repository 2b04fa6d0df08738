"""Pipeline events -> chat messages: pure functions, no gradio, no models.

A turn shows as two assistant messages under the user's question (and an error, if any):
- a status "thought" (gradio message metadata: title, log, status pending/done) that says
  from the first second what is happening: searching, reading N passages, prefilling;
- the answer text (markdown, exactly as the model wrote it), growing as tokens stream, and
  below it once done the details (HTML): provenance (the answer again, with each span copied verbatim from a
  source marked with that source's number, and a legend), grounding warnings, what the
  sources say the answer's options mean, the sources (title, heading, path, score; chunk
  text on expand) and the stats line.
Messages are plain dicts ({"role", "content", "metadata"}), the format gr.Chatbot takes.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from typing import Any

from app.copilot import Final, GroundingItem, Segment
from app.copilot.code_spans import FENCE, INLINE, joined_spans
from app.copilot.events import (
    CutCode,
    Definition,
    ExampleFact,
    Miscomparison,
    MisplacedSetting,
    Quote,
    Recitation,
    Splice,
    UnlistedValue,
)
from app.copilot.gate import weak_match_warning
from app.copilot.links import LINK, is_relative, relative_links_as_text
from app.copilot.summary import (
    REPEATED_EARLIER,
    adapted,
    assembled,
    borrowed,
    cut_command,
    definition,
    example_fact,
    example_kept,
    left_out,
    misattribution,
    miscomparison,
    misplaced,
    misquotation,
    recitation,
    run_under_tool,
    said_earlier,
    shown_paths,
    source_heading,
    source_marks,
    splice,
    stats_parts,
    unlisted_value,
    why_not_found,
)

Message = dict[str, Any]
PALETTE = 6  # provenance colours (CSS classes prov-c0 .. prov-c5), cycled by source number


def user_message(question: str) -> Message:
    return {"role": "user", "content": question if question.strip() else "*(empty question)*"}


def status_message(title: str, log: Sequence[str], pending: bool, duration: float | None = None) -> Message:
    metadata: dict[str, Any] = {"title": title, "status": "pending" if pending else "done"}
    if duration is not None:
        metadata["duration"] = round(duration, 1)
    return {"role": "assistant", "content": "\n".join(f"- {line}" for line in log), "metadata": metadata}


def answer_message(text: str, note: str = "", final: Final | None = None) -> Message:
    """The answer (markdown as the model wrote it), a note such as "stopped", and once done its details."""
    body = close_fences(inert_tags(text)) if text else ""
    if note:
        body = f"{body}\n\n*{note}*" if body else f"*{note}*"
    if final is not None:
        body = f"{body}\n\n{details_html(final)}"  # an HTML block after a blank line: markdown leaves it alone
    return {"role": "assistant", "content": body or "…"}


def error_message(text: str) -> Message:
    return {"role": "assistant", "content": error_html(text)}


def error_html(text: str) -> str:
    """A warning or error line, as its own message or heading the answer's."""
    return f'<div class="sr-error">⚠ {html.escape(text)}</div>'


_TAG_START = re.compile(r"<(?=[A-Za-z/!?])")


def inert_tags(text: str) -> str:
    """`text` (the model's markdown) with every `<` that could open an HTML tag in its prose written `&lt;`, and
    each relative link written as its text (app/copilot/links.py); code spans and fenced blocks, which markdown
    shows as they are, stay as written.

    The chat renders markdown, and markdown passes HTML through: "check with "ping <address>"", copied from the
    Slurm troubleshooting guide, showed "ping", a line break and the rest, its `<address>` taken for an HTML
    element (seen in the chat, session 58); `<time>`, `<code>` or `<label>` placeholders would go the same way."""
    code = [(m.start(), m.end()) for m in FENCE.finditer(text)]
    code += [(m.start(), m.end()) for m in INLINE.finditer(joined_spans(text))]
    out, at = [], 0
    for begin, end in sorted(code):
        if begin < at:
            continue  # inside a span already kept (backticks in a fenced block)
        out += [_shown_prose(text[at:begin]), text[begin:end]]
        at = end
    return "".join([*out, _shown_prose(text[at:])])


def _shown_prose(prose: str) -> str:
    return _TAG_START.sub("&lt;", relative_links_as_text(prose))


def close_fences(text: str) -> str:
    """Close a code fence the (streaming or stopped) answer left open, so the page below it renders."""
    return text + "\n```" if text.count("```") % 2 else text


def details_html(final: Final) -> str:
    if final.gated:  # no model ran: nothing was copied, invented or timed; say why it was not answered
        # (a value's band in a listed source's thresholds is the source's own words: shown all the same)
        shown = definitions_html(final.definitions) + sources_html(final.sources) + stats_html(final)
        return f'<div class="sr-details">{shown}</div>'
    texts = {p.number: p.text for p in final.passages}
    warning = weak_match_warning(final.relevance)
    parts = [
        _warning_html(warning) if warning else "",
        _warning_html(REPEATED_EARLIER) if final.repeats_earlier and not final.withheld else "",
        # a withheld answer's words are not shown, so neither is where they came from nor what they invented
        "" if final.withheld else provenance_html(merge_verbatim(final.citations.segments, texts), final.sources),
        ""
        if final.withheld
        else grounding_html(
            final.grounding,
            final.citations.invalid,
            final.misquoted,
            final.recitations,
            final.borrowed,
            final.spliced,
            final.left_out,
            final.said_before,
            final.miscompared,
            final.example_facts,
            final.cut_code,
            final.misplaced,
            final.unlisted,
        ),
        "" if final.withheld else definitions_html(final.definitions),
        sources_html(final.sources),
        stats_html(final),
    ]
    return '<div class="sr-details">' + "".join(p for p in parts if p) + "</div>"


def _warning_html(text: str) -> str:
    """A warning of the summary's (written lower-case, to run on in `ask` and Slack) as a sentence of its own."""
    return f'<div class="sr-warn">⚠ {html.escape(text[0].upper() + text[1:])}</div>'


def merge_verbatim(segments: Sequence[Segment], passage_texts: dict[int, str]) -> list[Segment]:
    """Grow each copied span over the segments after it while the joined text is still verbatim in its passage;
    then a span still shorter than MIN_QUOTE_CHARS counts as the model's own text.

    The engine's copies come in pieces (each verified draft is followed by the target's own
    token, which often is the source's next character too); one mark per piece is noise.
    A merged span is only ever claimed for text that its passage contains word for word.
    """
    merged: list[Segment] = []
    for segment in segments:
        last = merged[-1] if merged else None
        if last is not None and last.passage is not None:
            joined = last.text + segment.text
            if segment.passage in (None, last.passage) and joined in passage_texts.get(last.passage, ""):
                merged[-1] = Segment(joined, last.passage)
                continue
        if last is not None and last.passage is None and segment.passage is None:
            merged[-1] = Segment(last.text + segment.text, None)
            continue
        merged.append(segment)
    return _short_copies_as_own(merged)


# A copied span shorter than this (after merging) reads as the model's own text: one or two
# accepted tokens ("4", "a job", "one time") are the target agreeing with a copy, not a quote,
# and marking them scattered source marks through the chat's provenance view.
MIN_QUOTE_CHARS = 10


def _short_copies_as_own(segments: list[Segment]) -> list[Segment]:
    own: list[Segment] = []
    for segment in segments:
        if segment.passage is not None and len(segment.text.strip()) < MIN_QUOTE_CHARS:
            segment = Segment(segment.text, None)
        if own and own[-1].passage is None and segment.passage is None:
            own[-1] = Segment(own[-1].text + segment.text, None)
        else:
            own.append(segment)
    return own


def provenance_html(segments: Sequence[Segment], sources: Sequence[dict[str, Any]]) -> str:
    """The answer with every copied span marked by its source number, and the legend of those numbers.

    The answer is shown as text with its markdown laid out as the answer above shows it, not as
    markers (`_FenceLayout`): the ``` lines are left out and the lines between them shown as code,
    `inline code` as code and **bold** as bold. A mark goes after a copy's last visible character (not
    after the newline before a closing fence, where it read as part of the next line)."""
    copied = sorted({s.passage for s in segments if s.passage is not None})
    if not copied:
        return '<div class="sr-prov-none">Provenance: nothing was copied verbatim from the sources.</div>'
    layout = _FenceLayout("".join(s.text for s in segments))
    spans, pending, start = [], "", 0  # pending: a source mark waiting for the end of the word its copy stopped in
    for segment, following in zip(segments, [*segments[1:], None], strict=True):
        end = start + len(segment.text)
        if segment.passage is None:
            cut = start + (len(segment.text) - len(segment.text.lstrip(_WORD_TAIL)) if pending else 0)
            spans.append(layout.html(start, cut) + pending + layout.html(cut, end))
            pending, start = "", end
            continue
        n = segment.passage
        mark = f'<sup class="prov-n">{n}</sup>'
        # a copy that stops inside a word ("-l", "adev13") gets its mark after the word, not in it
        inside_word = (
            following is not None
            and following.passage is None
            and segment.text[-1:].isalnum()
            and following.text[:1] in _WORD_TAIL
        )
        pending = mark if inside_word else ""
        last = layout.last_visible(start, end)
        spans.append(
            f'<span class="prov prov-c{n % PALETTE}" title="copied verbatim from source [{n}]">'
            f"{layout.html(start, last)}{'' if inside_word else mark}</span>{layout.html(last, end)}"
        )
        start = end
    titles = {s["number"]: s["title"] or s["path"] for s in sources}
    legend = " ".join(
        f'<span class="prov prov-c{n % PALETTE}">[{n}]</span> {html.escape(titles.get(n, ""))}' for n in copied
    )
    return (
        '<div class="sr-prov"><div class="sr-h">Provenance</div>'
        f'<div class="sr-prov-text">{"".join(spans)}</div>'
        f'<div class="sr-legend">Copied verbatim from source: {legend} · unmarked text: written by the model</div>'
        "</div>"
    )


class _FenceLayout:
    """How each character of an answer shows in the provenance view: fence lines and the markers of
    `inline code` and **bold** hidden, fenced lines and inline code as code, bold as bold, a relative link as its
    text (app/copilot/links.py), the rest as text.
    (Single `*` or `_` stay as written: in commands they are globs and names more often than emphasis.)"""

    def __init__(self, text: str) -> None:
        self.text = text = joined_spans(text)  # a code span a soft wrap cut reads as one, its break a space
        self.kind = [""] * len(text)  # "": prose, "hidden", "code" (fenced), "icode" (inline code), "bold"
        inside, pos = False, 0
        for line in text.splitlines(keepends=True):
            fence = line.strip().startswith("```")
            if fence or inside:
                self.kind[pos : pos + len(line)] = ["hidden" if fence else "code"] * len(line)
            else:
                self._inline(line, pos)
            inside ^= fence
            pos += len(line)

    def _inline(self, line: str, pos: int) -> None:
        for pattern, kind, inner in ((INLINE, "icode", "code"), (_BOLD, "bold", 1)):
            for match in pattern.finditer(line):
                start, end = pos + match.start(), pos + match.end()
                marker = (len(match.group(0)) - len(match.group(inner))) // 2  # ` (or ``) or **
                if any(self.kind[start : start + marker]) or any(self.kind[end - marker : end]):
                    continue  # a marker inside inline code: literal
                # bold around inline code ("**Probe fails with `failed to download`.**") keeps the code as code
                inside = [k or kind for k in self.kind[start + marker : end - marker]]
                self.kind[start:end] = ["hidden"] * marker + inside + ["hidden"] * marker
        for link in LINK.finditer(line):  # a relative link shows as its text, as in the answer above
            start, end = pos + link.start(), pos + link.end()
            if is_relative(link.group(2)) and not any(self.kind[start:end]):
                self.kind[start : start + 1] = ["hidden"]
                self.kind[pos + link.end(1) : end] = ["hidden"] * (end - pos - link.end(1))

    def html(self, start: int, end: int) -> str:
        """text[start:end] as inert HTML, laid out as `kind` says."""
        out, i = [], start
        while i < end:
            j = i
            while j < end and self.kind[j] == self.kind[i]:
                j += 1
            piece, kind = inert_html(self.text[i:j]), self.kind[i]
            if kind in _TAGS:
                tag, attributes = _TAGS[kind]
                out.append(f"<{tag}{attributes}>{piece}</{tag}>")
            elif kind != "hidden":
                out.append(piece)
            i = j
        return "".join(out)

    def last_visible(self, start: int, end: int) -> int:
        """The end of text[start:end] without its trailing whitespace and hidden markers (start if nothing is left)."""
        while end > start and (self.text[end - 1].isspace() or self.kind[end - 1] == "hidden"):
            end -= 1
        return end


_BOLD = re.compile(r"\*\*(?=\S)([^\n]*?\S)\*\*")
_TAGS = {
    "code": ("code", ' class="sr-prov-code"'),
    "icode": ("code", ' class="sr-prov-code sr-prov-inline"'),
    "bold": ("strong", ""),
}


_WORD_TAIL = "".join(chr(c) for c in range(128) if chr(c).isalnum()) + "_-."  # how a word goes on (ASCII)


# The chat renders messages as markdown: a blank line ends an HTML block, and then a code fence
# in the answer turned the provenance marks inside it into literal "<span ...>" text.
_MARKDOWN_INERT = str.maketrans({"`": "&#96;", "*": "&#42;", "_": "&#95;", "~": "&#126;", "\n": "<br>"})


def inert_html(text: str) -> str:
    """`text` escaped for HTML, on one line, with nothing a markdown renderer would act on."""
    return html.escape(text).translate(_MARKDOWN_INERT)


def grounding_html(
    items: Sequence[GroundingItem],
    invalid: Sequence[int] = (),
    misquoted: Sequence[Quote] = (),
    recitations: Sequence[Recitation] = (),
    borrowed_from_example: Sequence[tuple[str, str]] = (),
    spliced: Sequence[Splice] = (),
    left_out_sentences: Sequence[tuple[str, str]] = (),
    said_before: Sequence[str] = (),
    miscompared: Sequence[Miscomparison] = (),
    told_of_yours: Sequence[ExampleFact] = (),
    cut: CutCode | None = None,
    misplaced_settings: Sequence[MisplacedSetting] = (),
    unlisted: Sequence[UnlistedValue] = (),
) -> str:
    """Warnings for commands, options, paths, code and specifics (names, numbers...) in no passage, and bad [n]."""
    lines = [f"<li>{cut_command(cut, _code_html)}</li>"] if cut else []
    lines += [
        f"<li><code>{html.escape(item.text)}</code> ({item.kind}) — <b>not found in the sources</b>"
        + why_not_found(item, _code_html)
        + (f"; nearest in [{item.nearest_source}]: <code>{html.escape(item.nearest)}</code>" if item.nearest else "")
        + "</li>"
        for item in items
        if not item.found
    ]
    lines += [f"<li>the answer cites [{n}], which is not among the sources</li>" for n in invalid]
    lines += [f"<li>{example_kept(item, _code_html)}</li>" for item in items if item.found and item.examples]
    lines += [f"<li>{inert_html(borrowed(sentence, word))}</li>" for sentence, word in borrowed_from_example]
    lines += [f"<li>{inert_html(splice(one))}</li>" for one in spliced]
    lines += [f"<li>{inert_html(miscomparison(wrong))}</li>" for wrong in miscompared]
    lines += [f"<li>{inert_html(example_fact(told))}</li>" for told in told_of_yours]
    lines += [f"<li>{misplaced(setting, _code_html, inert_html)}</li>" for setting in misplaced_settings]
    lines += [f"<li>{unlisted_value(value, _code_html, inert_html)}</li>" for value in unlisted]
    found = sum(item.found for item in items)
    note = (
        f'<div class="sr-ok">✓ {found} command/path/code/specific item(s) found in the sources</div>' if found else ""
    )
    note += "".join(
        f'<div class="sr-ok">↳ {adapted(item, _code_html)}</div>' for item in items if item.found and item.adapted
    )
    note += "".join(f'<div class="sr-ok">↳ {run_under_tool(item, _code_html)}</div>' for item in items if item.tool)
    note += "".join(f'<div class="sr-ok">↳ {assembled(item, _code_html)}</div>' for item in items if item.assembled)
    note += "".join(f'<div class="sr-ok">↳ {inert_html(recitation(recited))}</div>' for recited in recitations)
    note += "".join(f'<div class="sr-ok">↳ {inert_html(left_out(*pair))}</div>' for pair in left_out_sentences)
    note += f'<div class="sr-ok">↳ {inert_html(said_earlier(said_before))}</div>' if said_before else ""
    note += "".join(
        f'<div class="sr-ok">↳ {misattribution(item, _code_html)}</div>' for item in items if item.misattributed
    )
    note += "".join(f'<div class="sr-ok">↳ {inert_html(misquotation(quote))}</div>' for quote in misquoted)
    if not lines:
        return note
    return (
        '<div class="sr-warn"><div class="sr-h">⚠ Check before running or acting on it</div>'
        f"<ul>{''.join(lines)}</ul></div>{note}"
    )


def definitions_html(definitions: Sequence[Definition]) -> str:
    """What the sources say the answer's options and terms mean: a real option used for the wrong purpose
    shows here (definitions.py); above them, where the question's values fall in the sources' thresholds
    (thresholds.py)."""
    blocks = [
        ("Your values against the sources' thresholds", [d for d in definitions if d.value]),
        ("What the sources say these terms mean", [d for d in definitions if not d.value]),
    ]
    return "".join(
        f'<div class="sr-defs"><div class="sr-h">{heading}</div><ul>'
        + "".join(f"<li>{definition(defined, _code_html, inert_html)}</li>" for defined in shown)
        + "</ul></div>"
        for heading, shown in blocks
        if shown
    )


def _code_html(text: str) -> str:
    return f"<code>{html.escape(text)}</code>"


def sources_html(sources: Sequence[dict[str, Any]]) -> str:
    if not sources:
        return '<div class="sr-sources"><div class="sr-h">Sources</div>none</div>'
    paths = shown_paths(sources)
    rows = "".join(source_row(s, paths[s["number"]]) for s in sources)
    return f'<div class="sr-sources"><div class="sr-h">Sources</div>{rows}</div>'


def source_row(source: dict[str, Any], path: str) -> str:
    """One source, its `path` as shown (summary.shown_paths) and the full one on hover."""
    n = source["number"]
    heading = source_heading(source, html.escape)
    score = f" · score {source['score']:.3f}" if source.get("score") is not None else ""
    marks = source_marks(source)
    badge = f' <span class="sr-badge">{", ".join(marks)}</span>' if marks else ""
    title = html.escape(source.get("title") or source["path"])
    return (
        f'<details class="sr-source"><summary><span class="prov prov-c{n % PALETTE}">[{n}]</span> '
        f'<b>{title}</b>{heading} <span class="sr-path" title="{html.escape(source["path"])}">'
        f"{html.escape(path)}{score}</span>{badge}"
        f'</summary><pre class="sr-chunk">{pre_text(source.get("text", ""))}</pre></details>'
    )


def pre_text(text: str) -> str:
    """`text` for a <pre> inside the chat's markdown: escaped, its line breaks as `&#10;`.

    A blank line ends an HTML block in markdown: a chunk with one (a man page's definition list,
    whose entries the reader separates by blank lines since session 24) broke out of its
    <details>, and the chat lost a source row below it. In a <pre> the entity still breaks the line."""
    return html.escape(text).replace("\n", "&#10;")


def stats_html(final: Final) -> str:
    """The stats line (summary.py), or for a gated answer the gate's reason."""
    return f'<div class="sr-stats">{html.escape(" · ".join(stats_parts(final)))}</div>'
