"""The plugins a scheduler conf names, one module each (Volcano's names)."""
