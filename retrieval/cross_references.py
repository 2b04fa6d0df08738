"""A chunk that only points at other pages is no passage.

A man page's SEE ALSO section is a list of references, "slurm.conf(5), slurmctld(8)", and on the Slurm index
each one is a chunk of its own (28 of them). Such a chunk is almost nothing but the name a question mentions, so
it ranks near the top for any question naming that file or command: "How do I print the full slurm.conf the
controller is currently running with?" got four of them among its first eight passages, and the model read
nothing from them. Retrieval passes over chunks that hold no word outside such references.
"""

from __future__ import annotations

import re

# a man page reference: a name and its section number, e.g. slurm.conf(5), sbatch(1), cgroups(7)
_REFERENCE = re.compile(r"[\w.+-]+\(\d\w{0,3}\)")


def only_references(text: str) -> bool:
    """Does `text` hold at least one man page reference and no word outside them?"""
    rest, found = _REFERENCE.subn(" ", text)
    return found > 0 and re.search(r"\w", rest) is None
