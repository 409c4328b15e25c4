"""The broker: configuration, metadata managers, processors, long polling and the controller."""
