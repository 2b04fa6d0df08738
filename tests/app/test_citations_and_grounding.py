"""Citation markers, provenance segments and the grounding check on handwritten answers."""

from app.copilot import Passage
from app.copilot.citations import build_citations, provenance_segments
from app.copilot.grounding import GroundingSources, check_grounding, pieces
from app.copilot.markers import cited_numbers
from app.copilot.specifics import check_specifics
from app.copilot.withhold import withheld_notice

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


def test_a_hostlist_quoted_from_a_log_is_no_citation():
    answer = "Look for lines like this [4]:\n```\nerror: Nodes node[00,03,25] not responding\n```\n"
    answer += "then c[1-2] and arr[3]."
    passages = [Passage(n, "t", "t.md") for n in range(1, 7)]
    citations = build_citations(answer, [], [], passages, lambda ids: "")
    assert citations.markers == [4] and citations.invalid == []
    assert cited_numbers("Drain it.[2] Then [3]\n[5] resume") == [2, 3, 5]  # after a full stop or a line break


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


def test_a_command_built_from_one_sources_words_is_found_but_not_one_mixing_sources_or_inventing():
    job_array = (
        "$ sbatch --array=0-31 -N1 tmp\nA maximum number of simultaneously running tasks may be given with a "
        '"%" separator. For example "--array=0-15%4" will limit them to 4.'
    )
    passages = [job_array, PASSAGES[0]]
    answer = (
        "```\nsbatch --array=0-15%4 -N1 tmp\n```\n"  # the example's options on the page's command line
        "```\nsbatch --array=0-15%4 --reboot tmp\n```\n"  # an option no source has
        "```\nscontrol reboot --array=0-15%4\n```\n"  # words of two different sources
        "`sbatch`\n"  # one word: verbatim only, as before
    )
    items = {item.text: item.found for item in check_grounding(answer, passages)}
    assert items["sbatch --array=0-15%4 -N1 tmp"]
    assert not items["sbatch --array=0-15%4 --reboot tmp"] and not items["--reboot"]
    assert not items["scontrol reboot --array=0-15%4"]
    assert items["sbatch"]


def test_a_quoted_reason_and_a_lone_name_from_the_question_are_the_users_values():
    # session 44, fresh6 s6-01: the right drain command and the node's name were flagged "not found", and the
    # nearest source command shown beside the flag was `State=DOWN`, the one that kills the running jobs
    passages = [
        "Set the node's state to DRAIN until all jobs terminate: scontrol update NodeName=name State=DOWN "
        "Reason=hung_completing",
        "Reason=<reason> Identify the reason the node is in a DOWN or DRAINED state.",
    ]
    question = "Node cn117 is throwing ECC memory warnings. How do I stop new jobs landing on it?"
    answer = (
        '```\nscontrol update NodeName=cn117 State=DRAIN Reason="ECC memory warnings"\n```\n'
        "This keeps new jobs off `cn117`.\n"
        '```\nscontrol update NodeName=cn117 State=DRAIN Reason="flaky power supply"\n```\n'  # words no one wrote
        "`cn118` `ECC` `--cn117`\n"  # another node, a plain word, an option: never the user's
    )
    items = {item.text: item for item in check_grounding(answer, passages, question)}
    drain = 'scontrol update NodeName=cn117 State=DRAIN Reason="ECC memory warnings"'
    assert items[drain].found and items[drain].adapted and items[drain].unasked == ()
    assert items["cn117"].found and not items["cn117"].adapted  # the user's own name: no note to check it
    assert not items['scontrol update NodeName=cn117 State=DRAIN Reason="flaky power supply"'].found
    for text in ("cn118", "ECC", "--cn117"):
        assert not items[text].found, text
    # the decoding filter may write the node's name in a code span, and a quoted reason is closed whole
    sources = GroundingSources(passages, question)
    assert all(sources.may_complete("cn117"[:end]) for end in range(1, 6)) and sources.holds_whole("code", "cn117")
    assert sources.holds_whole("code", drain)
    # the quoted words stay one value before a closing comma or period too; a lone quoted word is a value as before
    assert ("value", "ECC memory warnings") in pieces('scontrol update Reason="ECC memory warnings", then')
    assert pieces("scontrol update Reason='hung'") == [("name", "scontrol"), ("arg", "update"), ("name", "Reason"),
                                                       ("value", "hung")]  # fmt: skip


def test_a_word_the_question_quotes_is_the_users_name_and_an_optional_value_names_its_option():
    # fresh10 (session 56): `squeue -q long` for "the 'long' QOS" and `salloc --nice=100` from a man page's
    # `--nice[=adjustment]` were flagged "not found", though each was its source's option with the user's value
    passages = [
        "squeue › OPTIONS\n- -q, --qos=<qos_list> - Specify the qos(s) of the jobs or steps to view.",
        "salloc › OPTIONS\n- --nice[=adjustment]\n- Run the job with an adjusted scheduling priority within Slurm.",
    ]
    question = "How do I list the jobs under the 'long' QOS, and lower my job's priority?"
    answer = "`squeue -q long`, `salloc --nice=100`; not `squeue -q short`, `squeue -q priority`, `salloc --nicer=5`."
    found = {item.text: item.found for item in check_grounding(answer, passages, question)}
    assert found["squeue -q long"] and found["salloc --nice=100"]
    # a word no one quoted, a plain word of the question, an option no page has: still the model's, still flagged
    assert not any(found[text] for text in ("squeue -q short", "squeue -q priority", "salloc --nicer=5"))
    sources = GroundingSources(passages, question)
    assert all(sources.may_complete("squeue -q long"[:end]) for end in range(1, 15))
    assert pieces("--nice[=adjustment]") == [("name", "--nice"), ("value", "adjustment")]
    # an apostrophe inside or after a word quotes nothing
    assert not GroundingSources(passages, "The user's jobs' QOS isn't long").holds_whole("code", "squeue -q long")


def test_a_date_with_slashes_or_glued_to_a_short_option_is_a_value_of_the_users():
    # fresh6 `s6-05` (session 44): "last month" as start=10/01/2023 end=10/31/2023 in the guide's sreport line
    # was flagged "not found", where the model's chosen dates are what to check
    passages = [
        "Report usage: sreport cluster AccountUtilizationByUser cluster=zeus accounts=lc start=2/16/09 end=2/23/09",
        "Jobs of a window: sacct -S2014-07-03-11:40 -E2014-07-03-12:00 -X -ojobid,start,end,state",
    ]
    answer = (
        "`sreport cluster AccountUtilizationByUser start=10/01/2023 end=10/31/2023`\n"
        "`sacct -S2014-07-03-00:00 -E2014-07-03-06:00 -X`\n"
        "`sacct -S2014-07-03-00:00 -X -ojobid,exit_code`\n"  # a field no source lists
        "`sreport cluster Utilization start=10/01/2023`\n"  # a report no source names
    )
    items = {item.text: item for item in check_grounding(answer, passages, "Usage of each account last month?")}
    report = items["sreport cluster AccountUtilizationByUser start=10/01/2023 end=10/31/2023"]
    assert report.found and report.adapted and report.unasked == ("10/01/2023", "10/31/2023")
    window = items["sacct -S2014-07-03-00:00 -E2014-07-03-06:00 -X"]
    assert window.found and window.adapted
    assert not items["sacct -S2014-07-03-00:00 -X -ojobid,exit_code"].found
    assert not items["sreport cluster Utilization start=10/01/2023"].found
    sources = GroundingSources(passages, "")
    line = "sreport cluster AccountUtilizationByUser start=10/01/2023"
    assert all(sources.may_complete(line[:end]) for end in range(len(line) - 10, len(line) + 1))


def test_a_variable_or_setting_named_in_prose_that_no_source_has_is_flagged():
    # fresh16 (session 60): "Which environment variable tells a batch script the name of its node?" got a bare
    # "[3] SLURM_NODE_NAME", which no Slurm page has; with no code in the answer, nothing had been flagged
    sources = ["- SLURMD_NODENAME\n- Name of the node running the job script.", "Set MaxJobCount in slurm.conf."]
    answer = "[1] SLURM_NODE_NAME holds it; MaxJobCount and SLURMD_NODENAME are the sources' own. Ask about NodeName."
    items = {item.text: (item.kind, item.found) for item in check_grounding(answer, sources, "What is NodeName?")}
    assert items == {"SLURM_NODE_NAME": ("identifier", False)}  # the question's NodeName is the user's own word
    assert (
        withheld_notice(check_grounding("[1] Our variable is SLURM_NODE_NAME.", sources, "What is our variable?")) == ""
    )


def test_a_job_arrays_task_is_a_value_of_the_users():
    # fresh15 (session 60): "Job 5000 is a job array. How do I cancel only its task number 7?" got the right
    # `scancel 5000_7`, flagged as found in no source
    passages = ["Cancel one task of an array: scancel 1234_4. Or a range of them: scancel 1234_[1-3]."]
    answer = "`scancel 5000_7`, or `scancel 5000_[7-9]`; not `scancel --task 7`"
    items = {item.text: item for item in check_grounding(answer, passages, "How do I cancel task 7 of job 5000?")}
    assert items["scancel 5000_7"].found and items["scancel 5000_7"].adapted
    assert items["scancel 5000_[7-9]"].found
    assert not items["scancel --task 7"].found
    sources = GroundingSources(passages, "")
    assert all(sources.may_complete("scancel 5000_7"[:end]) for end in range(1, 15))


def test_the_users_own_values_in_a_sources_command_are_found_and_marked_adapted():
    passages = [
        "Request GPUs with srun --gpus-per-node=volta:3. "
        "Drain a node: scontrol update NodeName=name State=DRAIN Reason=text.",
        "Jobs may depend on others: sbatch --depend=afterok:123 my.job",
        "scontrol create reservation StartTime=2009-02-06T16:00:00 Duration=120 Users=root Nodes=ALL",
    ]
    question = "A node c042 needs a firmware update; how do I get 2 GPUs?"
    answer = (
        "```\nsrun --gpus-per-node=volta:2\n```\n"  # a number of the user's in a source's option
        "```\nscontrol update NodeName=c042 State=DRAIN Reason=firmware_update\n```\n"  # the question's values
        "```\nscontrol update NodeName=<node> State=DRAIN\n```\n"  # a placeholder
        "```\nscontrol update NodeName=c042 State=REBOOT\n```\n"  # a keyword no source has
        "```\nsbatch --afterok=123 my.job\n```\n"  # an option no source has
        "```\nscontrol update Firmware=c042\n```\n"  # the question names values, never keys
        "`--gpus-per-node=volta:2`\n"
        "`scontrol firmware`\n"  # a bare word from the question is no subcommand
        "`scontrol create reservation StartTime=2024-05-01T9:30:00 Duration=120 Users=root Nodes=ALL`\n"  # a time
        "`scontrol create reservation StartTime=2024-05-01T9:30:00 Duration=120 Users=root Nodes=ALL Flags=X`\n"
    )
    items = {item.text: item for item in check_grounding(answer, passages, question)}
    for text in (
        "srun --gpus-per-node=volta:2",
        "scontrol update NodeName=c042 State=DRAIN Reason=firmware_update",
        "scontrol update NodeName=<node> State=DRAIN",
        "--gpus-per-node=volta:2",
        "scontrol create reservation StartTime=2024-05-01T9:30:00 Duration=120 Users=root Nodes=ALL",
    ):
        assert items[text].found and items[text].adapted, text
    # which of their values the question does not give either: the model chose the reservation's date
    assert items["srun --gpus-per-node=volta:2"].unasked == ()  # "2 GPUs"
    assert items["scontrol update NodeName=<node> State=DRAIN"].unasked == ()  # a placeholder is the user's
    assert items["scontrol update NodeName=c042 State=DRAIN Reason=firmware_update"].unasked == ()
    reservation = "scontrol create reservation StartTime=2024-05-01T9:30:00 Duration=120 Users=root Nodes=ALL"
    assert items[reservation].unasked == ("2024-05-01T9:30:00",)
    for text in (
        "scontrol update NodeName=c042 State=REBOOT",
        "sbatch --afterok=123 my.job",
        "--afterok=123",
        "scontrol update Firmware=c042",
        "scontrol firmware",
        "scontrol create reservation StartTime=2024-05-01T9:30:00 Duration=120 Users=root Nodes=ALL Flags=X",
    ):
        assert not items[text].found and not items[text].adapted, text
    # the decoding filter lets such a time be written: every prefix of it may still complete
    sources = GroundingSources(passages, question)
    line = "scontrol create reservation StartTime=2024-05-01T9:30:00"
    assert all(sources.may_complete(line[:end]) for end in range(len("scontrol create reservation "), len(line) + 1))
    verbatim = check_grounding("`sbatch --depend=afterok:123 my.job`", passages)
    assert verbatim[0].found and not verbatim[0].adapted


def test_a_value_the_answer_says_to_replace_is_a_placeholder_but_an_option_it_says_to_replace_is_not():
    # session 52, slurm-004: the right command, the source's `123` written as `job_id` and declared a slot by
    # "Replace `job_id` with ...", was flagged, as was the lone `JOBID` of "where `JOBID` is ..."
    passages = ["Jobs may depend on others: sbatch --depend=afterok:123 my.job", "Show a step: sstat -j 11"]
    answer = (
        "[1] Use `--depend=afterok:job_id`:\n\n```\nsbatch --depend=afterok:job_id my.job\n```\n\n"
        "Replace `job_id` with the ID of the first job. Run `sstat -j JOBID`, where `JOBID` is the job's ID.\n"
        "`sbatch --afterok=job_id my.job` `sbatch --depend=afterok:jobid my.job`\n"  # an invented option; no slot
        "Replace `--wait` with `--depend=afterok:123`.\n"  # an option said to be replaced stays a claim
    )
    items = {item.text: item for item in check_grounding(answer, passages, "How do I chain two jobs?")}
    for text in ("--depend=afterok:job_id", "sbatch --depend=afterok:job_id my.job", "sstat -j JOBID"):
        assert items[text].found and items[text].adapted and items[text].unasked == (), text
    assert "job_id" not in items and "JOBID" not in items  # lone declared slots, as a lone <job_id>
    for text in ("sbatch --afterok=job_id my.job", "sbatch --depend=afterok:jobid my.job", "--wait"):
        assert not items[text].found, text
    # without the declaration the same command is flagged
    bare = {item.text: item for item in check_grounding("`sbatch --depend=afterok:job_id my.job`", passages)}
    assert not bare["sbatch --depend=afterok:job_id my.job"].found


def test_a_comment_in_words_in_a_code_block_is_no_item_but_a_root_prompts_command_is():
    # session 52, slurm-035: three comment lines of a code block were flagged as invented commands
    passages = ["Add a user: # sacctmgr add user da DefaultAccount=test"]
    answer = (
        "```\n# Install the Slurm PAM module\n# For example, on a Debian-based system:\n"
        "sudo apt-get install slurm-pam\n# sacctmgr add user da DefaultAccount=test\n"
        "# sacctmgr add user da DefaultAccount=nope\n```"
    )
    items = {item.text: item for item in check_grounding(answer, passages)}
    assert not any(text.startswith(("# Install", "# For example")) for text in items)
    assert not items["sudo apt-get install slurm-pam"].found
    assert items["# sacctmgr add user da DefaultAccount=test"].found
    assert not items["# sacctmgr add user da DefaultAccount=nope"].found


def test_a_path_under_path_to_is_a_slot_not_a_file_the_sources_must_have():
    passages = ["Epilog: Fully qualified pathname of a script to execute on every node when a job ends."]
    answer = "Set `Epilog=/path/to/cleanup_script.sh` in slurm.conf, e.g. /path/to/cleanup.sh or /etc/slurm/epilog.sh."
    items = {item.text: item for item in check_grounding(answer, passages)}
    assert "/path/to/cleanup.sh" not in items and "/path/to/cleanup_script.sh" not in items
    assert not items["/etc/slurm/epilog.sh"].found  # a real-looking path no source has is still flagged


def test_a_sources_joined_placeholders_filled_with_the_questions_names_are_adapted_not_flagged():
    passages = ["disable server <backend>/<server>\nMark the server DOWN for maintenance.", "show table <name>"]
    question = "We need to patch web-07 in the api backend right now. How do I pull it out of the pool?"
    answer = (
        "```\ndisable server api/web-07\n```\n"  # both slots filled with the question's names
        "`disable server shop/web-09`\n"  # names the question never gave
        "`disable server api/web-07/x`\n"  # not the slot's shape
        "`enable server api/web-07`\n"  # a command no passage has
        "`show table api`\n"  # a lone <name> is no slot: a plain word of the question does not fill it
    )
    items = {item.text: item for item in check_grounding(answer, passages, question)}
    assert items["disable server api/web-07"].found and items["disable server api/web-07"].adapted
    others = ("disable server shop/web-09", "disable server api/web-07/x", "enable server api/web-07", "show table api")
    for text in others:
        assert not items[text].found, text


def test_a_clock_hour_with_am_or_pm_is_a_time_of_day():
    from app.copilot.specifics import check_specifics

    passages = ["Backups run nightly at 01:00; the maintenance window closes at 21:30."]
    answer = "[1] Reloads are allowed from 9 AM to 5 PM. Backups run at 1 AM and the window closes at 9:30 PM."
    found = {item.text: item.found for item in check_specifics(answer, passages) if item.kind == "time"}
    assert found == {"9 AM": False, "5 PM": False, "1 AM": True, "9:30 PM": True}


def test_a_setting_written_with_spaces_around_its_equals_sign_is_one_setting():
    items = check_grounding("```\nRebootProgram = /sbin/reboot\n```", ["RebootProgram=/sbin/reboot"])
    assert [(i.text, i.found) for i in items if i.kind == "code"] == [("RebootProgram = /sbin/reboot", True)]


def test_whitespace_is_normalised_but_case_is_not():
    items = check_grounding("Use `scontrol   reboot ASAP`, not `Scontrol reboot ASAP`.", PASSAGES)
    assert [(i.text, i.found) for i in items] == [("scontrol reboot ASAP", True), ("Scontrol reboot ASAP", False)]


def test_a_continued_shell_line_matches_the_command_on_one_line_or_split_as_in_the_source():
    source = "$ strigger --set --node --down \\\n      --program=/usr/sbin/notify\nThen wait."
    joined = check_grounding("```\nstrigger --set --node --down --program=/usr/sbin/notify\n```", [source])
    split = check_grounding("```\nstrigger --set --node --down \\\n  --program=/usr/sbin/notify\n```", [source])
    assert [(i.text, i.found) for i in joined if i.kind == "code"] == [
        ("strigger --set --node --down --program=/usr/sbin/notify", True)
    ]
    assert [(i.text, i.found) for i in split if i.kind == "code"] == [
        ("strigger --set --node --down", True),
        ("--program=/usr/sbin/notify", True),
    ]


def test_an_option_value_keeps_its_commas_but_not_a_trailing_one():
    items = check_grounding("Run sacct --format=JobID,MaxRSS, then compare --array, --gres=gpu:2,mem=1G.", ["x"])
    options = [i.text for i in items if i.kind == "option"]
    assert options == ["--format=JobID,MaxRSS", "--array", "--gres=gpu:2,mem=1G"]


def test_a_closing_fence_cut_short_by_the_length_limit_is_not_code():
    items = check_grounding("Run:\n```\nscontrol reboot ASAP nextstate=RESUME c042\n``", PASSAGES)
    assert [(i.text, i.found) for i in items] == [("scontrol reboot ASAP nextstate=RESUME c042", True)]


def test_prose_is_not_mistaken_for_commands():
    assert check_grounding("Check the node state first. Then resume it when it is idle.", PASSAGES) == []


SOURCES = [
    "Page the on-call team through the escalation matrix. Nodes reboot after 30 min of idle time.",
    "Mail slurm-admins@example.org or call +41 22 767 1111. The Slurm Workload Manager runs on head01.cluster.local.",
    "Docs: https://slurm.schedmd.com/sbatch.html. Jobs may use 2GB per core. Version 23.11.1 of 2024-01-15, 10.0.0.1.",
]


def specifics(answer, question=""):
    return {item.text: (item.kind, item.found) for item in check_grounding(answer, SOURCES, question)}


def test_an_invented_person_and_pager_number_are_flagged():
    items = specifics("The on-call Slurm administrator tonight is John Smith, pager 555-0134 [1].")
    assert items == {"John Smith": ("name", False), "555-0134": ("phone", False)}


def test_a_bare_pager_number_is_flagged_but_short_numbers_are_not():
    items = specifics("His pager number is 1234567890 [2]; job 65541 used 23.11.1 on 10.0.0.1.")
    assert {text: item for text, item in items.items() if item[0] != "version"} == {"1234567890": ("phone", False)}


def test_a_phone_shaped_job_id_or_task_range_is_a_number_flagged_but_not_withheld():
    answer = "Cancel job 12345678, then resubmit tasks 1000-2000 [1]. Or call the desk at 555-0134."
    items = specifics(answer)
    assert items == {"12345678": ("number", False), "1000-2000": ("number", False), "555-0134": ("phone", False)}
    assert specifics("Cancel job 12345678 [1].", "Why did job 12345678 fail?") == {"12345678": ("number", True)}
    assert withheld_notice(check_grounding("Cancel job 12345678 and tasks 1000-2000 [1].", SOURCES, "")) == ""
    # a setting's value (a dev answer's invented MaxJobId default) is a claim to check, not a contact
    setting = "[4] MaxJobId: the largest job ID. The default value is 1000000000."
    assert specifics(setting) == {"1000000000": ("number", False), "MaxJobId": ("identifier", False)}
    assert withheld_notice(check_grounding(setting, SOURCES, "")) == ""
    assert specifics("The maximum wait is over: call 5551234567 [1].")["5551234567"][0] == "phone"  # contact word


def test_contacts_and_hosts_are_found_only_when_a_source_has_them():
    items = specifics(
        "Mail slurm-admins@example.org, not ops@example.org. Call +41 22 767 1111 or +41 22 767 9999. "
        "See https://slurm.schedmd.com/sbatch.html on HEAD01.cluster.local, not node07.cluster.local."
    )
    assert items["slurm-admins@example.org"] == ("email", True) and items["ops@example.org"] == ("email", False)
    assert items["+41 22 767 1111"] == ("phone", True) and items["+41 22 767 9999"] == ("phone", False)
    assert items["https://slurm.schedmd.com/sbatch.html"] == ("url", True)
    assert items["HEAD01.cluster.local"] == ("host", True) and items["node07.cluster.local"] == ("host", False)
    assert "example.org" not in items and "slurm.schedmd.com" not in items  # parts of an email or URL: not twice


def test_quantities_match_across_unit_synonyms_and_spacing():
    items = specifics("Wait 30 minutes, not 45 minutes; give it 2 GB, not 4 GB, and keep 20% free.")
    assert items["30 minutes"] == ("quantity", True) and items["2 GB"] == ("quantity", True)
    assert items["45 minutes"] == ("quantity", False) and items["4 GB"] == ("quantity", False)
    assert items["20%"] == ("quantity", False)
    assert specifics("Use 12 GB, then 2 GB.") == {"12 GB": ("quantity", False), "2 GB": ("quantity", True)}


def test_a_time_of_day_is_checked_against_the_sources_times():
    passages = ["Create it with scontrol create reservation StartTime=2009-02-06T16:00:00 Duration=60."]
    # the worked example's hours given as a site's maintenance window (session 27)
    items = {i.text: (i.kind, i.found) for i in check_specifics("The window is from 01:00 to 03:00 [3].", passages)}
    assert items == {"01:00": ("time", False), "03:00": ("time", False)}
    # a date-time's time is the source's; 4:00 is 04:00; the question's own time is the user's
    answer = "It starts at 16:00, not 4:00, and the outage began at 02:10; lunch at 12:30 PM."
    sources = [*passages, "a job at 04:00 and one at 12:30PM"]
    items = {i.text: i.found for i in check_specifics(answer, sources, "it failed at 02:10")}
    assert items == {"16:00": True, "4:00": True, "02:10": True, "12:30 PM": True}  # the source's 12:30PM
    # neither a ratio, an address with its port, a command's time limit nor a bare hour is a time of day
    listed = check_specifics("A 3:1 ratio on 10.0.0.1:8080; run `sbatch --time=10:00 job.sh` at 9.", passages)
    assert [item.kind for item in listed] == ["version"]  # the address, as before


def test_a_value_given_to_a_setting_is_found_only_where_a_source_gives_that_setting_that_value():
    passages = [
        "- LimitFactor\n- A float that is factored into an association's limits.\n- MaxJobsAccruePerUser\n"
        "- The maximum number of pending jobs a user can have accruing age priority.",
        "MaxArraySize\nThe maximum job array task index value will be one less than MaxArraySize. "
        "The default value is 1001. KillWait\nThe default value is 30 seconds.",
    ]
    # site limits the passages describe without a value (fresh4 h-24), next to values a passage gives
    answer = (
        "[1] The limits are:\n- LimitFactor: 2\n- MaxJobsAccruePerUser: 50\n"
        "The MaxArraySize parameter is set to 1001 and KillWait is 30 seconds; set DefMemPerCPU=2048. "
        "The ArrayTaskId=1-100%2 field shows it; 2 GPUs: 4 nodes."
    )
    listed = check_specifics(answer, passages, "our jobs ask 2048 MB per CPU")
    items = {i.text: i.found for i in listed if i.kind == "setting"}
    assert items == {
        "LimitFactor: 2": False,
        "MaxJobsAccruePerUser: 50": False,
        "MaxArraySize parameter is set to 1001": True,
        "KillWait is 30": True,
        "DefMemPerCPU=2048": True,  # the question's own number
    }
    # a source's number elsewhere is not this setting's value
    assert not check_specifics("KillWait is 1001.", passages)[0].found


def test_the_question_counts_as_a_source_for_specifics():
    answer = "A job that ran 3 hours was killed; ask Jane Doe."
    assert specifics(answer)["3 hours"] == ("quantity", False)
    assert specifics(answer, "My job ran 3 hours and Jane Doe asked why")["3 hours"] == ("quantity", True)
    assert "Jane Doe" not in specifics(answer, "My job ran 3 hours and Jane Doe asked why")


def test_the_sources_own_terms_versions_dates_and_counts_are_not_flagged():
    answer = (
        "Restart Slurm with the Slurm Workload Manager tools. Version 23.11.1 of 2024-01-15 runs on 10.0.0.1 "
        "and 192.168.100.200. Request 2 GPUs with --array=0-499%10.\n```\ncall 555-9999\n```"
    )
    listed = {text: kind for text, kind in specifics(answer).items() if kind[0] not in ("option", "code")}
    # versions and addresses are listed, found when a source has them; nothing else here is a specific
    assert listed == {
        "23.11.1": ("version", True),
        "10.0.0.1": ("version", True),
        "192.168.100.200": ("version", False),
    }


def test_an_invented_version_is_flagged_but_a_bare_decimal_or_a_dotted_word_is_not():
    items = specifics("CUDA 12 needs driver 470.30.0 (see v23.11.1 or file.2.3 or 23.11.1.x). Use 1.5 of it.")
    assert items == {"470.30.0": ("version", False), "v23.11.1": ("version", True)}
    # two parts count after a word naming a version, in the same sentence only
    items = specifics("The driver version for CUDA 12 is 470.59. Use 0.5 of it.\nThen 2.5 more.")
    assert items == {"470.59": ("version", False)}


def test_an_item_not_found_points_to_the_closest_line_or_option_a_source_has():
    passages = [
        'Limit running tasks with a % separator: "--array=0-15%4". For example $ sbatch --array=0-31 -N1 tmp',
        "Put it back with scontrol update NodeName=adev13 State=RESUME Reason=fixed when done.",
    ]
    answer = (
        "```\nsbatch --array=0-31 --array-task-throttle=4 -N1 tmp\n```\n"
        "Then `scontrol update NodeName=adev13 State=IDLE`, or `--arrays=0-15%4`; `kubectl drain c042`."
    )
    items = {item.text: item for item in check_grounding(answer, passages, numbers=[3, 5])}
    throttle = items["sbatch --array=0-31 --array-task-throttle=4 -N1 tmp"]
    assert (throttle.found, throttle.nearest, throttle.nearest_source) == (False, "sbatch --array=0-31 -N1 tmp", 3)
    idle = items["scontrol update NodeName=adev13 State=IDLE"]
    assert (idle.nearest, idle.nearest_source) == ("scontrol update NodeName=adev13 State=RESUME", 5)
    assert (items["--arrays=0-15%4"].nearest, items["--arrays=0-15%4"].nearest_source) == ("--array=0-15%4", 3)
    quoted = check_grounding("```\nsrun -w `hosts.pl 4,1` -l hostname\n```", ["Try srun -w `hosts.pl 4,1` hostname."])
    assert quoted[0].nearest == "srun -w `hosts.pl 4,1` hostname"  # its backquoted part kept whole
    # nothing close: no pointer; and a found item never carries one
    assert items["kubectl drain c042"].nearest == "" and items["kubectl drain c042"].nearest_source is None
    assert items["--array=0-31"].found and items["--array=0-31"].nearest == ""


def test_an_option_points_only_to_an_option_of_its_own_name_or_family():
    """Compared whole, `--update` was "nearest" `--nodes` (seen in the chat): a pointer the wrong way."""
    passages = ["Give --nodes or --uid, --switches too. -A, --account=<account> Charge it. See --nodes=<minnodes>."]
    answer = "Use `--update`, `--path`, `--default-account=physics` and `--nodes-min=2`."
    items = {item.text: item for item in check_grounding(answer, passages)}
    assert items["--update"].nearest == "" and items["--path"].nearest == ""  # nothing of theirs in the sources
    assert (items["--default-account=physics"].nearest, items["--default-account=physics"].nearest_source) == (
        "--account=<account>",
        1,
    )
    assert items["--nodes-min=2"].nearest == "--nodes"


def test_a_misspelt_command_points_to_the_command_a_source_spells_right():
    passages = ["Run sshare -l (lowercase L) to view the columns.", "Add one: sacctmgr add user brian account=x; ls -l"]
    answer = "Use `ssha -l`, then `ssacctmgr add user brian account=x`, `sshare -a` and `lsx -l`."
    items = {item.text: item for item in check_grounding(answer, passages)}
    assert (items["ssha -l"].nearest, items["ssha -l"].nearest_source) == ("sshare -l", 1)
    assert items["ssacctmgr add user brian account=x"].nearest == "sacctmgr add user brian account=x"
    assert items["ssacctmgr add user brian account=x"].nearest_source == 2
    # a command the sources spell the same way is compared with its own lines only; a short name never fuzzily
    assert items["sshare -a"].nearest == "sshare -l" and items["lsx -l"].nearest == ""


def test_a_line_put_together_from_a_sources_words_is_found_and_noted_as_written_so_in_no_source():
    from app.copilot.pipeline import final_from_text
    from app.copilot.summary import check_notes
    from app.web.render import grounding_html

    passages = ["sdiag shows scheduling statistics, backfill cycle times included.", "Run scontrol show job 477."]
    answer = "[1] Run:\n```\nsdiag backfill\n```\n`scontrol show job 477` or\n```\nscontrol show job 12\n```"
    items = {item.text: item for item in check_grounding(answer, passages)}
    assembled = items["sdiag backfill"]  # seen: the sdiag page has both words, no source the line
    assert assembled.found and assembled.assembled and assembled.built_from == (1,)
    verbatim = items["scontrol show job 477"]
    assert verbatim.found and verbatim.holders == (2,) and not verbatim.assembled
    adapted = items["scontrol show job 12"]  # the user's own job id: noted as adapted, not as assembled
    assert adapted.found and adapted.adapted and not adapted.assembled
    final = final_from_text(
        "Show backfill stats?", [Passage(n, t, f"{n}.md") for n, t in enumerate(passages, 1)], answer, "eos"
    )
    assert [item.text for item in final.assembled] == ["sdiag backfill"]
    notes = [text for _, text in check_notes(final, code=lambda text: f"`{text}`")]
    assert "`sdiag backfill` is written so in no source: it is put together from words of [1]; check it" in notes
    assert "put together from words of [1]" in grounding_html(final.grounding)


def test_a_bare_placeholder_is_not_an_item_and_the_filter_may_close_it():
    answer = "Run `scontrol update JobId=<job_id> TimeLimit=+120`. Replace `<job_id>` with the job's id."
    items = {i.text: i for i in check_grounding(answer, ["scontrol update JobId=1234 TimeLimit=+60"], "")}
    assert "<job_id>" not in items
    assert items["scontrol update JobId=<job_id> TimeLimit=+120"].found
    sources = GroundingSources(["scontrol update JobId=1234"], "")
    assert sources.holds_whole("code", "<job_id>") and not sources.holds_whole("code", "job_id")


def test_durations_match_in_any_time_unit_and_numbers_written_as_words():
    question = "A job needs two more hours before it hits its time limit."
    items = specifics("Add 120 minutes (2 hours), not 3 hours.", question)
    assert items["120 minutes"] == ("quantity", True) and items["2 hours"] == ("quantity", True)
    assert items["3 hours"] == ("quantity", False)
    assert specifics("Wait 1 day, or 90 seconds.")["1 day"] == ("quantity", False)
    assert specifics("Wait 1 day.", "It waited 24 hours already.")["1 day"] == ("quantity", True)
    assert specifics("Use 1 GB.", "I have one GB left.")["1 GB"] == ("quantity", True)


def test_a_value_the_model_chose_for_a_sources_option_is_named_in_the_note():
    from app.copilot.summary import adapted

    passages = ["--time-min=<time> Set a minimum time limit on the job allocation. Acceptable time formats "
                'include "minutes", "minutes:seconds", "hours:minutes:seconds".']  # fmt: skip
    answer = "[1] Use `sbatch --time-min=2:00`."
    question = "How do I give a running job two more hours of walltime?"
    item = next(i for i in check_grounding(answer, passages, question) if i.text == "--time-min=2:00")
    assert item.found and item.adapted and item.unasked == ("2:00",)
    note = adapted(item, lambda text: f"`{text}`")
    assert note == (
        "`--time-min=2:00` is a source's option with values that neither the sources nor your question give "
        "(`2:00`); check them"
    )
    asked = check_grounding(answer, passages, "Can a job start early if I allow 2:00 instead of its limit?")
    assert next(i for i in asked if i.text == "--time-min=2:00").unasked == ()


def test_a_command_in_double_quotes_is_checked_and_quoted_prose_is_not():
    # the troubleshooting guide writes its commands in double quotes, and the model copies that style
    guide = 'Check the reason with "scontrol show node <name>"; if it is "Not responding", run "ping <address>".'
    answer = (
        'If the reason is "Not responding", run "ping <address>" [1]. If it is "Memory errors", run '
        "“scontrol show node <name> -o 'MemoryUtilization'” [1]."
    )
    items = {item.text: item for item in check_grounding(answer, [guide])}
    assert items["ping <address>"].found and items["ping <address>"].kind == "command"
    invented = items["scontrol show node <name> -o 'MemoryUtilization'"]  # curly quotes too
    assert not invented.found and invented.nearest == "scontrol show node <name>"
    assert "Not responding" not in items and "Memory errors" not in items  # no option, key=value or <placeholder>


def test_a_value_a_man_page_offers_as_a_choice_is_grounded_and_one_it_does_not_is_flagged():
    # sacct's page writes `--units=[KMGTP]` (session 61: `sacct --units=G` was flagged although it is right)
    passages = [
        "sacct\n- --units=[KMGTP]\n- Display values in specified unit type.\n- -j, --jobs\n- Displays the job.",
        "sbatch\n- --open-mode={append|truncate}\n- Open the output and error files as given.",
    ]
    found = {
        item.text: item.found
        for answer in (
            "Run `sacct --units=G -j 123`.",
            "Run `sacct --units=X -j 123`.",
            "Run `sacct --units=KM -j 123`.",
            "Run `sbatch --open-mode=append job.sh`.",
            "Run `sbatch --open-mode=rewrite job.sh`.",
        )
        for item in check_grounding(answer, passages)
    }
    assert found["sacct --units=G -j 123"] and found["--units=G"] and found["--open-mode=append"]
    assert not found["sacct --units=X -j 123"] and not found["--units=X"] and not found["--units=KM"]
    assert not found["--open-mode=rewrite"]
