"""A behaviour suite for what no public suite covers: event source mappings (SQS and DynamoDB
streams), EventBridge Pipes and SNS FIFO topics, each case one sentence of the AWS
documentation (cited in its docstring), driven with plain boto3 against any endpoint.

`python -m behaviour` runs every case against each target (this project's local stack and the
rival emulators installed under .tools/behaviour/) and writes the table (pass, fail,
unsupported) into docs/local-stack.md."""
