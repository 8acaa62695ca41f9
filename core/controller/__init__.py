"""The one runtime every controller of `vulcan controllers` runs on (Volcano's
controller-manager): shared informers, keyed work queues reconciled with retries and backoff
(`--max-requeue-num`), `/healthz` `/readyz` `/metrics`, and leader election, one leadership term
at a time. The controllers themselves live in their packages (`podgroup_controller`,
`flow_controller`) and are handed to the runtime as factories by name."""
