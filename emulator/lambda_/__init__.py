"""Lambda's function side: warm worker processes speaking the Lambda Runtime API, and the
packages Lambda's python runtime puts beside a function."""
