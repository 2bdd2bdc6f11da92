"""The workers' line as the run page reads it: the broker's own messages, in the order the workers take them."""

from __future__ import annotations

import pytest
from celery import current_app

from verifier.queueing import RUN_VERIFICATION
from verifier.redelivery import waiting_line

LINE = "kgv-test-line"  # a queue no worker consumes: the messages stay where they were sent


@pytest.fixture
def line():
    with current_app.connection_for_write() as connection:
        client = connection.default_channel.client
        client.delete(LINE)
        yield client
        client.delete(LINE)


def test_the_line_is_the_order_runs_were_sent_in_whatever_their_ids(line):
    for run_id in (12, 7, 30):  # 7 sent after 12: a run sent again after its training stands behind
        current_app.send_task(RUN_VERIFICATION, args=[run_id], queue=LINE)
    current_app.send_task("verifier.deliver_webhook", args=[99], queue=LINE)  # not a run: not in the line
    assert waiting_line(LINE) == [12, 7, 30]
    line.rpop(LINE)  # what a worker takes first
    assert waiting_line(LINE) == [7, 30]
