"""kq services: one process each, talking only over NATS JetStream."""
