"""The cases, one module per feature; importing this package registers them all."""

from behaviour.cases import pipes, sns_fifo, sqs_mappings, stream_mappings

__all__ = ["pipes", "sns_fifo", "sqs_mappings", "stream_mappings"]
