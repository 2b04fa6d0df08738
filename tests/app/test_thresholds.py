"""A value of the question against the sources' thresholds: the row or item it falls in, shown under the answer."""

from app.copilot.events import Passage
from app.copilot.pipeline import final_from_text
from app.copilot.summary import check_notes
from app.copilot.thresholds import thresholds
from app.web.render import definitions_html

CERT = Passage(
    1,
    "| Lifetime left | State | Action |\n| --- | --- | --- |\n"
    "| More than 30 days | OK | Nothing |\n"
    "| **Less than 30 days** | WARNING | Open a helpdesk ticket for the Grid Middleware Expert |\n"
    "| **Less than 7 days** | CRITICAL | Page the On-call Site Administrator |\n"
    "| Expired | Outage | Declare an unscheduled OUTAGE |",
    "certificate-expiry.md",
    "Host and User Certificate Expiry",
    "Thresholds",
)
SQUID = Passage(
    2,
    "| Check | WARNING | CRITICAL |\n| --- | --- | --- |\n"
    "| HTTP 5xx responses in `access.log` | > 1 % | > 5 % |\n"
    "| Cache disk `/var/cache/squid` | 85 % | 95 % |\n"
    "| Frontier cache hit ratio | < 70 % | < 50 % |",
    "squid.md",
    "Squid Proxies",
    "Thresholds",
)
STORAGE = Passage(
    3,
    "The same site-wide thresholds apply to all three:\n\n"
    "- **WARNING at 85 %** used: investigate during the shift.\n"
    "- **CRITICAL at 95 %** used: act now.",
    "storage.md",
    "Storage Full and Quotas",
    "Thresholds",
)
TRIAGE = Passage(
    4,
    "| Pattern | Runbook | Expert | Escalate when |\n| --- | --- | --- | --- |\n"
    "| CVMFS broken | CVMFS runbook | Grid Middleware Expert | More than 5 % of worker nodes failing the probe |",
    "triage.md",
    "Monitoring Alert Triage",
    "Patterns",
)


def rows(question, passages=(CERT, SQUID, STORAGE, TRIAGE)):
    return [(d.value, d.source, d.text) for d in thresholds(question, list(passages))]


def test_a_value_falls_in_the_closest_bound_it_meets():
    warning = "Less than 30 days · WARNING · Open a helpdesk ticket for the Grid Middleware Expert"
    assert rows("about 20 days left on the host cert, is that urgent?") == [("20 days", 1, warning)]
    # under 30 days and under 7 days: the 7-day row is the band it is in
    assert rows("the host cert on ce02 expires in 3 days") == [
        ("3 days", 1, "Less than 7 days · CRITICAL · Page the On-call Site Administrator")
    ]
    assert rows("the cert has 45 days left") == [("45 days", 1, "More than 30 days · OK · Nothing")]


def test_a_level_table_is_read_on_the_row_the_question_is_about():
    assert rows("the squid cache disk is at 96%") == [("96%", 2, "Cache disk /var/cache/squid: CRITICAL 95 %")]
    assert rows("squid cache disk at 90 %") == [("90 %", 2, "Cache disk /var/cache/squid: WARNING 85 %")]
    assert rows("the squid cache disk is at 40%") == []  # below every level
    assert rows("the frontier hit ratio fell to 60%") == [("60%", 2, "Frontier cache hit ratio: WARNING < 70 %")]


def test_a_list_item_counts_and_a_row_about_something_else_does_not():
    assert rows("the storage pool on se01 is 87% full") == [
        ("87%", 3, "WARNING at 85 % used: investigate during the shift.")
    ]
    # the alert table's "More than 5 % of worker nodes" bound is about nodes, not this space token
    assert rows("ATLASDATADISK just hit 87%. should i clean up?", [TRIAGE]) == []
    assert rows("how do I renew the host cert?") == []  # no value in the question


def test_every_front_end_shows_where_the_value_falls():
    answer = "[1] Open a helpdesk ticket for the Grid Middleware Expert [1]."
    final = final_from_text("about 20 days left on the host cert, is that urgent?", [CERT], answer, "eos")
    notes = [text for _, text in check_notes(final, code=str)]
    assert any(
        text.startswith("your 20 days, against [1] (Host and User Certificate Expiry › Thresholds)") for text in notes
    )
    html = definitions_html(final.definitions)
    assert (
        "Your values against the sources&#x27; thresholds" in html
        or "Your values against the sources' thresholds" in html
    )
    assert "Less than 30 days · WARNING" in html


def test_a_list_right_after_a_level_table_is_read_on_its_own():
    text = SQUID.text + "\n- **Log partition above 90 %**: rotate the logs now."
    squid = Passage(2, text, "squid.md", "Squid Proxies", "Thresholds")
    # the table's filter keeps its best-matching row (the cache disk's), and the list item is none of its rows:
    # 91 % is closer to the item's 90 % than to the cache disk's 85 %
    assert rows("squid log partition at 91%", [squid]) == [("91%", 2, "Log partition above 90 %: rotate the logs now.")]


COOLING = Passage(
    1,
    "| Signal | WARNING | CRITICAL / action trigger |\n| --- | --- | --- |\n"
    "| Inlet temperature (rack front) | **27 °C** | **32 °C**: start emergency shutdown of hall B |\n"
    "| UPS runtime left | < 15 min | **< 10 min**: shut down everything except core services in hall A |\n",
    "power-and-cooling-incident.md",
    "Power and Cooling Incident",
    "Thresholds and triggers",
)


def test_a_temperature_typed_as_operators_type_it_is_read_as_the_runbook_writes_it():
    """Seen in the chat (session 58): "31C" matched no row, so the 27 °C warning row went unshown."""
    for typed in ("31C", "31 C", "31 deg", "31 degrees", "31°C"):
        [row] = thresholds(f"the hall B inlet temperature is {typed}, what do I do?", [COOLING])
        assert (row.value, row.text) == ("31 °C", "Inlet temperature (rack front): WARNING 27 °C"), typed
    [row] = thresholds("inlet temps at 33C and climbing", [COOLING])
    assert row.text.startswith("Inlet temperature (rack front): CRITICAL / action trigger 32 °C")
    assert thresholds("inlet nodes have 4C/8T CPUs, job 31 failed", [COOLING]) == []  # no temperature


SPACE_TOKENS = Passage(
    2,
    "Actions:\n\n"
    "- **Space token at WARNING (85 %)**: notify the Experiment Site Contact for that VO in their\n"
    "  support channel.\n"
    "- **Space token at CRITICAL (95 %)**: open a helpdesk ticket for the Storage Expert, who may move\n"
    "  unused space between tokens if the pledge allows it.\n",
    "storage-full-and-quota.md",
    "Storage Full, Space Tokens and Quotas",
    "dCache space token or pool full",
)
CRL = Passage(
    3,
    "- **WARNING**: `fetch-crl` has not completed successfully on a host for **24 hours**.\n",
    "crl-updates.md",
    "Certificate Revocation List (CRL) Updates",
    "Thresholds",
)


def test_a_level_right_before_a_value_bounds_it_and_an_items_wrapped_lines_are_read_whole():
    """Seen in the chat (session 58): nothing stood under "ATLASDATADISK is at 96% full"."""
    [row] = thresholds("ATLASDATADISK space token is at 96% full, how urgent is it?", [SPACE_TOKENS])
    assert row.text == (
        "Space token at CRITICAL (95 %): open a helpdesk ticket for the Storage Expert, who may move "
        "unused space between tokens if the pledge allows it."
    )
    [row] = thresholds("the space token is at 88% now", [SPACE_TOKENS])
    assert row.text.startswith("Space token at WARNING (85 %)")
    # a level further before the value is not its bound: a certificate's days left are another clock (`rf-02`)
    assert thresholds("the external check on this host still says 5 days left on the cert", [CRL]) == []


def test_of_the_rows_a_value_falls_in_only_those_sharing_most_words_with_the_question_are_shown():
    """The session 58 probe: "40% of its baseline" was also shown against packet loss, by the word "peer"."""
    network = Passage(
        1,
        "| Metric | WARNING | CRITICAL |\n| --- | --- | --- |\n"
        "| Throughput compared with the 30-day baseline for the same peer "
        "| < 50 % for 2 consecutive tests | < 20 % |\n",
        "network-perfsonar-degradation.md",
        "Network Degradation and perfSONAR",
        "Thresholds",
    )
    overview = Passage(
        2,
        "| Metric | WARNING | CRITICAL |\n| --- | --- | --- |\n"
        "| Packet loss to a WLCG peer (1 h sustained) | > 0.1 % | > 1 % |\n",
        "site-overview.md",
        "NORTHGRID-EXAMPLE Site Overview and Service Map",
        "Site-wide thresholds",
    )
    question = "throughput to one peer is at 40% of its usual baseline for two tests in a row, warning or critical?"
    assert [row.source for row in thresholds(question, [overview])] == [2]  # alone, the looser match still shows
    [row] = thresholds(question, [overview, network])
    assert row.source == 1 and row.text.startswith("Throughput compared with the 30-day baseline")
