"""`make image` without docker or podman: the image from Debian's packages (build_debian)."""
