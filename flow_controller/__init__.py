"""Volcano's batch controllers for `vulcan controllers`: the Job controller (`job/`), the
JobFlow and JobTemplate controllers (`jobflow/`) and the CronJob controller (`cronjob/`).
Imports nothing from the extender or the pg-controller: they meet only through the API
server."""
