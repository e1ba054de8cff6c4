"""kq: a Kueue-compatible job queueing system over NATS JetStream."""
