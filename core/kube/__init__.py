"""Talking to the API server: client, informers, work queue, leader election, events."""
