"""Volcano's Job controller (and next its JobFlow and JobTemplate controllers) for
`vulcan controllers`. Imports nothing from the extender or the pg-controller: they meet only
through the API server."""
