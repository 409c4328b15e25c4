"""The push consumer's services, split along upstream's seams.

``client.push_consumer.PushConsumer`` (upstream ``DefaultMQPushConsumer`` with
``DefaultMQPushConsumerImpl``) is the facade: configuration, lifecycle, the client
instance's hooks and the background work it owns (tasks and timers). It starts and
stops the services here, which hold a reference to it as upstream's services hold
their ``DefaultMQPushConsumerImpl``:

* ``listener``: the listener statuses and contexts (upstream ``consumer.listener``);
* ``pull_service``: the pull loop (``PullMessageService`` and
  ``DefaultMQPushConsumerImpl.pullMessage`` with its ``PullCallback``);
* ``consume_service``: what both consume services share (``ConsumeMessageService``):
  the bounded request queue, the workers, the listener call;
* ``concurrently``: ``ConsumeMessageConcurrentlyService``;
* ``orderly``: ``ConsumeMessageOrderlyService``.
"""
