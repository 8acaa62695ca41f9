"""The hypernode-controller: HyperNodes discovered from node labels (Volcano's label source)."""
