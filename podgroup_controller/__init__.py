"""`vulcan controllers`: PodGroups for annotated pods and workloads (Volcano's pg-controller)
and the Queue lifecycle (Volcano's queue-controller), run under leader election.

Imports nothing from the extender: the two meet only through the API server.
"""
