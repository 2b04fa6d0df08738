"""Replies to a button click find the clicked message's channel however the payload carries it."""

from app.slack.bot import reply_privately, take_button_off


class RecordingClient:
    def __init__(self) -> None:
        self.calls: list[tuple[str, dict]] = []

    def chat_postEphemeral(self, **kwargs) -> None:
        self.calls.append(("ephemeral", kwargs))

    def chat_update(self, **kwargs) -> None:
        self.calls.append(("update", kwargs))


def click(with_channel: bool) -> dict:
    body = {
        "user": {"id": "U1"},
        "container": {"type": "message", "channel_id": "C9", "message_ts": "2.0", "thread_ts": "1.0"},
        "message": {"ts": "2.0", "thread_ts": "1.0", "text": "refused", "blocks": []},
    }
    return body | ({"channel": {"id": "C9"}} if with_channel else {})


def test_a_private_reply_and_the_button_removal_go_to_the_same_channel_without_the_payloads_channel_field():
    for with_channel in (True, False):
        client = RecordingClient()
        reply_privately(client, click(with_channel), "gone", "answer a click")
        take_button_off(client, click(with_channel), "taken")
        assert [(kind, call["channel"]) for kind, call in client.calls] == [("ephemeral", "C9"), ("update", "C9")]
        assert client.calls[0][1]["thread_ts"] == "1.0" and client.calls[1][1]["ts"] == "2.0"
