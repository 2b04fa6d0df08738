"""The streaming web chat (gradio): `specrag chat`, a front end of the copilot pipeline.

render.py turns pipeline events into chat messages (pure functions), backend.py loads the
index and the models in the background and holds the feedback store, chat.py wires both
into a gradio Blocks page.
"""
