"""The process kube-scheduler calls: filter, prioritize, preempt and bind over HTTP."""
