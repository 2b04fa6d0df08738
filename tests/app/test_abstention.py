"""The abstention detector on handwritten answers that do and do not abstain."""

import pytest

from app.copilot.abstention import abstains, abstention_phrase

ABSTAINING = [
    "The provided context does not contain information about GPU pricing.",
    "The passages do not mention how to configure Kubernetes.",
    "I'm sorry, but I cannot find that in the sources.",
    "There is no information about this in the documentation.",
    "This is not covered in the provided passages [1].",
    "The context doesn't say which vendor's firmware is supported.",
    "I don't know: the documents only describe Slurm commands, not the storage system.",
    "Unfortunately, the answer cannot be determined from the given passages. You may want to ask the vendor.",
    "The documentation provided does not specify a licence price. It only explains how to count licences in "
    "slurm.conf. Ask your procurement office. They keep the contracts.",
    "Based on the context, I am unable to answer this question.",
    "That is outside the scope of the provided documents.",
    "CVMFS_TIMEOUT is not in the sources. Ask the site's CVMFS admins.",  # the copilot's own-site rule shows these
    "The `ipmitool` and `Dell` tools are not in the provided passages.",
]

ANSWERING = [
    'Use scontrol update NodeName=n1 State=DRAIN Reason="firmware". If the node does not respond, check slurmd.',
    "Run sinfo. The output does not include drained nodes unless you pass -R.",
    "Set ReturnToService=1 in slurm.conf [2]. Nodes then return to service when they register. This avoids manual "
    "work. Note that the context does not say in which version this default changed.",
    "Submit a job array with sbatch --array=0-499 and read $SLURM_ARRAY_TASK_ID in the script [1].",
    "No. Slurm does not provide a GUI for that; use sacctmgr on the command line [3].",
    "There is a limit: MaxJobCount caps the number of jobs the controller keeps in memory.",
    "The job was killed by signal 9. The exit code 0:9 means exit code 0 and signal 9 [1].",
    "",
]


@pytest.mark.parametrize("answer", ABSTAINING)
def test_abstaining_answers_are_detected(answer):
    assert abstains(answer), abstention_phrase(answer)


@pytest.mark.parametrize("answer", ANSWERING)
def test_real_answers_are_not_abstentions(answer):
    assert not abstains(answer), abstention_phrase(answer)
