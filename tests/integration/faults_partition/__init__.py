"""A network between the worker and Redis that breaks the ways real networks break: a
fault-injecting TCP proxy (tests/support/tcp_proxy.py) sits between a real worker and a
real redis-server; the producer sends straight to Redis.

For each fault — a blackhole (nothing forwarded, old or new connections), the open
connections frozen while new ones pass, every connection reset every 2 s, 200 ms of
latency each way — every job sent before, during and after it is answered exactly once,
no valid job is answered ``time_limit``, and within 15 s the worker logs that it lost
Redis (``Redis unreachable from this worker``) or a connection (``Connection to broker
lost``, or kombu's ``Redis BRPOP got no reply``). During the blackhole ``apportion
submit --wait --timeout 10`` through the proxy gives up within 15 s. The blackhole
lasts 120 s, as an operator's failover or dead NAT entry might: twenty times the hard
limit and ten times the visibility timeout, so the jobs in hand are restored and taken
again several times while the worker keeps reconnecting.

The blackhole has a file of its own (its own redis-server, proxy and worker, from
conftest.py here): it mostly waits, and under --dist loadfile the suite's other
processes carry on meanwhile.
"""
