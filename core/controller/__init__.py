"""The one runtime every controller of `vulcan controllers` runs on (Volcano's
controller-manager): the reconciler contract and the runtime that wires it (`runtime.py`: work
queue, handlers, retries with backoff and `--max-requeue-num`, give-up events, periodic resync,
metrics), shared informers, `/healthz` `/readyz` `/metrics`, and leader election, one
leadership term at a time. The controllers themselves live in their packages
(`podgroup_controller`, `flow_controller`, `topology_controller`) and are handed to the manager
as factories by name."""
