"""`specrag eval`: the batch Q&A evaluation harness, a front end of the copilot pipeline.

questions.py reads and validates question rows (ours and Spec-Bench's), metrics.py scores
retrieval (with ranx) and answers (app/copilot/abstention.py detects "the sources do not
cover this" answers, for the eval and the copilot's rules alike), results.py appends one
crash-safe row per question, runner.py evaluates one question through `Copilot`,
report.py writes report.md, report.json and the plots.
"""
