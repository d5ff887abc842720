"""finchmq.broker: the broker (processors, long polling, offsets, flow control).

Imports: ``finchmq.protocol``, ``finchmq.remoting`` and ``finchmq.store``.
"""
