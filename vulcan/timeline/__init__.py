"""`vulcan timeline`: a Gantt chart of what the scheduler did, from what the API server holds.

`data` makes the bars (pure: pods, events, PodGroups, nodes -> `records.Timeline`), `render`
draws them with matplotlib (PNG or SVG) and `command` reads a cluster and writes the picture and
its data (JSON).
"""
