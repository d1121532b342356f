"""Docker-free local stack: the deployed wiring of template.yaml on one machine (dev/test only).

Functions never import this package. See docs/local-stack.md.
"""
