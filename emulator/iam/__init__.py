"""Least privilege at run time: policy evaluation, what a request asks IAM for, and the access
record of every function's calls."""
