"""Volcano's CronJob controller (`cronjob-controller`): the reconcile (`controller`), one
CronJob's sync (`sync`) and the schedule arithmetic (`times`)."""
