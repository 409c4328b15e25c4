"""The broker's durable message store (upstream ``org.apache.rocketmq.store``).

``message_store.MessageStore`` is the facade the broker uses; the other modules hold
one structure each: ``commit_log`` (the append-only log), ``mapped_file`` (segment
files), ``consume_queue`` (per-queue index), ``index`` (key index), ``checkpoint``,
``flush`` (flush and group commit), ``dispatcher`` (log record -> queue units, index
entries), ``inner`` (the broker-side message input type), ``config``.
"""
