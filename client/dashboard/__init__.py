"""``mqdashboard``: an operator's web dashboard over ``MQAdmin`` (issue #14).

The pages an operator knows from Apache rocketmq-dashboard (cluster and broker configs,
topics, consumer groups with their lag and subscription group configs, a client's running
info, message search and trace, dead letters, ACL accounts, connections, live TPS and lag
charts) and past it (paged, cached lists; groups whose clients subscribe differently are
flagged), served by one asyncio process that talks to the cluster only through our admin client, so it works the
same against stock Java 4.9.x clusters.

Modules, one concept each:

* ``config``  -- DashboardConfig: nameserver list, listen address, ACL credentials, users
  (a TOML file plus command-line flags).
* ``auth``    -- password hashes (scrypt), the bounded session table, CSRF tokens; pure.
* ``service`` -- DashboardService: every page's data as JSON-ready dicts, input checks,
  the destructive actions (with the name of who asked); no HTTP here.
* ``sampler`` -- LiveSampler: the background routine filling bounded TPS / lag series.
* ``routes``  -- the ``/api/...`` handlers (aiohttp) and the error -> HTTP status table.
* ``app``     -- the aiohttp application: middlewares (errors, login, CSRF, access log),
  static assets shipped in ``static/``, start-up and clean-up of the admin client and sampler.
* ``main``    -- the ``mqdashboard`` console script.

Only ``app``, ``routes`` and ``main`` import aiohttp (the ``dashboard`` extra).
"""

from __future__ import annotations
