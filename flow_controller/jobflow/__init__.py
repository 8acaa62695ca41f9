"""Volcano's JobFlow controller (`jobflow-controller`: rules in `state`, status in `status`,
probes in `probes`, the reconcile in `controller`, its writes in `writes`) and JobTemplate
controller (`jobtemplate-controller`, `templates`)."""
