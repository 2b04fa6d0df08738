"""Citation markers, provenance segments and the grounding check on handwritten answers."""

from app.copilot import Passage
from app.copilot.citations import build_citations, cited_numbers, provenance_segments
from app.copilot.grounding import check_grounding

PASSAGES = [
    "Reboot a node when idle with scontrol reboot ASAP nextstate=RESUME c042.",
    "The configuration lives in /etc/slurm/slurm.conf; check it with `slurmd -C`.",
]


def test_markers_in_order_of_first_use_and_invalid_ones_named():
    answer = "Drain it [2], then reboot [1][2]. See also [1, 3] and [7]."
    assert cited_numbers(answer) == [2, 1, 3, 7]
    passages = [Passage(1, "a", "a.md"), Passage(2, "b", "b.md"), Passage(3, "c", "c.md")]
    citations = build_citations(answer, [], [], passages, lambda ids: "")
    assert citations.invalid == [7] and citations.valid == [2, 1, 3]


def test_segments_follow_the_token_origins():
    tokens = list("abcdef")
    origins = ["target", "passage:2", "passage:2", "model", "passage:1", "passage:1"]
    segments = provenance_segments("abcdef", tokens, origins, lambda ids: "".join(ids))
    assert [(s.text, s.passage) for s in segments] == [("a", None), ("bc", 2), ("d", None), ("ef", 1)]


def test_invented_options_and_commands_are_flagged_and_quoted_ones_found():
    answer = (
        "Run `scontrol reboot ASAP nextstate=RESUME c042` [1].\n"
        "Or:\n```bash\n$ scontrol reboot --reboot --keep-partinfo --node c042\n```\n"
        "The file is /etc/slurm/slurm.conf and `slurmd -C` prints the node's hardware.\n"
        "kubectl drain c042 --ignore-daemonsets\n"
    )
    items = {item.text: item for item in check_grounding(answer, PASSAGES)}
    assert items["scontrol reboot ASAP nextstate=RESUME c042"].found
    assert items["slurmd -C"].found and items["/etc/slurm/slurm.conf"].found
    invented = items["scontrol reboot --reboot --keep-partinfo --node c042"]
    assert not invented.found and invented.kind == "code"
    for option in ("--reboot", "--keep-partinfo", "--node", "--ignore-daemonsets"):
        assert items[option].kind == "option" and not items[option].found
    assert items["kubectl drain c042 --ignore-daemonsets"].kind == "command"
    assert not items["kubectl drain c042 --ignore-daemonsets"].found


def test_whitespace_is_normalised_but_case_is_not():
    items = check_grounding("Use `scontrol   reboot ASAP`, not `Scontrol reboot ASAP`.", PASSAGES)
    assert [(i.text, i.found) for i in items] == [("scontrol reboot ASAP", True), ("Scontrol reboot ASAP", False)]


def test_prose_is_not_mistaken_for_commands():
    assert check_grounding("Check the node state first. Then resume it when it is idle.", PASSAGES) == []
