"""The nameserver (``mqnamesrv``): broker registry, topic routes, cluster info, KV config.

Modules: ``config`` (NamesrvConfig), ``route_info`` (RouteInfoManager, pure),
``kv_config`` (KVConfigManager), ``processor`` (request handlers by code),
``controller`` (NamesrvController: wiring and lifecycle), ``main`` (the CLI).
"""
