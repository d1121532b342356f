"""Least privilege at run time: policy evaluation (identity and resource policies combined), what a
request asks IAM for, the resources' own policies and the services' deliveries, and the access
record of every function's calls."""
