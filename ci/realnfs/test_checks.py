"""The campaign's own checks, on traces shaped like librdkafka's (run by
`bash ci/realnfs/run campaign` before it boots anything)."""

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
import workloads as w  # noqa: E402

# A failover as the real-NFS campaign traced it (seed 1, round 8):
# partition 1's MsgId 686 written by a fenced leader, answered
# NOT_LEADER_OR_FOLLOWER, re-sent under epoch 26 after another
# partition's sequence gap; MsgId 685 sent once.
TRACE = """\
PRODUCE [rdkafka#producer-6] [thrd:10.77.0.11:9092/0]: 10.77.0.11:9092/0: c-idem [1]: Produce MessageSet with 2 message(s) (99 bytes, ApiVersion 10, MsgVersion 2, MsgId 685, BaseSeq 341, PID{Id:1001,Epoch:25}, uncompressed)
MSGSET [rdkafka#producer-6] [thrd:10.77.0.11:9092/0]: 10.77.0.11:9092/0: c-idem [1]: MessageSet with 1 message(s) (MsgId 686, BaseSeq 342) encountered error: Broker: Not leader for partition (actions Refresh,MsgNotPersisted)
PRODUCE [rdkafka#producer-6] [thrd:10.77.0.12:9092/1]: 10.77.0.12:9092/1: c-idem [1]: Reconstructed MessageSet (1 message(s), 119 bytes, MsgIds 686..686)
PRODUCE [rdkafka#producer-6] [thrd:10.77.0.12:9092/1]: 10.77.0.12:9092/1: c-idem [1]: Produce MessageSet with 1 message(s) (73 bytes, ApiVersion 10, MsgVersion 2, MsgId 686, BaseSeq 0, PID{Id:1001,Epoch:26}, uncompressed)
PRODUCE [rdkafka#producer-6] [thrd:10.77.0.12:9092/1]: 10.77.0.12:9092/1: other [1]: Produce MessageSet with 1 message(s) (73 bytes, ApiVersion 10, MsgVersion 2, MsgId 7, BaseSeq 0, PID{Id:1001,Epoch:3}, uncompressed)
PRODUCE [rdkafka#producer-6] [thrd:10.77.0.12:9092/1]: 10.77.0.12:9092/1: other [1]: Produce MessageSet with 1 message(s) (73 bytes, ApiVersion 10, MsgVersion 2, MsgId 7, BaseSeq 0, PID{Id:1001,Epoch:4}, uncompressed)
""".splitlines()


def test_a_batch_is_known_by_every_epoch_it_went_out_under():
    sent = w.epochs_sent(TRACE, "c-idem")
    assert sent[(1, 685)] == {25}
    assert sent[(1, 686)] == {25, 26}
    assert (1, 7) not in sent  # another topic's


def test_only_a_record_re_sent_under_a_new_epoch_is_the_clients_duplicate():
    sent = w.epochs_sent(TRACE, "c-idem")
    # i-4111 is partition 4111 % 6 = 1, MsgId 4111 // 6 + 1 = 686;
    # i-4105 is MsgId 685 there, sent under one epoch: the broker's.
    twice = {"i-4111": [(1, 685), (1, 686)], "i-4105": [(1, 684), (1, 685)]}
    assert w.resent_after_bump(twice, 6, sent) == {"i-4111"}
    assert w.resent_after_bump(twice, 6, {}) == set()


# The compacted topic in the same failover (seed 13, round 30, a server
# crash): MsgId 6762 (value k9=6761) answered NOT_LEADER_OR_FOLLOWER under
# epoch 1 after it reached the file, re-sent under epoch 2; MsgId 6761
# sent once.
KEYED = """\
PRODUCE [rdkafka#producer-9] [thrd:10.77.0.13:9092/2]: 10.77.0.13:9092/2: c-compact [0]: Produce MessageSet with 1 message(s) (79 bytes, ApiVersion 10, MsgVersion 2, MsgId 6761, BaseSeq 5901, PID{Id:1001,Epoch:1}, uncompressed)
PRODUCE [rdkafka#producer-9] [thrd:10.77.0.13:9092/2]: 10.77.0.13:9092/2: c-compact [0]: Produce MessageSet with 1 message(s) (77 bytes, ApiVersion 10, MsgVersion 2, MsgId 6762, BaseSeq 5902, PID{Id:1001,Epoch:1}, uncompressed)
MSGSET [rdkafka#producer-9] [thrd:10.77.0.13:9092/2]: 10.77.0.13:9092/2: c-compact [0]: MessageSet with 1 message(s) (MsgId 6762, BaseSeq 5902) encountered error: Broker: Not leader for partition (actions Refresh,MsgNotPersisted)
PRODUCE [rdkafka#producer-9] [thrd:10.77.0.11:9092/0]: 10.77.0.11:9092/0: c-compact [0]: Produce MessageSet with 3 message(s) (111 bytes, ApiVersion 10, MsgVersion 2, MsgId 6762, BaseSeq 0, PID{Id:1001,Epoch:2}, uncompressed)
""".splitlines()


def test_a_keyed_value_re_sent_under_a_new_epoch_is_the_clients_duplicate():
    sent = w.epochs_sent(KEYED, "c-compact")
    assert sent[(0, 6762)] == {1, 2} and sent[(0, 6763)] == {2}
    assert w.resent_keyed({"k9=6761", "k8=6760", "k10=6762"}, sent) == {"k9=6761"}


def test_a_round_whose_victim_led_nothing_is_not_timed():
    import campaign
    rows = [{"kind": "kill-9", "victim_led": 0, "led": 0.3},
            {"kind": "kill-9", "victim_led": 3, "led": 11.0},
            {"kind": "cut-from-brokers", "failover": 0.7}]
    assert [r.get("led") for r in campaign.timed(rows)] == [11.0, None]
