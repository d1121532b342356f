"""What delivers events as Lambda and EventBridge Pipes do: the event source mapping engine, its
in-process sources, the SQS pollers, the stream shard workers and the pipes riding on them."""
