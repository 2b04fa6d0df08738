"""The Slack bridge: `specrag slack` answers mentions and direct messages in their thread.

A thin front end of the copilot pipeline: bot.py (which events, the answer job,
feedback), streaming.py (status, native stream, placeholder fallback), render.py
(mrkdwn, footer, buttons), history.py (a thread as conversation turns), queue.py (N
workers, de-duplication) and server.py (Web API client, Socket Mode, HTTP mode).
manifest.yaml creates the Slack app.
"""
