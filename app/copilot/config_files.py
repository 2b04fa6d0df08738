"""A setting put in a configuration file whose own page never names it.

Asked in the chat "How can I limit one user to 4 running jobs at a time?", the model answered "Set the
MaxJobsPerUser parameter to 4 in the slurm.conf file" (session 59). `MaxJobsPerUser` is a QOS and association
limit, set with sacctmgr; slurm.conf's man page never names it. The setting's own definition stood beneath the
answer, from the resource-limits page, but nothing said the file was wrong, and an operator would add a line
slurmctld rejects.

An index that holds a configuration file's man page (a page titled like `slurm.conf` or `cgroup.conf`) knows
every setting that file takes, so a sentence of the answer's prose that names one such file and a setting
(definitions.CONFIG_KEY: `MaxJobsPerUser`, `CVMFS_TIMEOUT`) which that file's pages never name, in any case, is
reported, with the passage that defines the setting where one does.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from app.copilot.attribution import prose_sentences
from app.copilot.definitions import CONFIG_KEY, entries_of, entry_for
from app.copilot.events import MisplacedSetting, Passage
from app.copilot.markers import MARKER_GROUP

CONFIG_PAGE = re.compile(r"[a-z][a-z0-9_-]*\.conf")  # a configuration file's man page is titled by its name


def misplaced_settings(
    answer: str, settings: Mapping[str, frozenset[str]], passages: Sequence[Passage]
) -> list[MisplacedSetting]:
    """Each setting a sentence of the answer puts in the one configuration file it names, where that file's pages
    (`settings`: {file: the settings its pages name, in lower case}) never name it."""
    if not settings:
        return []
    misplaced: dict[str, str] = {}  # each setting, and the file the answer first puts it in
    for sentence in prose_sentences(MARKER_GROUP.sub(" ", answer)):
        said = sentence.replace("`", " ")
        files = [name for name in settings if re.search(rf"(?<![\w.-]){re.escape(name)}(?![\w-])", said)]
        if len(files) != 1:
            continue  # no file, or two: which one a setting goes in is not this sentence's to say
        for key in CONFIG_KEY.findall(said):
            if key.casefold() not in settings[files[0]]:
                misplaced.setdefault(key, files[0])
    if not misplaced:
        return []
    entries = [entry for passage in passages for entry in entries_of(passage)]
    found = []
    for key, file in misplaced.items():  # with the passage that defines it, found as the definitions are
        entry = entry_for(key, "", entries)
        found.append(MisplacedSetting(key, file, entry.source, entry.title) if entry else MisplacedSetting(key, file))
    return found


def config_settings(chunks: Sequence[object]) -> dict[str, frozenset[str]]:
    """{configuration file: every setting its pages name, in lower case} for the pages titled by a file's name."""
    named: dict[str, set[str]] = {}
    for chunk in chunks:
        title = (getattr(chunk, "title", "") or "").strip()
        if CONFIG_PAGE.fullmatch(title):
            named.setdefault(title, set()).update(key.casefold() for key in CONFIG_KEY.findall(chunk.text))
    return {name: frozenset(keys) for name, keys in named.items() if keys}
