"""finchmq.store: the message store (commit log, consume queues, index, flush, recovery).

Imports: ``finchmq.protocol`` only. Knows nothing of the network; no asyncio.
"""
