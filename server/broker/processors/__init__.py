"""Broker request processors, one module per request family (upstream broker/processor/)."""
