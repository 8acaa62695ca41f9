"""Volcano's Job controller (`job-controller`): the state machine and policies (`state`), the
events that become requests (`events`), Commands (`commands`), pods and PodGroup (`objects`,
`writer`), job plugins (`plugins`, `plugin_frameworks`, `plugin_registry`) and the reconcile
(`controller`, `sync`)."""
