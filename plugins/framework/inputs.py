"""The names of what a decision may read besides the policy's answers (the memo compares their
values, `plugins.framework.session.Session.input_value`): the nodes' room, the cluster's
allocatable, every queue's numbers, the overcommit rule's sums, the HyperNode tree (a gang with
a networkTopology reads it); ("victims", queue or None) and
("queue", name) are keyed by scope."""

from __future__ import annotations

ROOM, TOTAL, QUEUES, USED = "room", "total", "queues", "used"
TOPOLOGY = "topology"
