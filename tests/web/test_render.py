"""What the chat shows for an answer: provenance marks with a legend, grounding warnings, sources, stats."""

from app.copilot import GroundingItem, Segment
from app.web import render

SOURCES = [
    {"number": 1, "title": "Slurm controller", "heading": "Restart", "path": "runbooks/slurm.md", "score": 0.5,
     "cited": True, "copied_tokens": 12, "text": "Restart with systemctl restart slurmctld <now>."},
    {"number": 2, "title": "", "heading": "", "path": "munge.md", "score": None, "cited": False,
     "copied_tokens": 0, "text": "Munge keys"},
]  # fmt: skip


def test_copied_spans_are_marked_with_their_source_number_and_a_legend():
    segments = [Segment("Run "), Segment("systemctl restart", 1), Segment(" now.")]
    html = render.provenance_html(segments, SOURCES)
    assert 'class="prov prov-c1"' in html and 'systemctl restart<sup class="prov-n">1</sup></span>' in html
    assert "Copied verbatim from source" in html and "Slurm controller" in html
    assert "nothing was copied" in render.provenance_html([Segment("all mine")], SOURCES)


def test_a_copy_that_stops_inside_a_word_gets_its_mark_after_the_word():
    segments = [Segment("scontrol update Node"), Segment("Name=adev1", 1), Segment("3 Reason=x and "), Segment("-l", 1)]
    html = render.provenance_html(segments, SOURCES)
    assert 'Name=adev1</span>3<sup class="prov-n">1</sup> Reason=x and ' in html  # not "adev1^1 3"
    assert html.count('<sup class="prov-n">1</sup>') == 2 and '-l<sup class="prov-n">1</sup></span>' in html


def test_pieces_of_one_copy_merge_only_while_the_text_stays_verbatim():
    passage = "Restart with systemctl restart slurmctld now."
    pieces = [Segment("Restart with sys", 1), Segment("t"), Segment("emctl", 1), Segment(" and then", None)]
    merged = render.merge_verbatim(pieces, {1: passage})
    assert merged == [Segment("Restart with systemctl", 1), Segment(" and then")]


def test_a_copy_under_ten_characters_after_merging_reads_as_the_models_own_text():
    passage = "Limit the number of tasks of a job array to 4 with --array=0-15%4."
    pieces = [Segment("Set "), Segment("4", 1), Segment(" tasks with "), Segment("--array=0-15", 1), Segment("%4")]
    merged = render.merge_verbatim(pieces, {1: passage})
    assert merged == [Segment("Set 4 tasks with "), Segment("--array=0-15%4", 1)]


def test_ungrounded_items_are_flagged_not_found_and_html_is_escaped():
    items = [GroundingItem("scontrol --force<x>", "option", False), GroundingItem("/etc/munge", "path", True)]
    html = render.grounding_html(items, invalid=[7])
    assert "not found in the sources" in html and "scontrol --force&lt;x&gt;" in html
    assert "cites [7]" in html and "1 command/path/code/specific item(s) found" in html
    assert render.grounding_html([GroundingItem("/etc/munge", "path", True)]).count("not found") == 0
    adapted = GroundingItem("srun --gpus-per-node=volta:2", "code", True, adapted=True)
    shown = render.grounding_html([adapted])
    assert "1 command/path/code/specific item(s) found" in shown
    assert "<code>srun --gpus-per-node=volta:2</code> is a source's code with your own values" in shown
    pointer = GroundingItem("scontrol update State=IDLE", "code", False, "scontrol update State=<RESUME>", 2)
    assert "; nearest in [2]: <code>scontrol update State=&lt;RESUME&gt;</code>" in render.grounding_html([pointer])
    elsewhere = GroundingItem("MaxJobs<4>", "code", True, holders=(3,), cited=(1, 4))
    assert "<code>MaxJobs&lt;4&gt;</code> is in [3], not in [1], [4] that its sentence cites" in render.grounding_html(
        [elsewhere]
    )
    assert "its sentence cites" not in render.grounding_html([GroundingItem("MaxJobs", "code", True, holders=(3,))])


def test_sources_show_title_heading_path_score_and_the_chunk_on_expand():
    html = render.sources_html(SOURCES)
    assert "<details" in html and "Slurm controller" in html and "› Restart" in html
    assert "runbooks/slurm.md · score 0.500" in html and "cited, 12 tokens copied" in html
    assert "&lt;now&gt;" in html and "munge.md" in html
    entry = render.sources_html([{**SOURCES[0], "entry": "reboot [ASAP] {ALL|<NodeList>}"}])
    assert "<b>Slurm controller</b> › Restart › reboot [ASAP] {ALL|&lt;NodeList&gt;} <span" in entry


def test_status_messages_carry_gradio_thought_metadata():
    pending = render.status_message("searching…", ["0.0 s · searching"], pending=True)
    assert pending["metadata"] == {"title": "searching…", "status": "pending"}
    done = render.status_message("read 3 passages", [], pending=False, duration=1.26)
    assert done["metadata"]["status"] == "done" and done["metadata"]["duration"] == 1.3


def test_an_open_code_fence_is_closed_so_the_page_below_renders():
    assert render.close_fences("```bash\nsinfo -R") == "```bash\nsinfo -R\n```"
    assert render.answer_message("", "stopped")["content"] == "*stopped*"


def test_a_placeholder_in_the_answers_prose_is_text_not_an_html_element():
    """`"ping <address>"` showed as "ping", a line break and the rest: markdown passed `<address>` through as HTML."""
    from markdown_it import MarkdownIt

    answer = 'Check with "ping <address>", then `srun --begin=<time>`:\n\n```\nsbatch --begin=<time> job.sh\n```\n'
    shown = MarkdownIt("commonmark").render(render.answer_message(answer)["content"])
    assert "ping &lt;address&gt;" in shown and "<address>" not in shown
    assert "<code>srun --begin=&lt;time&gt;</code>" in shown  # code as it was written, once escaped, not twice
    assert "sbatch --begin=&lt;time&gt; job.sh" in shown and "&amp;lt;" not in shown


def test_a_link_to_the_sources_own_chapter_is_text_and_a_web_link_stays_a_link():
    """Icinga's "[troubleshooting](15-troubleshooting.md#troubleshooting)", quoted in an answer, opened the chat
    server's own address (not found) in a new tab."""
    from markdown_it import MarkdownIt

    answer = (
        "Read the [troubleshooting](15-troubleshooting.md#troubleshooting) chapter, [the API](#api) and "
        "[Icinga's site](https://icinga.com/docs/).\n\n```\n[ -f x ] && echo [a](b.md)\n```\n"
    )
    shown = MarkdownIt("commonmark").render(render.answer_message(answer)["content"])
    assert "Read the troubleshooting chapter, the API and" in shown
    assert '<a href="https://icinga.com/docs/">Icinga\'s site</a>' in shown and shown.count("<a ") == 1
    assert "[ -f x ] &amp;&amp; echo [a](b.md)" in shown  # code as written


def test_provenance_marks_inside_a_code_fence_stay_markup_when_the_chat_renders_markdown():
    """A copied span inside a fenced command used to show as literal '<span class=...>' text."""
    from markdown_it import MarkdownIt

    segments = [
        Segment("[1] Resume it:\n\n```bash\nscontrol update"),
        Segment(" NodeName=c042 State=RESUME", 1),
        Segment("\n```\n\nThen check `sinfo -R` and *wait*."),
    ]
    rendered = MarkdownIt("commonmark", {"html": True}).render(render.provenance_html(segments, SOURCES))
    assert "&lt;span" not in rendered and "<code>" not in rendered and "<em>" not in rendered
    assert (
        '<span class="prov prov-c1" title="copied verbatim from source [1]"><code class="sr-prov-code"> NodeName=c042 '
        'State=RESUME</code><sup class="prov-n">1</sup></span>'
    ) in rendered
    # the fence lines are left out and the fenced line is shown as code
    assert "&#96;&#96;&#96;" not in rendered and '<code class="sr-prov-code">scontrol update</code>' in rendered
    # inline code shows as code, without its backticks; a single * stays as written (a glob more often)
    assert 'Then check <code class="sr-prov-code sr-prov-inline">sinfo -R</code> and &#42;wait&#42;.' in rendered


def test_provenance_shows_a_relative_link_as_its_text_as_the_answer_does():
    segments = [
        Segment("Read the "),
        Segment("[troubleshooting](15-troubleshooting.md#troubleshooting) chapter", 1),
        Segment(" and [the site](https://icinga.com/) or `[a](b.md)`."),
    ]
    html = render.provenance_html(segments, SOURCES)
    copied = '<span class="prov prov-c1" title="copied verbatim from source [1]">troubleshooting chapter<sup'
    assert f"Read the {copied}" in html
    assert "15-troubleshooting.md" not in html
    assert "and [the site](https://icinga.com/) or" in html  # a web link is shown as written, as all text here
    assert '<code class="sr-prov-code sr-prov-inline">[a](b.md)</code>' in html  # inline code as written


def test_bold_shows_as_bold_not_as_asterisks_also_across_a_copy():
    """Seen in the chat: runbook steps copied as '2. **Page the On-call Site Administrator (extension 4111).**'."""
    segments = [Segment("2. **Page the "), Segment("On-call Site Administrator (extension 4111).** Now.", 1)]
    html = render.provenance_html(segments, SOURCES)
    assert "&#42;" not in html and "**" not in html
    assert html.count("<strong>") == 2 and "2. <strong>Page the </strong>" in html
    assert '<strong>On-call Site Administrator (extension 4111).</strong> Now.<sup class="prov-n">1</sup>' in html
    # an unpaired marker, or markers in inline code, stay as written
    lone = render.provenance_html([Segment("**start the shutdown", 1), Segment(" and `a**b**`")], SOURCES)
    assert "&#42;&#42;start the shutdown" in lone and "a&#42;&#42;b&#42;&#42;" in lone and "<strong>" not in lone


def test_double_backtick_code_shows_as_one_code_span_without_backticks():
    """Seen in the chat on awscli's rst topics: 'Set the ``multipart_chunksize`` to a larger value, such as
    ``16MB``' showed a stray backtick and the prose between the spans as code."""
    segments = [Segment("[3] Set the ``multipart_chunksize`` to a larger value, such as ``16MB``.", 3)]
    html = render.provenance_html(segments, SOURCES)
    assert "&#96;" not in html
    assert (
        '<code class="sr-prov-code sr-prov-inline">multipart&#95;chunksize</code> to a larger value, such as '
        '<code class="sr-prov-code sr-prov-inline">16MB</code>.'
    ) in html


def test_a_copy_that_ends_a_code_line_gets_its_mark_on_that_line_not_before_the_closing_fence():
    """Seen in the chat: 'scontrol update NodeName=adev13 State=DRAIN' then, on the next line, '3```'."""
    segments = [Segment("[3] Drain it:\n\n```\n"), Segment("scontrol update State=DRAIN\n", 3), Segment("```\nDone.")]
    html = render.provenance_html(segments, SOURCES)
    code = '<code class="sr-prov-code">scontrol update State=DRAIN</code>'
    assert f'{code}<sup class="prov-n">3</sup></span><code class="sr-prov-code"><br></code>Done.' in html


def test_a_source_whose_text_has_blank_lines_stays_inside_its_row():
    from app.copilot.events import Passage
    from app.copilot.pipeline import final_from_text

    entries = "- SlurmctldDebug\n- The level of detail.\n\n- SlurmctldSyslogDebug\n- Events to <syslog>."
    passages = [Passage(n, entries, "/x/slurm.conf.html", "slurm.conf", "PARAMETERS", 0.04) for n in (1, 2, 3)]
    shown = render.details_html(final_from_text("q?", passages, "[2] The level of detail.", "eos"))
    assert "\n\n" not in shown  # a blank line would end the HTML block: the markdown after it loses the rows
    assert shown.count('<details class="sr-source">') == 3 and shown.count("</details>") == 3
    assert "- The level of detail.&#10;&#10;- SlurmctldSyslogDebug&#10;- Events to &lt;syslog&gt;." in shown


def test_a_code_span_cut_by_a_soft_wrap_shows_as_one_code_span_without_backticks():
    """Seen in the chat on the runbooks: "Check `cvmfs_talk -i atlas.cern.ch" / "host info` to see" showed both
    backticks, the span read line by line."""
    segments = [Segment("Check `cvmfs_talk -i atlas.cern.ch\nhost info` to see which one it is using.", 1)]
    html = render.provenance_html(segments, SOURCES)
    assert "&#96;" not in html and "`" not in html
    assert '<code class="sr-prov-code sr-prov-inline">cvmfs&#95;talk -i atlas.cern.ch host info</code>' in html


def test_bold_around_inline_code_is_bold_with_the_code_as_code():
    """Seen in the chat on the runbooks: '**Probe fails with `failed to download` or timeouts.**' showed its
    asterisks, the bold taken for literal because it held a code span."""
    segments = [Segment("**Probe fails with `failed to download` or timeouts.** Check.", 1)]
    html = render.provenance_html(segments, SOURCES)
    assert "&#42;" not in html and "&#96;" not in html
    assert (
        '<strong>Probe fails with </strong><code class="sr-prov-code sr-prov-inline">failed to download</code>'
        "<strong> or timeouts.</strong> Check."
    ) in html
