"""The functions' batches through Powertools' batch processing: table_changes, the fan-out
consumers' events (the table's stream, or their queue in every mode but lambda) as stream records
with their partial batch response; sends, what the records' handlers returned sent in as few
calls as the service allows, each failed send failing its record. No AWS call of their own: the
sends are the adapters' (aws/)."""
