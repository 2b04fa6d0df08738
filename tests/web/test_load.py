"""Eight questions at once through gradio_client: all answered, none lost, one at a time."""

from load_chat import run_load


def test_eight_concurrent_questions_are_all_answered(chat_server):
    results, seconds = run_load(chat_server[0], n=8)
    print(f"8 concurrent questions answered in {seconds:.1f} s")
    assert len(results) == 8
    for i, result in enumerate(results):
        assert result["done"] and not result.get("error"), result
        assert result["question"].endswith(f"(#{i + 1})") and "Cwm_fjord" in result["answer"]
        assert result["sources"] and result["stats"]["new_tokens"] > 0
